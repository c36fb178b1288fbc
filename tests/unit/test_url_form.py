"""The URL form in process (a directory origin, the model stand-in that finds no face): the option
grammar, every fit, formats, signing, the directory origin's walls, caching headers, API keys."""

import io
import ipaddress
import os
import runpy
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evaluation.images import astronaut, encoded, png_declaring
from evaluation.origins import trap
from evaluation.sources import animation
from facecrop_client import image_url
from gateway.config import Settings
from gateway.errors import InvalidParameter, InvalidSignature, OriginError, OriginTimeout, SourceNotAllowed
from gateway.imaging.encode import output_format
from gateway.request import anonymize_request
from gateway.web.app import create_app
from gateway.web.url.admission import FetchAdmission
from gateway.web.url.caching import cache_control, conditions, negotiate
from gateway.web.url.fetch import AddressRefused, Fetcher, first_address, is_public
from gateway.web.url.options import UNSUPPORTED, parse_url_options
from gateway.web.url.signing import signature, unsigned_path
from gateway.web.url.sources import Source, resolve_source
from tests.support import NoFacesModel, sticker, url_client, url_get

KEY, SALT = "736563726574", "73616c74"


@pytest.fixture
def originals(tmp_path: Path) -> Path:
    root = tmp_path / "originals"
    (root / "people").mkdir(parents=True)
    (root / "people" / "astronaut.jpg").write_bytes(encoded(astronaut(), "JPEG", quality=90))
    (root / "wide.png").write_bytes(encoded(astronaut().resize((800, 400)), "PNG"))
    (root / "notes.txt").write_text("not a picture")
    (root / "bomb.png").write_bytes(png_declaring(100_000, 100_000))
    (tmp_path / "secret.jpg").write_bytes(encoded(astronaut(), "JPEG"))
    (root / "escape.jpg").symlink_to(tmp_path / "secret.jpg")
    (root / "inside.jpg").symlink_to(root / "people" / "astronaut.jpg")
    return root


def picture(response) -> Image.Image:
    assert response.status_code == 200, response.data
    return Image.open(io.BytesIO(response.data))


@pytest.mark.parametrize(
    "options,size",
    [
        ("width=200", (200, 200)),
        ("w=1000", (512, 512)),  # scale-down (the default) never enlarges
        ("width=1000,fit=contain", (1000, 1000)),
        ("width=300,height=100,fit=contain", (100, 100)),
        ("width=300,height=100,fit=scale-down", (100, 100)),
        ("width=300,height=100,fit=cover", (300, 100)),
        ("width=300,height=100,fit=squeeze", (300, 100)),
        ("width=300,height=100,fit=pad", (300, 100)),
        ("width=300,height=100,fit=crop", (300, 100)),
        ("width=1000,height=500,fit=crop", (500, 500)),  # cannot fill 1000 x 500 unenlarged: like scale-down
        ("width=1000,height=500,fit=aspect-crop", (512, 256)),  # never enlarged, the target's aspect
        ("width=100,dpr=2", (200, 200)),
        ("h=64", (64, 64)),
        ("quality=50", (512, 512)),
    ],
)
def test_every_fit_gives_cloudflares_size(originals, options, size):
    assert picture(url_get(url_client(originals), f"{options}/people/astronaut.jpg")).size == size


def test_pad_fills_with_the_background_and_squeeze_fills_without_it(originals):
    client = url_client(originals)
    padded = np.asarray(picture(url_get(client, "width=300,height=100,fit=pad,background=%23ff0000,f=png/wide.png")))
    assert padded.shape == (100, 300, 3) and tuple(padded[50, 5]) == (255, 0, 0)  # a red band at the side
    assert tuple(np.asarray(picture(url_get(client, "width=300,height=100,fit=pad,f=png/wide.png")))[50, 5]) == (
        255,
        255,
        255,
    )
    squeezed = np.asarray(picture(url_get(client, "width=300,height=100,fit=squeeze,f=png/wide.png")))
    assert tuple(squeezed[50, 5]) != (255, 255, 255)


@pytest.mark.parametrize(
    "gravity,rect",
    [("left", "0,0,256,512"), ("right", "256,0,256,512"), ("0.5x0.5", "128,0,256,512"), ("center", "128,0,256,512")],
)
def test_gravity_sides_and_points(originals, gravity, rect):
    response = url_get(url_client(originals), f"width=100,height=200,fit=cover,gravity={gravity}/people/astronaut.jpg")
    assert response.headers["X-Crop-Rect"] == rect


@pytest.mark.parametrize(
    "options,content_type,accept",
    [
        ("format=png", "image/png", ""),
        ("format=webp", "image/webp", ""),
        ("format=avif", "image/avif", ""),
        ("format=jpeg", "image/jpeg", ""),
        ("format=baseline-jpeg", "image/jpeg", ""),
        ("quality=80", "image/jpeg", "image/avif,image/webp"),  # no format: the input's, whatever Accept says
        ("format=auto", "image/avif", "image/avif,image/webp,*/*"),
        ("format=auto", "image/webp", "image/webp,*/*"),
        ("format=auto", "image/jpeg", "*/*"),  # a wildcard promises nothing
        ("format=auto", "image/jpeg", "image/avif;q=0,image/jpeg"),
    ],
)
def test_formats_and_negotiation(originals, options, content_type, accept):
    response = url_get(url_client(originals), f"{options}/people/astronaut.jpg", Accept=accept)
    assert response.status_code == 200 and response.headers["Content-Type"] == content_type
    assert (response.headers.get("Vary") == "Accept") == ("auto" in options)
    assert picture(response).size == (512, 512)


@pytest.mark.parametrize(
    ("source", "accept", "expected", "frames"),
    [
        ("sticker.png", "image/png,image/*", "PNG", 1),  # a link-preview bot, a mail client: transparency kept
        ("sticker.png", "*/*", "PNG", 1),
        ("sticker.png", "image/webp,*/*", "WEBP", 1),
        ("people/astronaut.jpg", "image/png,image/*", "JPEG", 1),
        ("moving.gif", "*/*", "GIF", 3),  # an animated GIF stays one
        ("moving.png", "*/*", "PNG", 3),  # an APNG stays one
        ("moving.webp", "*/*", "GIF", 3),  # not every client plays WebP: GIF, as before
        ("still.webp", "image/png,image/*", "JPEG", 1),  # not every client reads WebP: JPEG
        ("still.gif", "*/*", "JPEG", 1),  # a still GIF, as with no format (Cloudflare's rule)
    ],
)
def test_format_auto_falls_back_to_the_sources_own_format_where_every_client_reads_it(
    originals, source, accept, expected, frames
):
    """format=auto for a client that takes neither AVIF nor WebP: the original format, as Cloudflare
    Images, Fastly and Sanity answer (a transparent PNG came back a JPEG, its transparency gone)."""
    disc = sticker()
    (originals / "sticker.png").write_bytes(encoded(disc, "PNG"))
    moving = [sticker().rotate(angle) for angle in (0, 30, 60)]
    for name in ("moving.gif", "moving.png", "moving.webp"):
        (originals / name).write_bytes(animation(moving, name.split(".")[1].upper(), [100] * 3, 0))
    (originals / "still.webp").write_bytes(encoded(disc, "WEBP"))
    (originals / "still.gif").write_bytes(encoded(disc, "GIF"))
    response = url_get(url_client(originals), f"width=200,format=auto/{source}", Accept=accept)
    got = picture(response)
    assert (got.format, getattr(got, "n_frames", 1)) == (expected, frames)
    assert response.headers["Vary"] == "Accept" and response.headers["Content-Type"] == f"image/{expected.lower()}"
    if source == "sticker.png":
        alpha = np.asarray(got.convert("RGBA"))[..., 3]
        assert alpha[2, 2] == 0 and alpha[75, 100] == 255  # the ground transparent, the disc opaque


def test_jpeg_is_progressive_as_cloudflares_and_baseline_jpeg_is_not(originals):
    client = url_client(originals)
    assert picture(url_get(client, "format=jpeg/people/astronaut.jpg")).info.get("progressive") == 1
    assert not picture(url_get(client, "format=baseline-jpeg/people/astronaut.jpg")).info.get("progressive")


def test_json_answers_the_crop_geometry(originals):
    body = url_get(url_client(originals), "width=100,height=50,fit=cover,format=json/people/astronaut.jpg").json
    assert body == {
        "image": {"width": 512, "height": 512},
        "crop": {"x": 0, "y": 128, "width": 512, "height": 256},
        "output": {"width": 100, "height": 50},
        "faces": [],
        "focus": "center",
    }


@pytest.mark.parametrize(
    "options,parameter",
    [
        ("width=0", "width"),
        ("width=abc", "width"),
        ("height=12001", "height"),
        ("fit=fill", "fit"),
        ("gravity=north", "gravity"),
        ("gravity=1.5x0", "gravity"),
        ("zoom=2", "zoom"),
        ("format=heic", "format"),
        ("quality=0", "quality"),
        ("quality=best", "quality"),
        ("dpr=0", "dpr"),
        ("width=6001,dpr=2", "dpr"),
        ("background=nope", "background"),
        ("onerror=ignore", "onerror"),
        ("metadata=all", "metadata"),
        ("anim=yes", "anim"),
        ("faces=some", "faces"),
        ("detail=max", "detail"),
        ("min-confidence=101", "min-confidence"),
        ("anonymize=erase", "anonymize"),
        ("width=1,w=2", "width"),
        ("colour=red", "colour"),
        ("sharpen=11", "sharpen"),
        ("trim.right=5", "trim.right"),  # Cloudflare has trim.width and trim.left, no trim.right
        ("trim=1;2;3", "trim"),
        ("trim=a;b;c;d", "trim"),
        ("rotate=45", "rotate"),
        ("flip=x", "flip"),
        ("blur=251", "blur"),
        ("brightness=-1", "brightness"),
        ("saturation=11", "saturation"),
        ("compression=slow", "compression"),
        ("scq=0", "slow-connection-quality"),
        ("upscale=generate", "upscale"),
        ("segment=foreground", "segment"),
        ("border=1", "border"),
        ("width", "people"),  # with no `=`, the first segment is a signature (none needed here)
    ],
)
def test_an_unknown_or_invalid_option_is_a_400_naming_it(originals, options, parameter):
    response = url_get(url_client(originals), f"{options}/people/astronaut.jpg")
    assert response.status_code == 400 and response.headers["Cache-Control"] == "no-store"
    assert response.json["error"]["code"] == "invalid_parameter" and response.json["error"]["parameter"] == parameter


def test_every_cloudflare_option_is_supported_or_refused_with_a_reason():
    cloudflare = [
        *("anim", "background", "blur", "border", "brightness", "compression", "contrast", "dpr", "fit", "flip"),
        *("format", "gamma", "gravity", "height", "metadata", "onerror", "quality", "rotate", "saturation"),
        *("segment", "sharpen", "slow-connection-quality", "trim", "upscale", "width", "zoom"),
    ]
    for name in cloudflare:
        if name in UNSUPPORTED:
            with pytest.raises(InvalidParameter, match="is not supported"):
                parse_url_options(f"{name}=x")
            continue
        try:
            parse_url_options(f"{name}=x")  # x may be a valid value, or one refused naming the option
        except InvalidParameter as error:
            assert error.parameter == name and "is not an option" not in error.message, name
    hooks = runpy.run_path(str(Path(__file__).resolve().parents[2] / "docs" / "hooks.py"))
    rows = {line.split("|")[1] for line in hooks["url_options_table"]().splitlines() if line.startswith("| `")}
    for name in cloudflare:
        assert any(f"`{name}`" in row for row in rows), f"docs/api/url.md's option table lacks {name}"


@pytest.mark.parametrize(
    "source",
    [
        "../secret.jpg",
        "%2e%2e/secret.jpg",
        "people/%2e%2e/%2e%2e/secret.jpg",
        "%2Fetc%2Fpasswd",
        "escape.jpg",
        "nope.jpg",
    ],
)
def test_a_directory_origin_is_never_left(originals, source):
    response = url_get(url_client(originals), f"width=10/{source}")
    assert response.status_code == 404 and response.json["error"]["code"] == "source_not_found"


@pytest.mark.parametrize(
    "source", ["/people/astronaut.jpg", "//people/astronaut.jpg", "people//astronaut.jpg", "people%2Fastronaut.jpg"]
)
def test_a_source_is_a_path_on_the_origin_whatever_its_slashes(originals, source):
    # Next.js's documented Cloudflare loader writes `.../format=auto/${src}` with src = "/people/..."
    assert picture(url_get(url_client(originals), f"width=10/{source}")).size == (10, 10)


@pytest.mark.parametrize(
    ("options", "size"),
    [
        ("width=5120", (512, 512)),  # scale-down (the default): never enlarged, the source's size
        ("width=6016,fit=crop", (512, 512)),
        ("width=4480,height=2520,fit=cover", (4480, 2520)),  # Cloudflare's fits beyond 4096
        ("width=12000,height=1,fit=squeeze", (12000, 1)),
    ],
)
def test_sizes_up_to_cloudflares_limits_follow_each_fit(originals, options, size):
    # unpic's and Astro's full-width layouts ask for 4480, 5120, 5334 and 6016 px candidates
    assert picture(url_get(url_client(originals), f"{options}/people/astronaut.jpg")).size == size


def test_a_404_names_the_source_it_looked_for(originals):
    response = url_get(url_client(originals), "width=10//people/nobody.jpg")
    assert response.status_code == 404 and "'people/nobody.jpg'" in response.json["error"]["message"]


def test_a_link_inside_the_origin_is_followed(originals):
    assert picture(url_get(url_client(originals), "width=10/inside.jpg")).size == (10, 10)


@pytest.mark.parametrize(
    "source,status,code",
    [("notes.txt", 415, "unsupported_image"), ("bomb.png", 413, "image_too_large")],
)
def test_the_bytes_are_sniffed_and_bombs_refused(originals, source, status, code):
    response = url_get(url_client(originals), f"width=10/{source}")
    assert response.status_code == status and response.json["error"]["code"] == code
    assert response.headers["Cache-Control"] == "public, max-age=60"


def test_a_file_over_the_upload_limit_is_refused_unread(originals):
    response = url_get(url_client(originals, max_upload_bytes=1000), "width=10/people/astronaut.jpg")
    assert response.status_code == 413 and response.json["error"]["code"] == "payload_too_large"


def test_a_file_origin_revalidates_by_its_stat(originals):
    client = url_client(originals)
    first = url_get(client, "width=100/people/astronaut.jpg")
    assert first.headers["Cache-Control"] == "public, max-age=86400"
    again = url_get(client, "width=100/people/astronaut.jpg", **{"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and again.data == b"" and again.headers["ETag"] == first.headers["ETag"]
    assert again.headers["Cache-Control"] == first.headers["Cache-Control"]
    other_options = url_get(client, "width=101/people/astronaut.jpg", **{"If-None-Match": first.headers["ETag"]})
    assert other_options.status_code == 200 and other_options.headers["ETag"] != first.headers["ETag"]
    os.utime(originals / "people" / "astronaut.jpg", ns=(1, 1))  # the source changed
    changed = url_get(client, "width=100/people/astronaut.jpg", **{"If-None-Match": first.headers["ETag"]})
    assert changed.status_code == 200 and changed.headers["ETag"] != first.headers["ETag"]
    forged = url_get(client, "width=100/people/astronaut.jpg", **{"If-None-Match": '"abc.Zjox"'})
    assert forged.status_code == 200


def test_head_answers_the_headers_without_the_body(originals):
    client = url_client(originals)
    full, head = (
        url_get(client, "width=64/people/astronaut.jpg"),
        client.head("/cdn-cgi/image/width=64/people/astronaut.jpg"),
    )
    assert head.status_code == 200 and head.data == b""
    assert head.headers["ETag"] == full.headers["ETag"] and head.headers["Content-Type"] == "image/jpeg"


def test_signed_urls_from_the_python_client_pass_and_every_other_fails(originals):
    client = url_client(originals, url_key=bytes.fromhex(KEY), url_salt=bytes.fromhex(SALT))
    good = image_url("", "people/astronaut.jpg", key=KEY, salt=SALT, width=64, fit="cover", height=32)
    assert picture(client.get(good)).size == (64, 32)
    signature = good.split("/")[3]
    cases = {
        "unsigned": "/cdn-cgi/image/width=64,fit=cover,height=32/people/astronaut.jpg",
        "wrong": good.replace(signature, signature[::-1]),
        "truncated": good.replace(signature, signature[:20]),
        "other options": good.replace("width=64", "width=65"),
        "other source": good.replace("people/astronaut.jpg", "wide.png"),
        "other salt": image_url("", "people/astronaut.jpg", key=KEY, salt="00", width=64, fit="cover", height=32),
    }
    for case, url in cases.items():
        response = client.get(url)
        assert response.status_code == 403 and response.json["error"]["code"] == "invalid_signature", case


def test_a_signed_url_to_a_source_sent_percent_encoded_is_served(originals):
    """Through the app: the signature is checked over the path as the request sent it, percent-
    encoded as the client signed it, not over the path the server decoded."""
    (originals / "people" / "an astronaut.jpg").write_bytes((originals / "people" / "astronaut.jpg").read_bytes())
    client = url_client(originals, url_key=bytes.fromhex(KEY), url_salt=bytes.fromhex(SALT))
    good = image_url("", "people/an astronaut.jpg", key=KEY, salt=SALT, width=64)
    assert "/people/an%20astronaut.jpg" in good
    assert picture(client.get(good)).size == (64, 64)
    decoded = good.replace("%20", " ")
    assert client.get(decoded).status_code == 403


def test_without_a_key_a_signature_segment_is_passed_over(originals):
    url = image_url("", "people/astronaut.jpg", key=KEY, salt=SALT, width=64)
    assert picture(url_client(originals).get(url)).size == (64, 64)


def test_api_keys_do_not_leak_through_the_url_form(originals):
    keys = {"api_keys": ("k1",)}
    refused = url_get(url_client(originals, **keys), "width=64/people/astronaut.jpg")
    assert refused.status_code == 403 and refused.json["error"]["code"] == "invalid_signature"
    opened = url_get(url_client(originals, allow_unsigned_urls=True, **keys), "width=64/people/astronaut.jpg")
    assert picture(opened).size == (64, 64)
    signed = image_url("", "people/astronaut.jpg", key=KEY, width=64)
    assert picture(url_client(originals, url_key=bytes.fromhex(KEY), **keys).get(signed)).size == (64, 64)


def test_relative_sources_need_an_origin_and_absolute_ones_an_allowed_prefix():
    client = create_app(Settings(), NoFacesModel).test_client()
    for path in ("width=10/a.jpg", "width=10/https://example.com/a.jpg"):
        response = client.get(f"/cdn-cgi/image/{path}")
        assert response.status_code == 403 and response.json["error"]["code"] == "source_not_allowed"
    missing = client.get("/cdn-cgi/image/width=10")
    assert missing.status_code == 400 and missing.json["error"]["parameter"] == "source"


@pytest.mark.parametrize(
    "raw,query,allowed,expected",
    [
        ("https://Example.COM:443/a.jpg", "", ("https://example.com/",), "https://example.com/a.jpg"),
        ("https:/example.com/a.jpg", "v=2", ("https://example.com/",), "https://example.com/a.jpg?v=2"),
        ("http://example.com/a.jpg", "", ("*",), "http://example.com/a.jpg"),
    ],
)
def test_absolute_sources_are_normalized_before_the_allowlist(raw, query, allowed, expected):
    assert resolve_source(raw, query, "", allowed) == Source(url=expected)


@pytest.mark.parametrize(
    "raw,allowed",
    [
        ("https://example.com.evil.net/a.jpg", ("https://example.com/",)),
        ("https://user:pass@example.com/a.jpg", ("*",)),
        ("http://example.com/a.jpg", ("https://example.com/",)),
        ("https://example.com:8443/a.jpg", ("https://example.com/",)),
    ],
)
def test_the_allowlist_is_a_prefix_of_the_whole_url(raw, allowed):
    with pytest.raises(SourceNotAllowed):
        resolve_source(raw, "", "", allowed)


def test_a_prefix_without_a_host_slash_is_refused_at_start():
    with pytest.raises(ValueError, match="FACECROP_ALLOWED_SOURCES"):
        Settings(allowed_sources=("https://example.com",))


def test_without_an_avif_encoder_webp_is_answered(monkeypatch):
    monkeypatch.setattr("gateway.imaging.encode.AVIF_AVAILABLE", False)
    assert negotiate("auto", "image/avif,image/webp") == "webp"
    assert negotiate(None, "image/avif") == "input"
    assert output_format("avif", "JPEG", (64, 64)) == "webp"


def test_avif_outputs_are_bounded_as_cloudflare_bounds_them():
    assert output_format("avif", "JPEG", (1600, 900)) == "avif"
    assert output_format("avif", "JPEG", (900, 1601)) == "webp"
    assert output_format("avif", "JPEG", (1201, 900), avif_max_side=1200) == "webp"


@pytest.mark.parametrize(
    "options,detects",
    [
        ("width=64,gravity=face", False),  # scale-down keeps the whole image: faces change nothing
        ("width=64,height=64,fit=cover", False),
        ("width=64,height=64,fit=cover,gravity=face", True),
        ("width=64,gravity=auto,fit=crop", True),
        ("width=64,anonymize=blur", True),
        ("width=64,format=json", True),
    ],
)
def test_faces_are_looked_for_only_where_the_answer_depends_on_them(originals, options, detects):
    response = url_get(url_client(originals), f"{options}/people/astronaut.jpg")
    assert response.status_code == 200 and ("X-Face-Count" in response.headers) == detects


@pytest.mark.parametrize(
    "options,confidence,detail,margin",
    [
        # The privacy-first defaults of /v1/anonymize (docs/defaults.md: 8 %, detail=auto, margin 1.4).
        ("anonymize=blur", 8.0, "auto", 1.4),
        ("anonymize=pixelate,width=64", 8.0, "auto", 1.4),
        ("anonymize=fill,preset=privacy", 8.0, "auto", 1.4),
        # preset=fast: the standard pass, 12 %, margin 1.3; an option given still applies.
        ("anonymize=blur,preset=fast", 12.0, "standard", 1.3),
        ("anonymize=blur,preset=fast,min-confidence=30", 30.0, "standard", 1.3),
        ("anonymize=blur,preset=fast,detail=high", 12.0, "high", 1.3),
        ("anonymize=blur,detail=fast", 8.0, "fast", 1.4),
        ("anonymize=blur,min-confidence=60", 60.0, "auto", 1.4),
        # No anonymize: a crop's own defaults.
        ("width=64", 50.0, "fast", None),
    ],
)
def test_the_url_forms_anonymize_defaults_are_privacy_first(options, confidence, detail, margin):
    parsed = parse_url_options(options).image
    assert (parsed.detect.min_confidence, parsed.detect.detail) == (confidence, detail)
    assert (parsed.hiding.margin if parsed.hiding else None) == margin
    if parsed.hiding:
        assert parsed.hiding.method == options.split(",")[0].split("=")[1]


def test_the_url_forms_anonymize_hides_as_v1_anonymize_does():
    """The same policy as /v1/anonymize's, preset by preset (not only the same literals)."""
    for preset in ("privacy", "fast"):
        v1 = anonymize_request({"preset": preset})
        parsed = parse_url_options(f"anonymize=blur,preset={preset}").image
        assert (parsed.detect.min_confidence, parsed.detect.detail) == (v1.detect.min_confidence, v1.detect.detail)
        assert parsed.hiding is not None and v1.hiding is not None and parsed.hiding.margin == v1.hiding.margin


def test_a_signature_covers_the_query_string(originals):
    client = url_client(originals, url_key=bytes.fromhex(KEY), url_salt=bytes.fromhex(SALT))
    good = image_url("", "people/astronaut.jpg?v=2", key=KEY, salt=SALT, width=64)
    assert picture(client.get(good)).size == (64, 64)
    response = client.get(good.replace("v=2", "v=3"))
    assert response.status_code == 403 and response.json["error"]["code"] == "invalid_signature"


@pytest.mark.parametrize(
    "raw,origin,allowed",
    [
        ("https://s3.example.com/bucket/../other/x.jpg", "", ("https://s3.example.com/bucket/",)),
        ("https://s3.example.com/bucket/%2e%2e/other/x.jpg", "", ("https://s3.example.com/bucket/",)),
        ("https://s3.example.com/bucket/.%2E/other/x.jpg", "", ("*",)),
        ("../admin/x.jpg", "http://origin.internal/images/", ()),
        ("a/%2E%2E/%2e%2e/admin", "http://origin.internal/images/", ()),
        ("http://x..com/a.jpg", "", ("*",)),  # a host name IDNA cannot encode
    ],
)
def test_dot_segments_never_leave_a_prefix_or_an_origins_path(raw, origin, allowed):
    with pytest.raises(SourceNotAllowed):
        resolve_source(raw, "", origin, allowed)


def test_a_relative_source_stays_under_the_http_origins_path():
    source = resolve_source("team/a b.jpg", "v=1", "http://Origin.internal:80/images", ())
    assert source == Source(url="http://origin.internal/images/team/a b.jpg?v=1", origin="http://origin.internal")


@pytest.mark.parametrize(
    "origin,answer",
    [
        (None, "public, max-age=86400"),
        ("max-age=60", "public, max-age=3600"),
        ("public, max-age=604800", "public, max-age=604800"),
        ("private, max-age=600", "private, max-age=3600"),
        ("no-store", "no-store"),
        ('s-maxage="7200", max-age=10', "public, max-age=7200"),
        ("no-cache", "public, max-age=3600"),  # was a day: no max-age, so the default
        ("private, no-cache, max-age=600", "private, max-age=3600"),
        ("max-age=60, must-revalidate", "public, max-age=60, must-revalidate"),  # Cloudflare's way under an hour
        ("no-cache, must-revalidate", "public, max-age=0, must-revalidate"),
        ("must-revalidate", "public, max-age=86400, must-revalidate"),
    ],
)
def test_the_origins_cache_control_is_followed_at_least_an_hour(origin, answer):
    assert cache_control(origin) == answer


def test_made_up_validators_are_never_sent_to_an_origin():
    assert conditions('e:"abc"') == {"If-None-Match": '"abc"'}
    assert conditions("e:caf\u00e9\u4e2d") is None and conditions("e:a\r\nX: y") is None
    assert conditions("h:0123") is None


@pytest.mark.parametrize(
    "address,public",
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.2", False),
        ("10.1.2.3", False),
        ("100.64.0.1", False),
        ("169.254.169.254", False),
        ("192.0.0.8", False),
        ("224.0.0.1", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("::ffff:127.0.0.1", False),
        ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
        ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
        ("64:ff9b::5db8:d822", False),  # NAT64 of a public address: ::/8 is reserved
        ("::5db8:d822", False),  # IPv4-compatible, the same
        ("2002:5db8:d822::", True),  # 6to4 of a public address
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("fec0::1", False),  # site-local
        ("fe80::1", False),
        ("fd00::1", False),
    ],
)
def test_only_public_addresses_are_reached(address, public):
    assert is_public(ipaddress.ip_address(address)) == public


def test_a_name_that_rebinds_to_loopback_is_never_connected_to(monkeypatch):
    """DNS rebinding: the name resolves to a public address when checked, and to the trap's
    loopback address on any later lookup. The connection must go to the address checked (here
    refused before any packet leaves: nothing may reach the public internet), never to the trap."""
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect
    lookups, attempts = [], []

    with trap() as caught:

        def rebinding(host, port, *args, **kwargs):
            if host != "rebind.example":
                return real_getaddrinfo(host, port, *args, **kwargs)
            lookups.append(host)
            address = "93.184.216.34" if len(lookups) == 1 else "127.0.0.2"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, caught.port))]

        def guarded(sock, address):
            attempts.append(address[0])
            if not ipaddress.ip_address(address[0]).is_loopback:
                raise ConnectionRefusedError("no packet leaves this test")
            return real_connect(sock, address)

        monkeypatch.setattr(socket, "getaddrinfo", rebinding)
        monkeypatch.setattr(socket.socket, "connect", guarded)
        fetcher = Fetcher(("*",), False, 1, 3, 1 << 20, FetchAdmission(8, 4, 5, 30))
        with pytest.raises(OriginError):
            fetcher.get(f"http://rebind.example:{caught.port}/x.jpg")
        assert attempts == ["93.184.216.34"] and caught.connections() == 0


def test_a_slow_name_lookup_ends_at_the_fetch_deadline(monkeypatch):
    """A lookup that never answers (a resolver that drops the query): the fetch is a 504 at its
    deadline, while the lookup is still blocked, not when the lookup gives up."""
    real, blocked, released = socket.getaddrinfo, threading.Event(), threading.Event()

    def slow(host, *args, **kwargs):
        if host == "slow.example":
            blocked.set()
            released.wait(20)  # as long as a resolver's retries can take
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    fetcher = Fetcher(("*",), False, 1, 1, 1 << 20, FetchAdmission(8, 4, 5, 30))
    started = time.monotonic()
    try:
        with pytest.raises(OriginTimeout):
            fetcher.get("http://slow.example/x.jpg")
        elapsed = time.monotonic() - started
        assert blocked.is_set() and not released.is_set()  # ended by the deadline, the lookup still waiting
        assert elapsed < 1 + 1, elapsed  # the deadline (1 s) + 1 s
    finally:
        released.set()


def test_an_animations_output_over_the_pixel_limit_is_refused_as_a_stills_is(originals):
    """400 output_too_large, before any frame is decoded, for a still and an animation alike."""
    frames = [astronaut().resize((64, 64)), astronaut().resize((64, 64)).rotate(90)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    (originals / "moving.gif").write_bytes(buffer.getvalue())
    client = url_client(originals)
    for source in ("moving.gif", "wide.png"):
        response = url_get(client, f"width=12000,height=12000,fit=cover/{source}")
        assert response.status_code == 400 and response.json["error"]["code"] == "output_too_large", source


@pytest.mark.parametrize("fmt", ["webp", "avif", "jpeg", "png", "json"])
def test_a_side_that_follows_a_thin_regions_aspect_is_bounded_as_a_given_side_is(originals, fmt):
    """height alone enlarges a 100x2 strip 120 times to 12000x240 (Cloudflare's longest side, and
    wider than AVIF's: WebP instead), made; one row more makes it 12050 wide, 400
    output_too_large in every format (before, WebP's 16383 and JPEG's 65535 were found by the
    encoders: 500)."""
    (originals / "strip.png").write_bytes(encoded(Image.new("RGB", (100, 2), (30, 60, 90)), "PNG"))
    client = url_client(originals)
    made = url_get(client, f"height=240,fit=scale-up,format={fmt}/strip.png")
    assert made.status_code == 200, made.json
    if fmt != "json":
        assert picture(made).size == (12000, 240)
    for options in ("height=241,fit=scale-up", "height=241,fit=contain", "height=241,fit=cover"):
        refused = url_get(client, f"{options},format={fmt}/strip.png")
        assert refused.status_code == 400, (options, refused.status_code)
        assert refused.json["error"] == {
            "code": "output_too_large",
            "message": "a 12050x241 output has a side over the limit of 12000 pixels",
        }


@pytest.mark.parametrize("raw", ["//team/a.jpg", "///team/a.jpg", "/team/a.jpg"])
def test_leading_slashes_stay_on_the_http_origins_host_and_path(raw):
    """`//team/a.jpg` is a path on the origin, never a host (a URL join would read it as one)."""
    source = resolve_source(raw, "", "https://cdn.example.com/images/", ())
    assert source == Source(url="https://cdn.example.com/images/team/a.jpg", origin="https://cdn.example.com")


def test_a_signature_covers_the_source_as_sent_percent_encoded():
    """The signature is over the path as it is in the URL: a source sent percent-encoded is signed so
    (the client signs what it sends); its decoded form, or another encoding, does not match."""
    key, salt = b"k" * 16, b"s"
    sent = "/width=64/team%2Fa%20b.jpg"
    signed = f"/{signature(key, salt, sent)}{sent}"
    assert unsigned_path(signed, "", key, salt) == sent
    for other in ("/width=64/team/a b.jpg", "/width=64/team%2fa%20b.jpg", "/width=64/team/a%20b.jpg"):
        with pytest.raises(InvalidSignature):
            unsigned_path(f"/{signature(key, salt, sent)}{other}", "", key, salt)


def test_a_name_with_several_addresses_connects_to_a_public_one_or_none():
    """getaddrinfo's answers in order: the first public one is connected to (never a private one
    listed before it); where every one is private, none is, unless private sources are allowed."""

    def answers(*addresses: str) -> list:
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 443)) for a in addresses
        ]

    assert first_address(answers("10.0.0.5", "93.184.216.34", "127.0.0.1"), public_only=True) == "93.184.216.34"
    assert first_address(answers("fd00::1", "2606:2800:220:1::1"), public_only=True) == "2606:2800:220:1::1"
    assert first_address(answers("fe80::1%eth0", "93.184.216.34"), public_only=True) == "93.184.216.34"  # scoped
    with pytest.raises(AddressRefused):
        first_address(answers("10.0.0.5", "127.0.0.2", "::ffff:192.168.0.1"), public_only=True)
    assert first_address(answers("10.0.0.5", "93.184.216.34"), public_only=False) == "10.0.0.5"


def signed_with(first: str) -> str:
    """A path the client signs (facecrop_client.image_url) with a signature that starts with `first`:
    a character a strip of the path could eat. (A signature's last character carries 4 bits of the
    32 bytes: one of 16, never X, - or _.)"""
    key, salt = b"k" * 16, b"s"
    for width in range(1, 100_000):
        url = image_url("", "team/a.jpg", key=key.hex(), salt=salt.hex(), width=width)
        signature_part = url.removeprefix("/cdn-cgi/image/").split("/")[0]
        if signature_part.startswith(first):
            return url.removeprefix("/cdn-cgi/image")
    raise AssertionError("no such signature")


@pytest.mark.parametrize("first", ["X", "-", "_"])
def test_every_signature_the_client_makes_is_accepted_whatever_its_first_character(first):
    tail = signed_with(first)
    assert unsigned_path(tail, "", b"k" * 16, b"s") == "/" + tail.lstrip("/").partition("/")[2]


def test_a_refused_signature_says_why():
    """The two refusals' messages: what the URL form with a signature looks like, or that it does not
    match (a client reads them to fix the URL)."""
    key, salt = b"k" * 16, b"s"
    for tail in ("/width=64/team/a.jpg", "/c2lnbmF0dXJl"):  # options without a signature; a signature alone
        with pytest.raises(InvalidSignature) as unsigned:
            unsigned_path(tail, "", key, salt)
        assert str(unsigned.value) == "this service needs signed URLs: /cdn-cgi/image/<signature>/<options>/<source>"
    with pytest.raises(InvalidSignature) as wrong:
        unsigned_path("/c2lnbmF0dXJl/width=64/team/a.jpg", "", key, salt)
    assert str(wrong.value) == "the URL's signature does not match its options and source"

"""A new output format is one row of gateway/imaging/encode.py's FORMATS and its encoder: a stand-in
format (BMP, OpenCV's encoder), registered before the gateway is imported, is taken by both doors'
parsers, listed by the OpenAPI document and answered by both doors in its content type, with
nothing else changed. In a process of its own, so that the table this test changes is its alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
REGISTERED = """
import io, json, sys
from PIL import Image
from gateway.imaging import encode
def bmp(pixels, quality, progressive, exif):
    return encode.opencv(".bmp", pixels, [])
encode.FORMATS.append(encode.OutputFormat("bmp", "image/bmp", bmp))
from gateway.config import Settings
from gateway.web.app import create_app
from gateway.web.openapi import openapi_document
from tests.support import NoFacesModel

origin = sys.argv[1]
picture = io.BytesIO()
Image.new("RGB", (64, 48), (200, 30, 10)).save(picture, "JPEG")
Image.new("RGB", (64, 48), (200, 30, 10)).save(origin + "/red.jpg")
client = create_app(Settings(origin=origin), NoFacesModel).test_client()
upload = client.post("/v1/crop?format=bmp&width=32&height=24", data=picture.getvalue(), content_type="image/jpeg")
url = client.get("/cdn-cgi/image/width=32,format=bmp/red.jpg")
document = openapi_document()
crop = next(p for p in document["paths"]["/v1/crop"]["post"]["parameters"] if p["name"] == "format")
url_form = document["paths"]["/cdn-cgi/image/{options}/{source}"]["get"]
by_url = next(p for p in url_form["parameters"] if p["name"] == "options")
answers = document["paths"]["/v1/crop"]["post"]["responses"]["200"]["content"]
json.dump({
    "upload": [upload.status_code, upload.content_type, upload.data.hex()],
    "url": [url.status_code, url.content_type, url.data.hex()],
    "crop_formats": crop["schema"]["enum"],
    "url_formats": by_url["schema"]["properties"]["format"]["enum"],
    "answers": sorted(answers),
}, sys.stdout)
"""


def test_a_format_registered_in_the_table_is_taken_and_answered_by_both_doors(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", REGISTERED, str(tmp_path)], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout)
    for door, size in (("upload", (32, 24)), ("url", (32, 24))):
        status, content_type, body = told[door]
        assert (status, content_type) == (200, "image/bmp"), told[door]
        pixels = cv2.imdecode(np.frombuffer(bytes.fromhex(body), np.uint8), cv2.IMREAD_COLOR)
        assert bytes.fromhex(body)[:2] == b"BM" and pixels.shape[1::-1] == size
        assert np.abs(pixels[12, 16].astype(int) - [10, 30, 200]).max() <= 12  # red, as BGR
    assert told["crop_formats"] == ["jpeg", "png", "webp", "avif", "gif", "bmp", "json"]
    assert told["url_formats"] == ["auto", "avif", "webp", "jpeg", "baseline-jpeg", "png", "gif", "bmp", "json"]
    assert "image/bmp" in told["answers"]

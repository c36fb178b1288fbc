"""Multipart uploads stay in memory: Werkzeug would otherwise spool large files to disk."""

import io
import tempfile

from evaluation.images import png_declaring


def test_large_multipart_upload_never_touches_a_temporary_file(monkeypatch, client):
    def refuse(*args, **kwargs):
        raise AssertionError("a request tried to write a temporary file")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    monkeypatch.setattr(tempfile, "SpooledTemporaryFile", refuse)
    bomb = png_declaring(60_000, 60_000) + b"\0" * 2_000_000  # bigger than Werkzeug's 500 kB spool limit
    response = client.post("/v1/detect", data={"image": (io.BytesIO(bomb), "x.png")})
    assert response.status_code == 413
    assert response.json["error"]["code"] == "image_too_large"


def test_multipart_bodies_past_the_form_limits_or_cut_short_get_json_4xx(client):
    """More parts than MAX_FORM_PARTS or a text field over MAX_FORM_MEMORY_SIZE: 413 with a code;
    a body cut before its closing boundary: the image is missing (400), never a 500."""
    photo = (io.BytesIO(png_declaring(8, 8)), "x.png")
    many = client.post("/v1/detect", data={"image": photo, **{f"f{i}": "1" for i in range(1001)}})
    long_text = client.post(
        "/v1/detect", data={"image": (io.BytesIO(png_declaring(8, 8)), "x.png"), "min_size": "1" * 600_000}
    )
    body = b'--x\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\n' + png_declaring(8, 8)
    cut = client.post("/v1/detect", data=body, content_type="multipart/form-data; boundary=x")
    answers = [(r.status_code, r.is_json and r.json["error"]["code"]) for r in (many, long_text, cut)]
    assert answers == [(413, "payload_too_large"), (413, "payload_too_large"), (400, "missing_image")]

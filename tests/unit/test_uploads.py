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

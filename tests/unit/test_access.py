"""Security headers, CORS and key checks of the app, with an in-process stand-in for Triton."""

import pytest

from gateway.config import Settings
from gateway.web.access import key_is_valid


def test_security_headers_and_no_cors_by_default(client):
    response = client.get("/healthz", headers={"Origin": "https://example.com"})
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "Access-Control-Allow-Origin" not in response.headers


@pytest.mark.parametrize("settings", [Settings(cors_origins=("https://app.example.com",))])
def test_cors_only_for_configured_origins(client):
    allowed = client.options(
        "/v1/detect", headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}
    )
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert "X-Crop-Rect" in allowed.headers["Access-Control-Expose-Headers"]
    other = client.options("/v1/detect", headers={"Origin": "https://evil.example.com"})
    assert "Access-Control-Allow-Origin" not in other.headers


@pytest.mark.parametrize(
    "header,valid",
    [
        ("Bearer k1", True),
        ("bearer k2", True),
        ("Bearer k3", False),
        ("Bearer", False),
        (None, False),
        ("Token k1", False),
    ],
)
def test_key_check(header, valid):
    assert key_is_valid(header, ("k1", "k2")) is valid


def test_settings_read_keys_from_env_and_file(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("a\n b \n\n")
    settings = Settings.from_env(
        {"FACECROP_API_KEYS": "x, y", "FACECROP_API_KEYS_FILE": str(keys), "FACECROP_CORS_ORIGINS": "https://a"}
    )
    assert settings.api_keys == ("x", "y", "a", "b")
    assert settings.cors_origins == ("https://a",)
    assert Settings.from_env({}).api_keys == ()

"""URLs of the service's URL form, for `<img src>`: /cdn-cgi/image/[<signature>/]<options>/<source>,
signed where the service has FACECROP_URL_KEY (imgproxy's scheme: HMAC-SHA256 over salt + path)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import quote

URL_CHARACTERS = ":/?#[]@!$&'()*+,;=%~"  # left as they are in a source: only the rest is encoded


def option_name(name: str) -> str:
    """Cloudflare's name of a keyword: `min_confidence` is `min-confidence`, `slow_connection_quality`
    `slow-connection-quality`, `trim_left` `trim.left` and `trim_border_color` `trim.border.color`."""
    return name.replace("_", ".") if name.startswith("trim_") else name.replace("_", "-")


def option_value(value: object) -> str:
    """A value as the URL carries it: a sequence (trim's four sides) joined by `;`, the rest encoded."""
    if isinstance(value, (tuple, list)):
        return ";".join(quote(str(part), safe="") for part in value)
    return quote(str(value), safe="")


def image_url(base_url: str, source: str, key: str = "", salt: str = "", **options: object) -> str:
    """The URL of `source` (a path under the service's origin, or an http(s) URL, with its query
    string if any) transformed by `options` (Cloudflare's names, as `option_name` spells keywords;
    `trim=(top, right, bottom, left)`), signed with `key` and `salt` (hex) where a key is given:
    `image_url(base, "team.jpg", width=256, height=256, fit="cover", gravity="face")`."""
    listed = ",".join(f"{option_name(name)}={option_value(value)}" for name, value in options.items())
    path = f"/{listed}/{quote(source, safe=URL_CHARACTERS)}"  # as an HTTP library would send it
    if key:
        digest = hmac.new(bytes.fromhex(key), bytes.fromhex(salt) + path.encode(), hashlib.sha256).digest()
        path = "/" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode() + path
    return f"{base_url.rstrip('/')}/cdn-cgi/image{path}"

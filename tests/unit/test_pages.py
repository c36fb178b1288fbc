"""The demo page and the API docs as served: same-origin files only, no inline code, the strict policy."""

from html.parser import HTMLParser

import pytest

from tests.support import assert_strict_policy


class Resources(HTMLParser):
    """What a page loads (script and stylesheet addresses), and any inline code or style it carries."""

    def __init__(self):
        super().__init__()
        self.loads: list[str] = []
        self.inline: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "style" in attributes or any(name.startswith("on") for name in attributes):
            self.inline.append(f"<{tag}> attribute")
        if tag == "style":
            self.inline.append("<style>")
        if tag == "script":
            self._in_script = True
            self.loads.append(attributes.get("src") or "")
        if tag == "link" and attributes.get("rel") == "stylesheet":
            self.loads.append(attributes["href"])

    def handle_endtag(self, tag):
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline.append("<script> body")


@pytest.mark.parametrize("path", ["/", "/docs"])
def test_pages_load_only_their_own_files_under_the_strict_policy(client, path):
    page = client.get(path)
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert_strict_policy(page.headers["Content-Security-Policy"])
    resources = Resources()
    resources.feed(page.get_data(as_text=True))
    assert resources.loads and not resources.inline
    for address in resources.loads:
        assert address.startswith("/") and not address.startswith("//"), address
        assert client.get(address).status_code == 200, address


def test_docs_serve_swagger_ui_from_its_package_and_nothing_else_of_it(client):
    script = client.get("/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200 and script.mimetype in ("application/javascript", "text/javascript")
    assert b"SwaggerUIBundle" in script.get_data()
    for other in ("index.html", "swagger-initializer.js", "..%2Fvendor", "oauth2-redirect.html"):
        missing = client.get(f"/docs/assets/{other}")
        assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found"

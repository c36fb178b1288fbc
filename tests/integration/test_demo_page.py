"""The demo page in headless Chromium: upload a real photo, see its faces boxed."""

from pathlib import Path

import requests
from playwright.sync_api import sync_playwright

from tests.support import CROWD, photo

CHROMIUM = "/usr/bin/chromium"  # Debian's package; `make test` installs it
ARTIFACTS = Path(__file__).resolve().parent.parent.parent / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_demo_page_boxes_the_faces_and_crops(stack):
    expected = len(
        requests.post(f"{stack.gateway}/v1/detect", files={"image": photo(CROWD).read_bytes()}, timeout=30).json()[
            "faces"
        ]
    )
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors = []
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            response = page.goto(stack.gateway + "/")
            assert "default-src 'self'" in response.headers["content-security-policy"]
            page.set_input_files("#file", str(photo(CROWD)))
            page.wait_for_selector("#face-count:not([data-count=''])", timeout=30_000)
            assert int(page.get_attribute("#face-count", "data-count")) == expected
            page.wait_for_selector("#crop-result[data-rect]:not([data-rect=''])", timeout=30_000)
            assert page.eval_on_selector("#crop-result", "image => image.naturalWidth") == 256
            assert "curl -F image=@" in page.inner_text("#curl") and "/v1/crop?width=256" in page.inner_text("#curl")
            page.screenshot(path=str(ARTIFACTS / "demo-page.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()

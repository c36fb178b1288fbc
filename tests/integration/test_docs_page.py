"""/docs in headless Chromium: Swagger UI (from the swagger-ui-bundle package) under the page's
strict Content-Security-Policy, its "Try it out" sending a real photo to both endpoints."""

import json
import shutil

from evaluation.images import ASTRONAUT, CROWD, photo
from local_triton.processes import running_gateway
from tests.support import assert_strict_policy, detect, screenshot, watched_page


def try_it_out(page, operation: str):
    """Opens `operation` in "Try it out" mode; returns its section of the page."""
    section = page.locator(f"#operations-default-{operation}")
    section.locator(".opblock-summary").click()
    section.locator(".try-out__btn").click()
    return section


def execute_with(section, relative: str):
    """Chooses the photo for the `image` field, sends the request; returns the response's row."""
    section.locator("input[type=file]").set_input_files(str(photo(relative)))
    section.locator(".execute").click()
    row = section.locator(".live-responses-table tr.response")
    row.wait_for(timeout=60_000)
    return row


def test_try_it_out_detects_the_faces_of_an_uploaded_photo(stack, browser):
    page, errors = watched_page(browser, 1280)
    response = page.goto(stack.gateway + "/docs")
    assert_strict_policy(response.headers["content-security-policy"])
    section = try_it_out(page, "detect")
    screenshot(page, "api-docs.png", down_to=".execute-wrapper")  # no photo yet: the README's docs/api-docs.png
    row = execute_with(section, CROWD)
    assert row.locator(".response-col_status").inner_text() == "200"
    body = json.loads(row.locator(".response-col_description pre.microlight").first.inner_text())
    assert len(body["faces"]) == len(detect(stack, photo(CROWD).read_bytes()).json()["faces"]) >= 10
    assert not errors, errors


def test_try_it_out_crops_an_uploaded_photo(stack, browser):
    page, errors = watched_page(browser, 1280)
    page.goto(stack.gateway + "/docs")
    section = try_it_out(page, "crop")
    section.locator("tr[data-param-name=width] input").fill("128")
    section.locator("tr[data-param-name=height] input").fill("96")
    row = execute_with(section, ASTRONAUT)
    assert row.locator(".response-col_status").inner_text() == "200"
    size = row.locator("img").evaluate("image => image.decode().then(() => [image.naturalWidth, image.naturalHeight])")
    assert size == [128, 96]
    assert "x-face-count: 1" in row.inner_text()
    assert not errors, errors


def test_try_it_out_serves_a_face_crop_by_url(stack, browser, tmp_path):
    shutil.copy(photo(ASTRONAUT), tmp_path / "astronaut.jpg")
    with running_gateway(stack.triton_grpc, {"FACECROP_ORIGIN": str(tmp_path)}, name="docs-url") as gateway:
        page, errors = watched_page(browser, 1280)
        page.goto(gateway.url + "/docs")
        section = try_it_out(page, "image")
        section.locator("tr[data-param-name=source] input").fill("astronaut.jpg")
        section.locator(".execute").click()  # the options' example: a 256x256 face crop
        row = section.locator(".live-responses-table tr.response")
        row.wait_for(timeout=60_000)
        assert row.locator(".response-col_status").inner_text() == "200"
        size = row.locator("img").evaluate(
            "image => image.decode().then(() => [image.naturalWidth, image.naturalHeight])"
        )
        assert size == [256, 256] and "x-face-count: 1" in row.inner_text()
        assert not errors, errors

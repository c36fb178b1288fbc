"""The demo page in headless Chromium: upload a real crowd photo, see its faces boxed, their
confidence where it fits, and the crop framed on the photo; at a desktop and at a phone's width."""

import pytest
import requests
from PIL import Image

from evaluation.images import STADIUM, photo
from evaluation.sources import encoded_as
from tests.support import assert_strict_policy, detect, screenshot, watched_page


def faces_of(stack, detail: str = "standard") -> list[dict]:
    """What the page asks for: every face above 50%."""
    params = {"min_confidence": 50, "max_faces": 1000, "detail": detail}
    return detect(stack, photo(STADIUM).read_bytes(), params).json()["faces"]


def load_photo(page, stack) -> None:
    page.set_input_files("#file", str(photo(STADIUM)))
    page.wait_for_selector("#face-count:not([data-count=''])", timeout=60_000)
    page.wait_for_selector("#crop-result[data-rect]:not([data-rect=''])", timeout=60_000)


@pytest.mark.parametrize("width", [1280, 390])
def test_demo_page_labels_what_fits_and_frames_the_crop(stack, browser, width):
    expected = len(faces_of(stack))
    page, errors = watched_page(browser, width)
    response = page.goto(stack.gateway + "/")
    assert_strict_policy(response.headers["content-security-policy"])
    if width == 1280:
        screenshot(page, "demo-page-empty.png", down_to=".panels")  # the README's docs/demo-page.png
    load_photo(page, stack)
    assert int(page.get_attribute("#face-count", "data-count")) == expected == 30
    labels = int(page.get_attribute("#canvas", "data-labels"))
    assert 5 <= labels < expected  # only those that fit; the rest on hover
    assert page.eval_on_selector("#crop-result", "image => image.naturalWidth") == 256
    assert page.get_attribute("#canvas", "data-crop") == page.get_attribute("#crop-result", "data-rect")  # drawn
    assert "/v1/crop?width=256" in page.inner_text("#curl")
    assert "/cdn-cgi/image/width=256," in page.inner_text("#curl") and "gravity=face" in page.inner_text("#curl")
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scrolling
    screenshot(page, f"demo-page-{width}.png")
    assert not errors, errors


def test_demo_page_hover_largest_face_and_small_faces(stack, browser):
    faces = faces_of(stack)
    page, errors = watched_page(browser, 1280)
    page.goto(stack.gateway + "/")
    load_photo(page, stack)

    # pointing at the least sure face (whose label rarely fits) tells its confidence
    face = faces[-1]["face_rectangle"]
    scale = page.eval_on_selector("#canvas", "canvas => canvas.clientWidth / canvas.width")
    centre = {"x": (face["x"] + face["width"] / 2) * scale, "y": (face["y"] + face["height"] / 2) * scale}
    page.hover("#canvas", position=centre)
    assert f"{faces[-1]['confidence']:.2f}% confidence" in page.inner_text("#face-info")

    all_faces = page.get_attribute("#crop-result", "data-rect")
    page.select_option("#faces", "largest")
    page.wait_for_selector(f"#crop-result:not([data-rect='{all_faces}'])", timeout=30_000)
    assert "faces=largest" in page.inner_text("#curl")

    page.select_option("#detail", "high")  # detects again, with the tiled pass, then crops again
    page.wait_for_function("() => document.getElementById('curl').textContent.includes('detail=high')", timeout=60_000)
    assert int(page.get_attribute("#face-count", "data-count")) == len(faces_of(stack, "high"))
    assert not errors, errors


def test_demo_page_anonymizes_the_photo(stack, browser):
    hidden = requests.post(f"{stack.gateway}/v1/anonymize", files={"image": photo(STADIUM).read_bytes()}, timeout=120)
    page, errors = watched_page(browser, 1280)
    page.goto(stack.gateway + "/")
    load_photo(page, stack)
    page.wait_for_selector("#hidden-count:not([data-count=''])", timeout=60_000)
    assert page.get_attribute("#hidden-count", "data-count") == hidden.headers["X-Face-Count"]
    width = page.eval_on_selector("#anonymize-result", "image => image.naturalWidth")
    assert width == page.eval_on_selector("#canvas", "canvas => canvas.width")  # the whole photo, same size
    previous = page.get_attribute("#anonymize-result", "src")
    page.select_option("#method", "pixelate")
    page.wait_for_selector(f"#anonymize-result:not([src='{previous}'])", timeout=60_000)
    screenshot(page, "demo-page-anonymize.png")
    assert not errors, errors


def test_demo_page_takes_a_heic(stack, browser, tmp_path):
    """Chromium cannot show HEIC: the page draws the gateway's rendition, and finds the faces."""
    heic = tmp_path / "stadium.heic"
    heic.write_bytes(encoded_as(Image.open(photo(STADIUM)).convert("RGB"), "HEIF"))
    expected = detect(stack, heic.read_bytes(), {"min_confidence": 50, "max_faces": 1000}).json()["faces"]
    page, errors = watched_page(browser, 1280)
    page.goto(stack.gateway + "/")
    page.set_input_files("#file", str(heic))
    page.wait_for_selector("#face-count:not([data-count=''])", timeout=60_000)
    page.wait_for_selector("#crop-result[data-rect]:not([data-rect=''])", timeout=60_000)
    assert int(page.get_attribute("#face-count", "data-count")) == len(expected) >= 20
    assert page.eval_on_selector("#canvas", "canvas => [canvas.width, canvas.height]") == list(
        Image.open(photo(STADIUM)).size
    )
    assert page.eval_on_selector("#crop-result", "image => image.naturalWidth") == 256
    assert not errors, errors

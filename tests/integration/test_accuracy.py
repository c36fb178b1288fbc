"""AP50 of the whole service on labeled real photos (../shared/faces), at the default policy."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.ap50 import average_precision
from tests.support import labeled_set

# Floors within 0.01 of what the service measures at its default policy, so that a real drop
# fails: 0.7563, 0.855, 0.999 and 0.6296 at detail=standard, and 0.7993 on the crowds of
# wider_val_native at detail=high (measured 2026-11-24; the in-process reference of
# ../shared/faces/README.md, one pass at 1024 and a 0.02 threshold, reaches 0.746, 0.817, 1.000 and
# 0.626). Elsewhere detail=high may cost at most 0.01 (it measures the same as standard).
FLOORS = {"wider_val_416sq": 0.75, "facemask": 0.85, "dlib_voc_faces": 0.99, "wider_val_native": 0.62}
HIGH_DETAIL_FLOORS = {"wider_val_native": 0.79}


def service_ap50(stack, name: str, detail: str) -> float:
    images, ground_truths = labeled_set(name)

    def detect(truth: dict):
        with open(images / truth["image"], "rb") as image:
            response = requests.post(
                f"{stack.gateway}/v1/detect",
                params={"min_confidence": "2", "max_faces": "1000", "detail": detail},
                files={"image": image},
                timeout=120,
            )
        response.raise_for_status()
        rectangles = [f["face_rectangle"] for f in response.json()["faces"]]
        scores = [f["confidence"] for f in response.json()["faces"]]
        boxes = [[r["x"], r["y"], r["width"], r["height"]] for r in rectangles]
        return truth["image"], list(zip(scores, boxes))

    with ThreadPoolExecutor(4) as pool:
        detections = dict(pool.map(detect, ground_truths))
    return average_precision(ground_truths, detections)


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_ap50_on_labeled_photos(stack, name):
    standard = service_ap50(stack, name, "standard")
    assert standard >= FLOORS[name]
    high = service_ap50(stack, name, "high")
    assert high >= max(standard - 0.01, HIGH_DETAIL_FLOORS.get(name, 0)), (standard, high)

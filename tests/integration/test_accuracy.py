"""AP50 of the whole service on labeled real photos (../shared/faces), at the default policy."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.ap50 import average_precision
from tests.support import labeled_set

# The in-process reference with the same model, the 1024 policy and a 0.02 score threshold
# reaches 0.746, 0.817 and 0.626 (../shared/faces/README.md); the service must not fall
# below these. detail=high must lift the crowds of wider_val_native to 0.78 and cost at
# most 0.01 elsewhere (measured: 0.800 there, unchanged elsewhere).
FLOORS = {"wider_val_416sq": 0.74, "facemask": 0.80, "dlib_voc_faces": 0.98, "wider_val_native": 0.62}
HIGH_DETAIL_FLOORS = {"wider_val_native": 0.78}


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

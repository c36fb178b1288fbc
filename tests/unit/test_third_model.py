"""A third face model is its module and one line of policy (gateway/detection/detectors.py's
KINDS): registered in process beside RetinaFace and YuNet (both run with onnxruntime), the
detection runs all three and fuses their faces, with no other change."""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import pytest

from bench.onnx_model import OnnxModel
from evaluation.images import ASTRONAUT_FACE, photo
from gateway.config import Settings
from gateway.detection.detections import Detections
from gateway.detection.detectors import ALL, KINDS, DetectorKind, serve
from gateway.detection.model import in_process_batch
from gateway.params import DetectOptions
from gateway.processing.answer import faces_in
from gateway.triton.wire import Answer, Batch, ModelOutputs, WireFormat

# The stand-in's own faces, in model-input pixels: the astronaut's (shifted a little) and one more.
THIRD_FACES = np.array([[360.0, 120.0, 544.0, 364.0], [800.0, 800.0, 880.0, 880.0]], np.float32)
THIRD_SCORES = np.array([0.6, 0.9], np.float32)


def third_candidates(outputs: ModelOutputs, input_shape: tuple[int, int], min_score: float) -> Detections:
    """The stand-in's decoder: its faces, at the scores its outputs carry."""
    centres = (THIRD_FACES[:, :2] + THIRD_FACES[:, 2:]) / 2
    found = Detections(outputs.scores, THIRD_FACES.copy(), np.repeat(centres[:, None], 5, axis=1))
    return found[found.scores >= min_score]


class ThirdModel:
    """A stand-in model answering its two faces' scores for every image it is sent."""

    def __init__(self, wire: WireFormat):
        self.wire = wire

    def batch(self, shape: tuple[int, ...]) -> AbstractContextManager[Batch]:
        return in_process_batch(shape, self.wire.dtype, self.run)

    def run(self, tensor: np.ndarray) -> list[Answer]:
        none = np.zeros((2, 4), np.float32)
        return [(ModelOutputs(np.arange(2), THIRD_SCORES, none, np.zeros((2, 10), np.float32)),)] * len(tensor)

    def is_ready(self) -> bool:
        return True


def test_a_third_model_is_run_and_fused_with_the_other_two():
    wire = KINDS["yunet"].wire_formats["uint8"]
    kinds = {**KINDS, "third": DetectorKind("third", {"uint8": wire}, third_candidates, ALL - {"fast"}, False)}
    data = photo("demo/skimage_astronaut.jpg").read_bytes()  # 512 x 512: the model input is 1024 x 1024
    two = serve(("retinaface", "yunet"), "uint8", lambda w: OnnxModel(w, threads=2))
    models = iter([*two.models, ThirdModel(wire)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gateway.detection.detectors.KINDS", kinds)
        three = serve(("retinaface", "yunet", "third"), "uint8", lambda _: next(models))
        options = DetectOptions(min_confidence=50)
        result = faces_in(data, three, Settings(), options)
        alone = faces_in(data, two, Settings(), options)
        fast = faces_in(data, three, Settings(), DetectOptions(detail="fast"))
    assert result.models == ("retinaface", "yunet", "third")
    assert fast.models == ("yunet",)  # the policy: the third one's line leaves fast out
    best = int(np.argmax(result.faces.scores))
    score, box = result.faces.scores[best], result.faces.boxes[best]
    # her face: one face found by all three, scored as any of them being right, its box between theirs
    [before] = alone.faces[alone.faces.scores > 0.9].boxes
    assert len(result.faces) == len(alone.faces) + 1
    assert score > alone.faces.scores.max()
    third_box = THIRD_FACES[0] / 2  # the model's input is twice the photo's size
    assert np.all(np.minimum(before, third_box) - 1e-3 <= box) and np.all(box <= np.maximum(before, third_box) + 1e-3)
    assert not np.allclose(box, before, atol=0.5)  # the third model's box moved it
    x, y = ASTRONAUT_FACE[:2]
    assert abs(box[0] - x) < 10 and abs(box[1] - y) < 10
    # the face only the third found, kept at its own score, in the photo's pixels
    only = result.faces[np.isclose(result.faces.scores, 0.9)]
    np.testing.assert_allclose(only.boxes, THIRD_FACES[1:] / 2)

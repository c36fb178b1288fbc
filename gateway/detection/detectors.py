"""The face models the gateway can run, each a wire format and a decoder, and those it serves."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.detection import retinaface, yunet
from gateway.detection.detections import Detections
from gateway.detection.model import Model
from gateway.triton.wire import ModelOutputs, WireFormat

Decoder = Callable[[ModelOutputs, tuple[int, int], float], Detections]  # outputs, input (H, W), min score


@dataclass(frozen=True)
class DetectorKind:
    """A face model the gateway knows: its wire formats (by FACECROP_WIRE_FORMAT) and decoder."""

    name: str
    wire_formats: Mapping[str, WireFormat]
    candidates: Decoder  # candidates in model-input pixels, best first


KINDS = {
    "retinaface": DetectorKind("retinaface", retinaface.WIRE_FORMATS, retinaface.candidates),
    "yunet": DetectorKind("yunet", yunet.WIRE_FORMATS, yunet.candidates),
}


@dataclass(frozen=True)
class Detector:
    """A served face model: its decoder, the wire format it is sent, and the model answering."""

    kind: DetectorKind
    wire: WireFormat
    model: Model

    @property
    def name(self) -> str:
        return self.kind.name


@dataclass(frozen=True)
class Detectors:
    """The models a gateway serves (FACECROP_DETECTORS), in that order."""

    served: tuple[Detector, ...]

    def chosen(self, preferred: tuple[str, ...]) -> tuple[Detector, ...]:
        """The served models among `preferred`; every served one where none of them is served
        (an operator who runs one model gets it at every detail level)."""
        picked = tuple(d for d in self.served if d.name in preferred)
        return picked or self.served

    def is_ready(self) -> bool:
        """Whether every served model can answer now."""
        return all(d.model.is_ready() for d in self.served)

    @property
    def models(self) -> tuple[Model, ...]:
        return tuple(d.model for d in self.served)


def serve(names: tuple[str, ...], wire_format: str, model_for: Callable[[WireFormat], Model]) -> Detectors:
    """The named models in `wire_format`, each answered by `model_for(its wire)`."""
    served = []
    for name in names:
        wire = KINDS[name].wire_formats[wire_format]
        served.append(Detector(KINDS[name], wire, model_for(wire)))
    return Detectors(tuple(served))


def every_wire_format() -> tuple[WireFormat, ...]:
    """Each known model's every wire format: the models a repository holds."""
    return tuple(wire for kind in KINDS.values() for wire in kind.wire_formats.values())

"""The face models the gateway can run, each a wire format, a decoder and the passes it runs in (the
policy), and those it serves; the joint models that answer for several of them in one request. A
model is its module (wire formats, decoder) and one line of KINDS."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.detection import retinaface, yunet
from gateway.detection.detections import Detections
from gateway.detection.model import Model
from gateway.triton.wire import ModelOutputs, WireFormat, joint_format

Decoder = Callable[[ModelOutputs, tuple[int, int], float], Detections]  # outputs, input (H, W), min score


@dataclass(frozen=True)
class DetectorKind:
    """A face model the gateway knows: its wire formats (by FACECROP_WIRE_FORMAT) and decoder."""

    name: str
    wire_formats: Mapping[str, WireFormat]
    candidates: Decoder  # candidates in model-input pixels, best first
    details: frozenset[str]  # the `detail` levels whose first pass runs it
    tiled: bool  # whether the tiled pass (detail=high, and auto where it tiles) runs it


ALL = frozenset({"fast", "standard", "auto", "high"})
# The policy, where served (docs/detectors.md, "Detectors"; chosen on every labeled set, each held
# out in turn, by `python -m bench.detectors`): YuNet alone at detail=fast (640) finds twice
# RetinaFace's crowd faces for the same CPU; from 1024 both run and are fused, each finding faces
# the other misses (YuNet small ones in crowds, RetinaFace masked ones), in the tiled pass too.
KINDS = {
    "retinaface": DetectorKind("retinaface", retinaface.WIRE_FORMATS, retinaface.candidates, ALL - {"fast"}, True),
    "yunet": DetectorKind("yunet", yunet.WIRE_FORMATS, yunet.candidates, ALL, True),
}


@dataclass(frozen=True)
class JointModel:
    """A Triton ensemble answering, in one request, for several models that take the same input:
    one picture sent, in one shared-memory region, where each model's own request would carry it."""

    name: str  # in Triton's repository
    wire_format: str
    parts: tuple[str, ...]  # the models it answers for (KINDS' names), in its outputs' order


JOINT = (JointModel("faces_uint8", "uint8", ("retinaface", "yunet")),)  # model_repository/faces_uint8


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
class Call:
    """One request of a pass: the model answering, its wire format, and the detectors it answers
    for (in its Answer's order)."""

    detectors: tuple[Detector, ...]
    wire: WireFormat
    model: Model


@dataclass(frozen=True)
class Detectors:
    """The models a gateway serves (FACECROP_DETECTORS), in that order, and the joint models that
    answer for several of them at once."""

    served: tuple[Detector, ...]
    joint: tuple[Call, ...] = ()

    def calls(self, detectors: tuple[Detector, ...]) -> tuple[Call, ...]:
        """The requests that run `detectors`: a joint model's for all of its parts where they all
        run, each other detector's own."""
        names = {d.name for d in detectors}
        calls = [call for call in self.joint if {d.name for d in call.detectors} <= names]
        joined = {d.name for call in calls for d in call.detectors}
        return (*calls, *(Call((d,), d.wire, d.model) for d in detectors if d.name not in joined))

    def first_pass(self, detail: str) -> tuple[Detector, ...]:
        """The served models the first pass at `detail` runs; every served one where the policy
        names none of them (an operator who serves one model gets it at every detail level)."""
        return tuple(d for d in self.served if detail in d.kind.details) or self.served

    def tiled_pass(self) -> tuple[Detector, ...]:
        """The served models the tiled pass runs (every served one where the policy names none)."""
        return tuple(d for d in self.served if d.kind.tiled) or self.served

    def is_ready(self) -> bool:
        """Whether every served model, joint ones too, can answer now."""
        return all(model.is_ready() for model in self.models)

    def runtimes(self) -> dict[str, str]:
        """What each served model (joint ones too) runs on, by its name, where the model can say."""
        return {
            getattr(model, "model_name", str(index)): model.runtime()
            for index, model in enumerate(self.models)
            if hasattr(model, "runtime")
        }

    @property
    def models(self) -> tuple[Model, ...]:
        return (*(d.model for d in self.served), *(call.model for call in self.joint))


def serve(
    names: tuple[str, ...],
    wire_format: str,
    model_for: Callable[[WireFormat], Model],
    joint: tuple[JointModel, ...] = (),
) -> Detectors:
    """The named models in `wire_format`, each answered by `model_for(its wire)`, and those of
    `joint` whose parts are all served in that format, answered by `model_for` of theirs."""
    served = []
    for name in names:
        wire = KINDS[name].wire_formats[wire_format]
        served.append(Detector(KINDS[name], wire, model_for(wire)))
    calls = []
    for model in joint:
        parts = tuple(d for part in model.parts for d in served if d.name == part)
        if model.wire_format == wire_format and len(parts) == len(model.parts):
            wire = joint_format(model.name, tuple(d.wire for d in parts))
            calls.append(Call(parts, wire, model_for(wire)))
    return Detectors(tuple(served), tuple(calls))


def every_wire_format() -> tuple[WireFormat, ...]:
    """Each known model's every wire format: the models a repository holds."""
    return tuple(wire for kind in KINDS.values() for wire in kind.wire_formats.values())


def check_served(names: tuple[str, ...], wire_format: str, renames: Mapping[str, str]) -> None:
    """Refuse (ValueError, naming the variable) detectors, a wire format or renamed models the
    gateway cannot serve: FACECROP_DETECTORS, FACECROP_WIRE_FORMAT, FACECROP_MODEL_NAMES."""
    formats = sorted({fmt for kind in KINDS.values() for fmt in kind.wire_formats})
    if wire_format not in formats:
        raise ValueError(f"FACECROP_WIRE_FORMAT must be one of {', '.join(formats)}")
    unknown = [name for name in names if name not in KINDS]
    if unknown or not names or len(set(names)) < len(names):
        raise ValueError(f"FACECROP_DETECTORS must name some of {', '.join(KINDS)}, each once")
    known = {wire.model_name for wire in every_wire_format()} | {model.name for model in JOINT}
    if set(renames) - known:
        raise ValueError(f"FACECROP_MODEL_NAMES renames models among {', '.join(sorted(known))}")


def served_name(detector: str, wire_format: str, renames: Mapping[str, str]) -> str:
    """The Triton model serving `detector` in `wire_format`, under the name `renames` gives it."""
    model = KINDS[detector].wire_formats[wire_format].model_name
    return renames.get(model, model)


def joint_models(wire_format: str, renames: Mapping[str, str]) -> tuple[JointModel, ...]:
    """The joint models that answer for their parts in one request: each of JOINT unless one of its
    parts is renamed and it is not (the repository's ensemble runs the repository's models)."""
    renamed = set(renames)
    return tuple(
        model
        for model in JOINT
        if model.name in renamed
        or not renamed & {KINDS[part].wire_formats[model.wire_format].model_name for part in model.parts}
    )

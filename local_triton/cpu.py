"""What runs each model on a CPU host: the runtime and precision this CPU's instruction set makes
fastest, chosen by a rule from its flags (never slower than onnxruntime's fp32), and how many
threads each model may take. The Triton stand-in (`make serve`, the CPU compose stack, the tests)
and the production model-init's CPU configs (local_triton/render.py) both choose with it.

Measured per graph, one thread (docs/detectors.md, "On CPU: runtime and precision per host"): on a
CPU with VNNI and BF16 (AMD EPYC, AVX-512), RetinaFace int8 (OpenVINO, NNCF) 1.92x onnxruntime's fp32
and bf16 1.62x, YuNet bf16 1.84x (its int8 1.62x, but 0.0067 AP50 lost on the masked faces: not
made); OpenVINO's f32 0.73-0.95x, so fp32 stays onnxruntime's. int8 without VNNI and bf16 without
BF16 are not chosen (OpenVINO runs a bf16 asked for without BF16 as f32, and reports int8 slower
than fp32 on AVX2-only Xeons).

Stdlib only: the model-init image runs it too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PRECISIONS = ("int8", "bf16", "fp32")
RUNTIMES = {"int8": "openvino", "bf16": "openvino", "fp32": "onnxruntime"}
MODEL_FILES = {"int8": "model.int8.xml", "bf16": "model.onnx", "fp32": "model.onnx"}
# What each precision needs of the CPU: any one of these flags (/proc/cpuinfo's names)
NEEDS = {
    "int8": frozenset({"avx512_vnni", "avx_vnni", "amx_int8"}),
    "bf16": frozenset({"avx512_bf16", "amx_bf16"}),
    "fp32": frozenset(),
}
# Each model's precisions, fastest first: the first the CPU has runs (an int8 file exists for RetinaFace
# alone: scripts/quantize.py)
PREFERENCE = {
    "retinaface_uint8": ("int8", "bf16", "fp32"),
    "yunet_n_uint8": ("bf16", "fp32"),
    "retinaface": ("bf16", "fp32"),
    "yunet_n": ("bf16", "fp32"),
}
CPUINFO = Path("/proc/cpuinfo")
DETECTOR_MODELS = 2  # the ensemble runs both detectors at once: each gets its share of the cores


class PrecisionError(ValueError):
    """A FACECROP_PRECISION that names an unknown model or precision, or one a model has no file for."""


@dataclass(frozen=True)
class Choice:
    """How one model runs: its precision, the runtime that runs it and the file it reads."""

    precision: str
    forced: bool = False  # FACECROP_PRECISION named it, whatever the CPU has

    @property
    def runtime(self) -> str:
        return RUNTIMES[self.precision]

    @property
    def model_file(self) -> str:
        return MODEL_FILES[self.precision]

    def describe(self) -> str:
        """As the service reports it: "int8 (openvino)"."""
        return f"{self.precision} ({self.runtime}{', forced' if self.forced else ''})"


def cpu_flags(cpuinfo: Path = CPUINFO) -> frozenset[str]:
    """The instruction-set flags of this machine's first CPU (empty where /proc/cpuinfo is not there)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def forced(setting: str) -> dict[str, str]:
    """FACECROP_PRECISION read: `auto` or empty (the rule), one precision for every model that has it
    (`fp32`, `bf16`, `int8`), or model=precision pairs, comma-separated."""
    setting = setting.strip().lower()
    if setting in ("", "auto"):
        return {}
    if "=" not in setting:
        if setting not in PRECISIONS:
            raise PrecisionError(
                f"FACECROP_PRECISION={setting}: expected auto, {', '.join(PRECISIONS)} or model=precision"
            )
        return {model: setting for model, allowed in PREFERENCE.items() if setting in allowed}
    pairs = dict(part.strip().split("=", 1) for part in setting.split(",") if part.strip())
    for model, precision in pairs.items():
        if model not in PREFERENCE or precision not in PREFERENCE[model]:
            known = "; ".join(f"{name}: {', '.join(allowed)}" for name, allowed in PREFERENCE.items())
            raise PrecisionError(f"FACECROP_PRECISION: {model}={precision} is not one of {known}")
    return pairs


def choose(model: str, flags: frozenset[str], setting: str = "") -> Choice:
    """How `model` runs on a CPU with `flags`: the precision FACECROP_PRECISION (`setting`) forces,
    else the first of its PREFERENCE that the CPU has (fp32, onnxruntime's, for a model not listed)."""
    if precision := forced(setting).get(model):
        return Choice(precision, forced=True)
    for precision in PREFERENCE.get(model, ("fp32",)):
        if not NEEDS[precision] or NEEDS[precision] & flags:
            return Choice(precision)
    return Choice("fp32")


def available_cpus() -> int:
    """The cores Triton may use: FACECROP_TRITON_CPUS where set (a container's limit, which the CPU's
    affinity does not show), else those this process may run on."""
    given = os.environ.get("FACECROP_TRITON_CPUS", "").strip()
    return max(1, int(given)) if given.isdigit() else len(os.sched_getaffinity(0))


def model_threads(cpus: int) -> int:
    """Each detector's threads: its share of `cpus`, both detectors running at once on every request
    (the ensemble), so that together they never ask for more cores than there are."""
    return max(1, cpus // DETECTOR_MODELS)

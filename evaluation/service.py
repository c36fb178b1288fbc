"""Triton's counters for the models a gateway serves (tests and benchmarks check calls with them)."""

from __future__ import annotations

import requests

from gateway.config import Settings


def model_statistics(stack, detector: str = "retinaface") -> dict:
    """Triton's statistics of one of the gateway's models."""
    name = Settings().model_name(detector)
    return requests.get(f"{stack.triton_http}/v2/models/{name}/stats", timeout=10).json()["model_stats"][0]


def inferences(triton_http: str) -> int:
    """Triton's inference count summed over every model a gateway serves (the URL form's default
    `detail=fast` runs YuNet alone, the API's `standard` both)."""
    names = [Settings().model_name(detector) for detector in Settings().detectors]
    stats = [requests.get(f"{triton_http}/v2/models/{name}/stats", timeout=10).json() for name in names]
    return sum(int(s["model_stats"][0]["inference_count"]) for s in stats)

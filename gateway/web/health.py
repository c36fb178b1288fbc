"""Liveness (/healthz: the process answers) and readiness (/readyz: Triton has every served model)."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from gateway.errors import BackendUnavailable

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    """Ready, and what each served model runs on (`int8 (openvino)`, `fp16 (tensorrt)`, ...)."""
    detectors = current_app.extensions["facecrop"].detectors
    if not detectors.is_ready():
        raise BackendUnavailable()
    return jsonify(status="ready", models=detectors.runtimes())

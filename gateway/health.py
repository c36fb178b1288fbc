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
    if not current_app.extensions["facecrop"].detectors.is_ready():
        raise BackendUnavailable()
    return jsonify(status="ready")

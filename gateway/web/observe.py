"""Observability: request ids, one JSON log line per request, and Prometheus metrics.

Under gunicorn the metrics are aggregated across workers (prometheus_client's multiprocess
mode, files in PROMETHEUS_MULTIPROC_DIR, which gunicorn.conf.py puts in /dev/shm).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid

from flask import Blueprint, Response, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from gateway.errors import BACKEND_ERRORS
from gateway.timing import StageTimer

REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

MAX_LOGGED_PATH = 512  # a URL form's path is its options and source
REQUESTS = Counter("facecrop_requests_total", "Requests by endpoint and status", ["endpoint", "status"])
LATENCY = Histogram("facecrop_request_duration_seconds", "Request latency", ["endpoint"], buckets=LATENCY_BUCKETS)
STAGES = Histogram("facecrop_stage_duration_seconds", "Pipeline stage latency", ["stage"], buckets=LATENCY_BUCKETS)
FACES = Histogram(
    "facecrop_faces_per_image", "Faces found per image", buckets=(0, 1, 2, 3, 5, 10, 20, 50, 100, 250, 1000)
)
TRITON_ERRORS = Counter("facecrop_triton_errors_total", "Failed Triton calls by error code", ["code"])
TRITON_ERROR_CODES = frozenset(error.code for error in BACKEND_ERRORS)
IN_FLIGHT = Gauge("facecrop_in_flight_requests", "Requests being handled", multiprocess_mode="livesum")

access_log = logging.getLogger("facecrop.access")
bp = Blueprint("observe", __name__)


def configure_logging() -> None:
    """Request lines go to stderr as they are (already JSON)."""
    if not access_log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        access_log.addHandler(handler)
        access_log.setLevel(logging.INFO)
        access_log.propagate = False


def start_request() -> None:
    """before_request: take the caller's X-Request-ID (if well-formed) or make one; start timing."""
    given = request.headers.get("X-Request-ID", "")
    g.request_id = given if REQUEST_ID.match(given) else uuid.uuid4().hex
    g.started, g.cpu_started = time.perf_counter(), time.thread_time()
    g.timer = StageTimer()
    IN_FLIGHT.inc()


def end_request(_error: BaseException | None = None) -> None:
    """teardown_request: the request is no longer in flight, whatever happened."""
    IN_FLIGHT.dec()


def note(**fields) -> None:
    """Add facts about this request (image size, face count, error code) to its log line."""
    g.setdefault("log_fields", {}).update(fields)


def finish_request(response: Response) -> Response:
    """after_request: metrics, the log line, and the X-Request-ID response header."""
    endpoint = request.url_rule.rule if request.url_rule else "unmatched"
    elapsed = time.perf_counter() - g.started
    REQUESTS.labels(endpoint, str(response.status_code)).inc()
    LATENCY.labels(endpoint).observe(elapsed)
    for stage, seconds in g.timer.seconds.items():
        STAGES.labels(stage).observe(seconds)
    fields = g.get("log_fields", {})
    if "faces" in fields:
        FACES.observe(fields["faces"])
    if fields.get("error") in TRITON_ERROR_CODES:
        TRITON_ERRORS.labels(fields["error"]).inc()
    line = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "request_id": g.request_id,
        "method": request.method,
        "endpoint": endpoint,  # the route (the metrics' label); `path` what was asked for
        "path": request.path[:MAX_LOGGED_PATH],
        "status": response.status_code,
        "duration_ms": round(elapsed * 1000, 1),
        "cpu_ms": round((time.thread_time() - g.cpu_started) * 1000, 1),  # this request's thread, in the app
        "stages_ms": {stage: round(seconds * 1000, 1) for stage, seconds in g.timer.seconds.items()},
        "stages_cpu_ms": {stage: round(seconds * 1000, 1) for stage, seconds in g.timer.cpu_seconds.items()},
        **fields,
    }
    access_log.info(json.dumps(line))
    response.headers["X-Request-ID"] = g.request_id
    return response


@bp.get("/metrics")
def metrics():
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)

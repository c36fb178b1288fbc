"""The pipeline's answer (gateway/processing/answer.py) as a Flask response, for every front door."""

from __future__ import annotations

from flask import Response, current_app, g

from gateway import observe
from gateway.config import Settings
from gateway.processing.answer import Answer
from gateway.timing import Deadline


def respond(answer: Answer, headers: dict[str, str] | None = None) -> Response:
    """`answer` with the view's own `headers` (the URL form's caching ones) beside its facts."""
    every = (headers or {}) | answer.headers
    return Response(answer.body, content_type=answer.media_type, headers=every)


def request_deadline(settings: Settings) -> Deadline:
    """This request's processing deadline: FACECROP_REQUEST_TIMEOUT_S from its arrival."""
    return Deadline.after(settings.request_timeout_s, started=g.started)


def pipeline_context() -> dict:
    """What `process` takes from the request being served (its timer, deadline and log line) and
    from the worker (its pixel budget)."""
    services = current_app.extensions["facecrop"]
    return {
        "timer": g.timer,
        "deadline": request_deadline(services.settings),
        "note": observe.note,
        "budget": services.pixels,
    }

"""What both front doors share once they hold the source's bytes and the typed request: the client
still there, a slot of the worker's in-flight limit (the one admission), the pipeline
(gateway/processing) held to the request's deadline, which also stops it between steps once the
client has hung up, and its answer as a Flask response."""

from __future__ import annotations

import socket
from functools import partial

from flask import Response, current_app, g, request

from gateway.config import Settings
from gateway.errors import ClientGone
from gateway.processing.answer import Answer, process
from gateway.request import ImageRequest
from gateway.timing import Deadline
from gateway.web import observe


def served(data: bytes, image_request: ImageRequest, headers: dict[str, str] | None = None) -> Response:
    """`image_request` answered for the source's `data`, with the view's own `headers` (the URL
    form's caching ones): refused where the client has already hung up (nothing is done for it), or
    where the in-flight limit is full (429)."""
    services = current_app.extensions["facecrop"]
    client = request.environ.get("gunicorn.socket")
    if client_gone(client):
        raise ClientGone("the client closed its connection")
    services.limit.admit()
    answer = process(
        data,
        image_request,
        services.settings,
        services.detectors,
        timer=g.timer,
        deadline=request_deadline(services.settings, client),
        note=observe.note,
        budget=services.pixels,
    )
    return respond(answer, headers)


def respond(answer: Answer, headers: dict[str, str] | None = None) -> Response:
    """`answer` with the view's own `headers` beside its facts."""
    every = (headers or {}) | answer.headers
    return Response(answer.body, content_type=answer.media_type, headers=every)


def request_deadline(settings: Settings, client: socket.socket | None = None) -> Deadline:
    """This request's processing deadline: FACECROP_REQUEST_TIMEOUT_S from its arrival, and its
    `client` still connected."""
    return Deadline.after(settings.request_timeout_s, started=g.started, gone=partial(client_gone, client))


def client_gone(client: socket.socket | None) -> bool:
    """Whether the client closed its connection (an orderly close or a reset; data it sent next,
    a pipelined request, does not count). False where it cannot be told (no socket, TLS)."""
    if client is None:
        return False
    try:
        return client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError, ValueError):
        return False
    except OSError:
        return True

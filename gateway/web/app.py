"""The Flask app factory: wires settings, the model, the hooks and the blueprints; no logic of its own."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from flask import Flask, jsonify
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from gateway.config import Settings
from gateway.detection import Detectors, Model, serve
from gateway.errors import ApiError, InternalError, PayloadTooLarge
from gateway.memory import PixelBudget
from gateway.triton.client import RegionPool, ThreadClients, TritonModel
from gateway.triton.wire import WireFormat
from gateway.web import access, api, health, observe, pages
from gateway.web.uploads import InMemoryRequest
from gateway.web.url import views as url_views
from gateway.web.url.admission import FetchAdmission
from gateway.web.url.caching import EtagSealer
from gateway.web.url.fetch import Fetcher


@dataclass(frozen=True)
class Services:
    settings: Settings
    detectors: Detectors
    limit: access.InFlightLimit  # requests decoding, running the model, encoding
    pixels: PixelBudget  # what those requests hold
    fetcher: Fetcher  # the URL form's HTTP sources
    etags: EtagSealer  # the URL form's ETags


def region_pool(settings: Settings) -> RegionPool | None:
    """The worker's shared-memory regions (FACECROP_TRITON_SHM), one pool for all its models."""
    return None if settings.triton_shm == "off" else RegionPool(required=settings.triton_shm == "on")


def triton_model(
    settings: Settings, wire: WireFormat, regions: RegionPool | None = None, clients: ThreadClients | None = None
) -> TritonModel:
    """The Triton model serving `wire` (under its name, or the one FACECROP_MODEL_NAMES gives it),
    its batches in `regions` and its calls on `clients` (the worker's, shared by its models; its own
    where None is given)."""
    return TritonModel(
        settings.triton_url,
        settings.triton_name(wire.model_name),
        wire,
        settings.infer_timeout_s,
        settings.ready_timeout_s,
        regions or region_pool(settings),
        clients,
    )


def create_app(settings: Settings | None = None, model_for: Callable[[WireFormat], Model] | None = None) -> Flask:
    """Build the gateway; each served model (FACECROP_DETECTORS) is `model_for(its wire format)`,
    by default the Triton model of that name, where the joint models answer for their parts."""
    settings = settings or Settings.from_env()
    regions, clients = region_pool(settings), ThreadClients()
    detectors = serve(
        settings.detectors,
        settings.wire_format,
        model_for or (lambda wire: triton_model(settings, wire, regions, clients)),
        settings.joint_models() if model_for is None else (),  # joint models are Triton's ensembles
    )
    app = Flask(__name__)
    app.request_class = InMemoryRequest
    app.config["MAX_CONTENT_LENGTH"] = settings.max_upload_bytes
    cast(DefaultJSONProvider, app.json).sort_keys = False
    admission = FetchAdmission(
        settings.fetch_concurrency,
        settings.fetch_per_origin,
        settings.source_breaker_failures,
        settings.source_breaker_cool_down_s,
    )
    fetcher = Fetcher(
        settings.allowed_sources,
        settings.allow_private_sources,
        settings.source_connect_timeout_s,
        settings.source_timeout_s,
        settings.max_upload_bytes,
        admission,
    )
    limit = access.InFlightLimit(settings.max_in_flight)
    etags = EtagSealer(settings.etag_secret or settings.url_key)
    pixels = PixelBudget(settings.max_pixels_in_flight)
    app.extensions["facecrop"] = Services(settings, detectors, limit, pixels, fetcher, etags)
    observe.configure_logging()

    app.before_request(observe.start_request)
    app.before_request(lambda: access.guard_api(settings.api_keys))
    app.after_request(lambda response: access.add_headers(response, settings.cors_origins))
    app.after_request(observe.finish_request)
    app.teardown_request(lambda error: limit.release())
    app.teardown_request(observe.end_request)

    for blueprint in (api.bp, url_views.bp, health.bp, observe.bp, pages.bp):
        app.register_blueprint(blueprint)
    app.register_error_handler(ApiError, _api_error)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected_error)
    return app


def _api_error(error: ApiError):
    observe.note(error=error.code)
    if error.cause:
        observe.note(cause=error.cause)
    return jsonify(error.to_json()), error.status, error.response_headers()


def _http_error(error: HTTPException):
    if error.code == 413:
        return _api_error(PayloadTooLarge("the request body is larger than the upload limit"))
    code = (error.name or "error").lower().replace(" ", "_")
    observe.note(error=code)
    return jsonify({"error": {"code": code, "message": error.description}}), error.code


def _unexpected_error(error: Exception):
    logging.getLogger("facecrop").exception("unexpected error")
    internal = InternalError("unexpected error; see the gateway log")
    observe.note(error=internal.code)
    return jsonify(internal.to_json()), internal.status

"""The human-facing pages: the demo (GET /), the API docs (GET /docs) and GET /openapi.json."""

from __future__ import annotations

from flask import Blueprint, abort, jsonify, send_from_directory
from swagger_ui_bundle import swagger_ui_path

from gateway.web.openapi import openapi_document

bp = Blueprint("pages", __name__, static_folder="static", static_url_path="/static")
# The files of Swagger UI's own build that /docs loads (from the swagger-ui-bundle package).
SWAGGER_UI_ASSETS = frozenset({"swagger-ui.css", "swagger-ui-bundle.js"})


@bp.get("/")
def demo():
    return bp.send_static_file("demo.html")


@bp.get("/docs")
def docs():
    return bp.send_static_file("docs.html")


@bp.get("/docs/assets/<name>")
def swagger_ui_asset(name: str):
    if name not in SWAGGER_UI_ASSETS:
        abort(404)
    return send_from_directory(swagger_ui_path, name)


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())

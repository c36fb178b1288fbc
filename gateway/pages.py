"""The human-facing pages: the demo (GET /), the API docs (GET /docs) and GET /openapi.json."""

from __future__ import annotations

from flask import Blueprint, jsonify

from gateway.openapi import openapi_document

bp = Blueprint("pages", __name__, static_folder="static", static_url_path="/static")


@bp.get("/")
def demo():
    return bp.send_static_file("demo.html")


@bp.get("/docs")
def docs():
    return bp.send_static_file("docs.html")


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())

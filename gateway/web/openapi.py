"""The OpenAPI 3 document of the API, built from the parameter tables: gateway/params.py's for the
upload endpoints, gateway/web/url/options.py's for the URL form (its options one path parameter, an
object that OpenAPI's `simple` style with `explode` writes as Cloudflare does: `width=256,fit=cover`)."""

from __future__ import annotations

from typing import Any

from gateway.config import with_limits
from gateway.detection import LANDMARK_NAMES
from gateway.errors import documented_errors
from gateway.imaging.encode import content_types
from gateway.params import ANONYMIZE, CROP, DETECT, Parameter
from gateway.web.url.options import ALIASES, OPTIONS, QUALITY_WORDS

IMAGE_TYPES = (
    "image/jpeg",
    "image/png",
    "image/webp",
    "image/bmp",
    "image/gif",
    "image/tiff",
    "application/octet-stream",
)
REQUEST_ID = {"description": "The caller's X-Request-ID if well-formed, else a new id", "schema": {"type": "string"}}


def parameter_schema(parameter: Parameter) -> dict[str, Any]:
    schema: dict[str, Any]
    if parameter.kind in ("number", "integer"):
        schema = {"type": parameter.kind, "minimum": parameter.low, "maximum": parameter.high}
    elif parameter.kind == "boolean":
        schema = {"type": "boolean"}
    elif parameter.kind == "choice":
        schema = {"type": "string", "enum": list(parameter.choices)}
    else:  # gravity: its table's words, or XxY
        unit = r"(0|1|0\.[0-9]+|1\.0+)"
        schema = {"type": "string", "pattern": rf"^({'|'.join(parameter.choices)}|{unit}x{unit})$"}
    if parameter.default is not None:
        schema["default"] = parameter.default
    return schema


def url_option_schema(parameter: Parameter) -> dict[str, Any]:
    """The schema of one of the URL form's options (its own kinds: quality words, colours, trim)."""
    if parameter.kind == "quality":
        number = {"type": "integer", "minimum": 1, "maximum": 100}
        schema: dict[str, Any] = {"anyOf": [number, {"type": "string", "enum": list(QUALITY_WORDS)}]}
    elif parameter.kind in ("color", "trim"):
        schema = {"type": "string"}
    elif parameter.kind == "upscale":
        schema = {"type": "string", "enum": list(parameter.choices)}
    else:
        return parameter_schema(parameter)
    if parameter.default is not None and parameter.kind != "color":
        schema["default"] = parameter.default
    return schema


def url_parameters() -> list[dict]:
    """The URL form's path: its options (every one, with its range and default) and its source."""
    aliases = ", ".join(f"`{short}` for `{name}`" for short, name in ALIASES.items())
    options = {
        "type": "object",
        "properties": {p.name: {**url_option_schema(p), "description": p.description} for p in OPTIONS},
        "additionalProperties": False,
    }
    return [
        {
            "name": "options",
            "in": "path",
            "required": True,
            "style": "simple",
            "explode": True,
            "description": f"Cloudflare's options, `key=value` joined by commas; aliases: {aliases}.",
            "schema": options,
            "example": {"width": 256, "height": 256, "fit": "cover", "gravity": "face", "zoom": 0.5},
        },
        {
            "name": "source",
            "in": "path",
            "required": True,
            "description": "A path under FACECROP_ORIGIN (a folder or an http(s) base URL), or an absolute "
            "http(s) URL under FACECROP_ALLOWED_SOURCES.",
            "schema": {"type": "string"},
            "example": "team.jpg",
        },
    ]


def query_parameters(parameters: tuple[Parameter, ...]) -> list[dict]:
    return [
        {"name": p.name, "in": "query", "required": False, "description": p.description, "schema": parameter_schema(p)}
        for p in parameters
    ]


def request_body() -> dict:
    binary = {"schema": {"type": "string", "format": "binary"}}
    multipart = {
        "schema": {
            "type": "object",
            "properties": {"image": {"type": "string", "format": "binary"}},
            "required": ["image"],
        }
    }
    return {
        "required": True,
        "description": "The image, as multipart field `image` or as the raw body. "
        "Parameters may also be sent as form fields.",
        "content": {"multipart/form-data": multipart, **{t: binary for t in IMAGE_TYPES}},
    }


def error_responses(by_url: bool = False) -> dict:
    """One response per status, listing the codes answered with it (from gateway/errors.py); the
    URL form's (`by_url`) include those of fetching a source."""
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    responses: dict[str, dict] = {}
    for error in documented_errors(by_url):
        response = responses.setdefault(
            str(error.status), {"description": "", "content": content, "headers": {"X-Request-ID": REQUEST_ID}}
        )
        summary = with_limits(error.summary)
        response["description"] += f"{'; ' if response['description'] else ''}`{error.code}`: {summary}"
        names = [*error.headers, *(["Retry-After"] if error.retries else [])]
        response["headers"].update({name: {"schema": {"type": "string"}} for name in names})
    return responses


def json_response(description: str, schema_name: str, headers: dict | None = None) -> dict:
    return {
        "description": description,
        "headers": {"X-Request-ID": REQUEST_ID, **(headers or {})},
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}},
    }


def integer_object(*names: str) -> dict:
    return {"type": "object", "properties": {n: {"type": "integer"} for n in names}, "required": list(names)}


SCHEMAS = {
    "Error": {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "parameter": {"type": "string"},
                },
                "required": ["code", "message"],
            }
        },
        "required": ["error"],
    },
    "Point": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
    "Face": {
        "type": "object",
        "properties": {
            "confidence": {"type": "number", "minimum": 0, "maximum": 100},
            "face_rectangle": integer_object("x", "y", "width", "height"),
            "landmarks": {
                "type": "object",
                "properties": {n: {"$ref": "#/components/schemas/Point"} for n in LANDMARK_NAMES},
                "required": list(LANDMARK_NAMES),
            },
        },
        "required": ["confidence", "face_rectangle"],
    },
    "Detection": {
        "type": "object",
        "properties": {
            "image": integer_object("width", "height"),
            "faces": {"type": "array", "items": {"$ref": "#/components/schemas/Face"}},
        },
        "required": ["image", "faces"],
    },
    "Crop": {
        "type": "object",
        "properties": {
            "image": integer_object("width", "height"),
            "crop": integer_object("x", "y", "width", "height"),
            "output": integer_object("width", "height"),
            "focus": {"type": "string", "enum": ["faces", "saliency", "center", "point"]},
            # the URL form's anonymize: the regions hidden
            "regions": {"type": "array", "items": integer_object("x", "y", "width", "height")},
            "faces": {"type": "array", "items": {"$ref": "#/components/schemas/Face"}},
        },
        "required": ["image", "crop", "output", "focus", "faces"],
    },
    "Anonymization": {
        "type": "object",
        "properties": {
            "image": integer_object("width", "height"),
            "regions": {"type": "array", "items": integer_object("x", "y", "width", "height")},
            "faces": {"type": "array", "items": {"$ref": "#/components/schemas/Face"}},
        },
        "required": ["image", "regions", "faces"],
    },
    "Status": {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]},
}


def picture_or_json(description: str, schema_name: str, headers: dict) -> dict:
    """A 200 that is an encoded picture, or JSON with format=json."""
    response = json_response(description, schema_name, headers)
    response["content"].update({t: {"schema": {"type": "string", "format": "binary"}} for t in content_types()})
    return response


def openapi_document() -> dict:
    passes = {
        "X-Passes": {
            "description": "The detection passes that ran: `standard`, `standard, tiled` (detail=high or auto), "
            "or `fast` (detail=fast: the first pass at 640 pixels)",
            "schema": {"type": "string", "enum": ["standard", "standard, tiled", "fast"]},
        },
        "X-Detectors": {
            "description": "The face models that ran, fused where more than one: `retinaface`, `yunet`",
            "schema": {"type": "string", "pattern": r"^[a-z0-9_]+(, [a-z0-9_]+)*$"},
        },
    }
    face_count = {
        "X-Face-Count": {
            "description": "Faces detected (those hidden, where the answer hides them)",
            "schema": {"type": "string", "pattern": r"^\d+$"},
        },
        **passes,
    }
    crop_headers = {
        "X-Crop-Rect": {
            "description": "The region cut out, x,y,width,height in original pixels",
            "schema": {"type": "string", "pattern": r"^\d+,\d+,\d+,\d+$"},
        },
        **face_count,
    }
    crop_ok = picture_or_json("The crop: the picture, or its geometry with format=json", "Crop", crop_headers)
    anonymize_ok = picture_or_json(
        "The picture with every face hidden, upright and without metadata; or the regions with format=json",
        "Anonymization",
        face_count,
    )
    url_headers = {
        **crop_headers,
        "ETag": {"schema": {"type": "string"}},
        "Cache-Control": {"schema": {"type": "string"}},
    }
    url_ok = picture_or_json("The picture, or its crop's geometry with format=json", "Crop", url_headers)
    api_security: list[dict[str, list[str]]] = [{}, {"bearer": []}]
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "facecrop",
            "version": "0.1.0",
            "description": "Face detection (RetinaFace on NVIDIA Triton) and face-aware cropping "
            "(Cloudflare Images' gravity=face with zoom). The same crops by URL, for `<img src>` behind a CDN: "
            "`GET /cdn-cgi/image/<options>/<source>` in Cloudflare's grammar (docs/api/url.md).",
        },
        "paths": {
            "/v1/detect": {
                "post": {
                    "operationId": "detect",
                    "summary": "Find faces: rectangles, landmarks and confidence, in original-image pixels",
                    "parameters": query_parameters(DETECT),
                    "requestBody": request_body(),
                    "responses": {
                        "200": json_response("Faces, highest confidence first", "Detection", face_count),
                        **error_responses(),
                    },
                    "security": api_security,
                }
            },
            "/v1/crop": {
                "post": {
                    "operationId": "crop",
                    "summary": "Crop around the faces (gravity=face, zoom) to a fixed size",
                    "parameters": query_parameters(DETECT + CROP),
                    "requestBody": request_body(),
                    "responses": {"200": crop_ok, **error_responses()},
                    "security": api_security,
                }
            },
            "/v1/anonymize": {
                "post": {
                    "operationId": "anonymize",
                    "summary": "Hide every face (blur, pixelate or fill), same picture, no metadata",
                    "parameters": query_parameters(ANONYMIZE),
                    "requestBody": request_body(),
                    "responses": {"200": anonymize_ok, **error_responses()},
                    "security": api_security,
                }
            },
            "/cdn-cgi/image/{options}/{source}": {
                "get": {
                    "operationId": "image",
                    "summary": "The crop or the hidden faces by URL, for <img src> behind a CDN (Cloudflare's grammar)",
                    "parameters": url_parameters(),
                    "responses": {
                        "200": url_ok,
                        "302": {"description": "onerror=redirect: an error sends the browser to the source"},
                        "304": {"description": "Not modified: the If-None-Match ETag is current"},
                        **error_responses(by_url=True),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "summary": "The gateway process answers",
                    "responses": {"200": json_response("Alive", "Status")},
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "summary": "Triton answers and has the model loaded",
                    "responses": {"200": json_response("Ready", "Status"), "503": error_responses()["503"]},
                }
            },
        },
        "components": {"schemas": SCHEMAS, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }

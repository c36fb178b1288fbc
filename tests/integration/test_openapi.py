"""The live service against its own OpenAPI document, fuzzed with schemathesis."""

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from evaluation.images import CROWD, photo
from gateway.web.openapi import openapi_document
from gateway.web.url.options import OPTIONS

CHECKS = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# Every operation of the document the gateway serves (the same function builds it), by method and path.
DOCUMENTED = [
    (method.upper(), path) for path, methods in openapi_document()["paths"].items() for method in sorted(methods)
]


def operations(stack):
    schema = schemathesis.openapi.from_url(f"{stack.gateway}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize(("method", "path"), DOCUMENTED, ids=[f"{m} {p}" for m, p in DOCUMENTED])
def test_every_response_matches_the_document(stack, method, path):
    # schemathesis' own pytest plugin does not run under this pytest, so each operation's
    # hypothesis strategy is driven here; a failure names the request that broke the document.
    (operation,) = [op for op in operations(stack) if (op.method.upper(), op.path) == (method, path)]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=operation.as_strategy())
    def call(case):
        case.call_and_validate(checks=CHECKS, timeout=30)

    call()


def test_every_operation_is_fuzzed(stack):
    served = sorted((op.method.upper(), op.path) for op in operations(stack))
    assert served == sorted(DOCUMENTED) and len(served) >= 5


def test_document_lists_every_parameter_with_range_and_default(stack):
    document = requests.get(f"{stack.gateway}/openapi.json", timeout=10).json()
    crop = {p["name"]: p["schema"] for p in document["paths"]["/v1/crop"]["post"]["parameters"]}
    assert crop["zoom"] == {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5}
    assert crop["max_faces"] == {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
    assert crop["format"]["enum"] == ["jpeg", "png", "webp", "avif", "gif", "json"]
    assert crop["anim"] == {"type": "boolean", "default": True}
    assert set(document["paths"]["/v1/detect"]["post"]["responses"]) >= {"200", "400", "413", "415", "503"}
    by_url = document["paths"]["/cdn-cgi/image/{options}/{source}"]["get"]
    options = by_url["parameters"][0]
    assert (options["name"], options["style"], options["explode"]) == ("options", "simple", True)
    assert set(options["schema"]["properties"]) == {p.name for p in OPTIONS}  # every option, from the table
    assert options["schema"]["properties"]["width"] | {"description": ""} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 12_000,
        "description": "",
    }
    assert options["schema"]["properties"]["fit"]["default"] == "scale-down"
    assert set(by_url["responses"]) >= {"200", "302", "304", "400", "403", "404", "502", "504"}
    page = requests.get(f"{stack.gateway}/docs", timeout=10)
    assert page.status_code == 200 and "/docs/assets/swagger-ui-bundle.js" in page.text


@pytest.mark.parametrize(
    "path,query",
    [
        ("/v1/detect", {}),
        ("/v1/detect", {"landmarks": "false"}),
        ("/v1/crop", {"width": "128", "format": "json"}),
        ("/v1/crop", {"width": "128", "height": "96"}),
    ],
)
def test_successful_answers_match_the_document(stack, path, query):
    operation = next(op for op in operations(stack) if op.path == path)
    case = operation.Case(body=photo(CROWD).read_bytes(), media_type="image/jpeg", query=query)
    response = case.call_and_validate(checks=CHECKS, timeout=30)
    assert response.status_code == 200

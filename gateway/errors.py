"""The API's errors: a stable code, an HTTP status and a message, rendered as JSON."""

from __future__ import annotations

from typing import ClassVar


class ApiError(Exception):
    """An error answered as `{"error": {"code": ..., "message": ...}}` with `status`."""

    status = 400
    code = "bad_request"
    # when it is answered, for the API documentation; {name}: a limit (gateway.config.with_limits)
    summary = ""
    headers: ClassVar[dict[str, str]] = {}
    by_url_only: ClassVar[bool] = False  # answered only by the URL form (GET /cdn-cgi/image/...)
    retries: ClassVar[bool] = False  # answered with Retry-After

    def __init__(self, message: str, cause: str = "", retry_after: int | None = None):
        super().__init__(message)
        self.message = message
        self.cause = cause  # for the log line only, never the answer (e.g. the gRPC status)
        self.retry_after = retry_after  # seconds, sent as Retry-After

    def to_json(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}

    def response_headers(self) -> dict[str, str]:
        retry = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        return {**self.headers, **retry}


class MissingImage(ApiError):
    status, code = 400, "missing_image"
    summary = "no image in the request, or an empty one"


class InvalidParameter(ApiError):
    status, code = 400, "invalid_parameter"
    summary = "a parameter out of range, malformed, unknown or given twice (named in `parameter`)"

    def __init__(self, name: str, problem: str):
        super().__init__(f"parameter '{name}' {problem}")
        self.parameter = name

    def to_json(self) -> dict:
        body = super().to_json()
        body["error"]["parameter"] = self.parameter
        return body


class UnsupportedImage(ApiError):
    status, code = 415, "unsupported_image"
    summary = "not a readable JPEG, PNG, WebP, AVIF, HEIC/HEIF, GIF, BMP or TIFF image"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"
    summary = "the body is over the upload limit, {max_upload_bytes}"


class ImageTooLarge(ApiError):
    status, code = 413, "image_too_large"
    summary = (
        "the header declares more than {max_pixels} pixels or a side over {max_side}; an animation of more than "
        "{max_animation_frames} frames, or more than {max_animation_pixels} pixels of frames in or out "
        "(Cloudflare's); a PNG text chunk over Pillow's bound: refused before decoding"
    )


class BackendUnavailable(ApiError):
    status, code = 503, "backend_unavailable"
    summary = "Triton is unavailable or a served model is not loaded (answered at once)"

    def __init__(self, cause: str = ""):
        super().__init__("the inference server is unavailable or the model is not ready", cause)


class BackendTimeout(ApiError):
    status, code = 504, "backend_timeout"
    summary = "Triton did not answer a call within {infer_timeout_s} seconds"


class ProcessingTimeout(ApiError):
    status, code = 504, "processing_timeout"
    summary = "the request's processing ran past {request_timeout_s} seconds (checked between its steps and frames)"


class OutputTooLarge(ApiError):
    status, code = 400, "output_too_large"
    summary = (
        "an output (a crop, or the picture whole) would be over {max_pixels} pixels, or enlarged to a side over "
        "{max_crop_side} (/v1/crop) or {max_side} (the URL form): a side that follows the region's aspect ratio too"
    )


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"
    summary = "API keys are configured and the request has no valid `Authorization: Bearer KEY`"
    headers: ClassVar[dict[str, str]] = {"WWW-Authenticate": "Bearer"}


class Overloaded(ApiError):
    status, code = 429, "overloaded"
    retries = True
    summary = "the worker already has {max_in_flight} requests in flight; retry after `Retry-After` seconds"

    def __init__(self, message: str):
        super().__init__(message, retry_after=1)


class InvalidSignature(ApiError):
    status, code, by_url_only = 403, "invalid_signature", True
    summary = "URL signing is on and the signature is missing, malformed or wrong"


class SourceNotAllowed(ApiError):
    status, code, by_url_only = 403, "source_not_allowed", True
    summary = "the source (or a redirect) is not allowed: not an allowed prefix, a private address, credentials"


class SourceNotFound(ApiError):
    status, code, by_url_only = 404, "source_not_found", True
    summary = "the origin has no such image"


class OriginError(ApiError):
    status, code, by_url_only = 502, "origin_error", True
    summary = "the origin failed: an error status, a refused connection, too many redirects"


class OriginTimeout(ApiError):
    status, code, by_url_only = 504, "origin_timeout", True
    summary = "the origin did not answer within {source_timeout_s} seconds"


class OriginBusy(ApiError):
    status, code, by_url_only = 503, "origin_busy", True
    retries = True
    summary = "the worker already fetches its most sources (in all, or from this origin); retry after `Retry-After`"


class OriginUnavailable(ApiError):
    status, code, by_url_only = 503, "origin_unavailable", True
    retries = True
    summary = "the origin failed repeatedly and is not asked again before `Retry-After` seconds"


class ClientGone(ApiError):
    status, code = 499, "client_closed_request"
    summary = (
        "the client closed its connection before its answer was made: before the URL form's source arrived, or "
        "between the steps of either door (nginx's 499; never seen by it)"
    )


class InternalError(ApiError):
    status, code = 500, "internal_error"
    summary = (
        "a defect, never an answer to what was sent: the gateway log has its traceback under the request's "
        "`X-Request-ID`; report it with the request"
    )


BACKEND_ERRORS = (BackendUnavailable, BackendTimeout)  # failed Triton calls


def documented_errors(by_url: bool = False) -> list[type[ApiError]]:
    """Every error the upload API answers with (`by_url`: the URL form), by status."""
    errors = [error for error in ApiError.__subclasses__() if by_url or not error.by_url_only]
    return sorted(errors, key=lambda error: (error.status, error.code))

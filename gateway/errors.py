"""The API's errors: a stable code, an HTTP status and a message, rendered as JSON."""

from __future__ import annotations


class ApiError(Exception):
    """An error answered as `{"error": {"code": ..., "message": ...}}` with `status`."""

    status = 400
    code = "bad_request"
    headers: dict[str, str] = {}

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def to_json(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


class MissingImage(ApiError):
    status, code = 400, "missing_image"


class InvalidParameter(ApiError):
    status, code = 400, "invalid_parameter"

    def __init__(self, name: str, problem: str):
        super().__init__(f"parameter '{name}' {problem}")
        self.parameter = name

    def to_json(self) -> dict:
        body = super().to_json()
        body["error"]["parameter"] = self.parameter
        return body


class UnsupportedImage(ApiError):
    status, code = 415, "unsupported_image"


class PayloadTooLarge(ApiError):
    status, code = 413, "payload_too_large"


class ImageTooLarge(ApiError):
    status, code = 413, "image_too_large"


class BackendUnavailable(ApiError):
    status, code = 503, "backend_unavailable"

    def __init__(self, message: str = "the inference server is unavailable or the model is not ready"):
        super().__init__(message)


class BackendTimeout(ApiError):
    status, code = 504, "backend_timeout"


class OutputTooLarge(ApiError):
    status, code = 400, "output_too_large"


class Unauthorized(ApiError):
    status, code = 401, "unauthorized"
    headers = {"WWW-Authenticate": "Bearer"}


class Overloaded(ApiError):
    status, code = 429, "overloaded"
    headers = {"Retry-After": "1"}

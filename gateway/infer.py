"""Run the model on Triton over gRPC (tritonclient.grpc); map transport failures to API errors."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from gateway.config import Settings
from gateway.errors import BackendTimeout, BackendUnavailable
from gateway.wire import INPUT_NAME, ModelOutputs, WireFormat

T = TypeVar("T")

# tritonclient's own defaults (unbounded message sizes), plus a reconnect backoff capped
# at one second so the gateway serves again soon after Triton comes back, and round-robin
# over every address the target resolves to (several Triton pods behind a headless Service).
CHANNEL_ARGS = [
    ("grpc.lb_policy_name", "round_robin"),
    ("grpc.max_send_message_length", grpcclient.MAX_GRPC_MESSAGE_SIZE),
    ("grpc.max_receive_message_length", grpcclient.MAX_GRPC_MESSAGE_SIZE),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


# A call that failed with UNAVAILABLE is made once more. Triton closes each connection after
# --grpc-max-connection-age (so new pods get traffic), and a reply on the wire as it closes
# can be lost to the connection reset, after the server answered; gRPC does not retry a call
# whose response headers arrived. Neither inference nor the readiness check has side effects.
CALL_ATTEMPTS = 2


class TritonModel:
    """The pipeline's model (`batch tensor -> [ModelOutputs]`, `is_ready()`) served by Triton.

    Each thread gets its own gRPC client (and channel), so gunicorn's threads never share one.
    """

    def __init__(self, url: str, model_name: str, wire: WireFormat, timeout_s: float, ready_timeout_s: float):
        self.url = url
        self.model_name = model_name
        self.wire = wire
        self.timeout_s = timeout_s
        self.ready_timeout_s = ready_timeout_s
        self._local = threading.local()

    @classmethod
    def from_settings(cls, settings: Settings) -> TritonModel:
        return cls(
            settings.triton_url, settings.model_name, settings.wire, settings.infer_timeout_s, settings.ready_timeout_s
        )

    def _client(self) -> grpcclient.InferenceServerClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = grpcclient.InferenceServerClient(self.url, channel_args=CHANNEL_ARGS)
        return client

    def __call__(self, tensor: np.ndarray) -> list[ModelOutputs]:
        model_input = grpcclient.InferInput(INPUT_NAME, list(tensor.shape), self.wire.triton_datatype)
        model_input.set_data_from_numpy(tensor)
        outputs = [grpcclient.InferRequestedOutput(name) for name in self.wire.output_names]
        try:
            result = self._attempts(
                lambda client: client.infer(
                    self.model_name, [model_input], outputs=outputs, client_timeout=self.timeout_s
                )
            )
        except InferenceServerException as error:
            raise _api_error(error) from None
        return self.wire.outputs({name: result.as_numpy(name) for name in self.wire.output_names})

    def is_ready(self) -> bool:
        """Whether Triton answers and has the model loaded, within `ready_timeout_s`."""
        try:
            return bool(
                self._attempts(
                    lambda client: client.is_model_ready(self.model_name, client_timeout=self.ready_timeout_s)
                )
            )
        except InferenceServerException:
            return False

    def _attempts(self, call: Callable[[grpcclient.InferenceServerClient], T]) -> T:
        """`call` on this thread's client, made again (CALL_ATTEMPTS in all) while Triton is UNAVAILABLE."""
        attempts_left = CALL_ATTEMPTS
        while True:
            attempts_left -= 1
            try:
                return call(self._client())
            except InferenceServerException as error:
                if attempts_left == 0 or "UNAVAILABLE" not in str(error.status()):
                    raise


def _api_error(error: InferenceServerException) -> BackendUnavailable | BackendTimeout:
    """A failed call as the API answers it: 504 past the deadline, else 503."""
    cause = f"{error.status()}: {error.message()}"
    if "DEADLINE_EXCEEDED" in str(error.status()):
        return BackendTimeout("the inference server did not answer within the deadline", cause)
    return BackendUnavailable(cause)

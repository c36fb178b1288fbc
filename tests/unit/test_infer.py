"""TritonModel's error mapping, against loopback sockets that are not Triton (no mocks)."""

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from gateway.config import Settings
from gateway.errors import BackendTimeout, BackendUnavailable
from gateway.infer import TritonModel
from local_triton.processes import free_port

TENSOR = np.zeros((1, 256, 256, 3), np.uint8)


def model_at(address: str, timeout_s: float = 0.5) -> TritonModel:
    return TritonModel.from_settings(Settings(triton_url=address, infer_timeout_s=timeout_s, ready_timeout_s=timeout_s))


def test_a_closed_port_is_unavailable_at_once():
    model = model_at(f"127.0.0.1:{free_port()}", timeout_s=5)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        model(TENSOR)
    assert time.monotonic() - started < 2
    assert model.is_ready() is False


class Stalling(grpc.GenericRpcHandler):
    """A gRPC server whose every call takes longer than the client's deadline."""

    def service(self, handler_call_details):
        return grpc.unary_unary_rpc_method_handler(lambda request, context: time.sleep(2) or b"")


def test_a_server_that_does_not_answer_in_time_is_a_timeout():
    server = grpc.server(ThreadPoolExecutor(2), handlers=[Stalling()])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(BackendTimeout) as raised:
            model_at(f"127.0.0.1:{port}")(TENSOR)
    finally:
        server.stop(grace=None)
    assert raised.value.status == 504 and raised.value.code == "backend_timeout"


def test_a_socket_that_never_speaks_grpc_is_unavailable():
    with socket.socket() as silent:  # accepts connections, never answers the HTTP/2 handshake
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(BackendUnavailable):
            model_at(f"127.0.0.1:{silent.getsockname()[1]}")(TENSOR)


def test_from_settings():
    model = TritonModel.from_settings(Settings(triton_url="triton:8001", wire_format="float32", infer_timeout_s=3))
    assert (model.url, model.model_name, model.wire.name, model.timeout_s) == (
        "triton:8001",
        "retinaface",
        "float32",
        3,
    )

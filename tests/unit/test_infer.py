"""TritonModel's error mapping, against loopback sockets that are not Triton (no mocks)."""

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from gateway.config import Settings
from gateway.detection import retinaface, yunet
from gateway.detection.model import infer
from gateway.errors import BackendTimeout, BackendUnavailable
from gateway.triton.client import CALL_ATTEMPTS, TritonModel
from gateway.web.app import create_app, triton_model
from local_triton.processes import free_port

TENSOR = np.zeros((1, 256, 256, 3), np.uint8)


def model_at(address: str, timeout_s: float = 0.5, shm: str = "off") -> TritonModel:
    """Bytes on the wire by default: these servers are not Triton and register no region."""
    settings = Settings(triton_url=address, infer_timeout_s=timeout_s, ready_timeout_s=timeout_s, triton_shm=shm)
    return triton_model(settings, retinaface.WIRE_FORMATS["uint8"])


@pytest.mark.parametrize("shm", ["off", "auto", "on"])
def test_a_closed_port_is_unavailable_at_once(shm):
    model = model_at(f"127.0.0.1:{free_port()}", timeout_s=5, shm=shm)
    started = time.monotonic()
    with pytest.raises(BackendUnavailable):
        infer(model, TENSOR)
    assert time.monotonic() - started < 2
    assert model.is_ready() is False


@pytest.fixture
def serve():
    servers = []

    def start(handler: grpc.GenericRpcHandler) -> str:
        server = grpc.server(ThreadPoolExecutor(2), handlers=[handler])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(grace=None)


class Stalling(grpc.GenericRpcHandler):
    """A gRPC server whose every call takes longer than the client's deadline."""

    calls = 0

    def service(self, handler_call_details):
        return grpc.unary_unary_rpc_method_handler(self.stall)

    def stall(self, request, context):
        self.calls += 1
        time.sleep(2)
        return b""


def test_a_server_that_does_not_answer_in_time_is_a_timeout_not_retried(serve):
    server = Stalling()
    with pytest.raises(BackendTimeout) as raised:
        infer(model_at(serve(server)), TENSOR)
    assert raised.value.status == 504 and raised.value.code == "backend_timeout"
    assert server.calls == 1


def test_a_socket_that_never_speaks_grpc_is_unavailable():
    with socket.socket() as silent:  # accepts connections, never answers the HTTP/2 handshake
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        with pytest.raises(BackendUnavailable):
            infer(model_at(f"127.0.0.1:{silent.getsockname()[1]}"), TENSOR)


def test_the_app_builds_each_triton_model_from_the_settings():
    settings = Settings(triton_url="triton:8001", infer_timeout_s=3, model_names={"yunet_n": "mine"})
    model = triton_model(settings, yunet.WIRE_FORMATS["float32"])
    assert (model.url, model.model_name, model.wire.name, model.timeout_s) == ("triton:8001", "mine", "float32", 3)


class AnswerLost(grpc.GenericRpcHandler):
    """A server that answers inference calls, but whose first `lost` answers never arrive:
    response headers sent, then UNAVAILABLE, as when Triton's connection aging resets the
    connection under a reply (gRPC itself does not retry once headers arrived)."""

    def __init__(self, lost: int, status: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE):
        self.lost, self.status, self.calls = lost, status, 0

    def service(self, handler_call_details):
        return grpc.unary_unary_rpc_method_handler(
            self.infer,
            request_deserializer=service_pb2.ModelInferRequest.FromString,
            response_serializer=service_pb2.ModelInferResponse.SerializeToString,
        )

    def infer(self, request, context):
        self.calls += 1
        if self.calls <= self.lost:
            context.send_initial_metadata(())
            context.abort(self.status, "Stream removed")
        response = service_pb2.ModelInferResponse(model_name=request.model_name)
        for name, array in ONE_FACE.items():
            response.outputs.add(name=name, datatype="FP32", shape=array.shape)
            response.raw_output_contents.append(array.tobytes())
        return response


ONE_FACE = {
    "scores": np.array([[0.5]], np.float32),
    "anchor_index": np.array([[7]], np.float32),
    "loc": np.zeros((1, 1, 4), np.float32),
    "landmarks": np.zeros((1, 1, 10), np.float32),
}


def test_an_answer_lost_to_the_connection_closing_is_asked_for_again(serve):
    server = AnswerLost(lost=1)
    [(outputs,)] = infer(
        model_at(serve(server)), np.zeros((1, 1024, 1024, 3), np.uint8)
    )  # 3 MiB, over gRPC's retry buffer
    assert server.calls == 2
    assert outputs.scores.tolist() == [0.5] and outputs.anchor_index.tolist() == [7]


def test_unavailable_on_every_attempt_is_a_503_after_call_attempts(serve):
    server = AnswerLost(lost=CALL_ATTEMPTS)
    with pytest.raises(BackendUnavailable) as raised:
        infer(model_at(serve(server)), TENSOR)
    assert server.calls == CALL_ATTEMPTS
    assert "UNAVAILABLE" in raised.value.cause


def test_other_failures_are_not_retried(serve):
    server = AnswerLost(lost=1, status=grpc.StatusCode.INTERNAL)
    with pytest.raises(BackendUnavailable) as raised:
        infer(model_at(serve(server)), TENSOR)
    assert server.calls == 1
    assert "INTERNAL" in raised.value.cause


@pytest.mark.parametrize(("shm", "pools"), [("auto", 1), ("on", 1), ("off", 0)])
def test_a_worker_s_models_share_one_pool_of_regions(shm, pools):
    """Every Triton model of a gateway (each detector's and the joint ensemble's) leases from one
    pool (one probe region, one budget of idle and warm regions per worker, not one per model)
    and calls on one gRPC client per thread."""
    app = create_app(Settings(triton_url=f"127.0.0.1:{free_port()}", triton_shm=shm))
    detectors = app.extensions["facecrop"].detectors
    models = [d.model for d in detectors.served] + [call.model for call in detectors.joint]
    assert len(models) >= 3
    regions = {id(model.regions) for model in models if model.regions is not None}
    assert len(regions) == pools and all(model.regions is models[0].regions for model in models)
    assert all(model._required == (shm == "on") for model in models)
    assert all(model._client() is models[0]._client() for model in models)  # one gRPC channel per thread

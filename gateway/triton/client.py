"""Run the model on Triton over gRPC (tritonclient.grpc); map transport failures to API errors.

Tensors travel one of two ways (FACECROP_TRITON_SHM):
- system shared memory, where the gateway and Triton share a host's /dev/shm: preprocessing
  writes the input straight into a region registered with Triton, Triton writes the outputs
  into the same region, and the gRPC messages carry only names and offsets;
- bytes in the gRPC messages, anywhere (across Kubernetes pods, say).
`auto` uses shared memory once Triton has opened a region, else bytes.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import TypeVar

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from gateway.errors import BackendTimeout, BackendUnavailable
from gateway.triton import shm
from gateway.triton.wire import INPUT_NAME, Answer, Batch, WireFormat

T = TypeVar("T")
log = logging.getLogger("facecrop")

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

REGION_QUANTUM = 1 << 20  # regions are made in whole MiB, so a few sizes serve every request
KEPT_REGION_BYTES = 32 << 20  # idle regions a worker keeps for reuse (a 3x3 tile batch); more are given back
# Idle regions keep their name and registration but give their pages back beyond the first
# WARM_REGION_BYTES (two standard-pass regions: c=1 and c=2 reuse them as they are), and always
# when larger than that (a tile batch): a worker's resident memory does not keep what a burst
# or a detail=high request left, which fault their pages in again (a few ms for a 6 MiB region).
WARM_REGION_BYTES = 12 << 20


class ThreadClients(threading.local):
    """Each thread's gRPC client of each Triton address, shared by the models given the same
    ThreadClients (a worker's): one channel per thread and Triton, not one per model."""

    def __init__(self) -> None:
        self.by_url: dict[str, grpcclient.InferenceServerClient] = {}


class TritonModel:
    """The pipeline's Model served by Triton: `batch(shape)` to fill and submit, `is_ready()`.

    Each thread gets its own gRPC client (and channel), so gunicorn's threads never share one; the
    models given one ThreadClients (a worker's) share each thread's.
    """

    def __init__(
        self,
        url: str,
        model_name: str,
        wire: WireFormat,
        timeout_s: float,
        ready_timeout_s: float,
        regions: RegionPool | None = None,
        clients: ThreadClients | None = None,
    ):
        self.url = url
        self.model_name = model_name
        self.wire = wire
        self.timeout_s = timeout_s
        self.ready_timeout_s = ready_timeout_s
        self.regions = regions  # the worker's, shared by its models; None: bytes
        self._clients = clients or ThreadClients()

    @property
    def shm_active(self) -> bool:
        """Whether batches travel in shared memory (until `auto` finds Triton cannot use it)."""
        return self.regions is not None and self.regions.active

    @property
    def _required(self) -> bool:
        return self.regions is not None and self.regions.required

    @property
    def transport(self) -> str:
        """`shm` or `bytes`: how the next batch travels."""
        return "shm" if self.shm_active else "bytes"

    def _client(self) -> grpcclient.InferenceServerClient:
        clients = self._clients.by_url
        client = clients.get(self.url)
        if client is None:
            client = clients[self.url] = grpcclient.InferenceServerClient(self.url, channel_args=CHANNEL_ARGS)
        return client

    @contextlib.contextmanager
    def batch(self, shape: tuple[int, ...]) -> Iterator[Batch]:
        """An input of `shape` in a shared-memory region (or ordinary memory, for bytes); the
        region goes back to the pool once every call made on it is over."""
        regions = self.regions
        if regions is not None and not regions.decided:
            regions.decide(self)
        if regions is None or not self.shm_active:
            yield self._batch(np.empty(shape, self.wire.dtype), None, [])
            return
        layout = self.wire.layout(*shape[1:3] if self.wire.channels_last else shape[2:4])
        tensor_bytes = shm.aligned(_nbytes(shape, self.wire.dtype))
        region = regions.lease(tensor_bytes + shape[0] * sum(_nbytes(s, d) for _, s, d in layout) + 1024)
        in_flight: list[PendingCall] = []
        try:
            yield self._batch(region.array(shape, self.wire.dtype), region, in_flight)
        finally:
            for call in in_flight:
                call.settle()  # Triton must be done with the region before it is reused
            regions.release(region, self)

    def _batch(self, tensor: np.ndarray, region: shm.Region | None, in_flight: list[PendingCall]) -> Batch:
        def submit() -> PendingCall:
            in_flight.append(PendingCall(self, tensor, region, self._start(tensor, region)))
            return in_flight[-1]

        return Batch(tensor, submit, lambda: PendingCall(self, tensor, region).result())

    def _request(
        self, tensor: np.ndarray, region: shm.Region | None
    ) -> tuple[dict, dict[str, tuple[int, tuple[int, ...], type[np.generic]]], shm.Region | None]:
        """The arguments of an infer call for `tensor`: as bytes, or by place in its region
        (registered first); also where each output will be in the region, and the region used."""
        model_input = grpcclient.InferInput(INPUT_NAME, list(tensor.shape), self.wire.triton_datatype)
        outputs = [grpcclient.InferRequestedOutput(name) for name in self.wire.output_names]
        places: dict[str, tuple[int, tuple[int, ...], type[np.generic]]] = {}
        if region is not None and self.regions is not None:
            try:
                self.regions.register(region, self)
            except InferenceServerException as error:
                if _is_transient(error) or self._required:
                    raise
                self._use_bytes(f"Triton can no longer open this host's shared memory: {error.message()}")
                region = None  # the batch is sent as bytes from its region
        if region is None:
            model_input.set_data_from_numpy(tensor)
        else:
            model_input.set_shared_memory(region.name, tensor.nbytes)
            offset = shm.aligned(tensor.nbytes)
            height, width = tensor.shape[1:3] if self.wire.channels_last else tensor.shape[2:4]
            for output, (name, shape, dtype) in zip(outputs, self.wire.layout(height, width)):
                size = len(tensor) * _nbytes(shape, dtype)
                output.set_shared_memory(region.name, size, offset)
                places[name] = (offset, (len(tensor), *shape), dtype)
                offset = shm.aligned(offset + size)
        arguments = {
            "model_name": self.model_name,
            "inputs": [model_input],
            "outputs": outputs,
            "client_timeout": self.timeout_s,
        }
        return arguments, places, region

    def _outputs(self, result: grpcclient.InferResult, region: shm.Region | None, places: dict) -> list[Answer]:
        """Each image's outputs, in arrays of their own (never views of a region that is reused)."""
        if region is None:
            named = {name: result.as_numpy(name) for name in self.wire.output_names}
        else:
            named = {
                name: region.array(_answered_shape(result, name, shape), dtype, offset).copy()
                for name, (offset, shape, dtype) in places.items()
            }
        return self.wire.outputs(named)

    def _call(self, tensor: np.ndarray, region: shm.Region | None) -> list[Answer]:
        """One blocking inference (on this thread: no thread of gRPC's is started for it)."""
        arguments, places, region = self._request(tensor, region)
        return self._outputs(self._client().infer(**arguments), region, places)

    def _start(self, tensor: np.ndarray, region: shm.Region | None) -> Future:
        """One inference sent now, its outputs in a future (while the caller prepares more)."""
        future: Future = Future()
        try:
            arguments, places, region = self._request(tensor, region)
        except InferenceServerException as error:
            future.set_exception(error)
            return future

        def done(result, error) -> None:
            try:
                if error is not None:
                    raise error
                future.set_result(self._outputs(result, region, places))
            except Exception as failure:
                future.set_exception(failure)

        try:
            self._client().async_infer(callback=done, **arguments)
        except InferenceServerException as error:
            future.set_exception(error)
        return future

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

    def runtime(self) -> str:
        """What Triton runs the model on, as its config says (`runtime_of`); "unknown" where Triton
        does not answer within `ready_timeout_s`."""
        try:
            config = self._attempts(
                lambda client: client.get_model_config(
                    self.model_name, as_json=True, client_timeout=self.ready_timeout_s
                )
            )
        except InferenceServerException:
            return "unknown"
        return runtime_of(config["config"])

    def _attempts(self, call: Callable[[grpcclient.InferenceServerClient], T]) -> T:
        """`call` on this thread's client, made again (CALL_ATTEMPTS in all) while Triton is UNAVAILABLE."""
        attempts_left = CALL_ATTEMPTS
        while True:
            attempts_left -= 1
            try:
                return call(self._client())
            except InferenceServerException as error:
                if attempts_left == 0 or not _is_unavailable(error):
                    raise

    def prepare(self) -> None:
        """Choose the transport now if Triton answers (else on the first request); logged, with what
        the model runs on."""
        if self.regions is not None and not self.regions.decided:
            try:
                self.regions.decide(self)
            except (BackendUnavailable, BackendTimeout):
                log.warning("facecrop: Triton not reachable yet; shared memory is tried on the first request")
        log.info("facecrop: model %s runs %s", self.model_name, self.runtime())

    def close(self) -> None:
        """Unregister and remove this process's regions (a worker's exit; once for all its models)."""
        if self.regions is not None:
            self.regions.close(self)

    def _use_bytes(self, reason: str) -> None:
        """Every model of the worker sends bytes from now on (their regions are one pool)."""
        if self.regions is not None:
            self.regions.stop(reason)


def runtime_of(config: dict) -> str:
    """A model's runtime and precision from its Triton config (JSON): its `precision` and `runtime`
    parameters where the CPU configs state them (local_triton/render.py), else TensorRT's precision
    mode (`fp16 (tensorrt)`), else its platform's fp32; an ensemble names its steps."""
    parameters = {key: value.get("string_value", "") for key, value in config.get("parameters", {}).items()}
    platform = config.get("backend") or config.get("platform") or "unknown"
    if "precision" in parameters:
        return f"{parameters['precision']} ({parameters.get('runtime') or platform})"
    if config.get("platform") == "ensemble":
        steps = config.get("ensemble_scheduling", {}).get("step", [])
        return "ensemble of " + ", ".join(step["model_name"] for step in steps)
    accelerators = config.get("optimization", {}).get("execution_accelerators", {}).get("gpu_execution_accelerator", [])
    for accelerator in accelerators:
        if accelerator.get("name") == "tensorrt":
            return f"{accelerator.get('parameters', {}).get('precision_mode', 'FP32').lower()} (tensorrt)"
    return f"fp32 ({platform})"


def _nbytes(shape: tuple[int, ...], dtype: type[np.generic]) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def _answered_shape(result: grpcclient.InferResult, name: str, room: tuple[int, ...]) -> tuple[int, ...]:
    """The shape Triton reports for output `name`, refused if larger than the room made for it."""
    shape = tuple(int(d) for d in result.get_output(name).shape)
    if len(shape) != len(room) or any(d > r for d, r in zip(shape, room)):
        raise InferenceServerException(f"output {name} has shape {shape}, more than the {room} expected")
    return shape


def _is_unavailable(error: InferenceServerException) -> bool:
    return "UNAVAILABLE" in str(error.status())


def _is_transient(error: InferenceServerException) -> bool:
    """Triton out of reach or late: says nothing about whether it can open a region."""
    return _is_unavailable(error) or "DEADLINE_EXCEEDED" in str(error.status())


def _is_region_unknown(error: InferenceServerException) -> bool:
    """Triton no longer knows a region (it restarted, or this is another replica)."""
    message = (error.message() or "").lower()
    return "shared memory region" in message and ("unable to find" in message or "not found" in message)


class PendingCall:
    """One inference: `result()` waits for the call already sent (if any) or makes it, makes an
    UNAVAILABLE call once more, registers a region again where Triton forgot it, and maps
    failures to API errors. Calls after the first are blocking."""

    def __init__(self, model: TritonModel, tensor: np.ndarray, region: shm.Region | None, sent: Future | None = None):
        self._model, self._tensor, self._region = model, tensor, region
        self._sent = sent

    def result(self) -> list[Answer]:
        attempts_left, registrations_left = CALL_ATTEMPTS, 1
        while True:
            try:
                if self._sent is not None:
                    return self._sent.result()
                return self._model._call(self._tensor, self._region)
            except InferenceServerException as error:
                self._sent = None
                regions = self._model.regions
                if _is_region_unknown(error) and regions is not None and registrations_left:
                    registrations_left -= 1
                    regions.forget_registrations()
                elif _is_unavailable(error) and attempts_left > 1:
                    attempts_left -= 1
                else:
                    raise _api_error(error) from None

    def settle(self) -> None:
        """Wait until Triton is done with the call's memory, whatever the outcome."""
        if self._sent is not None:
            with contextlib.suppress(Exception):
                self._sent.exception(timeout=self._model.timeout_s + 1)


def _api_error(error: InferenceServerException) -> BackendUnavailable | BackendTimeout:
    """A failed call as the API answers it: 504 past the deadline, else 503."""
    cause = f"{error.status()}: {error.message()}"
    if "DEADLINE_EXCEEDED" in str(error.status()):
        return BackendTimeout("the inference server did not answer within the deadline", cause)
    return BackendUnavailable(cause)


class RegionPool:
    """A worker's shared-memory regions, one pool for all its models (regions are Triton's, not a
    model's): leased to one batch at a time, registered with Triton when first used (again after
    Triton forgot them), kept for reuse up to KEPT_REGION_BYTES (their pages only up to
    WARM_REGION_BYTES). Each call names the model whose gRPC client speaks for it."""

    def __init__(self, required: bool = False):
        self.required = required  # FACECROP_TRITON_SHM=on: fail requests rather than fall back
        self.active = True  # until `auto` finds Triton cannot use it
        self._lock = threading.Lock()
        self._idle: list[shm.Region] = []
        self._warm: set[str] = set()  # idle regions that kept their pages
        self._registered: set[str] = set()  # in Triton now, as far as this worker knows
        self._known: set[str] = set()  # ever registered
        self._everything: dict[str, shm.Region] = {}
        self._stale = shm.sweep_stale()  # regions of this host's dead workers, maybe still in Triton
        self.decided = False

    def decide(self, model: TritonModel) -> None:
        """In `auto`, try one region with Triton: keep shared memory if Triton opens it, else
        fall back to bytes for good (logged once). `on` fails requests instead of falling back."""
        with self._lock:
            if self.decided:
                return
            if not shm.shared_memory_available():
                self._fall_back("no writable /dev/shm")
                return
            for name in self._stale:
                with contextlib.suppress(InferenceServerException):
                    model._client().unregister_system_shared_memory(name, client_timeout=1)
            probe = shm.Region(REGION_QUANTUM)
            self._everything[probe.name] = probe
        try:
            self.register(probe, model)
        except InferenceServerException as error:
            self._drop(probe, model)
            if _is_transient(error):
                raise _api_error(error) from None  # not known yet: decided on a later request
            with self._lock:
                self._fall_back(f"Triton cannot open this host's shared memory: {error.message()}")
            return
        with self._lock:
            self._idle.append(probe)
            self.decided = True
        log.warning("facecrop: Triton I/O through system shared memory (/dev/shm)")

    def _fall_back(self, reason: str) -> None:
        if self.required:
            raise BackendUnavailable(f"FACECROP_TRITON_SHM=on, but {reason}")
        self.decided = True
        self.stop(reason)

    def stop(self, reason: str) -> None:
        """Bytes from now on, for every model (logged once)."""
        if self.active:
            log.warning("facecrop: Triton I/O as gRPC bytes (%s)", reason)
        self.active = False

    def lease(self, size: int) -> shm.Region:
        """The smallest idle region of at least `size` bytes (one with its pages first), or a new one."""
        with self._lock:
            fitting = [r for r in self._idle if r.size >= size]
            if fitting:
                region = min(fitting, key=lambda r: (r.name not in self._warm, r.size))
                self._idle.remove(region)
                self._warm.discard(region.name)
                return region
            region = shm.Region(-(-size // REGION_QUANTUM) * REGION_QUANTUM)
            self._everything[region.name] = region
            return region

    def release(self, region: shm.Region, model: TritonModel) -> None:
        """Back to the idle pool, with its pages while the warm budget allows, else without (given
        back before another batch can lease it); dropped beyond KEPT_REGION_BYTES."""
        with self._lock:
            if self._fits(region, warm=True):
                self._idle.append(region)
                self._warm.add(region.name)
                return
        region.discard()
        with self._lock:
            kept = self._fits(region, warm=False)
            if kept:
                self._idle.append(region)
        if not kept:
            self._drop(region, model)

    def _fits(self, region: shm.Region, warm: bool) -> bool:
        """Whether `region` fits the idle pool's budget (and, `warm`, the budget of pages kept); under the lock."""
        idle = sum(r.size for r in self._idle)
        warm_bytes = sum(r.size for r in self._idle if r.name in self._warm)
        fits = idle + region.size <= KEPT_REGION_BYTES and region.name in self._everything
        return fits and (not warm or warm_bytes + region.size <= WARM_REGION_BYTES)

    def register(self, region: shm.Region, model: TritonModel) -> None:
        """Register `region` with Triton unless it already is (as far as this worker knows)."""
        if region.name in self._registered:
            return
        if region.name in self._known:  # registered before: Triton may still have it
            with contextlib.suppress(InferenceServerException):
                model._client().unregister_system_shared_memory(region.name, client_timeout=model.ready_timeout_s)
        model._attempts(
            lambda c: c.register_system_shared_memory(
                region.name, region.key, region.size, client_timeout=model.ready_timeout_s
            )
        )
        self._registered.add(region.name)
        self._known.add(region.name)

    def forget_registrations(self) -> None:
        """Triton lost its registrations (a restart): register each region again when next used."""
        self._registered.clear()

    def _drop(self, region: shm.Region, model: TritonModel) -> None:
        with self._lock:
            self._everything.pop(region.name, None)
        if region.name in self._known:
            self._registered.discard(region.name)
            with contextlib.suppress(InferenceServerException):
                model._client().unregister_system_shared_memory(region.name, client_timeout=1)
        region.unlink()

    def close(self, model: TritonModel) -> None:
        with self._lock:
            regions, self._idle, self._warm = list(self._everything.values()), [], set()
        for region in regions:
            self._drop(region, model)

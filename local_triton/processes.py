"""Start, wait for and stop the local `tritonserver` and the gunicorn gateway as subprocesses.

Used by `make serve` (local_triton/serve.py) and by the integration tests, which start
their own pair on free ports; the CPU Triton image (local_triton/container.py) runs
`server_command` too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from local_triton import BUILD_DIR, PROJECT_ROOT
from local_triton.allocators import allocator_env
from local_triton.compose import process_status
from local_triton.render import render_repository

PRODUCTION_REPOSITORY = PROJECT_ROOT / "model_repository"
LOG_DIR = BUILD_DIR / "logs"
# The shared photos and models, beside the checkout (FACECROP_SHARED: elsewhere, e.g. for a copy of the tree)
SHARED = Path(os.environ.get("FACECROP_SHARED") or PROJECT_ROOT.parent / "shared")
SHARED_FACES = SHARED / "faces"
SHM = Path("/dev/shm")  # where Triton's Python backend keeps each model instance's region
REGION_PREFIX = "--backend-config=python,shm-region-prefix-name="
COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yml"
LOCAL_ONLY_FLAGS = ("--model-repository=",)  # set by server_command to the rendering


def production_flags() -> list[str]:
    """Triton's flags in docker-compose.yml (a `${VAR:-default}` as its default), less those
    the local run sets itself: the local server runs with the production's flags."""
    command = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["triton"]["command"]
    return served_flags([re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", word) for word in command[1:]])


def served_flags(flags: list[str]) -> list[str]:
    """Production flags less those that name the production repository (the rendering replaces it)."""
    return [flag for flag in flags if not flag.startswith(LOCAL_ONLY_FLAGS)]


@dataclass(frozen=True)
class TritonPorts:
    http: int = 8000
    grpc: int = 8001
    metrics: int = 8002

    @classmethod
    def free(cls) -> TritonPorts:
        """Three ports nothing listens on now, none handed out before by this process."""
        return cls(http=free_port(), grpc=free_port(), metrics=free_port())


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on right now, on any address (Triton listens on all of them), and
    never one this process handed out before: the system may offer a port again as soon as it is
    closed, and two servers of one stack given the same port fail to start."""
    while True:
        with socket.socket() as sock:
            sock.bind(("0.0.0.0", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def pytriton_server_dir() -> Path:
    """The `tritonserver` tree bundled in the nvidia-pytriton wheel (found without importing it)."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("nvidia-pytriton is not installed: run `make venv`")
    return Path(spec.submodule_search_locations[0]) / "tritonserver"


def prepare_python_backend(server_dir: Path, backends_dir: Path) -> None:
    """Copy the Python backend and the stub built for this interpreter's version."""
    python_backend = backends_dir / "python"
    if python_backend.exists():
        shutil.rmtree(python_backend)
    shutil.copytree(server_dir / "backends" / "python", python_backend)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = server_dir / "python_backend_stubs" / version / "triton_python_backend_stub"
    shutil.copy2(stub, python_backend / stub.name)


def triton_environment(server_dir: Path) -> dict[str, str]:
    """Environment for `tritonserver` and the stub it spawns.

    The stub links `libpython3.X.so` from the base interpreter's LIBDIR and CUDA runtime
    stubs from the wheel's `.libs`; it ignores PYTHONPATH, which local_triton/model.py reads
    to put this virtual environment's packages (numpy < 2, onnxruntime) first.
    """
    env = dict(os.environ)
    libs = [sysconfig.get_config_var("LIBDIR"), str(server_dir.parent.parent / "nvidia_pytriton.libs")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*libs, env.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep)
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    return env


def server_command(
    source: Path, work_dir: Path, intra_op_threads: int = 0, instances: int = 1, precision: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """Render the repository `source` under `work_dir` for the wheel's `tritonserver` (each model on
    the runtime and precision this CPU runs fastest, or `precision` forces: FACECROP_PRECISION's
    values, None: that variable's): the command (repository, backends and Python-backend settings;
    no ports, no production flags) and its environment. `make serve`, the tests and the CPU Triton
    image share it."""
    server_dir = pytriton_server_dir()
    repository = work_dir / "model_repository"
    render_repository(source, repository, intra_op_threads, instances, precision)
    prepare_python_backend(server_dir, work_dir / "backends")
    command = [
        str(server_dir / "bin" / "tritonserver"),
        f"--model-repository={repository}",
        f"--backend-directory={work_dir / 'backends'}",
        "--backend-config=python,shm-default-byte-size=67108864",
        "--backend-config=python,shm-growth-byte-size=67108864",
        "--log-verbose=0",
    ]
    return command, triton_environment(server_dir)


def start_triton(
    ports: TritonPorts,
    work_dir: Path,
    intra_op_threads: int = 0,
    log_path: Path | None = None,
    instances: int = 1,
    precision: str | None = None,
) -> subprocess.Popen:
    """Render the local repository under `work_dir` and start `tritonserver` on `ports`, its Python
    backend's regions in /dev/shm named after its HTTP port (REGION_PREFIX: `stop` removes them)."""
    command, env = server_command(PRODUCTION_REPOSITORY, work_dir, intra_op_threads, instances, precision)
    command += [
        f"--http-port={ports.http}",
        f"--grpc-port={ports.grpc}",
        f"--metrics-port={ports.metrics}",
        f"{REGION_PREFIX}facecrop_triton_{ports.http}_",
        *production_flags(),
    ]
    return _spawn(command, env, log_path)


def start_gateway(
    port: int,
    triton_grpc_url: str,
    extra_env: dict[str, str] | None = None,
    log_path: Path | None = None,
    root: Path = PROJECT_ROOT,
) -> subprocess.Popen:
    """Start the gateway of the tree at `root` (this checkout; an earlier commit's, for before and
    after) under gunicorn, with its production config, on 127.0.0.1:`port`, with the allocator
    FACECROP_MALLOC names (local_triton/allocators.py: jemalloc where installed)."""
    env = dict(os.environ)
    env.update({"FACECROP_BIND": f"127.0.0.1:{port}", "FACECROP_TRITON_URL": triton_grpc_url})
    env.update(extra_env or {})
    env.update(allocator_env(env.get("FACECROP_MALLOC")))
    config = root / "gateway" / "web" / "gunicorn.conf.py"
    if not config.is_file():  # a tree before the web wing (issue 78)
        config = root / "gateway" / "gunicorn.conf.py"
    command = [sys.executable, "-m", "gunicorn", "--config", str(config)]
    return _spawn(command, env, log_path, root)


def _spawn(
    command: list[str], env: dict[str, str], log_path: Path | None, cwd: Path = PROJECT_ROOT
) -> subprocess.Popen:
    output = open(log_path, "ab") if log_path else None  # noqa: SIM115 - owned by the child
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=output, stderr=subprocess.STDOUT if output else None)


def wait_until_ok(url: str, process: subprocess.Popen, timeout_s: float) -> None:
    """Poll `url` until it answers 200; raise if `process` exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with status {process.returncode} before {url} was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} not ready after {timeout_s:.0f} s")


def child_pids(pid: int) -> list[int]:
    """Processes whose parent is `pid` (gunicorn's workers, Triton's backend stubs)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return sorted(children)


def memory_mib(pid: int) -> dict[str, float]:
    """Resident memory of one process in MiB: VmRSS and its parts RssAnon (heap), RssFile
    (mapped files: libraries) and RssShmem (shared memory: Triton regions, metrics files), and its
    Pss (each shared page divided among the processes that map it); zeros once it has exited."""
    fields = ("VmRSS", "RssAnon", "RssFile", "RssShmem", "Pss")
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        lines += Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        lines = []
    values = {line.split(":")[0]: int(line.split()[1]) / 1024 for line in lines if line.startswith(fields)}
    return {field: values.get(field, 0.0) for field in fields}


def rss_mib(pid: int) -> float:
    """Resident memory of one process, in MiB (0 once it has exited)."""
    return memory_mib(pid)["VmRSS"]


def stop(process: subprocess.Popen, timeout_s: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout_s`; then every child it left
    behind killed and, for a Triton of `start_triton`, its regions in /dev/shm removed. Triton
    stopped while it loads its models (`make serve` stopped at once) left Python backend stubs
    running, deadlocked, and regions of 64 MiB in /dev/shm, for good."""
    if process.poll() is not None:
        return
    children = {pid: _arguments(pid) for pid in child_pids(process.pid)}
    process.terminate()
    children |= {pid: _arguments(pid) for pid in child_pids(process.pid) if pid not in children}
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for pid, arguments in children.items():
        if arguments and _arguments(pid) == arguments:  # still that child (its pid not taken since)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while any(map(running, children)) and time.monotonic() < deadline:  # not ours to wait for: Triton's
        time.sleep(0.02)
    for argument in map(str, process.args):
        if argument.startswith(REGION_PREFIX):  # a Triton of start_triton: its regions have their own prefix
            for region in SHM.glob(f"{argument.removeprefix(REGION_PREFIX)}*"):
                region.unlink(missing_ok=True)


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie has)."""
    status = process_status(pid)
    return status is not None and status[1] != "Z"


def _arguments(pid: int) -> list[str]:
    """A process's command line (none once it has exited)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


@dataclass(frozen=True)
class Stack:
    """Addresses of a running Triton + gateway pair, and the processes behind them."""

    gateway: str  # http://127.0.0.1:PORT
    triton_http: str  # http://127.0.0.1:PORT
    triton_grpc: str  # 127.0.0.1:PORT
    triton_process: subprocess.Popen
    gateway_process: subprocess.Popen


@dataclass(frozen=True)
class Gateway:
    url: str  # http://127.0.0.1:PORT
    process: subprocess.Popen  # gunicorn's master


@contextmanager
def running_gateway(
    triton_grpc: str, gateway_env: dict[str, str] | None = None, name: str = "extra", root: Path = PROJECT_ROOT
) -> Iterator[Gateway]:
    """One more gateway (of the tree at `root`) on a free port, for an already running Triton."""
    port = free_port()
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    gateway = start_gateway(port, triton_grpc, gateway_env, LOG_DIR / f"{name}-gateway.log", root)
    try:
        wait_until_ok(f"http://127.0.0.1:{port}/readyz", gateway, timeout_s=60)
        yield Gateway(f"http://127.0.0.1:{port}", gateway)
    finally:
        stop(gateway)


@contextmanager
def running_stack(
    name: str,
    gateway_env: dict[str, str] | None = None,
    intra_op_threads: int = 0,
    instances: int = 1,
    ports: TritonPorts | None = None,
    gateway_port: int | None = None,
    log_to_files: bool = True,
    precision: str | None = None,
) -> Iterator[Stack]:
    """Triton (its models at `precision`: FACECROP_PRECISION's values) and a gateway on loopback
    (free ports unless given), logs in build/logs/NAME-*.log (or on this terminal); both stopped on exit."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    ports = ports or TritonPorts.free()
    gateway_port = gateway_port or free_port()

    def log(kind: str) -> Path | None:
        return LOG_DIR / f"{name}-{kind}.log" if log_to_files else None

    triton = start_triton(ports, BUILD_DIR / f"stack-{name}", intra_op_threads, log("triton"), instances, precision)
    gateway = None
    try:
        wait_until_ok(f"http://127.0.0.1:{ports.http}/v2/health/ready", triton, timeout_s=180)
        gateway = start_gateway(gateway_port, f"127.0.0.1:{ports.grpc}", gateway_env, log("gateway"))
        wait_until_ok(f"http://127.0.0.1:{gateway_port}/readyz", gateway, timeout_s=60)
        yield Stack(
            gateway=f"http://127.0.0.1:{gateway_port}",
            triton_http=f"http://127.0.0.1:{ports.http}",
            triton_grpc=f"127.0.0.1:{ports.grpc}",
            triton_process=triton,
            gateway_process=gateway,
        )
    finally:
        for process in (gateway, triton):
            if process is not None:
                stop(process)

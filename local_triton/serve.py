"""`make serve`: the real local Triton plus the gateway, until Ctrl-C or `make stop`.

Ports come from the environment: FACECROP_PORT (8080) for the gateway and Triton's
standard TRITON_HTTP_PORT (8000), TRITON_GRPC_PORT (8001), TRITON_METRICS_PORT (8002).
The URL form reads relative sources from FACECROP_ORIGIN, by default originals/ in the
checkout (made if missing): a photo copied there is served at /cdn-cgi/image/<options>/<name>.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from pathlib import Path

from local_triton import PROJECT_ROOT
from local_triton.processes import BUILD_DIR, TritonPorts, running_stack

PID_FILE = BUILD_DIR / "serve.pid"
ORIGINALS = PROJECT_ROOT / "originals"


PORTS = {"FACECROP_PORT": 8080, "TRITON_HTTP_PORT": 8000, "TRITON_GRPC_PORT": 8001, "TRITON_METRICS_PORT": 8002}


def busy_ports(ports: dict[str, int]) -> list[str]:
    """A line for each of `ports` (variable -> port) that something listens on already."""
    busy = []
    for variable, port in ports.items():
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: TIME_WAIT is no owner
            try:
                probe.bind(("127.0.0.1" if variable == "FACECROP_PORT" else "0.0.0.0", port))  # as each listens
            except OSError:
                busy.append(f"port {port} is in use: stop what listens there, or set {variable}=<another port>")
    return busy


def main() -> int:
    chosen = {variable: int(os.environ.get(variable, default)) for variable, default in PORTS.items()}
    if busy := busy_ports(chosen):  # told at once, before Triton loads its models for a minute
        print("facecrop: cannot start:", *busy, sep="\n  ", file=sys.stderr)
        return 1
    ports = TritonPorts(
        http=chosen["TRITON_HTTP_PORT"], grpc=chosen["TRITON_GRPC_PORT"], metrics=chosen["TRITON_METRICS_PORT"]
    )
    gateway_port = chosen["FACECROP_PORT"]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    BUILD_DIR.mkdir(exist_ok=True)
    PID_FILE.write_text(str(os.getpid()))
    origin = os.environ.get("FACECROP_ORIGIN") or str(ORIGINALS)
    if origin == str(ORIGINALS):
        ORIGINALS.mkdir(exist_ok=True)
    try:
        with running_stack(
            "serve", {"FACECROP_ORIGIN": origin}, ports=ports, gateway_port=gateway_port, log_to_files=False
        ) as stack:
            print(
                f"\nfacecrop is up: gateway {stack.gateway} "
                f"(Triton HTTP {ports.http}, gRPC {ports.grpc}, metrics {ports.metrics}). "
                f"Photos in {origin} are served at {stack.gateway}/cdn-cgi/image/<options>/<name>. "
                "Ctrl-C or `make stop` stops both.\n",
                flush=True,
            )
            while stack.triton_process.poll() is None and stack.gateway_process.poll() is None:
                time.sleep(0.5)
            print("tritonserver or the gateway exited; stopping the other", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, TimeoutError) as error:  # a server that did not come up: its own log, above, says why
        print(f"facecrop: {error}", file=sys.stderr)
        return 1
    finally:
        release(PID_FILE, os.getpid())


def release(pid_file: Path, pid: int) -> None:
    """Remove `pid_file` where it still names `pid`: a serve restarted (`make stop && make serve`)
    may have written its own while this one was stopping, and `make stop` needs it."""
    try:
        if pid_file.read_text().strip() == str(pid):
            pid_file.unlink()
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    sys.exit(main())

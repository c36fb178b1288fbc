"""`make serve`: the real local Triton plus the gateway, until Ctrl-C or `make stop`.

Ports come from the environment: FACECROP_PORT (8080) for the gateway and Triton's
standard TRITON_HTTP_PORT (8000), TRITON_GRPC_PORT (8001), TRITON_METRICS_PORT (8002).
The URL form reads relative sources from FACECROP_ORIGIN, by default originals/ in the
checkout (made if missing): a photo copied there is served at /cdn-cgi/image/<options>/<name>.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from local_triton import PROJECT_ROOT
from local_triton.processes import BUILD_DIR, TritonPorts, running_stack

PID_FILE = BUILD_DIR / "serve.pid"
ORIGINALS = PROJECT_ROOT / "originals"


def main() -> int:
    ports = TritonPorts(
        http=int(os.environ.get("TRITON_HTTP_PORT", "8000")),
        grpc=int(os.environ.get("TRITON_GRPC_PORT", "8001")),
        metrics=int(os.environ.get("TRITON_METRICS_PORT", "8002")),
    )
    gateway_port = int(os.environ.get("FACECROP_PORT", "8080"))
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
    finally:
        PID_FILE.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())

"""`make serve` (local_triton/serve.py) where a port it needs is taken: told at once, before Triton
loads its models, one line a port naming the variable that moves it (it was a traceback, a minute on)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from local_triton import PROJECT_ROOT
from local_triton.processes import free_port


def test_ports_in_use_are_told_at_once_naming_the_variable_that_moves_each():
    with socket.socket() as gateway_side, socket.socket() as triton_side:
        gateway_side.bind(("127.0.0.1", 0))  # the gateway listens on loopback
        triton_side.bind(("127.0.0.2", 0))  # Triton on every address: a listener on any one is in its way
        for taken in (gateway_side, triton_side):
            taken.listen()
        gateway_port, grpc_port = gateway_side.getsockname()[1], triton_side.getsockname()[1]
        env = {
            **os.environ,
            "FACECROP_PORT": str(gateway_port),
            "TRITON_HTTP_PORT": str(free_port()),
            "TRITON_GRPC_PORT": str(grpc_port),
            "TRITON_METRICS_PORT": str(free_port()),
        }
        done = subprocess.run(
            [sys.executable, "-m", "local_triton.serve"],
            env=env,
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "facecrop: cannot start:",
        f"  port {gateway_port} is in use: stop what listens there, or set FACECROP_PORT=<another port>",
        f"  port {grpc_port} is in use: stop what listens there, or set TRITON_GRPC_PORT=<another port>",
    ]

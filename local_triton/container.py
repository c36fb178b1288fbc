"""Entry point of the CPU Triton image (deploy/triton-cpu/Dockerfile).

It takes the production `tritonserver` command of docker-compose.yml as its arguments (the
CPU variant keeps that `command`), renders the `--model-repository` it names (written by
model-init) as `make serve` does, and replaces itself with the wheel's `tritonserver`
running that rendering with the other production flags.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from local_triton.processes import served_flags, server_command

WORK_DIR = Path("/tmp/triton")  # the rendered repository and the Python backend, rewritten at each start


def main(argv: list[str]) -> None:
    """`argv`: `tritonserver --model-repository=DIR FLAG...` (the compose service's command)."""
    program, *flags = argv
    repositories = [flag.split("=", 1)[1] for flag in flags if flag.startswith("--model-repository=")]
    if program != "tritonserver" or len(repositories) != 1:
        sys.exit(f"usage: tritonserver --model-repository=DIR [FLAG...], got {' '.join(argv)}")
    command, env = server_command(Path(repositories[0]), WORK_DIR)
    os.execve(command[0], command + served_flags(flags), env)


if __name__ == "__main__":
    main(sys.argv[1:])

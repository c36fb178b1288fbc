"""Run the production model repository on this machine's real `tritonserver` (CPU, no Docker),
or the whole stack in containers without a GPU (`compose`)."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = PROJECT_ROOT / "build"

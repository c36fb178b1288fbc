"""Run the production model repository on this machine's real `tritonserver` (CPU, no Docker)."""

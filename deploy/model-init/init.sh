#!/bin/sh
# Copy the model configs into the target repository, write the model files beside them, then each
# model's configs/cpu.pbtxt for this host's CPU (selected with tritonserver --model-config-name=cpu).
set -eu
target="${1:?usage: init.sh MODEL_REPOSITORY}"
cp -R /opt/facecrop/model_repository/. "$target/"
python /opt/facecrop/fetch_model.py "$target"
cd /opt/facecrop && exec python -m local_triton.render --cpu "$target"

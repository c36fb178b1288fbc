#!/bin/sh
# Copy the model configs into the target repository and write the model files beside them.
set -eu
target="${1:?usage: init.sh MODEL_REPOSITORY}"
cp -R /opt/facecrop/model_repository/. "$target/"
exec python /opt/facecrop/fetch_model.py "$target"

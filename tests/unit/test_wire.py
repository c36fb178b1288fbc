"""Each wire format's one definition agrees with its model's config.pbtxt and its ONNX file."""

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2

from bench.onnx_model import OnnxModel
from gateway.config import Settings
from gateway.triton.wire import INPUT_NAME, WIRE_FORMATS
from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import load_config

TRITON_TYPES = {np.uint8: model_config_pb2.TYPE_UINT8, np.float32: model_config_pb2.TYPE_FP32}


@pytest.mark.parametrize("name", sorted(WIRE_FORMATS))
def test_wire_format_matches_its_config(name):
    wire = WIRE_FORMATS[name]
    config = load_config(PRODUCTION_REPOSITORY / wire.model_name / "config.pbtxt")
    (model_input,) = config.input
    assert model_input.name == INPUT_NAME and model_input.data_type == TRITON_TYPES[wire.dtype]
    assert model_config_pb2.DataType.Name(model_input.data_type) == f"TYPE_{wire.triton_datatype}"
    assert list(model_input.dims) == ([-1, -1, 3] if wire.channels_last else [3, -1, -1])
    assert set(wire.output_names) == {output.name for output in config.output}


@pytest.mark.parametrize("name", sorted(WIRE_FORMATS))
def test_parsed_outputs_of_a_batch(name):
    wire = WIRE_FORMATS[name]
    shape = (2, 256, 1024, 3) if wire.channels_last else (2, 3, 256, 1024)
    outputs = OnnxModel(wire, threads=1)(np.zeros(shape, wire.dtype))
    assert len(outputs) == 2
    for image in outputs:
        assert image.scores.ndim == 1 and len(image.anchor_index) == len(image.scores) == len(image.loc) == len(
            image.landmarks
        )
        assert image.loc.shape[1] == 4 and image.landmarks.shape[1] == 10


def test_settings_pick_the_wire_formats_model_and_refuse_unknown_ones():
    assert Settings().model_name == "retinaface_uint8" and Settings(wire_format="float32").model_name == "retinaface"
    assert Settings(wire_format="float32", model_name="custom").model_name == "custom"
    with pytest.raises(ValueError, match="FACECROP_WIRE_FORMAT"):
        Settings(wire_format="x")
    with pytest.raises(ValueError, match="FACECROP_TARGET_SIZE"):
        Settings(target_size=1000)

"""Each wire format's one definition agrees with its model's config.pbtxt and its ONNX file."""

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2

from bench.onnx_model import OnnxModel
from gateway.config import Settings
from gateway.detection.detectors import every_wire_format
from gateway.triton.wire import INPUT_NAME
from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import load_config

TRITON_TYPES = {np.uint8: model_config_pb2.TYPE_UINT8, np.float32: model_config_pb2.TYPE_FP32}
WIRE_FORMATS = {wire.model_name: wire for wire in every_wire_format()}


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
    named = OnnxModel(wire, threads=1).run(np.zeros(shape, wire.dtype))
    for name, (expected, columns, dtype), output in zip(wire.output_names, wire.layout(256, 1024), named):
        assert (output.shape[1:], output.dtype) == (columns, dtype) and expected == name
    outputs = wire.outputs(dict(zip(wire.output_names, named)))
    assert len(outputs) == 2
    for (image,) in outputs:
        assert image.scores.ndim == 1 and len(image.anchor_index) == len(image.scores) == len(image.loc) == len(
            image.landmarks
        )
        assert image.loc.shape[1] == 4 and image.landmarks.shape[1] == 10


def test_settings_pick_the_wire_formats_models_and_refuse_unknown_ones():
    assert [Settings().model_name(d) for d in Settings().detectors] == ["retinaface_uint8", "yunet_n_uint8"]
    assert Settings(wire_format="float32").model_name("yunet") == "yunet_n"
    renamed = Settings.from_env({"FACECROP_MODEL_NAMES": "yunet_n_uint8=mine", "FACECROP_DETECTORS": "yunet"})
    assert renamed.detectors == ("yunet",) and renamed.model_name("yunet") == "mine"
    assert renamed.model_name("retinaface") == "retinaface_uint8"
    with pytest.raises(ValueError, match="FACECROP_WIRE_FORMAT"):
        Settings(wire_format="x")
    for detectors in ("", "scrfd", "yunet,yunet"):
        with pytest.raises(ValueError, match="FACECROP_DETECTORS"):
            Settings.from_env({"FACECROP_DETECTORS": detectors})
    for renames in ("yunet_n_uint8", "yunet_uint8=mine"):  # not a pair; a model no wire format has
        with pytest.raises(ValueError, match="FACECROP_MODEL_NAMES"):
            Settings.from_env({"FACECROP_MODEL_NAMES": renames})
    with pytest.raises(ValueError, match="FACECROP_TARGET_SIZE"):
        Settings(target_size=1000)

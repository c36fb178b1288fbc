"""The joint model (`faces_uint8`, a Triton ensemble): its config agrees with the gateway's joint wire
format, its answer is split back to the right models, and the passes call it where it answers for
every model they run."""

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2

from gateway.config import Settings
from gateway.detection.detectors import ALL, JOINT, KINDS, DetectorKind, serve
from gateway.triton.wire import INPUT_NAME, joint_format
from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import load_config
from tests.support import NoFacesModel

[FACES] = JOINT
TRITON_TYPES = {np.float32: model_config_pb2.TYPE_FP32, np.int32: model_config_pb2.TYPE_INT32}


def parts_wires():
    return tuple(KINDS[part].wire_formats[FACES.wire_format] for part in FACES.parts)


def test_the_ensemble_config_is_the_joint_wire_format():
    config = load_config(PRODUCTION_REPOSITORY / FACES.name / "config.pbtxt")
    wire = joint_format(FACES.name, parts_wires())
    assert config.platform == "ensemble" and config.name == FACES.name
    (model_input,) = config.input
    assert model_input.name == INPUT_NAME and list(model_input.dims) == [-1, -1, 3]
    assert model_config_pb2.DataType.Name(model_input.data_type) == f"TYPE_{wire.triton_datatype}"
    layout = wire.layout(768, 1024)
    assert [o.name for o in config.output] == [name for name, _, _ in layout] == list(wire.output_names)
    for output, (_, shape, dtype) in zip(config.output, layout):
        assert output.data_type == TRITON_TYPES[dtype] and len(output.dims) == len(shape)
    steps = config.ensemble_scheduling.step
    assert [step.model_name for step in steps] == [w.model_name for w in parts_wires()]
    for step, part in zip(steps, parts_wires()):
        assert dict(step.input_map) == {INPUT_NAME: INPUT_NAME}
        assert dict(step.output_map) == {name: f"{part.model_name}.{name}" for name in part.output_names}
        part_config = load_config(PRODUCTION_REPOSITORY / part.model_name / "config.pbtxt")
        assert part_config.max_batch_size >= config.max_batch_size


def test_a_joint_answer_is_split_back_to_each_model_in_order():
    wire = joint_format(FACES.name, parts_wires())
    named = {}
    for number, (name, shape, dtype) in enumerate(wire.layout(256, 256)):
        named[name] = np.full((2, *shape), number, dtype)  # every output its own value
    answers = wire.outputs(named)
    assert len(answers) == 2 and all(len(answer) == len(FACES.parts) for answer in answers)
    for answer in answers:
        for model, (part, outputs) in enumerate(zip(parts_wires(), answer)):
            for field in ("scores", "anchor_index", "loc", "landmarks"):
                number = list(wire.output_names).index(f"{part.model_name}.{field}")
                assert (getattr(outputs, field) == number).all(), (model, field)


def test_a_joint_model_takes_one_input_layout():
    retinaface_float = KINDS["retinaface"].wire_formats["float32"]
    with pytest.raises(ValueError, match="same input"):
        joint_format("mixed", (retinaface_float, KINDS["yunet"].wire_formats["uint8"]))


def test_passes_call_the_joint_model_for_both_models_and_each_other_one_alone():
    third = DetectorKind("third", KINDS["yunet"].wire_formats, KINDS["yunet"].candidates, ALL, True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gateway.detection.detectors.KINDS", {**KINDS, "third": third})
        detectors = serve(("retinaface", "yunet", "third"), "uint8", lambda _: NoFacesModel(), JOINT)
    both = detectors.calls(detectors.first_pass("standard"))
    assert [call.wire.model_name for call in both] == [FACES.name, "yunet_n_uint8"]
    assert [d.name for d in both[0].detectors] == ["retinaface", "yunet"]
    assert [d.name for d in both[1].detectors] == ["third"]
    fast = detectors.calls(detectors.first_pass("fast"))
    assert [[d.name for d in call.detectors] for call in fast] == [["yunet"], ["third"]]
    assert len(detectors.models) == 4  # /readyz waits for the ensemble too
    two = serve(("retinaface", "yunet"), "uint8", lambda _: NoFacesModel(), JOINT)
    for detail in ("standard", "auto", "high"):
        assert [c.wire.model_name for c in two.calls(two.first_pass(detail))] == [FACES.name]
    assert [c.wire.model_name for c in two.calls(two.tiled_pass())] == [FACES.name]
    one = serve(("yunet",), "uint8", lambda _: NoFacesModel(), JOINT)
    assert one.joint == () and [c.wire.model_name for c in one.calls(one.served)] == ["yunet_n_uint8"]
    floats = serve(("retinaface", "yunet"), "float32", lambda _: NoFacesModel(), JOINT)
    assert floats.joint == ()  # the ensemble is for the uint8 graphs


def test_renaming_a_part_turns_the_ensemble_off_unless_it_is_renamed_too():
    assert Settings().joint_models() == JOINT
    assert Settings.from_env({"FACECROP_MODEL_NAMES": "yunet_n_uint8=mine"}).joint_models() == ()
    both = Settings.from_env({"FACECROP_MODEL_NAMES": "yunet_n_uint8=mine,faces_uint8=my_faces"})
    assert both.joint_models() == JOINT and both.triton_name(FACES.name) == "my_faces"
    assert Settings.from_env({"FACECROP_MODEL_NAMES": "retinaface=other"}).joint_models() == JOINT  # not a part


class Named(NoFacesModel):
    """A stand-in model that knows the wire format it was made for, and whether it is ready."""

    def __init__(self, wire, ready: bool = True):
        super().__init__(wire)
        self.ready = ready

    def is_ready(self) -> bool:
        return self.ready


def test_each_call_is_answered_by_the_model_made_for_its_wire_and_all_must_be_ready():
    made = []

    def model_for(wire):
        made.append(Named(wire, ready=wire.model_name != FACES.name))
        return made[-1]

    detectors = serve(("retinaface", "yunet"), "uint8", model_for, JOINT)
    assert [m.wire.model_name for m in made] == ["retinaface_uint8", "yunet_n_uint8", FACES.name]
    [joint] = detectors.calls(detectors.first_pass("standard"))
    assert joint.model is made[2] and joint.wire.model_name == FACES.name
    [alone] = detectors.calls(detectors.first_pass("fast"))
    assert alone.model is made[1] and alone.wire is made[1].wire
    assert not detectors.is_ready()  # the ensemble is not
    made[2].ready = True
    assert detectors.is_ready()


def test_the_tiled_pass_runs_the_models_the_policy_tiles():
    untiled = DetectorKind("untiled", KINDS["yunet"].wire_formats, KINDS["yunet"].candidates, ALL, False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gateway.detection.detectors.KINDS", {**KINDS, "untiled": untiled})
        detectors = serve(("retinaface", "untiled"), "uint8", lambda _: NoFacesModel())
        alone = serve(("untiled",), "uint8", lambda _: NoFacesModel())
    assert [d.name for d in detectors.tiled_pass()] == ["retinaface"]
    assert [d.name for d in alone.tiled_pass()] == ["untiled"]  # where the policy names none: every served one

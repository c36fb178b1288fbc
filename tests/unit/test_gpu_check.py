"""The logic of deploy/gpu_check.py (the script itself needs a GPU host; see its docstring)."""

import importlib.util

from local_triton.processes import PROJECT_ROOT

spec = importlib.util.spec_from_file_location("gpu_check", PROJECT_ROOT / "deploy" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_driver_versions():
    assert gpu_check.driver_verdict("560.35.03")[0] and gpu_check.driver_verdict("575.51.02")[0]
    assert gpu_check.driver_verdict("535.183.01") == (
        True,
        "driver 535.183.01: CUDA 12.6 through forward compatibility, data-centre GPUs only",
    )
    assert gpu_check.driver_verdict("470.57.02")[0] and not gpu_check.driver_verdict("470.42.01")[0]
    assert not gpu_check.driver_verdict("550.54.14")[0] and not gpu_check.driver_verdict("515.65.01")[0]


def test_log_failures_find_tensorrt_refusals():
    log = "\n".join(
        [
            "I1122 model.cc:100] loading: retinaface_uint8:1",
            "E1122 onnxruntime.cc:55] EP Error: [ONNXRuntimeError] : 11 : EP_FAIL : "
            "User needs to provide all the dynamic shape inputs",
            "I1122 server.cc:600] successfully loaded 'retinaface'",
        ]
    )
    assert gpu_check.log_failures(log) == [log.splitlines()[1]]


def face(x, y, w, h, confidence=90.0):
    return {"confidence": confidence, "face_rectangle": {"x": x, "y": y, "width": w, "height": h}}


def test_parity_tolerates_fp16_noise_and_catches_real_differences():
    cuda = [face(10 * i, 0, 40, 50) for i in range(0, 400, 5)]
    assert gpu_check.same_faces([face(f["face_rectangle"]["x"] + 1, 1, 40, 50, 89.0) for f in cuda], cuda) is None
    assert (
        gpu_check.same_faces(cuda[: len(cuda) // 2], cuda)
        == f"{len(cuda) // 2} faces with TensorRT, {len(cuda)} with CUDA"
    )
    shifted = [face(f["face_rectangle"]["x"] + 20, 0, 40, 50) for f in cuda]
    assert gpu_check.same_faces(shifted, cuda) == f"{len(cuda)} of {len(cuda)} faces differ"

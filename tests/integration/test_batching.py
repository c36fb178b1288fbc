"""Requests of one canonical shape that arrive together share a Triton batch."""

from concurrent.futures import ThreadPoolExecutor

import requests

from evaluation.images import photo
from evaluation.service import model_statistics


def test_concurrent_requests_are_batched(stack):
    # A 4:3 photo and a 512 x 384 one of its own scale to the same canonical 768 x 1024 input.
    data = photo("demo/insightface_t1.jpg").read_bytes()
    before = model_statistics(stack)
    with ThreadPoolExecutor(8) as pool:
        responses = list(
            pool.map(
                lambda _: requests.post(f"{stack.gateway}/v1/detect", files={"image": data}, timeout=60), range(16)
            )
        )
    assert all(r.status_code == 200 for r in responses)
    after = model_statistics(stack)
    inferences = int(after["inference_count"]) - int(before["inference_count"])
    executions = int(after["execution_count"]) - int(before["execution_count"])
    assert inferences == 16
    assert executions < inferences, "no two requests shared a batch"
    assert any(int(s["batch_size"]) > 1 for s in after["batch_stats"])


def test_both_models_answer_one_request(stack):
    """detail=standard: one request, to the ensemble, runs both models once; detail=fast calls YuNet alone."""
    data = photo("demo/insightface_t1.jpg").read_bytes()

    def counts() -> dict[str, int]:
        names = {"joint": "faces_uint8", "retinaface": "retinaface_uint8", "yunet": "yunet_n_uint8"}
        stats = {
            key: requests.get(f"{stack.triton_http}/v2/models/{name}/stats", timeout=10).json()["model_stats"][0]
            for key, name in names.items()
        }
        return {key: int(s["inference_count"]) for key, s in stats.items()}

    for detail, expected in (("standard", (1, 1, 1)), ("fast", (0, 0, 1))):
        before = counts()
        response = requests.post(
            f"{stack.gateway}/v1/detect", params={"detail": detail}, files={"image": data}, timeout=60
        )
        assert response.status_code == 200
        after = counts()
        assert tuple(after[k] - before[k] for k in ("joint", "retinaface", "yunet")) == expected, detail

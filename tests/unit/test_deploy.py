"""Static checks of the GPU-host deployment: compose, Dockerfiles, Kubernetes, pinned versions."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILES = [ROOT / "gateway" / "Dockerfile", ROOT / "deploy" / "model-init" / "Dockerfile"]
KUBERNETES = ROOT / "deploy" / "kubernetes"


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def manifests() -> list[dict]:
    return [doc for path in sorted(KUBERNETES.glob("*.yaml")) if path.name != "kustomization.yaml" for doc in yaml.safe_load_all(path.read_text())]


def test_compose_file_matches_the_compose_specification():
    result = run(str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_triton_service():
    triton = compose()["services"]["triton"]
    (device,) = triton["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "models:/models:ro" in triton["volumes"]
    assert {"8000:8000", "8001:8001", "8002:8002"} <= set(triton["ports"])
    assert "/v2/health/ready" in " ".join(triton["healthcheck"]["test"])
    assert triton["restart"] == "unless-stopped" and triton["shm_size"]
    assert triton["depends_on"]["model-init"]["condition"] == "service_completed_successfully"


def test_gateway_service_scales_behind_the_proxy():
    services = compose()["services"]
    gateway = services["gateway"]
    assert gateway["build"] == {"context": ".", "dockerfile": "gateway/Dockerfile"}
    assert gateway["environment"]["FACECROP_TRITON_URL"] == "triton:8001"
    assert gateway["depends_on"]["triton"]["condition"] == "service_healthy"
    assert "/readyz" in " ".join(gateway["healthcheck"]["test"])
    assert "ports" not in gateway, "a published port would clash under --scale gateway=N"
    assert services["proxy"]["ports"] == ["8080:8080"]
    assert "http://gateway:8080" in (ROOT / "deploy" / "proxy" / "nginx.conf").read_text()


def test_model_init_writes_the_models_volume():
    init = compose()["services"]["model-init"]
    assert init["build"]["dockerfile"] == "deploy/model-init/Dockerfile"
    assert init["volumes"] == ["models:/models"] and init["restart"] == "no"
    assert set(compose()["volumes"]) == {"models", "trt-cache"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_passes_hadolint(dockerfile):
    result = run(str(BIN / "hadolint"), str(dockerfile))
    assert result.returncode == 0, result.stdout + result.stderr


def test_gateway_image_is_non_root_with_a_healthcheck_and_the_shared_lock_file():
    text = DOCKERFILES[0].read_text()
    assert re.search(r"^USER \d+", text, re.M) and "HEALTHCHECK" in text
    assert "--no-deps --only-binary=:all: --requirement /tmp/requirements.lock" in text
    assert "COPY gateway/requirements.lock" in text
    assert "FROM python:3.11.10-slim-bookworm AS build" in text  # build stage; the final stage copies only the venv


def image_references() -> list[str]:
    images = [service["image"] for service in compose()["services"].values() if "image" in service]
    for dockerfile in DOCKERFILES:
        images += re.findall(r"^FROM (\S+)", dockerfile.read_text(), re.M)
    for doc in manifests():
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        images += [c["image"] for c in spec.get("containers", []) + spec.get("initContainers", [])]
    return images


def test_every_image_tag_is_pinned():
    images = image_references()
    assert len(images) >= 8
    for image in images:
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest" and "/" not in tag, image


def test_kubernetes_manifests_validate_against_the_schemas():
    files = sorted(str(p) for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")
    result = run(str(BIN / "kubernetes-validate"), "--strict", "--quiet", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(Path(f).name for f in files)


def test_kubernetes_pieces():
    kinds = {(doc["kind"], doc["metadata"]["name"]): doc for doc in manifests()}
    triton = kinds[("Deployment", "triton")]["spec"]["template"]["spec"]
    (container,) = triton["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert triton["initContainers"][0]["image"].startswith("facecrop-model-init:")
    gateway = kinds[("Deployment", "gateway")]["spec"]["template"]["spec"]["containers"][0]
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert gateway["resources"]["requests"] and gateway["resources"]["limits"]
    assert kinds[("HorizontalPodAutoscaler", "gateway")]["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert ("PodDisruptionBudget", "gateway") in kinds
    assert {("Service", "triton"), ("Service", "gateway")} <= set(kinds)


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found.update(pins(path.parent / line[3:].strip()))
        elif "==" in line:
            name, version = line.split("==")
            found[re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()] = version
    return found


def test_lock_files_agree():
    local = pins(ROOT / "requirements-dev.lock")
    for lock in (ROOT / "gateway" / "requirements.lock", ROOT / "deploy" / "model-init" / "requirements.lock"):
        for name, version in pins(lock).items():
            assert local.get(name) == version, f"{lock.name}: {name}=={version}, local setup has {local.get(name)}"

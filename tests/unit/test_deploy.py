"""Static checks of the deployment: compose (GPU file and CPU variant), Dockerfiles, Kubernetes, pinned versions."""

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gateway.config import Settings

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
COMPOSE = ROOT / "docker-compose.yml"
COMPOSE_CPU = ROOT / "docker-compose.cpu.yml"
DOCKERFILES = [
    ROOT / "gateway" / "Dockerfile",
    ROOT / "deploy" / "model-init" / "Dockerfile",
    ROOT / "deploy" / "triton-cpu" / "Dockerfile",
    ROOT / "deploy" / "ray-job" / "Dockerfile",
]
KUBERNETES = ROOT / "deploy" / "kubernetes"
RAY_JOB = ROOT / "deploy" / "ray-job"
# The fields KubeRay's RayJob (ray.io/v1) takes, as its CRD (ray.io_rayjobs.yaml) names them: the
# manifest may use no other (no schema for custom resources is at hand offline).
RAYJOB_SPEC = {
    "activeDeadlineSeconds", "backoffLimit", "clusterSelector", "deletionStrategy", "entrypoint",
    "entrypointNumCpus", "entrypointNumGpus", "entrypointResources", "jobId", "managedBy", "metadata",
    "preRunningDeadlineSeconds", "rayClusterSpec", "runtimeEnvYAML", "shutdownAfterJobFinishes",
    "submissionMode", "submitterConfig", "submitterPodTemplate", "suspend", "ttlSecondsAfterFinished",
}  # fmt: skip
RAY_CLUSTER_SPEC = {
    "authOptions", "autoscalerOptions", "enableInTreeAutoscaling", "gcsFaultToleranceOptions", "headGroupSpec",
    "headServiceAnnotations", "historyServerOptions", "managedBy", "networkPolicy", "rayVersion", "suspend",
    "tlsOptions", "upgradeStrategy", "workerGroupSpecs",
}  # fmt: skip
HEAD_GROUP = {
    "enableIngress",
    "headService",
    "ingressOptions",
    "labels",
    "rayStartParams",
    "resources",
    "serviceType",
    "template",
}
WORKER_GROUP = {
    "groupName", "idleTimeoutSeconds", "labels", "maxReplicas", "minReplicas", "numOfHosts", "priority",
    "rayStartParams", "replicas", "resources", "scaleStrategy", "suspend", "template",
}  # fmt: skip


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT)


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@dataclass(frozen=True)
class Reset:
    """Compose's `!reset VALUE`: the attribute of the files before is replaced by VALUE (null: removed)."""

    value: object


def construct_reset(loader: yaml.SafeLoader, node: yaml.Node) -> Reset:
    if isinstance(node, yaml.MappingNode):
        return Reset(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Reset(loader.construct_sequence(node, deep=True))
    tag = loader.resolve(yaml.ScalarNode, node.value, (True, False))
    return Reset(loader.construct_object(yaml.ScalarNode(tag, node.value)))


class ComposeLoader(yaml.SafeLoader):
    pass


ComposeLoader.add_constructor("!reset", construct_reset)


def compose_cpu() -> dict:
    return yaml.load(COMPOSE_CPU.read_text(), ComposeLoader)


def published(ports: list[str]) -> dict[str, tuple[int, int]]:
    """`"${VARIABLE:-8080}:8080"` entries as {VARIABLE: (default host port, container port)}."""
    found = {}
    for port in ports:
        match = re.fullmatch(r"\$\{(\w+):-(\d+)\}:(\d+)", port)
        assert match, f"{port}: the host port should be a variable with a default"
        found[match[1]] = (int(match[2]), int(match[3]))
    return found


def manifests() -> list[dict]:
    return [
        doc
        for path in sorted(KUBERNETES.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for doc in yaml.safe_load_all(path.read_text())
    ]


def test_compose_file_matches_the_compose_specification():
    result = run(str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(COMPOSE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_triton_service():
    triton = compose()["services"]["triton"]
    (device,) = triton["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "models:/models:ro" in triton["volumes"]
    # The variables `make serve` reads too (local_triton/serve.py), the standard ports by default.
    assert published(triton["ports"]) == {
        "TRITON_HTTP_PORT": (8000, 8000),
        "TRITON_GRPC_PORT": (8001, 8001),
        "TRITON_METRICS_PORT": (8002, 8002),
    }
    assert "/v2/health/ready" in " ".join(triton["healthcheck"]["test"])
    assert triton["restart"] == "unless-stopped"
    assert triton["depends_on"]["model-init"]["condition"] == "service_completed_successfully"


def test_gateway_service_scales_behind_the_proxy():
    services = compose()["services"]
    gateway = services["gateway"]
    assert gateway["build"] == {"context": ".", "dockerfile": "gateway/Dockerfile"}
    assert gateway["environment"]["FACECROP_TRITON_URL"] == "triton:8001"
    assert gateway["depends_on"]["triton"]["condition"] == "service_healthy"
    assert "/readyz" in " ".join(gateway["healthcheck"]["test"])
    assert "ports" not in gateway, "a published port would clash under --scale gateway=N"
    assert published(services["proxy"]["ports"]) == {"FACECROP_PORT": (8080, 8080)}
    assert "http://gateway:8080" in (ROOT / "deploy" / "proxy" / "nginx.conf").read_text()


def test_model_init_writes_the_models_volume():
    init = compose()["services"]["model-init"]
    assert init["build"]["dockerfile"] == "deploy/model-init/Dockerfile"
    assert init["volumes"] == ["models:/models"] and init["restart"] == "no"
    assert set(compose()["volumes"]) == {"models", "trt-cache", "triton-shm", "proxy-cache"}


def test_gateways_share_triton_s_dev_shm():
    services, volumes = compose()["services"], compose()["volumes"]
    assert "triton-shm:/dev/shm" in services["triton"]["volumes"]
    assert services["gateway"]["volumes"] == [
        "triton-shm:/dev/shm",
        "${FACECROP_ORIGINALS:-./originals}:/srv/originals:ro",
    ]
    assert volumes["triton-shm"]["driver_opts"]["type"] == "tmpfs" and "shm_size" not in services["triton"]


def test_the_proxy_caches_the_url_form_on_its_own_volume():
    services = compose()["services"]
    assert "proxy-cache:/var/cache/nginx/facecrop" in services["proxy"]["volumes"]
    assert services["gateway"]["environment"]["FACECROP_ORIGIN"] == "/srv/originals"
    conf = (ROOT / "deploy" / "proxy" / "nginx.conf").read_text()
    assert "proxy_cache_path /var/cache/nginx/facecrop" in conf and "max_size=1g" in conf
    assert "X-Cache-Status $upstream_cache_status" in conf and "$facecrop_accept" in conf


def test_the_proxys_body_limit_is_the_gateways():
    """With a larger one (21m) the proxy sent on bodies the gateway refused unread, closing the
    connection, and nginx sometimes answered 502 instead of the 413 (a race)."""
    conf = (ROOT / "deploy" / "proxy" / "nginx.conf").read_text()
    [megabytes] = re.findall(r"^\s*client_max_body_size (\d+)m;", conf, re.MULTILINE)
    environment = compose()["services"]["gateway"]["environment"]
    assert int(megabytes) << 20 == int(environment.get("FACECROP_MAX_UPLOAD_BYTES", Settings().max_upload_bytes))


def without_resets(value: object) -> object:
    """The CPU file's content as the merged result has it: `!reset VALUE` as VALUE, `!reset null` left out."""
    if isinstance(value, Reset):
        return without_resets(value.value)
    if isinstance(value, dict):
        return {key: without_resets(item) for key, item in value.items() if item != Reset(None)}
    if isinstance(value, list):
        return [without_resets(item) for item in value]
    return value


def test_cpu_variant_matches_the_compose_specification(tmp_path):
    path = tmp_path / "docker-compose.cpu.json"
    path.write_text(json.dumps(without_resets(compose_cpu())))
    result = run(str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_cpu_variant_replaces_only_triton_s_image_and_gpu_settings_and_the_padding():
    cpu = compose_cpu()
    assert set(cpu) == {"services"} and set(cpu["services"]) == {"triton", "gateway"}
    # The gateway pads as little as on `make serve` (the models on CPU), not to the GPU's shapes.
    padding = f"${{FACECROP_PAD_MULTIPLE:-{Settings().pad_multiple}}}"
    assert cpu["services"]["gateway"] == {"environment": {"FACECROP_PAD_MULTIPLE": padding}}
    assert compose()["services"]["gateway"]["environment"]["FACECROP_PAD_MULTIPLE"] != padding
    triton = cpu["services"]["triton"]
    # The command (production flags), volumes, health check, restart policy stay production's.
    assert set(triton) == {"image", "build", "deploy", "ports", "ulimits", "environment"}
    assert triton["environment"] == {"FACECROP_PRECISION": "${FACECROP_PRECISION:-auto}"}  # the stand-in's rule
    assert (
        triton["deploy"] == Reset({}) and triton["ports"] == Reset([]) and triton["ulimits"] == {"memlock": Reset(None)}
    )
    assert triton["build"]["context"] == "."
    dockerfile = (ROOT / triton["build"]["dockerfile"]).read_text()
    assert dockerfile_path(triton) in DOCKERFILES
    assert 'ENTRYPOINT ["python", "-m", "local_triton.container"]' in dockerfile  # takes that command as arguments
    assert (
        compose()["services"]["triton"]["healthcheck"]["test"][1] == "curl"
        and "install -y --no-install-recommends curl" in dockerfile
    )
    assert re.search(r"^USER \d+", dockerfile, re.M)


def dockerfile_path(service: dict) -> Path:
    return ROOT / service["build"]["context"] / service["build"]["dockerfile"]


def test_cpu_triton_runs_the_compose_command_on_the_rendered_repository(tmp_path, monkeypatch):
    from local_triton import container
    from local_triton.processes import PRODUCTION_REPOSITORY

    executed = {}
    monkeypatch.setattr(container, "WORK_DIR", tmp_path)
    monkeypatch.setattr(container.os, "execve", lambda path, args, env: executed.update(path=path, args=args, env=env))
    command = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", word) for word in compose()["services"]["triton"]["command"]]
    assert command[1] == "--model-repository=/models"
    container.main([command[0], f"--model-repository={PRODUCTION_REPOSITORY}", *command[2:]])
    args = executed["args"]
    assert args[0] == executed["path"] and args[0].endswith("/bin/tritonserver")
    assert [a for a in args if a.startswith("--model-repository=")] == [
        f"--model-repository={tmp_path / 'model_repository'}"
    ]
    assert args[-len(command[2:]) :] == command[2:]
    assert 'backend: "python"' in (tmp_path / "model_repository" / "retinaface_uint8" / "config.pbtxt").read_text()
    assert executed["env"]["PYTHONPATH"] and executed["env"]["LD_LIBRARY_PATH"]
    with pytest.raises(SystemExit):
        container.main(["tritonserver", "--strict-readiness=true"])


def test_every_base_image_has_a_stand_in():
    """Where no registry answers, local_triton.compose builds a stand-in for each base image."""
    from local_triton.compose import STAND_INS, dockerfile_bases

    cpu = compose_cpu()["services"]
    services = {name: {**service, **cpu.get(name, {})} for name, service in compose()["services"].items()}
    bases = {
        image
        for service in services.values()
        if "build" in service
        for image in dockerfile_bases(dockerfile_path(service))
    }
    bases |= {service["image"] for service in services.values() if "build" not in service}
    assert bases == set(STAND_INS)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_passes_hadolint(dockerfile):
    result = run(str(BIN / "hadolint"), str(dockerfile))
    assert result.returncode == 0, result.stdout + result.stderr


def test_gateway_image_preloads_jemalloc_with_the_local_settings():
    from local_triton.allocators import SETTINGS

    text = DOCKERFILES[0].read_text()
    assert "libjemalloc2=" in text and "LD_PRELOAD=libjemalloc.so.2" in text
    assert f"MALLOC_CONF={SETTINGS['jemalloc']['MALLOC_CONF']}" in text


def test_gateway_image_is_non_root_with_a_healthcheck_and_the_shared_lock_file():
    text = DOCKERFILES[0].read_text()
    assert re.search(r"^USER \d+", text, re.M) and "HEALTHCHECK" in text
    assert "--no-deps --only-binary=:all: --requirement /tmp/requirements.lock" in text
    assert "COPY gateway/requirements.lock" in text
    assert "FROM python:3.11.10-slim-bookworm AS build" in text  # build stage; the final stage copies only the venv


def image_references() -> list[str]:
    services = [*compose()["services"].values(), *compose_cpu()["services"].values()]
    images = [service["image"] for service in services if "image" in service]
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


WORKER_MIB = 150  # a worker's own resident memory after a mixed day (`make soak`: 142-146 MiB)
MIB_PER_MEGAPIXEL = 8.5  # the costliest request measured in process: a 98 MP RGBA PNG's faces hidden, +828 MiB


def mebibytes(quantity: str) -> float:
    """A Kubernetes memory quantity (Mi, Gi) in MiB."""
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return int(number) * (1024 if unit == "Gi" else 1)


def test_the_gateways_memory_limit_holds_each_worker_at_its_worst():
    """Each worker: itself, the larger of its pixel budget and the largest request (which runs alone),
    and the bodies it may hold (requests in flight and the URL form's fetches), as docs/operating.md
    sizes it."""
    kinds = {(doc["kind"], doc["metadata"]["name"]): doc for doc in manifests()}
    beside_triton = yaml.safe_load((KUBERNETES / "components/gateway-beside-triton/triton-patch.yaml").read_text())
    gateways = [
        kinds[("Deployment", "gateway")]["spec"]["template"]["spec"]["containers"][0],
        next(c for c in beside_triton["spec"]["template"]["spec"]["containers"] if c["name"] == "gateway"),
    ]
    for gateway in gateways:
        env = {item["name"]: item["value"] for item in gateway["env"] if "value" in item}
        settings = Settings.from_env(env)
        megapixels = max(settings.max_pixels_in_flight, settings.max_pixels) / 1e6
        bodies = (settings.max_in_flight + settings.fetch_concurrency) * settings.max_upload_bytes / 2**20
        worst = int(env["FACECROP_WORKERS"]) * (WORKER_MIB + MIB_PER_MEGAPIXEL * megapixels + bodies)
        assert mebibytes(gateway["resources"]["limits"]["memory"]) >= worst, gateway["name"]


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
    for lock in (dockerfile.parent / "requirements.lock" for dockerfile in DOCKERFILES):
        for name, version in pins(lock).items():
            assert local.get(name) == version, f"{lock.name}: {name}=={version}, local setup has {local.get(name)}"


def kustomize(tmp_path: Path, components: list[str]) -> Path:
    """`kubectl kustomize` of the manifests with `components`, into a file."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(KUBERNETES, overlay)  # kustomize takes relative paths only
    kustomization = {"resources": [base], "components": [f"{base}/components/{c}" for c in components]}
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    result = run(str(BIN / "kubectl"), "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(overlay))
    assert result.returncode == 0, result.stderr
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(result.stdout)
    return rendered


def test_triton_on_cpu_nodes_reads_the_cpu_configs_the_init_wrote_for_its_limit(tmp_path):
    """components/cpu-host: no GPU asked for, Triton selects configs/cpu.pbtxt, and the model-init
    (which writes them: local_triton/render.py --cpu) is told Triton's CPU limit."""
    rendered = kustomize(tmp_path, ["cpu-host"])
    result = run(str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(rendered))
    assert result.returncode == 0, result.stdout + result.stderr
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered.read_text())}
    pod = docs[("Deployment", "triton")]["spec"]["template"]["spec"]
    (triton,) = pod["containers"]
    assert "--model-config-name=cpu" in triton["args"] and "--model-config-name=default" not in triton["args"]
    assert not any("nvidia.com/gpu" in part for part in triton["resources"].values())
    (init,) = pod["initContainers"]
    env = {e["name"]: e["value"] for e in init["env"]}
    assert env == {"FACECROP_TRITON_CPUS": triton["resources"]["limits"]["cpu"], "FACECROP_PRECISION": "auto"}
    assert "local_triton.render --cpu" in (ROOT / "deploy" / "model-init" / "init.sh").read_text()


def test_kubernetes_components_render_and_validate(tmp_path):
    components = sorted(p.name for p in (KUBERNETES / "components").iterdir())
    assert components == ["cpu-host", "gateway-beside-triton", "nvidia-runtime", "trt-cache-pvc"]
    components.remove("cpu-host")  # a GPU deployment's: cpu-host is one without a GPU
    rendered = kustomize(tmp_path, components)
    result = run(str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(rendered))
    assert result.returncode == 0, result.stdout + result.stderr
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered.read_text())}
    pod = docs[("Deployment", "triton")]["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    (cache,) = [v for v in pod["volumes"] if v["name"] == "trt-cache"]
    assert cache == {"name": "trt-cache", "persistentVolumeClaim": {"claimName": "triton-trt-cache"}}
    assert docs[("PersistentVolumeClaim", "triton-trt-cache")]["spec"]["accessModes"] == ["ReadWriteMany"]
    # gateway-beside-triton: a gateway in each Triton pod on the pod's memory-backed /dev/shm
    (shm,) = [v for v in pod["volumes"] if v["name"] == "shm"]
    assert shm["emptyDir"]["medium"] == "Memory"
    (gateway,) = [c for c in pod["containers"] if c["name"] == "gateway"]
    env = {e["name"]: e["value"] for e in gateway["env"]}
    assert env["FACECROP_TRITON_URL"] == "127.0.0.1:8001" and env["FACECROP_TRITON_SHM"] == "on"
    assert {"name": "shm", "mountPath": "/dev/shm"} in gateway["volumeMounts"]
    assert ("Deployment", "gateway") not in docs and ("HorizontalPodAutoscaler", "gateway") not in docs
    assert docs[("Service", "gateway")]["spec"]["selector"] == {"app.kubernetes.io/name": "triton"}


def test_gateways_in_their_own_pods_send_bytes():
    (deployment, *_) = yaml.safe_load_all((KUBERNETES / "gateway.yaml").read_text())
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FACECROP_TRITON_SHM"] == "off"


def triton_flags() -> dict[str, list[str]]:
    compose_flags = compose()["services"]["triton"]["command"][1:]
    (deployment,) = [d for d in manifests() if d["kind"] == "Deployment" and d["metadata"]["name"] == "triton"]
    kubernetes_flags = deployment["spec"]["template"]["spec"]["containers"][0]["args"][1:]
    return {"compose": compose_flags, "kubernetes": kubernetes_flags}


def test_compose_and_kubernetes_run_triton_with_the_same_flags():
    flags = triton_flags()
    assert [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", f) for f in flags["compose"]] == flags["kubernetes"]
    assert "--model-config-name=default" in flags["kubernetes"]  # no configs/default.pbtxt: config.pbtxt
    assert not any((ROOT / "model_repository").glob("*/configs/default.pbtxt"))
    age = {
        f.split("=")[0]: int(f.split("=")[1]) for f in flags["kubernetes"] if f.startswith("--grpc-max-connection-age")
    }
    assert age["--grpc-max-connection-age-grace"] > Settings().infer_timeout_s * 1000


def test_the_triton_release_knows_every_flag():
    """The pytriton wheel's tritonserver is Triton 2.51, the release of the 24.10 image."""
    from local_triton.processes import pytriton_server_dir, triton_environment

    server = pytriton_server_dir()
    usage = subprocess.run(
        [str(server / "bin" / "tritonserver"), "--help"], capture_output=True, text=True, env=triton_environment(server)
    )
    for flag in set(triton_flags()["compose"] + triton_flags()["kubernetes"]):
        assert f"  {flag.split('=')[0]} " in usage.stdout + usage.stderr, flag


def test_the_ray_job_runs_the_batch_on_its_cluster_with_valid_pods(tmp_path):
    from facecrop_client.cli import parser

    job = yaml.safe_load((RAY_JOB / "rayjob.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    spec = job["spec"]
    cluster = spec["rayClusterSpec"]
    assert set(spec) <= RAYJOB_SPEC and set(cluster) <= RAY_CLUSTER_SPEC
    assert set(cluster["headGroupSpec"]) <= HEAD_GROUP and "template" in cluster["headGroupSpec"]
    for group in cluster["workerGroupSpecs"]:
        assert set(group) <= WORKER_GROUP and {"groupName", "minReplicas", "maxReplicas", "template"} <= set(group)
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    # the cluster's Ray is the pinned one, in the image's base
    ray_version = pins(ROOT / "requirements-dev.lock")["ray"]
    assert cluster["rayVersion"] == ray_version
    dockerfile = (RAY_JOB / "Dockerfile").read_text()
    assert re.findall(r"^FROM (\S+)", dockerfile, re.M) == [f"rayproject/ray:{ray_version}-py311-cpu"]
    # the entrypoint is a facecrop command line, joining the cluster it runs on
    words = shlex.split(spec["entrypoint"])
    args = parser().parse_args(words[1:])
    assert words[0] == "facecrop" and args.command == "batch" and args.ray == "auto"
    # every pod: the image the Dockerfile builds, and a valid Kubernetes pod template
    templates = [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]
    built = re.search(r"-t (\S+) \.", dockerfile)[1]
    assert {c["image"] for t in templates for c in t["spec"]["containers"]} == {built}
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        yaml.safe_dump_all(
            {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"pod-{i}"}, "template": template}
            for i, template in enumerate(templates)
        )
    )
    result = run(str(BIN / "kubernetes-validate"), "--strict", "--quiet", str(pods))
    assert result.returncode == 0, result.stdout + result.stderr

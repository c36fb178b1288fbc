"""The stack in containers without a GPU: docker-compose.yml + docker-compose.cpu.yml.

`python -m local_triton.compose up|down` (`make up-cpu` / `make down-cpu`) and the compose
test share this. On a Debian machine, as root, from nothing installed:

- Docker: Debian's `docker.io` when there is no `dockerd`; the Compose and buildx plugins of
  Debian trixie (bookworm packages none) when `docker compose` is missing.
- `dockerd` is started only when no daemon answers; its pid goes to a file, and only a
  daemon recorded in such a file is ever stopped.
- Base images (the Dockerfiles' `FROM`s, the images of services without a build) are
  pulled; one that cannot be pulled gets a local stand-in under its name: a Debian root
  built by mmdebstrap from the host's apt sources, trusting the host's added CA
  certificates and using its pip index (the builds' pip goes out through the same network).

Standard library only: `make up-cpu` needs no virtual environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from local_triton import BUILD_DIR, PROJECT_ROOT

COMPOSE_FILES = ("docker-compose.yml", "docker-compose.cpu.yml")
PROJECT = "facecrop"
DAEMON_PID_FILE = BUILD_DIR / "docker" / "dockerd.pid"  # a dockerd started by `make up-cpu`
PLUGIN_PACKAGES = ("docker-compose", "docker-buildx")  # from trixie, into PLUGINS_DIR
PLUGINS_DIR = Path("/usr/local/lib/docker/cli-plugins")
APT_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
ADDED_CA_CERTIFICATES = Path("/usr/local/share/ca-certificates")  # update-ca-certificates' local ones
# Every command is bounded, so that a daemon stuck in the kernel fails `make up-cpu` or the test
# instead of hanging it (seconds).
QUICK_TIMEOUT_S = 120  # `docker info`, inspect, exec, logs, stop, down: anything but the below
APT_TIMEOUT_S = 900  # one apt-get or mmdebstrap run
PULL_TIMEOUT_S = 120
DAEMON_START_S = 120
BUILD_TIMEOUT_S = 1800
WAIT_TIMEOUT_S = 600  # `up --wait`: until every service is healthy


@dataclass(frozen=True)
class StandIn:
    """A Debian root standing in for an image no registry serves here."""

    packages: tuple[str, ...]
    changes: tuple[str, ...]  # `docker import --change` instructions


STAND_INS = {
    # `python` and a `pip` that installs system-wide, as in the python image; venv; the shared
    # libpython that Triton's Python-backend stub links.
    "python:3.11.10-slim-bookworm": StandIn(
        ("python3", "python3-pip", "python3-venv", "python-is-python3", "libpython3.11"), ('CMD ["python3"]',)
    ),
    # nginx, and the `wget` of the proxy's health check.
    "nginx:1.27.2-alpine": StandIn(("nginx", "wget"), ('CMD ["nginx", "-g", "daemon off;"]',)),
}
STAND_IN_PACKAGES = ("ca-certificates",)
STAND_IN_CHANGES = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    "LABEL org.facecrop.stand-in=mmdebstrap",
)


def log(message: str) -> None:
    print(f"[compose] {message}", file=sys.stderr, flush=True)


def sh(
    *command: str, timeout: float = QUICK_TIMEOUT_S, capture: bool = False, check: bool = True, **kwargs
) -> subprocess.CompletedProcess:
    """Run `command` in a process group of its own, output captured or passed through, for at
    most `timeout` seconds: then the whole group is killed (a Docker CLI's plugins hold its
    pipes open after it dies) and RuntimeError says what timed out. With `check`, RuntimeError
    also when it fails, with its output's end."""
    pipe = subprocess.PIPE if capture else None
    process = subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True, start_new_session=True, **kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except BaseException as error:  # the timeout, or Ctrl-C: the group has no terminal of its own
        os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):  # stuck in the kernel: unkillable, left behind
            process.communicate(timeout=10)
        if isinstance(error, subprocess.TimeoutExpired):
            raise RuntimeError(f"`{' '.join(command)}` did not finish within {timeout:.0f} s{stuck()}") from None
        raise
    result = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if check and result.returncode:
        output = (stdout or "")[-3000:] + (stderr or "")[-3000:]
        raise RuntimeError(f"`{' '.join(command)}` exited with {result.returncode}\n{output}")
    return result


def succeeds(*command: str, timeout: float = QUICK_TIMEOUT_S) -> bool:
    try:
        return sh(*command, timeout=timeout, capture=True, check=False).returncode == 0
    except (OSError, RuntimeError):
        return False


def process_status(pid: int | str) -> tuple[str, str, list[str]] | None:
    """A process's name, state and the /proc/<pid>/stat fields after them (field 4 on, proc(5));
    None once it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, *fields = stat[stat.rindex(")") + 2 :].split()
    return stat[stat.index("(") + 1 : stat.rindex(")")], state, fields


def stuck() -> str:
    """What a timeout's likeliest causes look like: processes the kernel holds (state D, with where
    they wait), and user processes at a real-time policy, which starve everything else (an AV1
    encoder opened as root once made a test runner, and all it started, SCHED_FIFO 99)."""
    held, real_time = [], []
    for process in Path("/proc").glob("[0-9]*"):
        status = process_status(process.name)
        if status is None:
            continue
        name, state, fields = status
        parent, policy = fields[0], int(fields[37])  # stat fields 4 and 41
        if state == "D":
            with contextlib.suppress(OSError):
                held.append(f"{process.name} {name} waiting in {(process / 'wchan').read_text() or '?'}")
        if policy in (1, 2) and parent != "2":  # SCHED_FIFO, SCHED_RR; kernel threads' parent is 2
            real_time.append(f"{process.name} {name}")
    said = [f"processes stuck in the kernel: {', '.join(held)}"] if held else []
    said += [f"processes at a real-time policy: {', '.join(real_time)}"] if real_time else []
    return "".join(f"; {line}" for line in said)


# --- Docker, installed with apt -----------------------------------------------------------


def apt_install(*packages: str) -> None:
    log(f"apt-get install {' '.join(packages)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    sh("apt-get", "update", "-qq", env=env, timeout=APT_TIMEOUT_S)
    sh("apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages, env=env, timeout=APT_TIMEOUT_S)


def host_codename() -> str:
    return re.search(r"^VERSION_CODENAME=(\w+)", Path("/etc/os-release").read_text(), re.M).group(1)


def apt_sources() -> list[tuple[Path, str, list[str]]]:
    """The host's enabled apt entries: (file, URI, suites)."""
    directory = Path("/etc/apt/sources.list.d")
    entries = []
    for path in [
        Path("/etc/apt/sources.list"),
        *sorted(directory.glob("*.list")),
        *sorted(directory.glob("*.sources")),
    ]:
        text = path.read_text() if path.is_file() else ""
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^([\w-]+):[ \t]*(.*)$", stanza, re.M))
                if fields.get("Enabled", "yes") != "no" and "deb" in fields.get("Types", "").split():
                    entries += [(path, uri, fields.get("Suites", "").split()) for uri in fields.get("URIs", "").split()]
        else:
            entries += [(path, m[0], [m[1]]) for m in re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", text, re.M)]
    return entries


def install_docker() -> None:
    """Debian's docker.io if `dockerd` is missing; Compose and buildx if `docker compose` is."""
    if not shutil.which("dockerd"):
        apt_install("docker.io")
    if not succeeds("docker", "compose", "version"):
        install_trixie_plugins()


def install_trixie_plugins() -> None:
    """The docker-compose and docker-buildx packages of Debian trixie, unpacked into Docker's
    plugin directory (not installed with dpkg: they would pull trixie's Docker along)."""
    codename = host_codename()
    mirror = next(uri for _, uri, suites in apt_sources() if codename in suites)
    log(f"Compose and buildx plugins from trixie ({mirror})")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # apt downloads as its `_apt` user
        for directory in ("lists/partial", "parts", "debs"):
            (work / directory).mkdir(parents=True)
        (work / "trixie.list").write_text(f"deb [signed-by={APT_KEYRING}] {mirror} trixie main\n")
        apt = ["apt-get", "-qq"] + [
            f"-oDir::{key}={value}"
            for key, value in {
                "Etc::SourceList": work / "trixie.list",
                "Etc::SourceParts": work / "parts",
                "State::Lists": work / "lists",
                "Cache::pkgcache": "",
                "Cache::srcpkgcache": "",
            }.items()
        ]
        sh(*apt, "update", timeout=APT_TIMEOUT_S)
        sh(*apt, "download", *PLUGIN_PACKAGES, cwd=work / "debs", timeout=APT_TIMEOUT_S)
        for deb in (work / "debs").glob("*.deb"):
            sh("dpkg-deb", "-x", str(deb), str(work / "root"))
        PLUGINS_DIR.mkdir(parents=True, exist_ok=True)
        for plugin in (work / "root" / "usr" / "libexec" / "docker" / "cli-plugins").iterdir():
            shutil.copy2(plugin, PLUGINS_DIR / plugin.name)


# --- the daemon ---------------------------------------------------------------------------


def daemon_answers() -> bool:
    return succeeds("docker", "info", timeout=30)


def start_daemon(pid_file: Path) -> bool:
    """Start `dockerd` unless a daemon answers, recording its pid in `pid_file` (its log
    beside it); True if it was started here."""
    if daemon_answers():
        return False
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log_path = pid_file.with_suffix(".log")
    log(f"starting dockerd (log: {log_path})")
    with open(log_path, "ab") as output:
        daemon = subprocess.Popen(
            ["dockerd", "--storage-driver", "overlay2"],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pid_file.write_text(f"{daemon.pid}\n")
    deadline = time.monotonic() + DAEMON_START_S
    while not daemon_answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"dockerd did not start{stuck()}:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.5)
    return True


def running_dockerd(pid: int) -> bool:
    """Whether `pid` is a live (not zombie) dockerd."""
    status = process_status(pid)
    return status is not None and status[0] == "dockerd" and status[1] != "Z"


def stop_daemon(pid_file: Path) -> None:
    """Stop the dockerd that start_daemon recorded in `pid_file`, if there is one."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    if running_dockerd(pid):
        log(f"stopping dockerd {pid}")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while running_dockerd(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if running_dockerd(pid):
            log(f"dockerd {pid} still runs a minute after SIGTERM: SIGKILL")
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink()


# --- base images: pulled, else stand-ins --------------------------------------------------


def compose_command(project: str) -> list[str]:
    files = [arg for name in COMPOSE_FILES for arg in ("--file", str(PROJECT_ROOT / name))]
    return ["docker", "compose", "--project-name", project, *files]


def dockerfile_bases(dockerfile: Path) -> list[str]:
    """The images a Dockerfile's `FROM` lines name (not its own earlier stages)."""
    stages: set[str] = set()
    images = []
    for image, stage in re.findall(
        r"^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", dockerfile.read_text(), re.M | re.I
    ):
        if image not in stages and image not in images:
            images.append(image)
        if stage:
            stages.add(stage)
    return images


def base_images() -> list[str]:
    """Every image the CPU stack builds from or runs unbuilt."""
    config = json.loads(sh(*compose_command(PROJECT), "config", "--format", "json", capture=True).stdout)
    images: set[str] = set()
    for service in config["services"].values():
        build = service.get("build")
        if build:
            images.update(dockerfile_bases(Path(build["context"]) / build.get("dockerfile", "Dockerfile")))
        else:
            images.add(service["image"])
    return sorted(images)


def pulled(image: str) -> bool:
    log(f"pulling {image}")
    try:
        return sh("docker", "pull", "--quiet", image, timeout=PULL_TIMEOUT_S, check=False).returncode == 0
    except RuntimeError as timed_out:
        log(str(timed_out))
        return False


def ensure_base_images() -> None:
    """Each base image present, pulled, or (only where the pull fails) a local stand-in."""
    for image in base_images():
        if not succeeds("docker", "image", "inspect", image) and not pulled(image):
            if image not in STAND_INS:
                raise RuntimeError(f"{image} cannot be pulled and has no stand-in recipe in {__name__}.STAND_INS")
            build_stand_in(image, STAND_INS[image])


def pip_index_settings() -> list[str]:
    """The host pip's http(s) `index-url` / `extra-index-url` settings (file:// ones stay
    on the host), as pip.conf lines; the environment's first, as pip ranks them."""
    listing = sh(sys.executable, "-m", "pip", "config", "list", capture=True, check=False).stdout
    found = dict(re.findall(r"^(\S+)='(.*)'$", listing, re.M))
    lines = []
    for key in ("index-url", "extra-index-url"):
        value = next(
            (found[f"{scope}.{key}"] for scope in (":env:", "install", "global") if f"{scope}.{key}" in found), ""
        )
        urls = [url for url in value.split() if url.startswith(("http://", "https://"))]
        if urls:
            lines.append(f"{key} = {' '.join(urls)}")
    return lines


def build_stand_in(image: str, recipe: StandIn) -> None:
    """mmdebstrap a minimal Debian root of the host's release from its apt sources, with
    the host's added CA certificates and pip settings, and import it as `image`."""
    if not shutil.which("mmdebstrap"):
        apt_install("mmdebstrap")
    codename = host_codename()
    sources = sorted({str(path) for path, _, suites in apt_sources() if any(s.startswith(codename) for s in suites)})
    log(f"building a stand-in for {image} (Debian {codename}: {', '.join(recipe.packages)})")
    with tempfile.TemporaryDirectory() as tmp:
        pip_conf = Path(tmp) / "pip.conf"
        settings = ["cert = /etc/ssl/certs/ca-certificates.crt", "break-system-packages = true", *pip_index_settings()]
        pip_conf.write_text("\n".join(["[global]", *settings, ""]))
        hooks = [f"upload {pip_conf} /etc/pip.conf"]
        if ADDED_CA_CERTIFICATES.is_dir():
            hooks.append(f"copy-in {ADDED_CA_CERTIFICATES} {ADDED_CA_CERTIFICATES.parent}")
        hooks.append('chroot "$1" update-ca-certificates')
        rootfs = subprocess.Popen(
            ["mmdebstrap", "--quiet", "--variant=minbase", "--include=" + ",".join(STAND_IN_PACKAGES + recipe.packages)]
            + [f"--customize-hook={hook}" for hook in hooks]
            + [codename, "-", *sources],
            stdout=subprocess.PIPE,
            start_new_session=True,  # on failure mmdebstrap signals its whole process group
        )
        changes = [f"--change={change}" for change in STAND_IN_CHANGES + recipe.changes]
        try:
            importing = ("docker", "import", *changes, "-", image)
            imported = sh(*importing, stdin=rootfs.stdout, capture=True, check=False, timeout=APT_TIMEOUT_S)
        finally:
            rootfs.stdout.close()
            if rootfs.poll() is None:  # the import failed or timed out: mmdebstrap has no reader left
                os.killpg(rootfs.pid, signal.SIGKILL)
        if rootfs.wait(timeout=QUICK_TIMEOUT_S) or imported.returncode:
            raise RuntimeError(
                f"stand-in for {image} failed: mmdebstrap {rootfs.returncode}, docker import: {imported.stderr}"
            )


# --- the stack ----------------------------------------------------------------------------


def prepare(pid_file: Path) -> bool:
    """Docker installed and answering, every base image at hand; True if dockerd was started here."""
    install_docker()
    started = start_daemon(pid_file)
    ensure_base_images()
    return started


def compose(
    project: str,
    *args: str,
    env: dict[str, str] | None = None,
    capture: bool = False,
    timeout: float = QUICK_TIMEOUT_S,
) -> subprocess.CompletedProcess:
    return sh(*compose_command(project), *args, env=env, capture=capture, cwd=PROJECT_ROOT, timeout=timeout)


def build(project: str, env: dict[str, str] | None = None) -> None:
    compose(project, "build", env=env, timeout=BUILD_TIMEOUT_S)


def up(project: str, *args: str, env: dict[str, str] | None = None) -> None:
    compose(
        project,
        *("up", "--detach", "--wait", "--wait-timeout", str(WAIT_TIMEOUT_S), *args),
        env=env,
        timeout=WAIT_TIMEOUT_S + QUICK_TIMEOUT_S,
    )


def main(argv: list[str]) -> int:
    if argv == ["up"]:
        prepare(DAEMON_PID_FILE)
        build(PROJECT)
        up(PROJECT)
        port = os.environ.get("FACECROP_PORT", "8080")
        log(f"facecrop (CPU) is up on http://127.0.0.1:{port}; `make down-cpu` removes it")
    elif argv == ["down"]:
        if daemon_answers():
            compose(PROJECT, "down", "--volumes")
        stop_daemon(DAEMON_PID_FILE)
    else:
        print("usage: python -m local_triton.compose up|down", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

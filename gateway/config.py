"""All gateway settings, read once from environment variables: each declared once below, with its
default and meaning (the source of the configuration reference, docs/configuration.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any

from gateway.detection import JointModel, Limits, check_served, joint_models, served_name
from gateway.framing.placement import SIZE_POWER
from gateway.imaging.animation import MAX_ANIMATION_PIXELS
from gateway.imaging.decode import MAX_SIDE
from gateway.params import MAX_CROP_SIDE

ALLOWED_SOURCE = re.compile(r"^https?://[^/?#@]+/", re.IGNORECASE)  # imgproxy's rule: the host ends with /
PREFIX = "FACECROP_"


def setting(default: Any, meaning: str, shown: str | None = None) -> Any:
    """A Settings field read from FACECROP_<NAME>; `shown`: the default as the reference says it."""
    metadata = {"meaning": meaning, "shown": shown}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    """Gateway configuration: each field is read from FACECROP_ and its name in capitals."""

    triton_url: str = setting("127.0.0.1:8001", "Triton's gRPC address, host:port")
    wire_format: str = setting(
        "uint8",
        "tensor sent to Triton: `uint8` (models `retinaface_uint8`, `yunet_n_uint8`; NHWC pixels, the model "
        "centres them) or `float32` (models `retinaface`, `yunet_n`; NCHW, centred here)",
    )
    triton_shm: str = setting(
        "auto",
        "tensors through Triton's system shared memory: `auto` (where Triton can open this host's `/dev/shm`, "
        "else gRPC bytes), `on` (503 without it), `off` (bytes)",
    )
    detectors: tuple[str, ...] = setting(
        ("retinaface", "yunet"),
        "comma-separated face models served, fused where both run ([Detectors](detectors.md)); one alone "
        "runs at every `detail`",
    )
    model_names: Mapping[str, str] = setting(
        {},
        "comma-separated `model=name` pairs: a served model under another name in Triton's repository, e.g. "
        "`yunet_n_uint8=my_yunet` (your own ONNX with the same inputs and outputs; each model then gets its own "
        "request, unless `faces_uint8`, the ensemble of both, is renamed too); a model no wire format has, or a "
        "word without `=`, stops the gateway at start-up",
    )
    target_size: int = setting(1024, "long side images are scaled to (a multiple of 32)")
    pad_multiple: int = setting(
        32,
        "short side padded up to a multiple of this (a multiple of 32): 32 where the models run on CPU, whose time "
        "grows with every padded pixel; GPU hosts set 256 (docker-compose.yml, deploy/kubernetes), for few "
        "shapes that share batches and that the TensorRT profile and warmup cover "
        '(docs/architecture.md, "Resize policy")',
    )
    max_upload_bytes: int = setting(20 * 1024 * 1024, "largest request body (then 413)", "`20971520` (20 MiB)")
    max_pixels: int = setting(100_000_000, "largest width x height, checked from the header (Cloudflare's)")
    max_side: int = setting(MAX_SIDE, "longest side, checked from the header, and the URL form's largest output side")
    max_animation_frames: int = setting(
        1000,
        "most frames an animation kept as one (`anim=true`) may have, counted before any is decoded (as "
        "imgproxy's `IMGPROXY_MAX_ANIMATION_FRAMES`); more, or more than 50 MP of frames in (Cloudflare's) or "
        "out (frames x output size), answer 413 `image_too_large` (`anim=false` answers the first frame)",
    )
    infer_timeout_s: float = setting(10.0, "deadline of one inference call (then 504)")
    request_timeout_s: float = setting(
        30.0,
        "deadline of a request's processing from its arrival, checked between its steps and between an "
        "animation's frames (then 504 `processing_timeout`)",
    )
    ready_timeout_s: float = setting(1.0, "deadline of Triton's readiness check behind `/readyz`")
    max_in_flight: int = setting(
        16,
        "requests one worker decodes, runs the models for and encodes at once (the API's, and the URL "
        "form's once their source is here); more get 429 with `Retry-After` at once",
    )
    max_pixels_in_flight: int = setting(
        100_000_000,
        "pixels one worker's requests hold at once (each its source's or its output's, the larger, times an "
        "animation's frames): one that would go over waits, in arrival order, for those before it, up to its "
        "deadline (504); one larger than this runs alone. Bounds a worker's memory in bursts of large photos "
        "([Operating](operating.md#memory-per-request))",
        "`100000000` (`FACECROP_MAX_PIXELS`'s: never more than the largest image alone; eight 12 MP photos)",
    )
    api_keys: tuple[str, ...] = setting(
        (), "comma-separated keys required as `Authorization: Bearer KEY` on the API (none: no authentication)"
    )
    cors_origins: tuple[str, ...] = setting(
        (), "comma-separated browser origins allowed to call the API (none: CORS off)"
    )
    origin: str = setting(
        "",
        "where the URL form's relative sources are read: an `http(s)://` base URL or a directory (none: only "
        "absolute sources)",
        "none (`make serve`: `originals/`; compose: `./originals` mounted at `/srv/originals`)",
    )
    allowed_sources: tuple[str, ...] = setting(
        (), "comma-separated URL prefixes (host ending in `/`) absolute sources must start with; `*`: any host"
    )
    allow_private_sources: bool = setting(
        False, "absolute sources and redirects may reach loopback, private and link-local addresses"
    )
    url_key: bytes = setting(b"", "hex; with a key, every URL of the URL form must be signed")
    url_salt: bytes = setting(b"", "hex; the salt signatures are computed with")
    allow_unsigned_urls: bool = setting(False, "unsigned URLs even where API keys are set")
    source_connect_timeout_s: float = setting(3.0, "connecting to an origin")
    source_timeout_s: float = setting(
        10.0,
        "a whole source fetch on the wall clock: name lookups, connecting, redirects, headers, 1xx answers, "
        "body, chunk lines and trailers",
    )
    fetch_concurrency: int = setting(
        8,
        "sources one worker fetches at once (apart from `FACECROP_MAX_IN_FLIGHT`: a fetch holds no slot "
        "while it waits); more get 503 `origin_busy` with `Retry-After` at once",
    )
    fetch_per_origin: int = setting(4, "of those, from one origin (scheme, host and port)")
    source_breaker_failures: int = setting(
        5,
        "failures in a row (timeouts, refused connections, 5xx, answers cut short) after which an origin is "
        "not asked again for a cool-down: 503 `origin_unavailable` at once",
    )
    source_breaker_cool_down_s: float = setting(30.0, "that cool-down, in seconds; then one request tries again")
    etag_secret: bytes = setting(
        b"",
        "hex; the key the URL form's ETags are sealed with: give every replica the same one, so that any of "
        "them answers 304 to the others' ETags",
        "`FACECROP_URL_KEY`, else one made when the gateway starts",
    )
    placement_power: float = setting(
        SIZE_POWER,
        "how far larger faces outweigh smaller ones where a crop cannot hold every face: each weighs its "
        "side relative to the largest's, to this power (chosen by `python -m bench.placement --candidates`)",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """Each field from its variable where set, else its default; more API keys from the file
        FACECROP_API_KEYS_FILE names."""
        values = {item.name: _parse(item, environ[variable(item)]) for item in fields(cls) if variable(item) in environ}
        keys_file = environ.get(API_KEYS_FILE)
        if keys_file:
            with open(keys_file, encoding="utf-8") as lines:
                values["api_keys"] = values.get("api_keys", ()) + _words(lines.read(), "\n")
        return cls(**values)

    def __post_init__(self) -> None:
        """Refuse settings the models cannot run with (their strides need multiples of 32), on
        construction."""
        check_served(self.detectors, self.wire_format, self.model_names)
        if self.triton_shm not in ("auto", "on", "off"):
            raise ValueError("FACECROP_TRITON_SHM must be one of auto, on, off")
        for name in (
            "max_in_flight",
            "max_pixels_in_flight",
            "fetch_concurrency",
            "fetch_per_origin",
            "source_breaker_failures",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"FACECROP_{name.upper()} must be at least 1")
        if self.target_size <= 0 or self.target_size % 32:
            raise ValueError("FACECROP_TARGET_SIZE must be a positive multiple of 32")
        if self.pad_multiple <= 0 or self.pad_multiple % 32:
            raise ValueError("FACECROP_PAD_MULTIPLE must be a positive multiple of 32")
        for prefix in self.allowed_sources:
            if prefix != "*" and not ALLOWED_SOURCE.match(prefix):
                raise ValueError(
                    f"FACECROP_ALLOWED_SOURCES: {prefix!r} must be * or an http(s):// prefix whose host ends with /"
                )

    def model_name(self, detector: str) -> str:
        """The Triton model serving `detector` in this wire format."""
        return served_name(detector, self.wire_format, self.model_names)

    def joint_models(self) -> tuple[JointModel, ...]:
        """The joint models that answer for their parts in one request (the repository's ensembles)."""
        return joint_models(self.wire_format, self.model_names)

    def triton_name(self, model: str) -> str:
        """The name Triton has `model` under (FACECROP_MODEL_NAMES, else its own)."""
        return self.model_names.get(model, model)

    @property
    def limits(self) -> Limits:
        """What the detection takes of these settings."""
        return Limits(self.target_size, self.pad_multiple)


# Read by from_env beside the fields (name: default, meaning); gunicorn's own are in
# gateway/web/gunicorn.conf.py's VARIABLES.
API_KEYS_FILE = "FACECROP_API_KEYS_FILE"
OTHER_VARIABLES = {API_KEYS_FILE: ("", "a file with more API keys, one a line (a mounted secret)")}


def variable(item: Field) -> str:
    """The environment variable a Settings field is read from."""
    return PREFIX + item.name.upper()


LIMITS = {"max_animation_pixels": MAX_ANIMATION_PIXELS, "max_crop_side": MAX_CROP_SIDE}  # no setting, named in prose
NAMED = re.compile(r"\{([a-z_]+)\}")


def with_limits(text: str) -> str:
    """`text` with each {name} written out: a setting as its variable and default
    ("`FACECROP_MAX_PIXELS` = 100,000,000"), a constant of LIMITS as its value; so the
    errors' summaries say each limit from its one definition."""
    settings = {item.name: item for item in fields(Settings)}

    def written(match: re.Match) -> str:
        name = match.group(1)
        if name in LIMITS:
            return f"{LIMITS[name]:,}"
        item = settings[name]
        default = item.metadata["shown"] or f"{item.default:,}".removesuffix(".0")
        return f"`{variable(item)}` = {default}"

    return NAMED.sub(written, text)


def _parse(item: Field, text: str) -> Any:
    name = variable(item)
    kind = item.type
    if kind == "bool":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{name} must be true or false")
        return text.lower() == "true"
    if kind == "bytes":
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise ValueError(f"{name} must be hexadecimal") from None
    if kind == "tuple[str, ...]":
        return _words(text)
    if kind == "Mapping[str, str]":
        return _pairs(text, name)
    try:
        return {"int": int, "float": float, "str": str}[str(kind)](text)
    except ValueError:
        raise ValueError(f"{name} must be a{'n integer' if kind == 'int' else ' number'}, not {text!r}") from None


def _pairs(text: str, name: str) -> dict[str, str]:
    """`key=value` words as a dict; a word without `=` is refused by `name`."""
    words = _words(text)
    if any("=" not in word for word in words):
        raise ValueError(f"{name} takes comma-separated model=name pairs, e.g. yunet_n_uint8=my_yunet")
    return dict(word.split("=", 1) for word in words)


def _words(text: str, separator: str = ",") -> tuple[str, ...]:
    return tuple(word.strip() for word in text.split(separator) if word.strip())

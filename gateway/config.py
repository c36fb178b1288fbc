"""All gateway settings, read once from environment variables (documented defaults below)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.detection.detectors import KINDS, every_wire_format
from gateway.placement import SIZE_POWER
from gateway.triton.wire import WIRE_FORMAT_NAMES

ALLOWED_SOURCE = re.compile(r"^https?://[^/?#@]+/", re.IGNORECASE)  # imgproxy's rule: the host ends with /


@dataclass(frozen=True)
class Settings:
    """Gateway configuration; `from_env` documents each variable and its default."""

    triton_url: str = "127.0.0.1:8001"
    wire_format: str = "uint8"
    triton_shm: str = "auto"
    detectors: tuple[str, ...] = ("retinaface", "yunet")
    model_names: Mapping[str, str] = field(default_factory=dict)  # served model -> the name Triton has it under
    target_size: int = 1024
    pad_multiple: int = 256
    max_upload_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 100_000_000
    max_side: int = 12_000
    max_animation_frames: int = 1000
    infer_timeout_s: float = 10.0
    ready_timeout_s: float = 1.0
    max_in_flight: int = 16
    api_keys: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    origin: str = ""  # the URL form's relative sources: an http(s) base URL or a directory; "": none
    allowed_sources: tuple[str, ...] = ()
    allow_private_sources: bool = False
    url_key: bytes = b""
    url_salt: bytes = b""
    allow_unsigned_urls: bool = False
    source_connect_timeout_s: float = 3.0
    source_timeout_s: float = 10.0
    fetch_concurrency: int = 8
    fetch_per_origin: int = 4
    source_breaker_failures: int = 5
    source_breaker_cool_down_s: float = 30.0
    etag_secret: bytes = b""
    placement_power: float = SIZE_POWER

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """Read `FACECROP_*` variables, falling back to the defaults above.

        FACECROP_TRITON_URL        Triton gRPC address, host:port (127.0.0.1:8001)
        FACECROP_WIRE_FORMAT       tensor sent to Triton: uint8 (NHWC pixels; the model
                                   centres them) or float32 (NCHW, centred here) (uint8)
        FACECROP_TRITON_SHM        tensors to and from Triton through system shared memory:
                                   auto (where Triton can open this host's /dev/shm, else
                                   gRPC bytes), on (fail requests without it) or off (auto)
        FACECROP_DETECTORS         comma-separated face models to serve, fused where both run:
                                   retinaface, yunet (both; README, "Detectors")
        FACECROP_MODEL_NAMES       comma-separated model=name pairs: a served model under another
                                   name in Triton's repository (your own ONNX with the same
                                   inputs and outputs), e.g. yunet_n_uint8=my_yunet (none)
        FACECROP_TARGET_SIZE       long side, in pixels, images are scaled to (1024)
        FACECROP_PAD_MULTIPLE      short side padded up to a multiple of this (256)
        FACECROP_MAX_UPLOAD_BYTES  largest accepted request body (20 MiB)
        FACECROP_MAX_PIXELS        largest accepted width x height, from the header
                                   (100,000,000: Cloudflare's)
        FACECROP_MAX_SIDE          longest accepted side, from the header (12,000: Cloudflare's)
        FACECROP_MAX_ANIMATION_FRAMES  most frames an animation kept as one may have (1,000);
                                   more, or more than 50 MP of frames in or out, get 413
        FACECROP_INFER_TIMEOUT_S   deadline of one Triton inference call (10)
        FACECROP_READY_TIMEOUT_S   deadline of Triton's readiness check behind /readyz (1)
        FACECROP_MAX_IN_FLIGHT     API requests one worker process handles at once; more get
                                   429 with Retry-After at once (16)
        FACECROP_API_KEYS          comma-separated keys required as `Authorization: Bearer KEY`
                                   on the API (none: no authentication)
        FACECROP_API_KEYS_FILE     file with more keys, one a line (a mounted secret)
        FACECROP_CORS_ORIGINS      comma-separated origins allowed to call the API from a
                                   browser (none: CORS off)

        Serving by URL (GET /cdn-cgi/image/<options>/<source>; README, "Serve by URL"):
        FACECROP_ORIGIN            where relative sources are read: an http(s):// base URL or a
                                   directory (none: only absolute sources)
        FACECROP_ALLOWED_SOURCES   comma-separated URL prefixes absolute sources must start with,
                                   each host ending in `/`; `*` alone: any host (none: no
                                   absolute sources)
        FACECROP_ALLOW_PRIVATE_SOURCES  true: absolute sources (and redirects) may reach loopback,
                                   private and link-local addresses (false)
        FACECROP_URL_KEY, FACECROP_URL_SALT  hex; with a key, every URL must be signed (none)
        FACECROP_ALLOW_UNSIGNED_URLS  true: unsigned URLs also where API keys are set (false)
        FACECROP_SOURCE_CONNECT_TIMEOUT_S  connecting to an origin (3)
        FACECROP_SOURCE_TIMEOUT_S  a whole source fetch on the wall clock: name lookups,
                                   redirects, headers and body included (10)
        FACECROP_FETCH_CONCURRENCY  sources one worker process fetches at once; more get 503
                                   origin_busy with Retry-After at once (8); a fetch holds no
                                   FACECROP_MAX_IN_FLIGHT slot while it waits
        FACECROP_FETCH_PER_ORIGIN  of those, from one origin (scheme, host and port) (4)
        FACECROP_SOURCE_BREAKER_FAILURES  failures in a row (timeouts, refused connections,
                                   5xx) after which an origin is not asked again for a
                                   cool-down: 503 origin_unavailable at once (5)
        FACECROP_SOURCE_BREAKER_COOL_DOWN_S  that cool-down, in seconds (30)
        FACECROP_PLACEMENT_POWER   how far larger faces outweigh smaller ones where a crop cannot
                                   hold every face: each weighs (its side / the largest's) to
                                   this power (2; chosen by `python -m bench.placement --candidates`)
        FACECROP_ETAG_SECRET       hex; the key the URL form's ETags are sealed with: the same
                                   on every replica, so that any replica can answer 304 (none:
                                   FACECROP_URL_KEY's, else one made when the gateway starts)
        """
        return cls(
            triton_url=environ.get("FACECROP_TRITON_URL", cls.triton_url),
            wire_format=environ.get("FACECROP_WIRE_FORMAT", cls.wire_format),
            triton_shm=environ.get("FACECROP_TRITON_SHM", cls.triton_shm),
            detectors=_words(environ.get("FACECROP_DETECTORS", ",".join(cls.detectors))),
            model_names=_pairs(environ.get("FACECROP_MODEL_NAMES", ""), "FACECROP_MODEL_NAMES"),
            target_size=int(environ.get("FACECROP_TARGET_SIZE", cls.target_size)),
            pad_multiple=int(environ.get("FACECROP_PAD_MULTIPLE", cls.pad_multiple)),
            max_upload_bytes=int(environ.get("FACECROP_MAX_UPLOAD_BYTES", cls.max_upload_bytes)),
            max_pixels=int(environ.get("FACECROP_MAX_PIXELS", cls.max_pixels)),
            max_side=int(environ.get("FACECROP_MAX_SIDE", cls.max_side)),
            max_animation_frames=int(environ.get("FACECROP_MAX_ANIMATION_FRAMES", cls.max_animation_frames)),
            infer_timeout_s=float(environ.get("FACECROP_INFER_TIMEOUT_S", cls.infer_timeout_s)),
            ready_timeout_s=float(environ.get("FACECROP_READY_TIMEOUT_S", cls.ready_timeout_s)),
            max_in_flight=int(environ.get("FACECROP_MAX_IN_FLIGHT", cls.max_in_flight)),
            api_keys=_api_keys(environ),
            cors_origins=_words(environ.get("FACECROP_CORS_ORIGINS", "")),
            origin=environ.get("FACECROP_ORIGIN", ""),
            allowed_sources=_words(environ.get("FACECROP_ALLOWED_SOURCES", "")),
            allow_private_sources=_flag(environ, "FACECROP_ALLOW_PRIVATE_SOURCES"),
            url_key=_hex(environ, "FACECROP_URL_KEY"),
            url_salt=_hex(environ, "FACECROP_URL_SALT"),
            allow_unsigned_urls=_flag(environ, "FACECROP_ALLOW_UNSIGNED_URLS"),
            source_connect_timeout_s=float(
                environ.get("FACECROP_SOURCE_CONNECT_TIMEOUT_S", cls.source_connect_timeout_s)
            ),
            source_timeout_s=float(environ.get("FACECROP_SOURCE_TIMEOUT_S", cls.source_timeout_s)),
            fetch_concurrency=int(environ.get("FACECROP_FETCH_CONCURRENCY", cls.fetch_concurrency)),
            fetch_per_origin=int(environ.get("FACECROP_FETCH_PER_ORIGIN", cls.fetch_per_origin)),
            source_breaker_failures=int(environ.get("FACECROP_SOURCE_BREAKER_FAILURES", cls.source_breaker_failures)),
            source_breaker_cool_down_s=float(
                environ.get("FACECROP_SOURCE_BREAKER_COOL_DOWN_S", cls.source_breaker_cool_down_s)
            ),
            etag_secret=_hex(environ, "FACECROP_ETAG_SECRET"),
            placement_power=float(environ.get("FACECROP_PLACEMENT_POWER", cls.placement_power)),
        )

    def __post_init__(self) -> None:
        """Refuse settings the models cannot run with (their strides need multiples of 32), on
        construction."""
        if self.wire_format not in WIRE_FORMAT_NAMES:
            raise ValueError(f"FACECROP_WIRE_FORMAT must be one of {', '.join(WIRE_FORMAT_NAMES)}")
        unknown = [name for name in self.detectors if name not in KINDS]
        if unknown or not self.detectors or len(set(self.detectors)) < len(self.detectors):
            raise ValueError(f"FACECROP_DETECTORS must name some of {', '.join(KINDS)}, each once")
        known = {wire.model_name for wire in every_wire_format()}
        if set(self.model_names) - known:
            raise ValueError(f"FACECROP_MODEL_NAMES renames models among {', '.join(sorted(known))}")
        if self.triton_shm not in ("auto", "on", "off"):
            raise ValueError("FACECROP_TRITON_SHM must be one of auto, on, off")
        for name in ("max_in_flight", "fetch_concurrency", "fetch_per_origin", "source_breaker_failures"):
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
        return self.triton_name(KINDS[detector].wire_formats[self.wire_format].model_name)

    def triton_name(self, model: str) -> str:
        """The name Triton has `model` under (FACECROP_MODEL_NAMES, else its own)."""
        return self.model_names.get(model, model)


def _flag(environ: Mapping[str, str], name: str) -> bool:
    value = environ.get(name, "false").lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name} must be true or false")
    return value == "true"


def _hex(environ: Mapping[str, str], name: str) -> bytes:
    try:
        return bytes.fromhex(environ.get(name, ""))
    except ValueError:
        raise ValueError(f"{name} must be hexadecimal") from None


def _pairs(text: str, name: str) -> dict[str, str]:
    """`key=value` words as a dict; a word without `=` is refused by `name`."""
    words = _words(text)
    if any("=" not in word for word in words):
        raise ValueError(f"{name} takes comma-separated model=name pairs, e.g. yunet_n_uint8=my_yunet")
    return dict(word.split("=", 1) for word in words)


def _words(text: str, separator: str = ",") -> tuple[str, ...]:
    return tuple(word.strip() for word in text.split(separator) if word.strip())


def _api_keys(environ: Mapping[str, str]) -> tuple[str, ...]:
    keys = _words(environ.get("FACECROP_API_KEYS", ""))
    path = environ.get("FACECROP_API_KEYS_FILE")
    if path:
        with open(path, encoding="utf-8") as lines:
            keys += _words(lines.read(), "\n")
    return keys

"""The shared photos (../shared/faces) and images built from them, for tests and benchmarks."""

from __future__ import annotations

import io
import json
import struct
import zlib
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image

from local_triton.processes import SHARED_FACES

ASTRONAUT = "demo/skimage_astronaut.jpg"
CROWD = "demo/widertest_20_Family_Group_Family_Group_20_435.jpg"
STADIUM = "demo/biubug6_Pytorch_Retinaface_test.jpg"  # 30 faces found above 50 %, small and close together
# The astronaut's face, in pixels of the 512 x 512 photo (checked by eye on the picture).
ASTRONAUT_FACE = (178, 56, 93, 123)
# Masked faces on which the detector, at anonymize's 8 %, also reports two boxes of 10-18 % over
# twice the shorter side of the confident faces (measured 2026-11-25): the anonymize size rule's case.
UNSURE_AND_LARGE = "facemask/images/maksssksksss233.jpg"
# How a camera stores an upright picture under each EXIF orientation (the inverse of the view).
STORED_AS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}


class MissingSharedData(FileNotFoundError):
    """Labeled evaluation data (../shared/faces) that this checkout does not have beside it."""


def shared(relative: str) -> Path:
    """A file or folder of the shared labeled photos; MissingSharedData, saying where they come from,
    where it is not there."""
    path = SHARED_FACES / relative
    if not path.exists():
        raise MissingSharedData(
            f"{path} is missing: the project's labeled evaluation data (real photos and clips with ground "
            "truth, kept out of the repository by their licences), read from ../shared/faces beside the "
            "checkout or from $FACECROP_SHARED/faces"
        )
    return path


def photo(relative: str) -> Path:
    return shared(relative)


def photos_in(*folders: str) -> list[Path]:
    """The JPEG photos of each shared folder, in order (MissingSharedData where one is not there)."""
    return [path for folder in folders for path in sorted(shared(folder).glob("*.jpg"))]


def labeled_set(name: str) -> tuple[Path, list[dict]]:
    root = shared(name)
    return root / "images", json.loads((root / "gt.json").read_text())


def encoded(image: Image.Image, fmt: str, **kwargs) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares width x height (a decompression bomb's shape)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


@cache
def astronaut() -> Image.Image:
    return Image.open(photo(ASTRONAUT)).convert("RGB")


def astronauts_moved() -> dict[str, bytes]:
    """The astronaut rescaled (0.73x, 1x, 1.31x) and shifted by cutting 0, 3 or 7 pixels off the top
    left: one face whose box lands on every fraction of a pixel, as JPEG."""
    pictures = {}
    for scale in (0.73, 1.0, 1.31):
        side = round(512 * scale)
        resized = astronaut().resize((side, side), Image.Resampling.LANCZOS)
        for shift in (0, 3, 7):
            pictures[f"astronaut-{scale}-{shift}.jpg"] = encoded(resized.crop((shift, shift, side, side)), "JPEG")
    return pictures


MOVING_FACE_SIZE = (360, 300)
MOVING_FACE_SHIFTS = ((20, 30), (70, 40), (120, 60), (170, 90), (150, 130), (60, 120))  # the face's corner per frame


def moving_face_frames() -> tuple[list[Image.Image], list[tuple[int, int, int, int]]]:
    """Six frames of a textured ground with the astronaut's head moving across it, and where her
    face is in each (x, y, w, h): an animation whose every frame hides its own face."""
    rng = np.random.default_rng(3)
    noise = rng.integers(60, 200, (MOVING_FACE_SIZE[1] // 12, MOVING_FACE_SIZE[0] // 12, 3), dtype=np.uint8)
    ground = np.asarray(Image.fromarray(noise).resize(MOVING_FACE_SIZE, Image.Resampling.BICUBIC))  # soft blotches
    head = astronaut().crop((140, 20, 310, 200))  # 170 x 180, the face inside at (38, 36)
    frames, faces = [], []
    for x, y in MOVING_FACE_SHIFTS:
        frame = Image.fromarray(ground)
        frame.paste(head, (x, y))
        frames.append(frame)
        faces.append((x + ASTRONAUT_FACE[0] - 140, y + ASTRONAUT_FACE[1] - 20, ASTRONAUT_FACE[2], ASTRONAUT_FACE[3]))
    return frames, faces


def moving_face_animation() -> bytes:
    """`moving_face_frames` as a lossless animated WebP (100 ms a frame)."""
    frames, _ = moving_face_frames()
    return encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0, lossless=True)

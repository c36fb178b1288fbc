"""A set of product-style photos without faces, each with its subject's box known: what
`gravity=auto` is judged on (bench/options.py), as an e-commerce gallery would send it.

How it is made (at bench time, into build/faceless, never committed): the object photos shipped in
scikit-image's wheel (a coffee cup, a cat, a rocket, a motorcycle, coins, a colour chart, a
horse's silhouette, a clock face, bricks, a retina), downloaded from PyPI with pip (nothing is
installed), are cut to their object and pasted off-centre, at 22-40 % of the width, on studio
backdrops: a light gradient with film grain, a defocused texture, or a darker vignette. The
position, size and backdrop come from a seeded random generator, so every run makes the same
photos. Landscape (1200x800) and portrait (800x1200), 24 of each. The subject box is where the
object was pasted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from local_triton import BUILD_DIR

FOLDER = BUILD_DIR / "faceless"
WHEEL = "scikit-image==0.26.0"
# (file in skimage/data, the object's box in it as fractions x0, y0, x1, y1)
OBJECTS = {
    "coffee.png": (0.12, 0.05, 0.88, 0.85),
    "chelsea.png": (0.15, 0.0, 0.75, 1.0),
    "rocket.jpg": (0.25, 0.0, 0.7, 1.0),
    "motorcycle_left.png": (0.05, 0.1, 0.95, 0.95),
    "coins.png": (0.0, 0.0, 1.0, 1.0),
    "color.png": (0.0, 0.0, 1.0, 1.0),
    "horse.png": (0.0, 0.0, 1.0, 1.0),
    "clock_motion.png": (0.1, 0.05, 0.9, 0.95),
    "brick.png": (0.2, 0.2, 0.8, 0.8),
    "retina.jpg": (0.05, 0.05, 0.95, 0.95),
    "ihc.png": (0.1, 0.1, 0.9, 0.9),
    "gravel.png": (0.25, 0.25, 0.75, 0.75),
}
SHAPES = {"landscape": (1200, 800), "portrait": (800, 1200)}
PER_SHAPE = 24


@dataclass(frozen=True)
class Product:
    path: Path
    size: tuple[int, int]
    subject: tuple[int, int, int, int]  # x0, y0, x1, y1


def object_photos() -> dict[str, np.ndarray]:
    """The objects (BGR), cut from scikit-image's sample photos in its wheel (pip download only)."""
    wheels = BUILD_DIR / "wheels"
    if not list(wheels.glob("scikit_image-*.whl")):
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels), WHEEL], check=True
        )
    (wheel,) = wheels.glob("scikit_image-*.whl")
    objects = {}
    with zipfile.ZipFile(wheel) as archive:
        for name, (x0, y0, x1, y1) in OBJECTS.items():
            pixels = cv2.imdecode(np.frombuffer(archive.read(f"skimage/data/{name}"), np.uint8), cv2.IMREAD_COLOR)
            height, width = pixels.shape[:2]
            objects[name] = pixels[round(y0 * height) : round(y1 * height), round(x0 * width) : round(x1 * width)]
    return objects


def backdrop(size: tuple[int, int], kind: int, rng: np.random.Generator, texture: np.ndarray) -> np.ndarray:
    """A studio backdrop: a light gradient with grain, a defocused texture, or a vignette."""
    width, height = size
    if kind == 0:
        ramp = np.linspace(rng.uniform(200, 225), rng.uniform(230, 250), height, dtype=np.float32)[:, None, None]
        picture = np.broadcast_to(ramp, (height, width, 3)) + rng.normal(0, 3, (height, width, 3))
    elif kind == 1:
        picture = cv2.GaussianBlur(cv2.resize(texture, size).astype(np.float32), (0, 0), 25) * 0.5 + 100
    else:
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        distance = np.hypot((x - width / 2) / width, (y - height / 2) / height)
        picture = np.repeat((90 - 80 * distance)[..., None], 3, axis=2) + rng.normal(0, 2, (height, width, 3))
    return np.clip(picture, 0, 255).astype(np.uint8)


def products() -> list[Product]:
    """The set, made once into build/faceless (its index.json lists every photo and subject box)."""
    index = FOLDER / "index.json"
    if index.exists():
        return [
            Product(FOLDER / p["file"], tuple(p["size"]), tuple(p["subject"])) for p in json.loads(index.read_text())
        ]
    FOLDER.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(2026)
    objects = list(object_photos().values())
    made = []
    for shape, (width, height) in SHAPES.items():
        for number in range(PER_SHAPE):
            subject = objects[number % len(objects)]
            picture = backdrop((width, height), number % 3, rng, objects[(number + 5) % len(objects)])
            side = rng.uniform(0.22, 0.40) * width
            scale = side / max(subject.shape[:2])
            pasted = cv2.resize(
                subject,
                (round(subject.shape[1] * scale), round(subject.shape[0] * scale)),
                interpolation=cv2.INTER_AREA,
            )
            h, w = pasted.shape[:2]
            # off-centre: the subject's centre in the outer thirds of at least one axis
            x = int(rng.choice([rng.uniform(0, width / 3 - w / 2), rng.uniform(2 * width / 3 - w / 2, width - w)]))
            y = int(rng.uniform(0, height - h))
            x, y = min(max(0, x), width - w), min(max(0, y), height - h)
            picture[y : y + h, x : x + w] = pasted
            path = FOLDER / f"{shape}-{number:02d}.jpg"
            cv2.imwrite(str(path), picture, [cv2.IMWRITE_JPEG_QUALITY, 92])
            made.append(Product(path, (width, height), (x, y, x + w, y + h)))
    index.write_text(json.dumps([{"file": p.path.name, "size": p.size, "subject": p.subject} for p in made]))
    return made


def kept(window: tuple[int, int, int, int], subject: tuple[int, int, int, int]) -> float:
    """The share of the subject's box inside the crop `window` (x, y, w, h)."""
    x, y, w, h = window
    inside_w = max(0, min(x + w, subject[2]) - max(x, subject[0]))
    inside_h = max(0, min(y + h, subject[3]) - max(y, subject[1]))
    return inside_w * inside_h / ((subject[2] - subject[0]) * (subject[3] - subject[1]))

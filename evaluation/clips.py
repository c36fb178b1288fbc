"""Short test clips of real faces in motion, built the way ../shared/faces/video was: a moving,
zooming camera over a labeled crowd photo, libx264 at an ordinary quality, a 440 Hz AAC tone,
and the photo's ground-truth boxes moved with the camera (kept where the shorter side is at
least 10 px and at least 80 % of the box is inside the frame)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from evaluation.ap50 import ignored
from evaluation.images import labeled_set

MIN_SIDE = 10
MIN_INSIDE = 0.8
SAMPLE_RATE = 48000


def crowd_photo(min_faces: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """The first wider_val_native photo with at least `min_faces` counted faces, and those boxes."""
    images, truths = labeled_set("wider_val_native")
    for truth in truths:
        boxes = np.asarray(truth["boxes"], dtype=float).reshape(-1, 4)[~ignored(truth)]
        if len(boxes) >= min_faces:
            return cv2.imread(str(images / truth["image"])), boxes
    raise LookupError("no such crowd photo")


def camera(
    index: int, count: int, photo_size: tuple[int, int], frame_size: tuple[int, int]
) -> tuple[float, float, float]:
    """(x0, y0, scale): the window the camera sees in frame `index`, panning and zooming in."""
    width, height = photo_size
    progress = index / max(count - 1, 1)
    scale = frame_size[0] / width * (1 + 0.6 * progress)  # frame pixels per photo pixel
    seen_w, seen_h = frame_size[0] / scale, frame_size[1] / scale
    x0 = (width - seen_w) * (0.2 + 0.6 * progress)
    y0 = max(0.0, (height - seen_h) * (0.5 - 0.3 * progress))
    return x0, y0, scale


def moved_boxes(
    boxes: np.ndarray, x0: float, y0: float, scale: float, frame_size: tuple[int, int]
) -> list[list[float]]:
    moved = np.column_stack([(boxes[:, 0] - x0) * scale, (boxes[:, 1] - y0) * scale, boxes[:, 2:] * scale])
    kept = []
    for x, y, w, h in moved:
        inside_w = max(0.0, min(x + w, frame_size[0]) - max(x, 0.0))
        inside_h = max(0.0, min(y + h, frame_size[1]) - max(y, 0.0))
        if min(w, h) >= MIN_SIDE and inside_w * inside_h >= MIN_INSIDE * w * h:
            kept.append([round(float(v), 1) for v in (x, y, w, h)])
    return kept


def build_clip(
    path: Path,
    frames: int = 40,
    size: tuple[int, int] = (640, 360),
    fps: int = 25,
    variable_rate: bool = False,
    rotation: int = 0,
) -> dict:
    """Write the clip to `path` and return its ground truth ({"fps", "width", "height", "frames":
    [{"frame", "pts", "boxes"}]}). With `variable_rate`, every third frame lasts three ticks."""
    photo, boxes = crowd_photo()
    photo_size = (photo.shape[1], photo.shape[0])
    truth: dict = {"fps": fps, "width": size[0], "height": size[1], "frames": []}
    with av.open(str(path), "w") as output:
        video = output.add_stream("libx264", rate=fps, options={"crf": "23", "preset": "veryfast"})
        video.width, video.height, video.pix_fmt = size[0], size[1], "yuv420p"
        video.codec_context.time_base = Fraction(1, fps)
        if rotation:
            video.set_display_rotation(rotation)
        audio = output.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        ticks = sum(3 if variable_rate and index % 3 == 2 else 1 for index in range(frames))
        samples = np.arange(ticks * SAMPLE_RATE // fps) / SAMPLE_RATE
        tone = av.AudioFrame.from_ndarray(
            (0.2 * np.sin(2 * np.pi * 440 * samples)).astype(np.float32)[None], format="fltp", layout="mono"
        )
        tone.sample_rate, tone.pts = SAMPLE_RATE, 0
        output.mux(audio.encode(tone))  # first: the header needs the AAC encoder opened
        output.mux(audio.encode(None))
        pts = 0
        for index in range(frames):
            x0, y0, scale = camera(index, frames, photo_size, size)
            affine = np.array([[scale, 0, -x0 * scale], [0, scale, -y0 * scale]])
            pixels = cv2.warpAffine(photo, affine, size, flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REFLECT)
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts, frame.time_base = pts, Fraction(1, fps)
            output.mux(video.encode(frame))
            truth["frames"].append({"frame": index, "pts": pts, "boxes": moved_boxes(boxes, x0, y0, scale, size)})
            pts += 3 if variable_rate and index % 3 == 2 else 1
        output.mux(video.encode(None))
    path.with_suffix(".json").write_text(json.dumps(truth))
    return truth

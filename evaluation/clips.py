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


def turned_clockwise(boxes: list[list[float]], size: tuple[int, int], turns: int) -> list[list[float]]:
    """(x, y, w, h) boxes of a picture of `size` (W, H), in it turned `turns` quarter turns clockwise."""
    width, height = size
    for _ in range(turns):
        boxes = [[height - y - h, x, h, w] for x, y, w, h in boxes]
        width, height = height, width
    return boxes


def build_clip(
    path: Path,
    frames: int = 40,
    size: tuple[int, int] = (640, 360),
    fps: int = 25,
    variable_rate: bool = False,
    rotation: int = 0,
    stored_turned: bool = False,
) -> dict:
    """Write the clip to `path` and return its ground truth ({"fps", "width", "height", "frames":
    [{"frame", "pts", "boxes"}]}, in stored pixels). With `variable_rate`, every third frame lasts
    three ticks. `rotation` is the display rotation (degrees counterclockwise, a multiple of 90);
    with `stored_turned` the frames are stored turned the other way, so that players show them
    upright, as a phone stores a portrait video (else they show turned)."""
    photo, boxes = crowd_photo()
    photo_size = (photo.shape[1], photo.shape[0])
    turns = (rotation // 90) % 4 if stored_turned else 0  # quarter turns clockwise, shown to stored
    stored = (size[1], size[0]) if turns % 2 else size
    truth: dict = {"fps": fps, "width": stored[0], "height": stored[1], "frames": []}
    with av.open(str(path), "w") as output:
        video = output.add_stream("libx264", rate=fps, options={"crf": "23", "preset": "veryfast"})
        video.width, video.height, video.pix_fmt = stored[0], stored[1], "yuv420p"
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
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(np.rot90(pixels, -turns)), format="bgr24")
            frame.pts, frame.time_base = pts, Fraction(1, fps)
            output.mux(video.encode(frame))
            shown = moved_boxes(boxes, x0, y0, scale, size)
            truth["frames"].append({"frame": index, "pts": pts, "boxes": turned_clockwise(shown, size, turns)})
            pts += 3 if variable_rate and index % 3 == 2 else 1
        output.mux(video.encode(None))
    path.with_suffix(".json").write_text(json.dumps(truth))
    return truth

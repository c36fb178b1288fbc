"""gravity=auto on a picture without faces: where its subject is. The picture, shrunk to SIDE pixels,
is marked where it has the most detail: its strongest FEATURES corners (Shi and Tomasi's, as
thumbor's feature detector finds them); the crop window then goes where it holds the most of them
(of windows within TIE of the best, the one nearest their centre of mass).

Chosen by measurement (`python -m bench.options --candidates`): on product-style photos whose
subject is known (bench/faceless.py), these corners kept more of the subject than Cloudflare's
maximum symmetric surround saliency, edge and spectral residual maps, libvips' attention and
entropy, and the centre. A few milliseconds, whatever the source.
"""

from __future__ import annotations

import cv2
import numpy as np

SIDE = 128
FEATURES, QUALITY, SPACING = 50, 0.04, 1
TIE = 0.02


def feature_map(pixels: np.ndarray) -> np.ndarray:
    """Counts of the strongest corners of BGR `pixels`, on a grid of SIDE pixels on the longer side."""
    height, width = pixels.shape[:2]
    scale = min(1.0, SIDE / max(height, width))
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    grey = cv2.cvtColor(cv2.resize(pixels, size, interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY)
    counts = np.zeros(grey.shape, np.float64)
    corners = cv2.goodFeaturesToTrack(grey, FEATURES, QUALITY, SPACING)
    if corners is not None:
        for x, y in corners.reshape(-1, 2).astype(int):
            counts[y, x] += 1
    return counts


def best_window(weights: np.ndarray, window: tuple[float, float], size: tuple[int, int]) -> tuple[float, float]:
    """Where (x, y in 0-1 of the picture) to centre a `window` (W, H, in pixels of a picture of
    `size`) to hold the most of `weights` (a map of that picture at any resolution): of the windows
    within TIE of the best, the one nearest the weights' centre of mass."""
    rows, columns = weights.shape
    span_x = min(columns, max(1, round(window[0] / size[0] * columns)))
    span_y = min(rows, max(1, round(window[1] / size[1] * rows)))
    total = cv2.integral(weights.astype(np.float64))
    held = total[span_y:, span_x:] - total[:-span_y, span_x:] - total[span_y:, :-span_x] + total[:-span_y, :-span_x]
    best = np.argwhere(held >= held.max() * (1 - TIE))
    mass = float(weights.sum())
    if mass > 0:
        y, x = np.mgrid[0:rows, 0:columns]
        centre = np.array(
            [((y + 0.5) * weights).sum() / mass - span_y / 2, ((x + 0.5) * weights).sum() / mass - span_x / 2]
        )
    else:
        centre = (np.array(held.shape) - 1) / 2
    top, left = best[np.argmin(np.abs(best - centre).sum(axis=1))]
    return float((left + span_x / 2) / columns), float((top + span_y / 2) / rows)


def salient_focus(pixels: np.ndarray, window: tuple[float, float], size: tuple[int, int]) -> tuple[float, float]:
    """Where to centre a crop `window` of a picture of `size` (BGR `pixels` of it, at any resolution)
    to hold its subject."""
    return best_window(feature_map(pixels), window, size)

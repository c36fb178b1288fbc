"""Where a crop window goes when it cannot hold every face: the same-size window placed to keep
the most faces whole, the largest first, with no edge through a face where a shift avoids it.

Along each axis on which the window is shorter than the box around the faces, every offset that
could change the answer is a candidate: where an edge meets a face's edge, from inside or
outside (at most four per face), and the centred offset. Each candidate is scored with sorted
sweeps (binary searches over cumulative weights), not a candidate-by-face matrix, so a crowd of
700 faces costs microseconds. Sizes are (width, height); boxes are corner boxes [K, 4].
"""

from __future__ import annotations

import numpy as np

# A face's weight is its shorter side relative to the largest face's, to this power: the main
# subject outweighs a background crowd of faces a third its size or smaller (docs/api/crop.md, "Geometry");
# FACECROP_PLACEMENT_POWER sets it, chosen through the service (bench/placement.py --candidates).
SIZE_POWER = 2
WEIGHT_SCALE = 1000  # weights are whole numbers (exact sums and ties); the smallest face weighs 1


def face_weights(boxes: np.ndarray, power: float = SIZE_POWER) -> np.ndarray:
    """Whole-number weights [K]: WEIGHT_SCALE * (shorter side / the largest face's) ** power, at least 1."""
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    relative = sides / max(float(sides.max()), 1e-9)
    return np.maximum(1, np.round(WEIGHT_SCALE * relative**power)).astype(np.int64)


def _totals(weights: np.ndarray, order: np.ndarray) -> np.ndarray:
    """[K + 1]: the total weight of the first 0..K faces in `order`."""
    return np.concatenate([[0], np.cumsum(weights[order])])


def best_offset(
    starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, length: int, limit: int, centred: int
) -> int:
    """The offset in [0, limit] of a window `length` long, for faces spanning [starts, ends] along
    the axis: the most face weight whole inside, then the least weight cut by an edge, then the
    offset nearest `centred`. A face longer than the window counts neither way (it is cut wherever
    the window overlaps it): where no face fits, the window stays centred."""
    candidates = np.concatenate(
        [
            np.ceil(ends - length),  # the far edge at a face's far side: the face just inside
            np.floor(starts),  # the near edge at a face's near side: the face just inside
            np.ceil(ends),  # the near edge just past a face: the face just outside
            np.floor(starts - length),  # the far edge just before a face: the face just outside
            [centred],
        ]
    )
    offsets = np.clip(candidates, 0, limit)
    by_start, by_end = np.argsort(starts), np.argsort(ends)
    sorted_starts, sorted_ends = starts[by_start], ends[by_end]
    # faces starting before a point, and faces ending at or before it, by binary search
    started = np.searchsorted(sorted_starts, offsets, side="left")
    started_by_far_edge = np.searchsorted(sorted_starts, offsets + length, side="left")
    ended = np.searchsorted(sorted_ends, offsets, side="right")
    ended_by_far_edge = np.searchsorted(sorted_ends, offsets + length, side="right")
    fitting = np.where(ends - starts <= length, weights, 0)  # only these can be whole
    # whole: end - length <= offset <= start; overlapping: start - length < offset < end
    whole = _totals(fitting, by_end)[ended_by_far_edge] - _totals(fitting, by_start)[started]
    overlapping = _totals(fitting, by_start)[started_by_far_edge] - _totals(fitting, by_end)[ended]
    cut = overlapping - whole
    best = whole == whole.max()
    best &= cut == cut[best].min()
    return int(offsets[best][np.argmin(np.abs(offsets[best] - centred))])


def place_for_faces(
    origin: tuple[int, int],
    size: tuple[int, int],
    boxes: np.ndarray,
    image: tuple[int, int],
    power: float = SIZE_POWER,
) -> tuple[int, int]:
    """The window's top-left corner: `origin` (the centred placement) moved, along each axis where
    the window is shorter than the faces' span, to keep the most faces whole (`best_offset`),
    counting only the faces whole along the other axis at the corner as it stands (centred, or
    moved along the first axis). `power`: see face_weights."""
    corner = list(origin)
    weights = face_weights(boxes, power)
    for axis in (0, 1):
        starts, ends = boxes[:, axis], boxes[:, axis + 2]
        if ends.max() - starts.min() <= size[axis] or size[axis] >= image[axis]:
            continue
        other = 1 - axis
        inside = (boxes[:, other] >= corner[other]) & (boxes[:, other + 2] <= corner[other] + size[other])
        if inside.any():
            limit = image[axis] - size[axis]
            corner[axis] = best_offset(starts[inside], ends[inside], weights[inside], size[axis], limit, corner[axis])
    return corner[0], corner[1]

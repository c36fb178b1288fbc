"""Face-aware crop geometry (Cloudflare Images' gravity=face with zoom, and its fits) and the crop itself.

All geometry is in the pixels of the picture the window is cut from: the source upright (after
EXIF orientation), then trimmed, flipped and rotated as asked (gateway/imaging/geometry.py); sizes
are (width, height).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np

from gateway.framing.placement import SIZE_POWER, place_for_faces
from gateway.imaging.decode import DecodedImage
from gateway.imaging.geometry import cut_scaled
from gateway.params import CropOptions, Gravity


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class CropPlan:
    region: Rect  # what is cut out of the (turned) picture
    output: tuple[int, int]  # (width, height) the region is resized to
    canvas: tuple[int, int] | None = None  # fit=pad: the returned picture, the output centred on it

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the returned picture."""
        return self.canvas or self.output

    @property
    def source_scale(self) -> float:
        """The fraction of each of the picture's sides the output needs (at most 1: no more than it has)."""
        return min(1.0, max(self.output[0] / self.region.width, self.output[1] / self.region.height))


def framed_faces(boxes: np.ndarray, faces: str) -> np.ndarray:
    """The faces [K, 4] the crop must frame: every one (`all`) or the largest one."""
    if faces == "largest" and len(boxes):
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        return boxes[[int(np.argmax(areas))]]
    return boxes


def in_whole_pixels(boxes: np.ndarray, image: tuple[int, int]) -> np.ndarray:
    """Corner boxes [K, 4] rounded outward to whole pixels, inside the image (width, height): a
    window of whole pixels holds a face exactly where it holds its box here, so a window as large as
    the faces, zoom=1, is never a pixel short of them."""
    width, height = image
    rounded = np.concatenate([np.floor(boxes[:, :2]), np.ceil(boxes[:, 2:])], axis=1)
    return np.clip(rounded, 0, [width, height, width, height])


def face_box(boxes: np.ndarray) -> np.ndarray | None:
    """Corner box (x1, y1, x2, y2) holding every face of `boxes`; None if there is none."""
    if not len(boxes):
        return None
    return np.concatenate([boxes[:, :2].min(axis=0), boxes[:, 2:].max(axis=0)])


def focal_point(box: np.ndarray | None, gravity: Gravity, image: tuple[int, int]) -> tuple[float, float]:
    """The face box's centre where the gravity follows faces and there is one; else its point."""
    width, height = image
    if gravity.follows != "point" and box is not None:
        return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    fx, fy = gravity.point
    return fx * width, fy * height


def region_size(box: np.ndarray | None, zoom: float, image: tuple[int, int]) -> tuple[float, float]:
    """`d / zoom` for each side, capped by the image; the whole image without a face box or at zoom 0."""
    width, height = image
    if box is None or zoom == 0:
        return float(width), float(height)
    return min((box[2] - box[0]) / zoom, width), min((box[3] - box[1]) / zoom, height)


def widen_to_aspect(size: tuple[float, float], aspect: float, image: tuple[int, int]) -> tuple[float, float]:
    """Grow one side so width / height == `aspect`; if that overflows the image, the largest such region that fits."""
    width, height = size
    if width < height * aspect:  # not width / height: a face box at the image's edge can be 0 high
        width = height * aspect
    else:
        height = width / aspect
    if width > image[0] or height > image[1]:
        width, height = (
            (image[1] * aspect, float(image[1]))
            if image[0] / image[1] > aspect
            else (float(image[0]), image[0] / aspect)
        )
    return width, height


def place(size: tuple[float, float], focal: tuple[float, float], image: tuple[int, int]) -> Rect:
    """Centre a region of `size` on `focal`, then shift it to lie inside the image (whole pixels)."""
    width = min(max(1, round(size[0])), image[0])
    height = min(max(1, round(size[1])), image[1])
    x = min(max(round(focal[0] - width / 2), 0), image[0] - width)
    y = min(max(round(focal[1] - height / 2), 0), image[1] - height)
    return Rect(x, y, width, height)


def output_size(region: Rect, options: CropOptions) -> tuple[int, int]:
    """The size the region is resized to, by fit (with one of width and height, the other follows
    the region's aspect ratio; with neither, the region's own size):

    cover, crop, squeeze   exactly width x height
    aspect-crop            that, shrunk to the region's size where it is smaller (never enlarged)
    contain, pad           the region scaled to fit inside width x height
    scale-down             the same, never enlarged
    scale-up               the same, never shrunk
    """
    if options.width is None and options.height is None:
        return region.width, region.height
    if options.fit in ("contain", "pad", "scale-down", "scale-up"):
        scale = min(
            side / own for side, own in ((options.width, region.width), (options.height, region.height)) if side
        )
        if options.fit == "scale-down":
            scale = min(scale, 1.0)
        elif options.fit == "scale-up":
            scale = max(scale, 1.0)
        return max(1, round(region.width * scale)), max(1, round(region.height * scale))
    if options.width is not None and options.height is not None:
        width, height = options.width, options.height
    elif options.width is not None:
        width, height = options.width, max(1, round(options.width * region.height / region.width))
    else:
        height = options.height or region.height
        width = max(1, round(height * region.width / region.height))
    if options.fit == "aspect-crop":
        shrink = min(1.0, region.width / width, region.height / height)
        width, height = max(1, round(width * shrink)), max(1, round(height * shrink))
    return width, height


def plan_crop(boxes: np.ndarray, image: tuple[int, int], options: CropOptions, power: float = SIZE_POWER) -> CropPlan:
    """Where to crop and at what size, from face boxes [K, 4] (x1, y1, x2, y2) in an image (width, height).

    The faces count in whole pixels (`in_whole_pixels`). A region that holds every face to frame
    is centred on them (Cloudflare's rule); one too small for them keeps the most faces whole
    instead (gateway/framing/placement.py, faces weighted by their size to `power`). Fits that do not
    crop keep the whole image; fit=crop where the region is smaller than width x height keeps
    the region before widening, never enlarged (Cloudflare's: like scale-down).
    """
    if not options.crops:
        whole = Rect(0, 0, *image)
        canvas = (options.width, options.height) if options.fit == "pad" else None
        output = output_size(whole, options)
        return CropPlan(whole, output, canvas and (canvas[0] or output[0], canvas[1] or output[1]))
    framed = framed_faces(boxes, options.faces) if options.gravity.follows != "point" else boxes[:0]
    framed = in_whole_pixels(framed, image)
    box = face_box(framed)
    size = focused = region_size(box, options.zoom, image)
    if options.width is not None and options.height is not None:
        size = widen_to_aspect(size, options.width / options.height, image)
    if options.fit == "crop" and ((options.width or 0) > size[0] or (options.height or 0) > size[1]):
        size, options = focused, replace(options, fit="scale-down")  # smaller than asked: as scale-down
    region = place(size, focal_point(box, options.gravity, image), image)
    output = output_size(region, options)  # the region's size decides it, not where it goes
    if len(framed):
        x, y = place_for_faces((region.x, region.y), (region.width, region.height), framed, image, power)
        region = Rect(x, y, region.width, region.height)
    return CropPlan(region=region, output=output)


def pad_to(pixels: np.ndarray, canvas: tuple[int, int], color: tuple[int, int, int]) -> np.ndarray:
    """`pixels` centred on a `canvas` (width, height) of `color` (BGR); transparent where `pixels`
    has an alpha channel."""
    height, width = pixels.shape[:2]
    top, left = (canvas[1] - height) // 2, (canvas[0] - width) // 2
    return cv2.copyMakeBorder(
        pixels, top, canvas[1] - height - top, left, canvas[0] - width - left, cv2.BORDER_CONSTANT, value=color
    )


def render_crop(image: DecodedImage, plan: CropPlan) -> np.ndarray:
    """Cut the region (in the picture's full-size pixels) out of the decoded, possibly reduced, pixels and resize
    it to the output: area interpolation shrinking, cubic enlarging."""
    r = plan.region
    cut = cut_scaled(image.pixels, (r.x, r.y, r.x + r.width, r.y + r.height), image.scale)
    if plan.output == (cut.shape[1], cut.shape[0]):
        return cut
    shrinking = plan.output[0] * plan.output[1] < cut.shape[0] * cut.shape[1]
    return cv2.resize(cut, plan.output, interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC)

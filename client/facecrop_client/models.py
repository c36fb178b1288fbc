"""Typed results of the facecrop API."""

from __future__ import annotations

from dataclasses import dataclass

Point = tuple[int, int]


@dataclass(frozen=True)
class Rectangle:
    x: int
    y: int
    width: int
    height: int

    @classmethod
    def from_json(cls, data: dict) -> Rectangle:
        return cls(data["x"], data["y"], data["width"], data["height"])


@dataclass(frozen=True)
class Landmarks:
    """Points as seen in the picture: `left_eye` is the eye on the picture's left."""

    left_eye: Point
    right_eye: Point
    nose: Point
    mouth_left: Point
    mouth_right: Point

    @classmethod
    def from_json(cls, data: dict) -> Landmarks:
        return cls(**{name: tuple(point) for name, point in data.items()})


@dataclass(frozen=True)
class Face:
    confidence: float  # percent
    rectangle: Rectangle
    landmarks: Landmarks | None

    @classmethod
    def from_json(cls, data: dict) -> Face:
        landmarks = Landmarks.from_json(data["landmarks"]) if "landmarks" in data else None
        return cls(data["confidence"], Rectangle.from_json(data["face_rectangle"]), landmarks)


@dataclass(frozen=True)
class Detection:
    width: int
    height: int
    faces: tuple[Face, ...]
    raw: dict  # the response body as sent, e.g. for writing it out unchanged

    @classmethod
    def from_json(cls, data: dict) -> Detection:
        return cls(
            data["image"]["width"], data["image"]["height"], tuple(Face.from_json(f) for f in data["faces"]), data
        )


@dataclass(frozen=True)
class AnonymizeResult:
    content: bytes  # the picture with every face hidden, without metadata (the JSON body for format=json)
    content_type: str
    face_count: int  # faces hidden
    request_id: str


@dataclass(frozen=True)
class CropResult:
    content: bytes  # the encoded picture (empty for format=json)
    content_type: str
    region: Rectangle  # what was cut out of the original, in its pixels
    face_count: int
    request_id: str

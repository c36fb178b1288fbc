"""Python client for the facecrop service: `Client(base_url)` with `.detect(image)`,
`.crop(image, ...)` and `.anonymize(image, ...)`; `image_url(...)` for the URL form."""

from facecrop_client.client import Client, FacecropError
from facecrop_client.models import AnonymizeResult, CropResult, Detection, Face, Landmarks, Point, Rectangle
from facecrop_client.urls import image_url

__all__ = [
    "AnonymizeResult",
    "Client",
    "CropResult",
    "Detection",
    "Face",
    "FacecropError",
    "Landmarks",
    "Point",
    "Rectangle",
    "image_url",
]

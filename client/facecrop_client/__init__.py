"""Python client for the facecrop service: `Client(base_url).detect(image)` / `.crop(image, ...)`."""

from facecrop_client.client import Client, FacecropError
from facecrop_client.models import CropResult, Detection, Face, Landmarks, Point, Rectangle

__all__ = ["Client", "CropResult", "Detection", "Face", "FacecropError", "Landmarks", "Point", "Rectangle"]

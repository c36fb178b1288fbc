"""ICC profiles written from a colour space's published primaries: what an AVIF or HEIF that
describes its colour by code points (nclx) instead of a profile needs for LittleCMS.

A matrix/TRC display profile, version 4.3 (the form Apple's and colord's are in): the white point
is D50 (the PCS's), `chad` the Bradford adaptation from the space's white, the colorants adapted
by it, and one parametric curve (IEC 61966-2-1's, sRGB's) for the three channels.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

D50 = np.array([0.9642, 1.0, 0.8249])  # the PCS illuminant, as profiles store it
D65 = (0.3127, 0.3290)
BRADFORD = np.array([[0.8951, 0.2664, -0.1614], [-0.7502, 1.7135, 0.0367], [0.0389, -0.0685, 1.0296]])
DISPLAY_P3_PRIMARIES = ((0.680, 0.320), (0.265, 0.690), (0.150, 0.060))  # SMPTE EG 432-1, D65
SRGB_CURVE = (2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045)  # parametric type 3: g, a, b, c, d


def xyz(x: float, y: float) -> np.ndarray:
    """XYZ of chromaticity (x, y) at Y = 1."""
    return np.array([x / y, 1.0, (1 - x - y) / y])


def rgb_to_xyz(primaries: tuple[tuple[float, float], ...], white: tuple[float, float]) -> np.ndarray:
    """Columns: the XYZ of full red, green and blue, scaled so that they add up to the white."""
    colorants = np.stack([xyz(*p) for p in primaries], axis=1)
    return colorants * np.linalg.solve(colorants, xyz(*white))


def bradford(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The Bradford chromatic adaptation from white `source` to white `target` (XYZ)."""
    cone = np.diag((BRADFORD @ target) / (BRADFORD @ source))
    return np.linalg.inv(BRADFORD) @ cone @ BRADFORD


def _s15(value: float) -> bytes:
    return struct.pack(">i", round(value * 65536))


def _tag(kind: bytes, payload: bytes) -> bytes:
    return kind + b"\0\0\0\0" + payload


def _text(text: str) -> bytes:
    data = text.encode("utf-16-be")
    return _tag(b"mluc", struct.pack(">II", 1, 12) + b"enUS" + struct.pack(">II", len(data), 28) + data)


def matrix_profile(
    description: str, primaries: tuple[tuple[float, float], ...], white: tuple[float, float] = D65
) -> bytes:
    """A v4.3 RGB display profile of `primaries` and `white` with sRGB's transfer curve."""
    adaptation = bradford(xyz(*white), D50)
    colorants = adaptation @ rgb_to_xyz(primaries, white)
    curve = _tag(b"para", struct.pack(">HH", 3, 0) + b"".join(_s15(v) for v in SRGB_CURVE))
    tags = [
        (b"desc", _text(description)),
        (b"cprt", _text("No copyright, use freely")),
        (b"wtpt", _tag(b"XYZ ", b"".join(_s15(v) for v in D50))),
        (b"chad", _tag(b"sf32", b"".join(_s15(v) for v in adaptation.flatten()))),
        *(
            (name, _tag(b"XYZ ", b"".join(_s15(v) for v in colorants[:, i])))
            for i, name in enumerate((b"rXYZ", b"gXYZ", b"bXYZ"))
        ),
        *((name, curve) for name in (b"rTRC", b"gTRC", b"bTRC")),
    ]
    offset = 128 + 4 + 12 * len(tags)
    table, body, placed = [], b"", {}
    for signature, data in tags:
        if data not in placed:  # the three curves are one
            placed[data] = offset + len(body)
            body += data + b"\0" * (-len(data) % 4)
        table.append(struct.pack(">4sII", signature, placed[data], len(data)))
    header = struct.pack(
        ">I4sI4s4s4s12s4s4sI8sQI12s4s16s28s",
        offset + len(body),
        b"\0" * 4,  # preferred CMM
        0x04300000,  # version 4.3
        b"mntr",
        b"RGB ",
        b"XYZ ",
        b"\0" * 12,  # date
        b"acsp",
        b"\0" * 4,  # platform
        0,  # flags
        b"\0" * 8,  # manufacturer, model
        0,  # attributes
        0,  # rendering intent: perceptual
        b"".join(_s15(v) for v in D50),
        b"\0" * 4,  # creator
        b"\0" * 16,  # profile ID, below
        b"\0" * 28,
    )
    profile = bytearray(header + struct.pack(">I", len(tags)) + b"".join(table) + body)
    profile[84:100] = hashlib.md5(bytes(profile)).digest()  # the ID: over the profile with the ID zeroed
    return bytes(profile)


DISPLAY_P3 = matrix_profile("Display P3", DISPLAY_P3_PRIMARIES)

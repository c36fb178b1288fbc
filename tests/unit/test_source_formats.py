"""What the gateway reads of a source's bytes that Pillow does not expose, each on bytes built here
(where the box, chunk or flag sits, and where the data ends): an AVIF's colr nclx, a PNG's eXIf
chunk, an animated WebP's alpha flag; and what an APNG plays first."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from gateway.imaging.formats import (
    DISPLAY_P3,
    NCLX_P3,
    NCLX_SEARCH_BYTES,
    avif_nclx,
    colour_profile,
    first_played,
    png_exif_chunk,
    webp_said_transparent,
)

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def nclx(primaries: int, transfer: int) -> bytes:
    """A colr box's type and colour type, then its code points (matrix and range after them)."""
    return b"colrnclx" + struct.pack(">HH", primaries, transfer) + b"\x00\x01\x80"


def chunk(kind: bytes, payload: bytes = b"") -> bytes:
    return struct.pack(">I4s", len(payload), kind) + payload + b"\x00" * 4  # the CRC is not read


@pytest.mark.parametrize(
    "data,code_points",
    [
        (nclx(12, 13), (12, 13)),  # at the very start
        (b"ftypavif" + nclx(1, 13), (1, 13)),
        (b"xx" + nclx(12, 13)[:12], (12, 13)),  # ends right after the code points
        (b"xx" + nclx(12, 13)[:11], None),  # cut inside them
        (nclx(40000, 2), (40000, 2)),  # unsigned
        (nclx(12, 13) + nclx(1, 1), (12, 13)),  # the first box
        (b"\x00" * 64, None),
        (b"\x00" * NCLX_SEARCH_BYTES + nclx(12, 13), None),  # past the header's bytes: not looked for
    ],
)
def test_an_avifs_colour_code_points_are_read_from_its_first_colr_box(data, code_points):
    assert avif_nclx(data) == code_points


@pytest.mark.parametrize(
    "image,data,profile",
    [
        (SimpleNamespace(format="AVIF", info={}), nclx(12, 13), DISPLAY_P3),
        (SimpleNamespace(format="AVIF", info={}), nclx(1, 13), None),  # sRGB's primaries
        (SimpleNamespace(format="AVIF", info={}), b"", None),
        (
            SimpleNamespace(
                format="HEIF",
                info={"nclx_profile": dict(zip(("color_primaries", "transfer_characteristics"), NCLX_P3, strict=True))},
            ),
            b"",
            DISPLAY_P3,
        ),
        (
            SimpleNamespace(
                format="HEIF", info={"nclx_profile": {"color_primaries": 1, "transfer_characteristics": 13}}
            ),
            b"",
            None,
        ),
        (SimpleNamespace(format="PNG", info={"icc_profile": b"icc"}), b"", b"icc"),
        (SimpleNamespace(format="PNG", info={}), nclx(12, 13), None),
    ],
)
def test_the_colour_profile_is_p3_only_where_the_code_points_say_it(image, data, profile):
    assert colour_profile(image, data) == profile


@pytest.mark.parametrize(
    "data,exif",
    [
        (SIGNATURE + chunk(b"IHDR", b"h" * 13) + chunk(b"eXIf", b"Exif") + chunk(b"IEND"), b"Exif"),
        (SIGNATURE + chunk(b"IHDR", b"h" * 13) + struct.pack(">I4s", 0, b"eXIf"), b""),  # its header ends the data
        (SIGNATURE + chunk(b"IHDR", b"h" * 13) + chunk(b"IEND") + chunk(b"eXIf", b"Exif"), None),  # after the end
        (SIGNATURE + chunk(b"IHDR", b"h" * 13) + b"\x00\x00", None),  # cut short, no IEND
        (SIGNATURE + struct.pack(">I4s", 0xFFFFFFF0, b"IDAT"), None),  # a length past the data
    ],
)
def test_a_pngs_exif_chunk_is_found_by_walking_its_chunks(data, exif):
    assert png_exif_chunk(data) == exif


def vp8x(flags: int, rest: bytes = b"") -> bytes:
    """A RIFF WebP's header up to its VP8X flags (byte 20), then `rest`."""
    return b"RIFF" + struct.pack("<I", 4 + len(rest)) + b"WEBPVP8X" + b"\x0a\x00\x00\x00" + bytes([flags]) + rest


@pytest.mark.parametrize(
    "data,flags",
    [
        (vp8x(0x02), 0x12),  # an animation, its alpha flag unset: set (21 bytes, the shortest read)
        (vp8x(0x02, b"\x10\x00\x00"), 0x12),  # the byte after the flags is not them
        (vp8x(0x12), 0x12),
        (vp8x(0x00), 0x00),  # a still WebP: as it is
    ],
)
def test_an_animated_webp_says_it_may_be_transparent(data, flags):
    fixed = webp_said_transparent(data)
    assert fixed[20] == flags and fixed[:20] == data[:20] and fixed[21:] == data[21:]


@pytest.mark.parametrize(
    "info,frames,first",
    [
        ({"default_image": True}, 3, 1),  # an APNG whose default image is not played
        ({"default_image": True}, 2, 1),
        ({"default_image": True}, 1, 0),  # only the default image: it is the picture
        ({"default_image": True}, None, 0),  # no frame count at all
        ({}, 3, 0),
    ],
)
def test_the_first_frame_played_skips_a_default_image_the_animation_leaves_out(info, frames, first):
    image = SimpleNamespace(info=info) if frames is None else SimpleNamespace(info=info, n_frames=frames)
    assert first_played(image) == first

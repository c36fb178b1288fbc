"""EXIF in what goes out, as Cloudflare's `metadata` option keeps it: only in JPEG outputs (PNG,
WebP and AVIF outputs carry none), `copyright` (the default) the EXIF copyright tag alone, `keep`
the source's EXIF with its orientation reset to 1 (it has been applied to the pixels) and without
the maker's notes (offsets into a file that no longer exists), `none` nothing. Where faces were
hidden, no location is ever kept (the GPS block goes, whatever `metadata` says). EXIF thumbnails
are never written (Pillow writes the first IFD only): a thumbnail would show the faces."""

from __future__ import annotations

import struct

from PIL import Image

COPYRIGHT, ORIENTATION, EXIF_IFD, GPS_IFD, MAKER_NOTE = 0x8298, 0x0112, 0x8769, 0x8825, 0x927C
METADATA_CHOICES = ("copyright", "keep", "none")


def output_exif(source: bytes, metadata: str, hidden_faces: bool) -> bytes:
    """The EXIF block (`Exif\\0\\0` and TIFF data) for a JPEG output; b"" for none. A source whose
    EXIF cannot be read keeps nothing."""
    if metadata == "none" or not source:
        return b""
    exif = Image.Exif()
    try:
        exif.load(source)
        if metadata == "copyright":
            kept = Image.Exif()
            if exif.get(COPYRIGHT):
                kept[COPYRIGHT] = exif[COPYRIGHT]
            return kept.tobytes() if len(kept) else b""
        exif[ORIENTATION] = 1
        if EXIF_IFD in exif:
            exif.get_ifd(EXIF_IFD).pop(MAKER_NOTE, None)
        if hidden_faces:
            exif.pop(GPS_IFD, None)
        return exif.tobytes()
    except (SyntaxError, ValueError, TypeError, KeyError, OSError, struct.error):
        return b""

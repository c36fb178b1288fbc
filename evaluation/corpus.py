"""The files image libraries keep to test themselves, remade by the project's own encoders (Pillow,
OpenCV, pillow-heif, and hand-written chunks where no encoder writes the kind): TIFFs under every
orientation, CMYK TIFFs, transparent PNG, WebP, GIF, HEIC and AVIF, 16-bit PNG, APNG (8 and 16-bit) and TIFF, an MPO,
palette-less and disposal GIFs, an RLE8 BMP, CIELab; and the reference each is judged against:
Pillow's decode, upright, 16-bit samples scaled to 8 (as libvips does), its transparency kept
(`over` shows it on a colour)."""

from __future__ import annotations

import io
import struct
import zlib
from functools import cache

import cv2
import numpy as np
from PIL import Image, ImageCms, ImageOps

from evaluation.images import STORED_AS, astronaut
from evaluation.sources import encoded_as

SIZE = (96, 64)  # small: every file goes through every endpoint and format


@cache
def upright() -> Image.Image:
    """An asymmetric picture: the astronaut's top-left, whose turn or mirror any check sees."""
    return astronaut().crop((0, 0, 288, 192)).resize(SIZE, Image.Resampling.LANCZOS)


def transparent() -> Image.Image:
    """The picture inside a disc on a transparent ground, its hidden colours a saturated green
    (what a decoder that drops the alpha shows)."""
    disc = np.zeros(SIZE[::-1], np.uint8)
    cv2.circle(disc, (SIZE[0] // 2, SIZE[1] // 2), SIZE[1] // 2 - 4, 255, -1)
    mask = Image.fromarray(disc)
    rgba = Image.new("RGBA", SIZE, (0, 255, 0, 0))
    rgba.paste(upright(), (0, 0), mask)
    return rgba


def tiff_oriented(orientation: int, compression: str) -> bytes:
    """`upright()` stored as a camera stores it under TIFF `orientation` (tag 274)."""
    transpose = STORED_AS.get(orientation)
    stored = upright().transpose(transpose) if transpose is not None else upright()
    return encoded_as(stored, "TIFF", tiffinfo={274: orientation}, compression=compression)


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks, (type, body), in order."""
    chunks, at = [], 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    return chunks


def apng(png: bytes, size: tuple[int, int]) -> bytes:
    """`png` as an APNG of two frames (acTL, fcTL and fdAT by hand): its picture is the first frame
    and the default image, shown again as the second."""
    chunks = png_chunks(png)
    data = b"".join(body for kind, body in chunks if kind == b"IDAT")

    def control(sequence: int) -> bytes:
        return png_chunk(b"fcTL", struct.pack(">IIIIIHHBB", sequence, *size, 0, 0, 1, 10, 0, 0))

    head = b"".join(png_chunk(kind, body) for kind, body in chunks if kind not in (b"IDAT", b"IEND"))
    frames = control(0) + png_chunk(b"IDAT", data) + control(1) + png_chunk(b"fdAT", struct.pack(">I", 2) + data)
    return png[:8] + head + png_chunk(b"acTL", struct.pack(">II", 2, 0)) + frames + png_chunk(b"IEND", b"")


def apng_blended() -> bytes:
    """An APNG (Pillow's writer: each later frame only the rectangle that changed) on a transparent
    ground whose later frames are blended over the ones before (APNG's "over"): a viewer shows
    composites, not the stored rectangles. (Pillow blends a half-transparent pixel over a
    transparent one as a mix, (200, 40, 0, 128) over (0, 255, 0, 0) as (100, 147, 0, 64): so its
    pixels are opaque or transparent.)"""
    frames = [transparent()]
    for shift in (1, 2):
        frame = frames[0].copy()
        frame.paste((200, 40 * shift, 0, 255), (12 * shift, 10 * shift, 12 * shift + 30, 10 * shift + 20))
        frames.append(frame)
    options = {"duration": [50, 60, 70], "blend": [0, 1, 1], "loop": 0}
    return encoded_as(frames[0], "PNG", save_all=True, append_images=frames[1:], **options)


def deep(alpha: bool) -> np.ndarray:
    """`upright()` as 16-bit BGR (BGRA with `alpha`: opaque inside, transparent border, half-transparent
    band), each sample's low byte unlike its high one, so a reader that swaps them is far off."""
    bgr = cv2.cvtColor(np.asarray(upright()), cv2.COLOR_RGB2BGR).astype(np.uint16)
    low = np.random.default_rng(16).integers(0, 256, bgr.shape, dtype=np.uint16)
    samples = bgr * 256 + low
    if not alpha:
        return samples
    opacity = np.zeros(samples.shape[:2], np.uint16)
    opacity[8:-8, 8:-8] = 65535
    opacity[8:-8, 8:24] = 32768 + 77  # half transparent, its low byte set too
    return np.dstack((samples, opacity))


def png16(alpha: bool) -> bytes:
    """A 16-bit PNG (OpenCV writes it) of `deep(alpha)`."""
    return cv2.imencode(".png", deep(alpha))[1].tobytes()


def tiff16() -> bytes:
    """A 16-bit RGB TIFF (OpenCV writes it), the full 16-bit range used."""
    bgr = cv2.cvtColor(np.asarray(upright()), cv2.COLOR_RGB2BGR).astype(np.uint16) * 257 + 100
    return cv2.imencode(".tiff", bgr)[1].tobytes()


def mpo() -> bytes:
    """A camera's multi-picture JPEG: the picture, then a second one (its other eye)."""
    buffer = io.BytesIO()
    upright().save(buffer, "MPO", save_all=True, append_images=[upright().transpose(Image.Transpose.FLIP_LEFT_RIGHT)])
    return buffer.getvalue()


def gif_without_palette() -> bytes:
    """A two-frame GIF with neither a global nor a local colour table (decoders use a grey ramp)."""
    width, height = 4, 2

    def frame(index: int) -> bytes:
        pixels = bytes((index * 60 + x * 20) & 0xFF for x in range(width * height))
        return (
            b"\x21\xf9\x04\x00\x0a\x00\x00\x00"  # graphic control: 100 ms, no transparency
            + b"\x2c"
            + struct.pack("<HHHHB", 0, 0, width, height, 0)  # no local colour table
            + b"\x08"
            + lzw_raw(pixels)
        )

    netscape = b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00"
    return b"GIF89a" + struct.pack("<HHBBB", width, height, 0x00, 0, 0) + netscape + frame(0) + frame(1) + b"\x3b"


def lzw_raw(pixels: bytes, min_code_size: int = 8) -> bytes:
    """GIF image data for `pixels` without compression: a clear code before every code, so the
    code size never grows (valid LZW that any decoder reads), in sub-blocks."""
    clear, end, width = 1 << min_code_size, (1 << min_code_size) + 1, min_code_size + 1
    codes = [clear]
    for value in pixels:
        codes += [value, clear]
    codes.append(end)
    bits = 0
    count = 0
    out = bytearray()
    for code in codes:
        bits |= code << count
        count += width
        while count >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            count -= 8
    if count:
        out.append(bits & 0xFF)
    blocks = b"".join(bytes([len(out[i : i + 255])]) + bytes(out[i : i + 255]) for i in range(0, len(out), 255))
    return blocks + b"\x00"


def gif_with_disposal() -> bytes:
    """A transparent GIF whose frames restore to the background (disposal 2): what shows of each
    frame is that frame's own disc."""
    frames = []
    for shift in (0, 24, 48):
        frame = Image.new("RGBA", SIZE, (0, 0, 0, 0))
        frame.paste((200, 40, 40, 255), (shift, 16, shift + 32, 48))
        frames.append(frame)
    return encoded_as(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, disposal=2, loop=0)


def bmp_rle8() -> bytes:
    """`upright()` as an 8-bit palette BMP compressed with RLE8 (BI_RLE8), runs and literals."""
    paletted = upright().quantize(64)
    rows = np.asarray(paletted)[::-1]  # BMP rows go bottom-up
    data = bytearray()
    for row in rows:
        data += rle8_row(bytes(row))
        data += b"\x00\x00"  # end of line
    data += b"\x00\x01"  # end of bitmap
    palette = paletted.getpalette()[: 64 * 3]  # type: ignore[index]
    table = b"".join(bytes((palette[i + 2], palette[i + 1], palette[i], 0)) for i in range(0, len(palette), 3))
    info = struct.pack("<IiiHHIIiiII", 40, SIZE[0], SIZE[1], 1, 8, 1, len(data), 2835, 2835, 64, 0)
    offset = 14 + len(info) + len(table)
    return b"BM" + struct.pack("<IHHI", offset + len(data), 0, 0, offset) + info + table + bytes(data)


def rle8_row(row: bytes) -> bytes:
    """One row in RLE8: runs of a repeated index as (count, index), the rest as absolute literals."""
    out = bytearray()
    i = 0
    while i < len(row):
        run = 1
        while i + run < len(row) and row[i + run] == row[i] and run < 255:
            run += 1
        if run >= 3:
            out += bytes((run, row[i]))
            i += run
            continue
        literal = bytearray()
        while i < len(row) and len(literal) < 255:
            if i + 2 < len(row) and row[i] == row[i + 1] == row[i + 2]:
                break
            literal.append(row[i])
            i += 1
        if len(literal) < 3:  # absolute mode needs 3 or more: encoded as runs of 1
            out += b"".join(bytes((1, value)) for value in literal)
        else:
            out += bytes((0, len(literal))) + literal + (b"\x00" if len(literal) % 2 else b"")
    return bytes(out)


def lab_tiff() -> bytes:
    """`upright()` converted to CIELab by LittleCMS and written as a CIELab TIFF."""
    to_lab = ImageCms.buildTransform(ImageCms.createProfile("sRGB"), ImageCms.createProfile("LAB"), "RGB", "LAB")
    return encoded_as(ImageCms.applyTransform(upright(), to_lab), "TIFF")  # type: ignore[arg-type]


def long_gif(frames: int = 5000) -> bytes:
    """A GIF of `frames` tiny frames, each its own colour (no two alike, so none is merged)."""
    pictures = [Image.new("P", (4, 4), i % 250) for i in range(frames)]
    for picture in pictures:
        picture.putpalette([c for i in range(256) for c in (i, 255 - i, (i * 7) % 256)])
    return encoded_as(pictures[0], "GIF", save_all=True, append_images=pictures[1:], duration=20, loop=0)


@cache
def corpus() -> dict[str, bytes]:
    """Every file, by name."""
    files = {f"tiff-orientation-{n}": tiff_oriented(n, "tiff_lzw" if n % 2 else "raw") for n in range(1, 9)}
    files |= {
        "tiff-cmyk": encoded_as(upright().convert("CMYK"), "TIFF", compression="tiff_lzw"),
        "tiff-16bit": tiff16(),
        "tiff-lab": lab_tiff(),
        "png-16bit": png16(alpha=False),
        "png-16bit-alpha": png16(alpha=True),
        "apng-16bit": apng(png16(alpha=False), SIZE),
        "apng-16bit-alpha": apng(png16(alpha=True), SIZE),
        "apng-8bit": apng(encoded_as(upright(), "PNG"), SIZE),
        "apng-blended": apng_blended(),
        "mpo": mpo(),
        "gif-no-palette": gif_without_palette(),
        "gif-disposal": gif_with_disposal(),
        "bmp-rle8": bmp_rle8(),
    }
    for container in ("PNG", "WEBP", "HEIF", "AVIF"):
        lossless = {"PNG": {}, "WEBP": {"lossless": True}, "HEIF": {"quality": -1}, "AVIF": {"quality": 100}}
        files[f"transparent-{container.lower()}"] = encoded_as(transparent(), container, **lossless[container])
    files["transparent-gif"] = encoded_as(transparent().quantize(255), "GIF", transparency=255)
    return files


def reference(data: bytes) -> np.ndarray:
    """Pillow's picture of `data` as a viewer shows it: upright (TIFFs turn as they load, the rest by
    EXIF), the first frame, deep samples scaled to 8 bits, CIELab through LittleCMS, its transparency
    kept; RGBA uint8 (straight alpha)."""
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        picture = ImageOps.exif_transpose(image)
        if picture.mode == "LAB":
            srgb = ImageCms.createProfile("sRGB")
            converted = ImageCms.applyTransform(
                picture, ImageCms.buildTransform(ImageCms.createProfile("LAB"), srgb, "LAB", "RGB")
            )
            assert converted is not None
            picture = converted
        elif picture.mode.startswith("I"):
            picture = Image.fromarray(np.clip(np.rint(np.asarray(picture) / 257), 0, 255).astype(np.uint8))
        return np.asarray(picture.convert("RGBA"))


def over(rgba: np.ndarray, ground: tuple[int, int, int]) -> np.ndarray:
    """RGBA pixels (straight alpha) composited onto a `ground` colour (RGB): RGB float."""
    alpha = rgba[..., 3:].astype(float) / 255
    return rgba[..., :3] * alpha + np.array(ground, float) * (1 - alpha)

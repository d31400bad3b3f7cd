"""Pictures (Pillow, pillow-heif): deterministic drawings, camera-like photos, EXIF, and images of text.

- ``picture``: a gradient sky, coloured discs and a dark horizon, drawn from a seed; small files (~20 kB at 800x533
  as JPEG).
- ``camera_picture``: smooth colour blobs under a fine grain, which encodes at about a camera JPEG's bits per pixel
  (~3 MB at 8 MP) and is quick to make at any size.
- ``exif``: an EXIF block (make, model, dates, lens, exposure, GPS with altitude, orientation, software); ``jpeg``
  writes a picture with one.
"""

from __future__ import annotations

import random
from pathlib import Path

from PIL import Image, ImageDraw
from PIL.ExifTags import GPS, IFD, Base
from PIL.TiffImagePlugin import IFDRational

from .files import prepare

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def dms(value: float) -> tuple[float, float, float]:
    """Degrees, minutes and seconds (2 decimals) of ``abs(value)``, as EXIF GPS coordinates are written."""
    value = abs(value)
    degrees = int(value)
    minutes = int((value - degrees) * 60)
    return (float(degrees), float(minutes), round((value - degrees - minutes / 60) * 3600, 2))


def picture(size: tuple[int, int], seed: int = 1) -> Image.Image:
    """A deterministic RGB picture: a vertical gradient, twelve discs and a dark polygon along the bottom (not
    uniform, so thumbnails and hashes differ between seeds)."""
    rng = random.Random(seed)
    w, h = size
    top, bottom = [tuple(rng.randint(0, 255) for _ in range(3)) for _ in range(2)]
    img = Image.new("RGB", size)
    draw = ImageDraw.Draw(img)
    for y in range(h):
        t = y / max(h - 1, 1)
        draw.line([(0, y), (w, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    biggest = max(5, min(w, h) // 4)
    for _ in range(12):
        x, y, r = rng.randint(0, w), rng.randint(0, h), rng.randint(min(10, biggest - 1), biggest)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(rng.randint(0, 255) for _ in range(3)))
    draw.polygon([(0, h), (w // 3, h // 2), (2 * w // 3, int(h * 0.7)), (w, h // 3), (w, h)], fill=(60, 70, 80))
    return img


def camera_picture(size: tuple[int, int], seed: int = 1) -> Image.Image:
    """A photo-like RGB picture: smooth colour blobs (low-resolution noise scaled up) under a fine grain (a tiled
    noise patch). As a JPEG at quality 90 it weighs what a camera's does (3-4 bits a pixel)."""
    w, h = size
    rng = random.Random(seed)
    small = [Image.effect_noise((max(8, w // 32), max(8, h // 32)), 50 + rng.random() * 50) for _ in range(3)]
    img = Image.merge("RGB", small).resize(size, Image.Resampling.BICUBIC)
    tile = Image.effect_noise((256, 256), 16 + rng.random() * 8).convert("RGB")
    grain = Image.new("RGB", size)
    for y in range(0, h, 256):
        for x in range(0, w, 256):
            grain.paste(tile, (x, y))
    return Image.blend(img, grain, 0.25)


def exif(make: str, model: str, taken: str, *, gps: tuple[float, float] | None = None,
         altitude: float | None = None, orientation: int | None = None, lens: str | None = None,
         exposure: tuple[int, int] | None = None, f_number: float | None = None, iso: int | None = None,
         focal_length: float | None = None, software: str | None = None, digitized: bool = False) -> Image.Exif:
    """An EXIF block: Make, Model, DateTime and DateTimeOriginal (``taken``, "YYYY:MM:DD HH:MM:SS"), and each of the
    others that is given (``digitized``: DateTimeDigitized = ``taken``; ``gps``: (latitude, longitude))."""
    block = Image.Exif()
    block[Base.Make] = make
    block[Base.Model] = model
    block[Base.DateTime] = taken
    if orientation is not None:
        block[Base.Orientation] = orientation
    if software:
        block[Base.Software] = software
    sub = block.get_ifd(IFD.Exif)
    sub[Base.DateTimeOriginal] = taken
    if digitized:
        sub[Base.DateTimeDigitized] = taken
    if lens:
        sub[Base.LensModel] = lens
    if exposure is not None:
        sub[Base.ExposureTime] = IFDRational(*exposure)
    if f_number is not None:
        sub[Base.FNumber] = f_number
    if iso is not None:
        sub[Base.ISOSpeedRatings] = iso
    if focal_length is not None:
        sub[Base.FocalLength] = focal_length
    if gps is not None:
        g = block.get_ifd(IFD.GPSInfo)
        g[GPS.GPSVersionID] = b"\x02\x03\x00\x00"
        g[GPS.GPSLatitudeRef] = "N" if gps[0] >= 0 else "S"
        g[GPS.GPSLatitude] = dms(gps[0])
        g[GPS.GPSLongitudeRef] = "E" if gps[1] >= 0 else "W"
        g[GPS.GPSLongitude] = dms(gps[1])
        if altitude is not None:
            g[GPS.GPSAltitudeRef] = b"\x00" if altitude >= 0 else b"\x01"
            g[GPS.GPSAltitude] = abs(altitude)
    return block


def jpeg(path: str | Path, size: tuple[int, int] = (800, 600), *, make: str = "FUJIFILM", model: str = "X-T4",
         taken: str = "2024:06:15 10:30:00", gps: tuple[float, float] | None = (46.5586, 7.9806),
         orientation: int | None = None, lens: str | None = "XF16-80mmF4 R OIS WR", seed: int = 1,
         quality: int = 85, exposure: tuple[int, int] | None = (1, 250), f_number: float | None = 4.0,
         iso: int | None = 400, focal_length: float | None = 23.0, altitude: float | None = 1200.5) -> Path:
    """A JPEG of ``picture(size, seed)`` with EXIF (see ``exif``; by default a Fujifilm X-T4 with lens, exposure and
    GPS with altitude; pass None to leave a field out)."""
    path = prepare(path)
    block = exif(make, model, taken, gps=gps, altitude=altitude, orientation=orientation, lens=lens,
                 exposure=exposure, f_number=f_number, iso=iso, focal_length=focal_length)
    picture(size, seed).save(path, "JPEG", quality=quality, exif=block)
    return path


def png(path: str | Path, size: tuple[int, int] = (640, 480), seed: int = 2) -> Path:
    path = prepare(path)
    picture(size, seed).save(path, "PNG")
    return path


def heic(path: str | Path, size: tuple[int, int] = (640, 480), seed: int = 3) -> Path:
    """A HEIC photo, as phones write them (pillow-heif's encoder)."""
    import pillow_heif

    pillow_heif.register_heif_opener()
    path = prepare(path)
    picture(size, seed).save(path, "HEIF", quality=70)
    return path


def animated_gif(path: str | Path, frames: int = 4, size: tuple[int, int] = (120, 90)) -> Path:
    """An animated GIF whose frames differ (the thumbnail is of the first)."""
    path = prepare(path)
    images = [picture(size, seed=10 + i).convert("P") for i in range(frames)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=100, loop=0)
    return path


def multipage_tiff(path: str | Path, pages: int = 3, size: tuple[int, int] = (200, 150)) -> Path:
    path = prepare(path)
    images = [picture(size, seed=20 + i) for i in range(pages)]
    images[0].save(path, save_all=True, append_images=images[1:])
    return path


def text_image(text: str, *, size: tuple[int, int] = (1400, 300), font_size: int = 72) -> Image.Image:
    """``text`` in large black letters on white: clear enough for Tesseract."""
    from PIL import ImageFont

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    try:
        font = ImageFont.truetype(FONT, font_size)
    except OSError:
        font = ImageFont.load_default(size=font_size)
    draw.text((40, (size[1] - font_size) // 2), text, fill="black", font=font)
    return image


def text_png(text: str) -> bytes:
    """``text_image(text)`` as PNG bytes (for a PDF page or an archive)."""
    import io

    buffer = io.BytesIO()
    text_image(text).save(buffer, format="PNG")
    return buffer.getvalue()


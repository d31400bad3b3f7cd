"""Photos and pictures: thumbnails that decode no more pixels than they need, and metadata with EXIF.

JPEGs are opened in draft mode (``Image.draft`` asks libjpeg for a 1/2..1/8 scaled decode), so a 12 MP photo is
decoded at about the thumbnail's size; the EXIF orientation is applied after (on the small image). HEIC/HEIF come
through pillow-heif, registered once per process. Animated GIFs and multi-page TIFFs give their first frame. Pillow's
decompression-bomb guard stays on: an image whose header claims more than ``Image.MAX_IMAGE_PIXELS`` is an error,
never an allocation.
"""

from __future__ import annotations

import logging
import warnings
from fractions import Fraction
from typing import Any

from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from flows.media.common import MediaError, encode_jpeg, fit

log = logging.getLogger(__name__)

_heif_registered = False
# EXIF tags that are pointers to other IFDs or opaque blobs, not values
_SKIP_TAGS = {"ExifOffset", "GPSInfo", "InteropOffset", "MakerNote", "PrintImageMatching", "UserComment",
              "JPEGInterchangeFormat", "JPEGInterchangeFormatLength", "StripOffsets", "StripByteCounts",
              "TileOffsets", "TileByteCounts", "XMLPacket", "InterColorProfile", "ImageResources", "IPTCNAA"}
ROTATED = {5, 6, 7, 8}  # orientations that swap width and height
MAX_TEXT = 200  # a longer EXIF string is cut


def register_heif() -> None:
    """Let Pillow open HEIC/HEIF (once per process)."""
    global _heif_registered
    if not _heif_registered:
        try:
            import pillow_heif  # heavy (libheif): loaded when an image is first opened

            pillow_heif.register_heif_opener()
        except ImportError:  # pragma: no cover - pinned in the project's dependencies
            log.warning("pillow-heif is not installed: HEIC/HEIF photos cannot be read")
        _heif_registered = True


def _claimed_size(path: str) -> tuple[int, int] | None:
    """The size an image's header claims, read without Pillow's bomb check (header only, no pixels)."""
    with open(path, "rb") as fh:
        prefix = fh.read(16)
        for ident in Image.ID:
            factory, accept = Image.OPEN[ident]
            if accept and not accept(prefix):
                continue
            fh.seek(0)
            try:
                im = factory(fh, path)
            except Exception:  # noqa: BLE001 - not this format: try the next, as Image.open does
                continue
            return im.size
    return None


def pixel_limit() -> int | None:
    """The most pixels an image may claim: where Pillow's own guard raises (twice ``Image.MAX_IMAGE_PIXELS``, which
    only warns; 178,956,970 by default), so a 100 MP photo still works while a forged header does not."""
    return 2 * Image.MAX_IMAGE_PIXELS if Image.MAX_IMAGE_PIXELS else None


def _bomb_message(width: int, height: int) -> str:
    return (f"image claims {width}x{height} pixels, over the {pixel_limit():,}-pixel limit "
            "(a decompression bomb or a corrupt header)")


def open_image(path: str) -> Image.Image:
    """Open ``path`` lazily (header only), or MediaError: not an image, truncated, or over the pixel limit."""
    register_heif()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # under the limit: a big photo
            img = Image.open(path)
    except Image.DecompressionBombError:
        size = _claimed_size(path)
        raise MediaError(_bomb_message(*size) if size else "image is over the pixel limit") from None
    except UnidentifiedImageError:
        raise MediaError("cannot identify image file (truncated or not an image)") from None
    except OSError as exc:
        raise MediaError(f"cannot read image: {exc}") from None
    width, height = img.size
    limit = pixel_limit()
    if limit and width * height > limit:
        img.close()
        raise MediaError(_bomb_message(width, height))
    return img


def exif_orientation(img: Image.Image) -> int:
    """The image's EXIF orientation (1-8; 1, upright, when it has none or its EXIF is broken); those in
    :data:`ROTATED` swap width and height."""
    try:
        value = img.getexif().get(ExifTags.Base.Orientation, 1)
        return int(value) if value else 1
    except Exception:  # noqa: BLE001 - broken EXIF: treat as upright
        return 1


def thumbnail(path: str, max_width: int, max_height: int, quality: int) -> tuple[bytes, int, int]:
    """A JPEG thumbnail of ``path`` within ``max_width`` x ``max_height`` (aspect kept, EXIF orientation applied,
    first frame), and its width and height."""
    img = open_image(path)
    try:
        orientation = exif_orientation(img)
        width, height = img.size
        box = (max_height, max_width) if orientation in ROTATED else (max_width, max_height)
        target = fit(width, height, *box)
        if img.format == "JPEG":
            img.draft("RGB", target)  # scaled decode: at least `target`, up to 8x fewer pixels each way
        try:
            img.seek(0)
            img.load()
        except (OSError, SyntaxError, ValueError) as exc:
            raise MediaError(f"cannot decode image: {_short(exc)}") from None
        frame = ImageOps.exif_transpose(img) if orientation != 1 else img
        frame.thumbnail((max_width, max_height), Image.Resampling.BICUBIC, reducing_gap=2.0)
        data = encode_jpeg(frame, quality)
        return data, frame.width, frame.height
    finally:
        img.close()


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if "truncated" in text.lower():
        return "image file is truncated"
    return text[:MAX_TEXT]


def _value(value: Any) -> Any:
    """An EXIF value as JSON: rationals as floats, numbers as numbers, strings stripped of NULs, bytes decoded when
    they are text (else None: skipped), tuples as lists."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, Fraction)) or hasattr(value, "numerator"):
        try:
            number = float(value)
        except (ZeroDivisionError, ValueError, TypeError):
            return None
        return number if number == number else None  # NaN (0/0 rationals) is skipped
    if isinstance(value, str):
        text = value.replace("\x00", "").strip()
        return text[:MAX_TEXT] if text else None
    if isinstance(value, bytes):
        stripped = value.rstrip(b"\x00")
        if stripped and all(32 <= b < 127 for b in stripped):
            return stripped.decode("ascii").strip()[:MAX_TEXT] or None
        return None
    if isinstance(value, (tuple, list)):
        items = [_value(v) for v in value]
        return items if all(v is not None for v in items) and len(items) <= 64 else None
    return None


def _degrees(dms: Any, ref: Any) -> float | None:
    """Degrees/minutes/seconds and an N/S/E/W reference as signed decimal degrees."""
    try:
        d, m, s = (float(x) for x in dms)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    value = d + m / 60 + s / 3600
    ref = ref.decode() if isinstance(ref, bytes) else str(ref or "")
    return round(-value if ref.strip().upper() in ("S", "W") else value, 7)


def exif_record(img: Image.Image) -> dict[str, Any]:
    """EXIF of ``img`` by PIL.ExifTags names (base IFD, Exif IFD, GPS), JSON-serialisable; GPSLatitude /
    GPSLongitude as signed decimal degrees, GPSAltitude in metres (negative below sea level)."""
    try:
        exif = img.getexif()
    except Exception:  # noqa: BLE001 - unreadable EXIF is no EXIF
        return {}
    out: dict[str, Any] = {}
    ifds: list[Any] = [exif]  # the base IFD (an Exif) and the Exif IFD (a dict)
    for ifd in (ExifTags.IFD.Exif,):
        try:
            ifds.append(exif.get_ifd(ifd))
        except Exception:  # noqa: BLE001
            pass
    for source in ifds:
        for tag, raw in source.items():
            name = ExifTags.TAGS.get(tag)
            if not name or name in _SKIP_TAGS:
                continue
            value = _value(raw)
            if value is not None:
                out[name] = value
    try:
        gps = {ExifTags.GPSTAGS.get(k, str(k)): v for k, v in exif.get_ifd(ExifTags.IFD.GPSInfo).items()}
    except Exception:  # noqa: BLE001
        gps = {}
    if gps:
        lat = _degrees(gps.get("GPSLatitude"), gps.get("GPSLatitudeRef"))
        lon = _degrees(gps.get("GPSLongitude"), gps.get("GPSLongitudeRef"))
        if lat is not None:
            out["GPSLatitude"] = lat
        if lon is not None:
            out["GPSLongitude"] = lon
        altitude = _value(gps.get("GPSAltitude"))
        if isinstance(altitude, (int, float)):
            ref = gps.get("GPSAltitudeRef")
            below = ref in (1, b"\x01")
            out["GPSAltitude"] = -float(altitude) if below else float(altitude)
        for name in ("GPSTimeStamp", "GPSDateStamp", "GPSImgDirection"):
            value = _value(gps.get(name))
            if value is not None:
                out[name] = value
    return out


def metadata(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(flat, details) of an image: width and height as displayed (EXIF orientation applied), format, mode, frames
    (when more than one), and ``exif.<Tag>`` for every scalar EXIF value."""
    img = open_image(path)
    try:
        orientation = exif_orientation(img)
        width, height = img.size
        if orientation in ROTATED:
            width, height = height, width
        frames = int(getattr(img, "n_frames", 1) or 1)
        flat: dict[str, Any] = {"width": width, "height": height, "format": img.format or "", "mode": img.mode}
        if frames > 1:
            flat["frames"] = frames
        exif = exif_record(img)
        for name, value in exif.items():
            if isinstance(value, (int, float, str)):
                flat[f"exif.{name}"] = value
        details = {"kind": "image", "width": width, "height": height, "stored_size": list(img.size),
                   "format": img.format, "mode": img.mode, "frames": frames, "exif": exif}
        return flat, details
    finally:
        img.close()

"""Generated test media, good and bad: every test that needs a photo, a video, a PDF or a broken one makes it here.

Nothing is downloaded. Photos come from Pillow (with EXIF: make, model, date taken, GPS, orientation), HEIC from
pillow-heif, PDFs from PyMuPDF (with metadata and an outline), video and audio from the ffmpeg binary (``testsrc``,
whose frames differ over time, and ``sine``). The bad files are the ones the classifier must survive: a truncated
JPEG, a corrupt MP4, an encrypted and a broken PDF, a 0-byte file, a "decompression bomb" PNG whose header claims
50,000 x 50,000 pixels, a FIFO named like a video (ffprobe blocks on it until its timeout), and file names ffmpeg
could read as options or a shell as commands.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

from PIL import Image, ImageDraw
from PIL.ExifTags import GPS, IFD, Base
from PIL.TiffImagePlugin import IFDRational

FFMPEG = shutil.which("ffmpeg")
HAVE_FFMPEG = FFMPEG is not None and shutil.which("ffprobe") is not None


def ffmpeg(*args: str) -> None:
    """Run the ffmpeg binary quietly; raises with its stderr when it fails."""
    if FFMPEG is None:
        raise RuntimeError("ffmpeg is not installed (./scripts/setup installs it)")
    cmd = [FFMPEG, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ffmpeg failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.strip()}")


def _dms(value: float) -> tuple[float, float, float]:
    value = abs(value)
    degrees = int(value)
    minutes = int((value - degrees) * 60)
    return (float(degrees), float(minutes), round((value - degrees - minutes / 60) * 3600, 2))


def picture(size: tuple[int, int], seed: int = 1) -> Image.Image:
    """A deterministic RGB picture with a gradient and shapes (not uniform, so thumbnails differ)."""
    rng = random.Random(seed)
    w, h = size
    top, bottom = [tuple(rng.randint(0, 255) for _ in range(3)) for _ in range(2)]
    img = Image.new("RGB", size)
    draw = ImageDraw.Draw(img)
    for y in range(0, h, max(1, h // 256)):
        t = y / max(h - 1, 1)
        draw.rectangle([(0, y), (w, y + max(1, h // 256))],
                       fill=tuple(int(a + (b - a) * t) for a, b in zip(top, bottom)))
    for _ in range(12):
        x, y, r = rng.randint(0, w), rng.randint(0, h), rng.randint(4, max(5, min(w, h) // 4))
        draw.ellipse([x - r, y - r, x + r, y + r], fill=tuple(rng.randint(0, 255) for _ in range(3)))
    return img


def jpeg(path: Path, size: tuple[int, int] = (800, 600), *, make: str = "FUJIFILM", model: str = "X-T4",
         taken: str = "2024:06:15 10:30:00", gps: tuple[float, float] | None = (46.5586, 7.9806),
         orientation: int | None = None, lens: str | None = "XF16-80mmF4 R OIS WR", seed: int = 1,
         quality: int = 85, exposure: tuple[int, int] | None = (1, 250), f_number: float | None = 4.0,
         iso: int | None = 400, focal_length: float | None = 23.0, altitude: float | None = 1200.5) -> Path:
    """A JPEG with EXIF: Make, Model, DateTimeOriginal, LensModel, exposure (ExposureTime, FNumber,
    ISOSpeedRatings, FocalLength), GPS with altitude and (optionally) Orientation."""
    exif = Image.Exif()
    exif[Base.Make] = make
    exif[Base.Model] = model
    exif[Base.DateTime] = taken
    if orientation is not None:
        exif[Base.Orientation] = orientation
    sub = exif.get_ifd(IFD.Exif)
    sub[Base.DateTimeOriginal] = taken
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
        g = exif.get_ifd(IFD.GPSInfo)
        g[GPS.GPSVersionID] = b"\x02\x03\x00\x00"
        g[GPS.GPSLatitudeRef] = "N" if gps[0] >= 0 else "S"
        g[GPS.GPSLatitude] = _dms(gps[0])
        g[GPS.GPSLongitudeRef] = "E" if gps[1] >= 0 else "W"
        g[GPS.GPSLongitude] = _dms(gps[1])
        if altitude is not None:
            g[GPS.GPSAltitudeRef] = b"\x00" if altitude >= 0 else b"\x01"
            g[GPS.GPSAltitude] = abs(altitude)
    path.parent.mkdir(parents=True, exist_ok=True)
    picture(size, seed).save(path, "JPEG", quality=quality, exif=exif)
    return path


def png(path: Path, size: tuple[int, int] = (640, 480), seed: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    picture(size, seed).save(path, "PNG")
    return path


def heic(path: Path, size: tuple[int, int] = (640, 480), seed: int = 3) -> Path:
    """A HEIC photo, as phones write them (pillow-heif's encoder)."""
    import pillow_heif

    pillow_heif.register_heif_opener()
    path.parent.mkdir(parents=True, exist_ok=True)
    picture(size, seed).save(path, "HEIF", quality=70)
    return path


def animated_gif(path: Path, frames: int = 4, size: tuple[int, int] = (120, 90)) -> Path:
    """An animated GIF whose frames differ (the thumbnail is of the first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [picture(size, seed=10 + i).convert("P") for i in range(frames)]
    images[0].save(path, save_all=True, append_images=images[1:], duration=100, loop=0)
    return path


def multipage_tiff(path: Path, pages: int = 3, size: tuple[int, int] = (200, 150)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [picture(size, seed=20 + i) for i in range(pages)]
    images[0].save(path, save_all=True, append_images=images[1:])
    return path


def pdf(path: Path, *, pages: int = 3, title: str = "A Field Guide", author: str = "M. Keller",
        subject: str = "birds", keywords: str = "alpine, birds", outline: bool = True) -> Path:
    """A PDF with text on every page, metadata (title, author, subject, keywords, creator, dates) and an outline."""
    import pymupdf

    doc = pymupdf.open()
    toc = []
    for n in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((56, 110), f"Chapter {n}", fontsize=18)
        page.insert_textbox(pymupdf.Rect(56, 130, 539, 780), f"Page {n} of {title}. " * 40, fontsize=11)
        toc.append([1, f"Chapter {n}", n])
    if outline:
        doc.set_toc(toc)
    doc.set_metadata({"title": title, "author": author, "subject": subject, "keywords": keywords,
                      "creator": "assay tests", "producer": "PyMuPDF", "creationDate": "D:20240101120000Z",
                      "modDate": "D:20240301120000Z"})
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(path)
    doc.close()
    return path


def encrypted_pdf(path: Path, password: str = "secret") -> Path:
    """A PDF that cannot be opened without its user password."""
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "locked")
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(path, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw=password + "-owner")
    doc.close()
    return path


def broken_pdf(path: Path) -> Path:
    """A file that starts like a PDF and then is garbage."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\n" + bytes(range(256)) * 4)
    return path


def video(path: Path, *, seconds: float = 4, size: str = "320x240", rate: int = 25, audio: bool = True,
          title: str | None = "test video", chapters: list[tuple[float, float, str]] | None = None,
          black_start: float = 0.0) -> Path:
    """An H.264 MP4 of ffmpeg's ``testsrc`` (its frames differ over time: a counter and a moving pattern) with a
    sine tone; optional chapters (start s, end s, title) and ``black_start`` seconds of black at the beginning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    src = f"testsrc=size={size}:rate={rate}:duration={seconds}"
    if black_start:
        src += f",drawbox=x=0:y=0:w=iw:h=ih:color=black:t=fill:enable='lt(t,{black_start})'"
    args = ["-f", "lavfi", "-i", src]
    maps = ["-map", "0:v"]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=44100:duration={seconds}"]
        maps += ["-map", "1:a"]
    meta_file = None
    if chapters:
        meta_file = path.with_name(path.name + ".chapters.txt")
        lines = [";FFMETADATA1", f"title={title or ''}"]
        for start, end, name in chapters:
            lines += ["[CHAPTER]", "TIMEBASE=1/1000", f"START={int(start * 1000)}", f"END={int(end * 1000)}",
                      f"title={name}"]
        meta_file.write_text("\n".join(lines) + "\n")
        args += ["-f", "ffmetadata", "-i", str(meta_file)]
        maps += ["-map_metadata", str(2 if audio else 1), "-map_chapters", str(2 if audio else 1)]
    elif title:
        maps += ["-metadata", f"title={title}"]
    codec = ["-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-g", str(rate)]
    if audio:
        codec += ["-c:a", "aac", "-b:a", "64k"]
    try:
        ffmpeg(*args, *maps, *codec, "-t", str(seconds), "-movflags", "+faststart", "file:" + str(path))
    finally:
        if meta_file is not None:
            meta_file.unlink(missing_ok=True)
    return path


def audio(path: Path, *, seconds: float = 3, title: str = "test tone", artist: str = "assay",
          cover: Path | None = None) -> Path:
    """An MP3 (by extension; .m4a / .ogg / .wav work too) of a sine tone with tags, optionally with cover art."""
    path.parent.mkdir(parents=True, exist_ok=True)
    args = ["-f", "lavfi", "-i", f"sine=frequency=660:sample_rate=44100:duration={seconds}"]
    maps = ["-map", "0:a"]
    if cover is not None:
        args += ["-i", "file:" + str(cover)]
        maps += ["-map", "1:v", "-c:v", "mjpeg", "-disposition:v", "attached_pic"]
        if path.suffix.lower() == ".mp3":
            maps += ["-id3v2_version", "3"]
    ffmpeg(*args, *maps, "-metadata", f"title={title}", "-metadata", f"artist={artist}", "file:" + str(path))
    return path


def text(path: Path, lines: int = 10, *, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"line {i}: the quick brown fox — café\n" for i in range(lines)), encoding=encoding)
    return path


# --- bad media ------------------------------------------------------------------------------------------------


def truncated_jpeg(path: Path) -> Path:
    """The first third of a real JPEG."""
    jpeg(path, (640, 480))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


def corrupt_mp4(path: Path) -> Path:
    """Bytes that claim to be an MP4 (an ftyp box) followed by garbage."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + bytes(random.Random(7).getrandbits(8)
                                                                                   for _ in range(4096)))
    return path


def empty(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def bomb_png(path: Path, width: int = 50_000, height: int = 50_000) -> Path:
    """A PNG whose header claims ``width`` x ``height`` pixels (2.5 gigapixels by default) with almost no data: a
    decoder that trusts the header would try to allocate gigabytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\x00" * 1024)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


def fifo(path: Path) -> Path:
    """A named pipe (e.g. ``stuck.mp4``): opening it for reading blocks until a writer comes, so a tool reading it
    hangs until its timeout."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


HOSTILE_NAMES = ("-i.mp4", ";rm -rf.mp4", "$(touch pwned).mp4", "a b'c\".mp4", "-vf.jpg")


def keyframe_times(path: Path) -> list[float]:
    """The presentation times (seconds) of the keyframes of the first video stream, as ffprobe reads them."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-skip_frame", "nokey",
                          "-show_entries", "frame=pts_time", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return sorted(float(line.split(",")[0]) for line in out.split() if line.strip())


def duration_of(path: Path) -> float:
    """The container's duration in seconds, as ffprobe reads it."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip())

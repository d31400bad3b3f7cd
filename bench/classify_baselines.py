"""The classification benchmark's baselines, run in this process: the plain loops and commands that do the work the
classifier does (thumbnails with Pillow, metadata with Pillow + EXIF / ffprobe / PyMuPDF, hashing with xxh128sum and
the xxhash library, a timeline as one raw ffmpeg command).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from bench.media import Corpus

BOX = (320, 320)
TIMEOUT = 600  # seconds for any one external command here


def baseline_thumbnails(images: list[Path], out: Path) -> float:
    """The plain loop: open, thumbnail, save JPEG, Pillow's defaults, one core. Returns seconds."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for i, p in enumerate(images):
        img = Image.open(p)
        img.thumbnail(BOX)
        img.save(out / f"{i}.jpg", "JPEG")
    return time.perf_counter() - started


def ffprobe(path: Path) -> dict:
    done = subprocess.run(["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams",
                           "-show_chapters", "file:" + str(path)], capture_output=True, timeout=TIMEOUT, check=True)
    return json.loads(done.stdout)


def baseline_metadata(corpus: Corpus) -> tuple[float, int]:
    """The plain loop: Pillow + EXIF (photos), ffprobe (videos), PyMuPDF (PDFs), one core. Returns (seconds, keys
    read), the count only so that nothing is optimised away."""
    import pymupdf
    from PIL import Image
    from PIL.ExifTags import IFD

    keys = 0
    started = time.perf_counter()
    for p in corpus.images:
        with Image.open(p) as img:
            exif = img.getexif()
            keys += len(exif) + len(exif.get_ifd(IFD.Exif)) + len(exif.get_ifd(IFD.GPSInfo)) + len(img.size)
    for p in corpus.videos:
        info = ffprobe(p)
        keys += len(info.get("format", {})) + sum(len(s) for s in info.get("streams", []))
    for p in corpus.pdfs:
        with pymupdf.open(p) as doc:
            keys += len(doc.metadata or {}) + doc.page_count + len(doc.get_toc())
    return time.perf_counter() - started, keys


def baseline_xxh128sum(paths: list[Path]) -> float | None:
    exe = shutil.which("xxh128sum")
    if exe is None:
        return None
    started = time.perf_counter()
    subprocess.run([exe, *map(str, paths)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT,
                   check=True)  # its stderr: a progress line for big files
    return time.perf_counter() - started


def baseline_xxhash_loop(paths: list[Path]) -> float:
    """The xxhash library's own streaming loop (xxh3-128, 1 MiB buffer), one core."""
    import xxhash

    buf = bytearray(1 << 20)
    view = memoryview(buf)
    started = time.perf_counter()
    for p in paths:
        h = xxhash.xxh3_128()
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(view[:n])
        h.hexdigest()
    return time.perf_counter() - started


def raw_timeline(video: Path, timestamps: list[float], out: Path) -> float:
    """One ffmpeg command extracting the frames at ``timestamps``: an input per frame, each with its own fast input
    seek, each scaled into the box and written as a JPEG. Returns seconds."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
    for t in timestamps:
        cmd += ["-ss", f"{t:.3f}", "-i", "file:" + str(video)]
    scale = f"scale=w={BOX[0]}:h={BOX[1]}:force_original_aspect_ratio=decrease"
    for i in range(len(timestamps)):
        cmd += ["-map", f"{i}:v:0", "-frames:v", "1", "-vf", scale, "file:" + str(out / f"frame-{i}.jpg")]
    started = time.perf_counter()
    subprocess.run(cmd, capture_output=True, timeout=TIMEOUT, check=True)
    return time.perf_counter() - started

"""Bad files, the ones a reader must survive: cut short, corrupt, empty, huge or lying about their size, a FIFO named
like a video (ffprobe blocks on it until its timeout), binary bytes named like text, and file names ffmpeg could read
as options or a shell as commands (``HOSTILE_NAMES``)."""

from __future__ import annotations

import os
import random
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

from .files import prepare
from .images import jpeg

HOSTILE_NAMES = ("-i.mp4", ";rm -rf.mp4", "$(touch pwned).mp4", "a b'c\".mp4", "-vf.jpg")


def truncated(path: str | Path, make: Callable[[Path], object], part: int) -> Path:
    """The first 1/``part`` of the bytes ``make(path)`` writes."""
    path = prepare(path)
    make(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // part])
    return path


def truncated_jpeg(path: str | Path) -> Path:
    """The first third of a real JPEG (640 x 480)."""
    return truncated(path, lambda p: jpeg(p, (640, 480)), 3)


def broken_pdf(path: str | Path) -> Path:
    """A file that starts like a PDF and then is garbage."""
    path = prepare(path)
    path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\n" + bytes(range(256)) * 4)
    return path


def corrupt_mp4(path: str | Path) -> Path:
    """Bytes that claim to be an MP4 (an ftyp box) followed by garbage."""
    path = prepare(path)
    noise = bytes(random.Random(7).getrandbits(8) for _ in range(4096))
    path.write_bytes(b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + noise)
    return path


def empty(path: str | Path) -> Path:
    """A 0-byte file."""
    path = prepare(path)
    path.write_bytes(b"")
    return path


def bomb_png(path: str | Path, width: int = 50_000, height: int = 50_000) -> Path:
    """A PNG whose header claims ``width`` x ``height`` pixels (2.5 gigapixels by default) with almost no data: a
    decoder that trusts the header would try to allocate gigabytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\x00" * 1024)
    path = prepare(path)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


def fifo(path: str | Path) -> Path:
    """A named pipe (e.g. ``stuck.mp4``): opening it for reading blocks until a writer comes, so a tool reading it
    hangs until its timeout."""
    path = prepare(path)
    os.mkfifo(path)
    return path


def binary_txt(path: str | Path, size: int = 4096) -> Path:
    """Random bytes with NUL bytes in them, named like text (e.g. ``blob.txt``)."""
    path = prepare(path)
    rng = random.Random(13)
    data = bytearray(rng.getrandbits(8) for _ in range(size))
    data[10:14] = b"\x00\x00\x00\x00"
    path.write_bytes(bytes(data))
    return path


def big_file(path: str | Path, size: int = 100 * 1024 * 1024) -> Path:
    """A sparse file of ``size`` bytes (zeros; takes no disk space): for the size limit."""
    path = prepare(path)
    with open(path, "wb") as f:
        f.truncate(size)
    return path


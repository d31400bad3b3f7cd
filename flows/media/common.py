"""What every extractor shares: the short error they raise, the one way external tools are run (no shell, a
timeout, killed when it expires), telling a full disk from a bad file, fitting a size into the thumbnail box and
encoding the JPEG.

Extractors raise :class:`MediaError` with a message a person can act on ("cannot identify image file (truncated or
not an image)"); the worker puts it into ``FileResult.errors`` under the operation's name. A full disk is not the
file's fault and would fail every file after it the same way, so it is never a MediaError: :func:`no_space` turns
what the OS (ENOSPC, EDQUOT), SQLite, ffmpeg or MuPDF say about it into :class:`~store.errors.NoSpace` (NO_SPACE),
which stops the run instead of recording one error per file.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import shutil
import subprocess
from typing import Sequence

from PIL import Image

from store.errors import NoSpace

log = logging.getLogger(__name__)

FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# how a write that found the disk full ends a message that carries no errno: strerror(ENOSPC) and strerror(EDQUOT) as
# ffmpeg and MuPDF print them ("av_interleaved_write_frame(): No space left on device", "code=2: cannot fwrite: No
# space left on device"), and SQLite's SQLITE_FULL as raw sqlite3 errors word it ("database or disk is full"). Only
# a line's end counts: a file name holding these words is not a full disk
FULL_DISK_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")


class MediaError(Exception):
    """A file could not be read or made into the requested artifact; the message is short and human."""


def says_full_disk(text: str) -> bool:
    """Whether a line of ``text`` ends with what a write to a full disk says (see ``FULL_DISK_WORDS``)."""
    for line in text.lower().splitlines():
        line = line.strip()
        if any(line == words or line.endswith(": " + words) for words in FULL_DISK_WORDS):
            return True
    return False


def is_full_disk(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or while handling, says the disk written to is full: a
    NoSpace, an OSError with errno ENOSPC or EDQUOT, or another exception whose message ends so (MuPDF's, say)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, NoSpace):
            return True
        if isinstance(exc, OSError) and exc.errno is not None:
            if exc.errno in FULL_DISK_ERRNOS:
                return True
        elif says_full_disk(str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def no_space(exc: BaseException | None, where: str | os.PathLike[str] | None = None) -> NoSpace | None:
    """``exc`` as :class:`NoSpace` when it says the disk is full (see :func:`is_full_disk`), else None. ``where``
    names what was being written (the cache folder, a temporary folder), so the person knows which disk to free."""
    if exc is None or not is_full_disk(exc):
        return None
    if isinstance(exc, NoSpace):
        return exc
    if where is None and isinstance(exc, OSError) and exc.filename is not None:
        where = exc.filename
    disk = f"the disk holding {os.fspath(where)}" if where is not None else "the disk written to"
    return NoSpace(f"{disk} is full ({_said(exc)}); free space and run the work again: what was done before is kept")


def _said(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def tool(name: str) -> str:
    """The absolute path of an external tool (ffmpeg / ffprobe), or MediaError saying how to install it."""
    found = shutil.which(name)
    if found is None:
        raise MediaError(f"{name} is not installed (./scripts/setup installs the ffmpeg package)")
    return found


def input_path(path: str) -> str:
    """``path`` as ffmpeg/ffprobe must see it: ``file:`` + the absolute path, so a name such as ``-i.mp4`` is never
    read as an option and no protocol (``concat:``, ``http:``) is ever inferred from it."""
    return "file:" + os.path.abspath(path)


def run_tool(cmd: Sequence[str], *, timeout: float, what: str, writes_to: str | None = None) -> bytes:
    """Run ``cmd`` (a list: never a shell) and return its stdout; stderr's last line becomes the error when it fails.

    On timeout the process is killed and reaped, and the error says so ("ffprobe timed out after 5 s"). Output is
    read through pipes; callers ask only for small outputs (JSON, one scaled frame). A tool that failed writing its
    output to a full disk raises NoSpace (naming ``writes_to``, where it wrote), not MediaError: ffmpeg's last line
    is then often only "Conversion failed!", so all of stderr is read for it."""
    try:
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise MediaError(f"cannot start {what}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise MediaError(f"{what} timed out after {timeout:g} s") from None
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    # ffmpeg 5 may exit 0 after "Error closing file ...: No space left on device": its output is cut short, so a
    # full disk is looked for in stderr whatever the exit status
    if says_full_disk(err.decode("utf-8", "replace")):
        raise NoSpace(f"{what} could not write its output: the disk holding {writes_to or 'it'} is full (no "
                      "space left on device); free space and run the work again")
    if proc.returncode != 0:
        raise MediaError(f"{what} failed: {last_line(err) or f'exit status {proc.returncode}'}")
    return out


def last_line(stderr: bytes, limit: int = 200) -> str:
    """The last non-empty line of a tool's stderr, shortened, without the ``file:/abs/path: `` prefix ffmpeg adds."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[-1]
    if line.startswith("file:") and ": " in line:
        line = line.rsplit(": ", 1)[-1]
    return line[:limit]


def fit(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """The largest size within ``max_width`` x ``max_height`` with the aspect of ``width`` x ``height`` (never
    upscaled, never below 1 pixel)."""
    if width <= 0 or height <= 0:
        return (max(width, 1), max(height, 1))
    scale = min(max_width / width, max_height / height, 1.0)
    return (max(1, round(width * scale)), max(1, round(height * scale)))


def to_rgb(img: Image.Image) -> Image.Image:
    """``img`` as RGB; transparency (RGBA, LA, palette with a transparent colour) is flattened onto white."""
    if img.mode == "RGB":
        return img
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        img = img.point(lambda v: v / 256) if img.mode != "I" else img
        return img.convert("L").convert("RGB")
    return img.convert("RGB")


def encode_jpeg(img: Image.Image, quality: int) -> bytes:
    """``img`` as JPEG bytes at ``quality`` (RGB, flattened)."""
    buf = io.BytesIO()
    to_rgb(img).save(buf, "JPEG", quality=max(1, min(int(quality), 100)), optimize=False)
    return buf.getvalue()


def image_from_bytes(data: bytes, what: str) -> Image.Image:
    """A decoded frame a tool wrote to its stdout (PPM/PNG), loaded now so the bytes can go."""
    if not data:
        raise MediaError(f"{what} produced no frame")
    img = Image.open(io.BytesIO(data))
    img.load()
    return img

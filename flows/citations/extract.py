"""Physical resolution: an address cut out of its source into a file of the content cache.

Pages of a document become a new PDF (PyMuPDF ``insert_pdf``, one call per range, in the address's order; EPUB, XPS
and the other formats PyMuPDF opens go through ``convert_to_pdf``); a time range of a video or audio file becomes a
clip (one ffmpeg process: stream copy from the nearest keyframe at or before the start by default, a re-encode cut at
the exact times with ``exact``); a bbox of an image becomes a PNG crop (Pillow, EXIF orientation applied first, so the
fractions are of the image as it is displayed); a line range becomes a UTF-8 text file.

An excerpt's cache path is ``cache/ab/cd/<key>.<ext>`` where the key (:func:`output_key`) hashes the source's content
hash, the address's fragment and ``exact``, never the resource id or any caller text: the same excerpt of the same
content is one file, reused (:func:`extract` returns at once when it exists) until the source changes, and no name
can leave the cache. A new excerpt is written under a temporary name in its target directory, checked (not empty,
opens, holds what was asked) and renamed; on any failure the temporary file is removed and CitationError
EXTRACTION_FAILED says what PyMuPDF, Pillow or ffmpeg said. A full disk under the cache is not the source's fault:
it is NoSpace (NO_SPACE) naming the cache folder written to, whoever noticed it (MuPDF, Pillow, ffmpeg, a write).

Paths and addresses reaching here were checked by the caller (the file inside the roots, the address against the
source's facts: ``flows.citations.address.check_address``); ffmpeg still gets an argument list, never a shell, with the
input as ``file:`` + an absolute path (a file named ``-x.mp4`` is no option) and a timeout.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import xxhash
from PIL import Image, ImageOps

from flows.addresses.model import Address, format_number
from flows.citations.model import SourceFacts
from flows.documents import formats
from flows.documents.extract import ExtractionFailed
from flows.documents.extract.text import decode, newlines, read_bounded
from flows.documents.model import ExtractOptions
from flows.media import common
from flows.media.common import MediaError, input_path, no_space, tool
from flows.media.images import open_image
from flows.media.pdf import load_pymupdf, mupdf_said, open_pdf
from store import cache
from store.errors import CitationError

log = logging.getLogger(__name__)

KEY_VERSION = "1"  # part of every key: bump it when an excerpt's bytes would change for the same address

# a copied clip keeps its source's container when that container holds whatever it held (suffix -> ffmpeg muxer,
# cache extension); any other source is copied into Matroska, which holds every codec
_VIDEO_COPY = {".mp4": ("mp4", "mp4"), ".m4v": ("mp4", "mp4"), ".mov": ("mov", "mov"), ".mkv": ("matroska", "mkv"),
               ".webm": ("webm", "webm")}
_AUDIO_COPY = {".mp3": ("mp3", "mp3"), ".m4a": ("mp4", "m4a"), ".m4b": ("mp4", "m4a"), ".mp4": ("mp4", "m4a"),
               ".aac": ("adts", "aac"), ".flac": ("flac", "flac"), ".wav": ("wav", "wav"), ".ogg": ("ogg", "ogg"),
               ".oga": ("ogg", "ogg"), ".opus": ("ogg", "opus"), ".mka": ("matroska", "mka")}
# an exact audio clip is re-encoded into its source's format (suffix -> muxer, extension, encoder), others into WAV
# (16-bit PCM); FLAC is always re-encoded: it is lossless, fast, and its copied header would claim the source's length
_AUDIO_EXACT = {".mp3": ("mp3", "mp3", ["-c:a", "libmp3lame", "-q:a", "2"]),
                ".m4a": ("mp4", "m4a", ["-c:a", "aac", "-b:a", "192k"]),
                ".m4b": ("mp4", "m4a", ["-c:a", "aac", "-b:a", "192k"]),
                ".mp4": ("mp4", "m4a", ["-c:a", "aac", "-b:a", "192k"]),
                ".aac": ("adts", "aac", ["-c:a", "aac", "-b:a", "192k"]),
                ".flac": ("flac", "flac", ["-c:a", "flac"]),
                ".ogg": ("ogg", "ogg", ["-c:a", "libvorbis", "-q:a", "6"]),
                ".oga": ("ogg", "ogg", ["-c:a", "libvorbis", "-q:a", "6"]),
                ".opus": ("ogg", "opus", ["-c:a", "libopus", "-b:a", "128k"])}
_WAV = ("wav", "wav", ["-c:a", "pcm_s16le"])
_PNG_MODES = {"1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"}


@dataclass(frozen=True)
class Extracted:
    """An excerpt in the content cache: its cache path (``cache/ab/cd/<key>.<ext>``, relative to the data dir, the
    form ``/api/content?path=`` and ``synthesis://content/`` take), its absolute path, MIME type and size, and whether
    it was there already (``cached``: nothing was cut)."""

    cache_path: str
    path: Path
    mime_type: str
    size_bytes: int
    cached: bool


def output_key(source_hash: str, address: Address, exact: bool) -> str:
    """The name of an excerpt (32 hex digits): xxh3-128 of the source's content hash, the modality and canonical
    fragment of the address (``pages=2-3``: the resource id is left out, so renaming a resource or citing the same
    content under two ids shares the file) and ``exact`` (for clips only: pages, crops and lines are exact anyway)."""
    exact = exact and address.modality in ("video", "audio")
    text = "\n".join((KEY_VERSION, source_hash, address.modality, address.fragment(), "exact" if exact else "copy"))
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8"))


def extract(data_dir: str | Path, source_path: str, source_hash: str, address: Address, facts: SourceFacts, *,
            exact: bool = False, text_lines: Callable[[int, int], list[str]] | None = None) -> Extracted:
    """Cut ``address`` out of the file at ``source_path`` (content hash ``source_hash``, extent ``facts``) into the
    content cache under ``data_dir``, or find it there (touched, so a sweep keeps it). ``exact``: re-encode clips
    for frame accuracy. ``text_lines(first, last)``: the lines of a text resource whose text comes from the documents
    capability's extraction (HTML, DOCX); without it the file is read as text. CitationError EXTRACTION_FAILED
    (corrupt, truncated, encrypted, a copy that produced nothing), INVALID_ADDRESS (a crop of zero pixels, pages or
    lines past what the file holds)."""
    modality = address.modality
    suffix = Path(source_path).suffix.lower()
    if modality == "document":
        ext = "pdf"
    elif modality == "image":
        ext = "png"
    elif modality == "text":
        ext = "txt"
    else:  # video, audio
        ext = _clip_format(modality, suffix, exact)[1]
    key = output_key(source_hash, address, exact)
    rel = f"{cache.CACHE_DIR}/{key[:2]}/{key[2:4]}/{key}.{ext}"
    target = cache.file_of(data_dir, rel)
    try:
        os.utime(target)  # fresh again: the sweep keeps young files
        return Extracted(rel, target, cache.mime_type(rel), target.stat().st_size, cached=True)
    except FileNotFoundError:
        pass
    with cache.written_beside(target) as tmp:  # nothing half-written is ever left in the cache
        if modality == "document":
            _pdf_pages(source_path, suffix, address, tmp)
        elif modality == "image":
            _crop(source_path, address, tmp)
        elif modality == "text":
            _lines(source_path, address, facts, tmp, text_lines)
        else:
            _clip(source_path, suffix, address, facts, exact, tmp)
        size = os.path.getsize(tmp)
        if size == 0:
            raise CitationError("EXTRACTION_FAILED", f"{address.format()}: extracting produced an empty file",
                                field="address")
    log.info("extracted %s from %s into %s (%d bytes)", address.format(), source_path, rel, size)
    return Extracted(rel, target, cache.mime_type(rel), size, cached=False)


def _failed(address: Address, what: str) -> CitationError:
    return CitationError("EXTRACTION_FAILED", f"{address.format()}: {what}", field="address")


# --- documents ----------------------------------------------------------------------------------------------------


def _open_document(path: str, suffix: str, address: Address):
    """The PyMuPDF document of ``path`` (a PDF, or another format PyMuPDF opens, by its extension)."""
    if suffix == ".pdf":
        try:
            return open_pdf(path)
        except MediaError as exc:
            raise _failed(address, str(exc)) from None
    pymupdf = load_pymupdf()
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    try:
        doc = pymupdf.open(path, filetype=formats.PYMUPDF.get(suffix, suffix.lstrip(".")))
    except Exception as exc:  # noqa: BLE001 - FileDataError, EmptyFileError, RuntimeError: all "cannot open"
        raise _failed(address, f"cannot open the document: {(mupdf_said(pymupdf) or str(exc))[:200]}") from None
    if doc.needs_pass:
        doc.close()
        raise _failed(address, "the document is encrypted: it needs a password")
    return doc


def _pdf_pages(path: str, suffix: str, address: Address, tmp: str) -> None:
    """The address's pages, in its order, as a new PDF at ``tmp`` (every page for the whole document)."""
    src = _open_document(path, suffix, address)
    pymupdf = load_pymupdf()  # heavy: imported on first use (_open_document has loaded it already)
    out = pymupdf.open()
    try:
        count = src.page_count
        ranges = list(address.pages) if address.pages else [(1, count)]
        past = [f"{a}-{b}" if a != b else str(a) for a, b in ranges if b > count or a < 1]
        if count < 1 or past:
            raise CitationError("INVALID_ADDRESS", f"{address.format()}: page(s) {', '.join(past) or '1'} are past "
                                                   f"the end: the document has {count} page(s)", field="address")
        wanted = sum(b - a + 1 for a, b in ranges)
        # insert_pdf visits every page of the source to mend its form fields before copying any (300 page loads for
        # a 10-page excerpt of a 300-page book); a PDF without a form has none to mend or copy
        widgets = bool(src.is_pdf and src.is_form_pdf)
        try:
            for first, last in ranges:
                if src.is_pdf:
                    out.insert_pdf(src, from_page=first - 1, to_page=last - 1, widgets=widgets)
                else:  # EPUB, XPS, FB2, ...: laid out and written as PDF, then inserted
                    with pymupdf.open("pdf", src.convert_to_pdf(from_page=first - 1, to_page=last - 1)) as part:
                        out.insert_pdf(part)
            if out.page_count != wanted:
                raise _failed(address, f"only {out.page_count} of {wanted} page(s) could be copied")
            out.save(tmp)
        except CitationError:
            raise
        except Exception as exc:  # noqa: BLE001 - MuPDF's errors on a damaged page or object
            full = no_space(exc, Path(tmp).parent)  # "cannot fwrite: No space left on device": not the file's fault
            if full is not None:
                raise full from exc
            raise _failed(address, f"cannot copy the pages: {str(exc)[:200]}") from None
    finally:
        out.close()
        src.close()


# --- images -------------------------------------------------------------------------------------------------------


def crop_box(width: int, height: int, bbox: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
    """The pixel box (left, top, right, bottom) of a bbox of fractions on a ``width`` x ``height`` image, rounded to
    the nearest pixel edges and kept inside the image."""
    x1, y1, x2, y2 = bbox
    left, right = (min(max(round(v * width), 0), width) for v in (x1, x2))
    top, bottom = (min(max(round(v * height), 0), height) for v in (y1, y2))
    return left, top, right, bottom


def _crop(path: str, address: Address, tmp: str) -> None:
    """The bbox of the image as displayed (EXIF orientation applied) as a PNG at ``tmp``; the whole image without
    one. INVALID_ADDRESS when the crop rounds to zero pixels."""
    try:
        img = open_image(path)
    except MediaError as exc:
        raise _failed(address, str(exc)) from None
    try:
        try:
            img.seek(0)  # an animated GIF or a multi-page TIFF: the first frame
            img.load()
            shown = ImageOps.exif_transpose(img)
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
            raise _failed(address, f"cannot decode the image: {str(exc)[:200] or type(exc).__name__}") from None
        if address.bbox is not None:
            box = crop_box(shown.width, shown.height, address.bbox)
            if box[2] - box[0] < 1 or box[3] - box[1] < 1:
                raise CitationError(
                    "INVALID_ADDRESS", f"{address.format()}: the region rounds to {box[2] - box[0]}x{box[3] - box[1]} "
                    f"pixels of the {shown.width}x{shown.height} image; a bbox must cover at least one pixel each way "
                    f"(here at least {format_number(1 / shown.width)} of the width and "
                    f"{format_number(1 / shown.height)} of the height)", field="address")
            shown = shown.crop(box)
        if shown.mode not in _PNG_MODES:
            has_alpha = "A" in shown.getbands() or "transparency" in shown.info
            shown = shown.convert("RGBA" if has_alpha else "RGB")
        try:
            shown.save(tmp, format="PNG")
        except (OSError, ValueError) as exc:
            full = no_space(exc, Path(tmp).parent)
            if full is not None:
                raise full from exc
            raise _failed(address, f"cannot write the PNG: {str(exc)[:200]}") from None
    finally:
        img.close()


# --- text ---------------------------------------------------------------------------------------------------------


def _lines(path: str, address: Address, facts: SourceFacts, tmp: str,
           text_lines: Callable[[int, int], list[str]] | None) -> None:
    """The address's lines (1-based, inclusive; every line for the whole resource) as UTF-8 text at ``tmp``, each
    ending with a newline."""
    if text_lines is not None:
        first, last = address.lines or (1, facts.line_count or 0)
        lines = list(text_lines(first, last)) if last >= first else []
        count = facts.line_count
    else:
        try:
            text, _ = decode(read_bounded(path, ExtractOptions().max_bytes))
        except ExtractionFailed as exc:
            raise _failed(address, str(exc)) from None
        except OSError as exc:
            raise _failed(address, f"cannot read the file: {exc.strerror or exc}") from None
        every = newlines(text).split("\n") if text else []
        count = len(every)
        first, last = address.lines or (1, count)
        lines = every[first - 1:last]
    if not lines or len(lines) != last - first + 1:
        raise CitationError("INVALID_ADDRESS", f"{address.format()}: lines {first}-{last} are past the end: the text "
                                               f"has {count if count is not None else len(lines)} line(s)",
                            field="address")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as exc:
        full = no_space(exc, Path(tmp).parent)
        if full is not None:
            raise full from exc
        raise


# --- video and audio ----------------------------------------------------------------------------------------------


def _clip_format(modality: str, suffix: str, exact: bool) -> tuple[str, str, list[str]]:
    """(ffmpeg muxer, cache extension, codec arguments) of a clip of a ``modality`` file with this suffix."""
    if modality == "video":
        if exact:
            return "mp4", "mp4", ["-map", "0:V:0", "-map", "0:a?", "-sn", "-dn",
                                  "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2,format=yuv420p",
                                  "-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac", "-b:a", "160k"]
        muxer, ext = _VIDEO_COPY.get(suffix, ("matroska", "mkv"))
        drop = ["-dn"] if muxer in ("mp4", "mov", "webm") else []  # timecode / telemetry tracks: no need, no room
        return muxer, ext, ["-map", "0", *drop, "-c", "copy"]
    if exact or suffix == ".flac":  # a copied FLAC keeps its source's STREAMINFO (the whole file's length)
        muxer, ext, codec = _AUDIO_EXACT.get(suffix, _WAV)
        return muxer, ext, ["-map", "0:a", "-vn", "-sn", "-dn", *codec]
    muxer, ext = _AUDIO_COPY.get(suffix, ("matroska", "mka"))
    return muxer, ext, ["-map", "0:a", "-c", "copy"]


def clip_timeout(seconds: float, exact: bool) -> float:
    """How long one ffmpeg run may take for a clip of ``seconds``: a copy moves bytes, a re-encode decodes and
    encodes every frame (veryfast x264 runs several times real time at 1080p on one core)."""
    return 60.0 + seconds * (2.0 if exact else 0.1)


def clip_command(ffmpeg: str, source_path: str, modality: str, suffix: str, start: float | None,
                 duration: float | None, exact: bool, tmp: str) -> list[str]:
    """The ffmpeg argument list of one clip: the whole file without ``start``."""
    muxer, _, codec = _clip_format(modality, suffix, exact)
    cmd = [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-nostats", "-progress", "pipe:1"]
    if start is not None:
        cmd += ["-ss", f"{start:.3f}"]
    cmd += ["-i", input_path(source_path)]
    if duration is not None:
        cmd += ["-t", f"{duration:.3f}"]
    cmd += [*codec, "-avoid_negative_ts", "make_zero", "-f", muxer, "-y", "file:" + os.path.abspath(tmp)]
    return cmd


def _progress(out: bytes) -> dict[str, str]:
    """The last value of each key of ffmpeg's ``-progress`` report (frame, out_time_us, total_size, ...)."""
    values: dict[str, str] = {}
    for line in out.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _clip(path: str, suffix: str, address: Address, facts: SourceFacts, exact: bool, tmp: str) -> None:
    """The address's time range as a clip at ``tmp`` (one ffmpeg process; an end past the duration is the end)."""
    start = duration = None
    if address.t is not None:
        begin, end = address.t
        if facts.duration is not None:
            end = min(end, facts.duration)
        if end <= begin:
            raise CitationError("INVALID_ADDRESS", f"{address.format()}: starts at or after the end of the "
                                                   f"{format_number(facts.duration or 0)} s source", field="address")
        start, duration = begin, end - begin
    try:
        cmd = clip_command(tool("ffmpeg"), path, address.modality, suffix, start, duration, exact, tmp)
        # common.run_tool, looked up when called: the runner is the seam tests fake. A full cache disk is NoSpace
        # naming the folder the clip was written in (the temporary file itself is gone by then)
        out = common.run_tool(cmd, timeout=clip_timeout(duration or facts.duration or 600.0, exact), what="ffmpeg",
                              writes_to=os.path.dirname(tmp))
    except MediaError as exc:
        raise _failed(address, str(exc)) from None
    done = _progress(out)
    frames = int(done.get("frame", "0") or 0)
    try:
        out_us = int(done.get("out_time_us", "0") or 0)
    except ValueError:  # "N/A" when nothing was written
        out_us = 0
    if (address.modality == "video" and frames == 0) or out_us <= 0:
        hint = "" if exact else (" (with stream copy a clip starts at a keyframe at or before the start, and the "
                                 "source has none there; resolve with exact=true to re-encode the range)")
        raise _failed(address, f"ffmpeg produced no {'frames' if address.modality == 'video' else 'audio'}{hint}")


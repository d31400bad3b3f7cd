"""What a source is (:func:`probe`): its extent in its modality, read by PyMuPDF (pages), the documents capability's
text decoding (lines), ffprobe (duration, size, chapters) or Pillow (size as displayed). A corrupt or truncated file
is CitationError EXTRACTION_FAILED saying what the tool said."""

from __future__ import annotations

import logging
import os
from typing import Any

from flows.citations.model import SourceFacts
from flows.documents.extract import ExtractionFailed, extract_file
from flows.documents.extract.text import decode, newlines, read_bounded
from flows.documents.formats import format_of
from flows.documents.model import ExtractOptions
from flows.media import video
from flows.media.common import MediaError
from flows.media.images import ROTATED, exif_orientation, open_image
from flows.media.pdf import load_pymupdf, mupdf_said, open_pdf
from store.errors import CitationError

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 30.0  # seconds ffprobe may take
TEXT_MAX_BYTES = 50 * 1024 * 1024  # a text source larger than this is refused (as the documents capability does)


def failed(what: str, said: str) -> CitationError:
    """EXTRACTION_FAILED: ``what`` (the tool or step) and what it said."""
    return CitationError("EXTRACTION_FAILED", f"{what}: {said}")


def ffprobe(path: str):
    """ffprobe's answer (format, streams, chapters) through the shared media runner (``flows.media.video``: a
    timeout, killed when it expires)."""
    try:
        return video.probe(path, PROBE_TIMEOUT)
    except MediaError as exc:
        raise failed("ffprobe", str(exc)) from None


def tag(tags: dict[str, Any] | None, name: str) -> str | None:
    """A container tag by name, whatever its case (``title`` / ``TITLE``), None when missing or blank."""
    for key, value in (tags or {}).items():
        if key.lower() == name and isinstance(value, str) and value.strip():
            return value.strip()
    return None


def media_facts(info, modality: str) -> SourceFacts:
    """Duration (and the first video stream's size when cited as video) with what streams and chapters there are;
    a file without a duration or without a stream of its modality is refused."""
    duration = info.duration
    if duration is None or duration <= 0:
        raise failed("ffprobe", "the file has no duration (corrupt, truncated or a still image)")
    videos, audios = info.video_streams, info.audio_streams
    if modality == "video" and not videos:
        raise CitationError("UNSUPPORTED_FORMAT", "the file has no video stream: cite it as audio")
    if modality == "audio" and not audios:
        raise CitationError("UNSUPPORTED_FORMAT", "the file has no audio stream")
    width = height = None
    if modality == "video":
        width, height = videos[0].get("width"), videos[0].get("height")
    try:
        start_time = float(info.format.get("start_time") or 0.0)
    except (TypeError, ValueError):
        start_time = 0.0
    extra = {"has_video": bool(videos), "has_audio": bool(audios), "chapters": len(info.data.get("chapters") or []),
             "format": info.format.get("format_name")}
    if modality == "video":
        extra["frame_rate"] = (video.frame_rate(videos[0].get("avg_frame_rate"))
                               or video.frame_rate(videos[0].get("r_frame_rate")))
    if start_time:
        extra["start_time"] = start_time
    return SourceFacts(modality=modality, duration=round(duration, 3), width=width, height=height,
                       extra=tuple(extra.items()))


def open_document(path: str, fmt: str | None):
    """The PyMuPDF document of ``path`` (a PDF, or another format PyMuPDF opens), or EXTRACTION_FAILED."""
    if fmt == "pdf" or (fmt is None and path.lower().endswith(".pdf")):
        try:
            return open_pdf(path)
        except MediaError as exc:
            raise failed("PyMuPDF", str(exc)) from None
    pymupdf = load_pymupdf()
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    try:
        doc = pymupdf.open(path)
    except Exception as exc:  # noqa: BLE001 - every "cannot open" of MuPDF
        raise failed("PyMuPDF", f"cannot open: {(mupdf_said(pymupdf) or str(exc))[:200]}") from None
    if doc.needs_pass:
        doc.close()
        raise failed("PyMuPDF", "encrypted document: needs a password")
    try:
        pages = doc.page_count
    except Exception as exc:  # noqa: BLE001 - a reflowable document that cannot be laid out
        doc.close()
        raise failed("PyMuPDF", f"cannot lay out the pages: {exc}") from None
    if pages < 1:
        doc.close()
        raise failed("PyMuPDF", "no readable pages")
    return doc


def document_facts(doc) -> SourceFacts:
    extra: dict[str, Any] = {}
    try:
        rect = doc[0].rect
        extra = {"page_width": round(rect.width, 2), "page_height": round(rect.height, 2)}
    except Exception:  # noqa: BLE001 - the size is a nicety
        log.debug("page 1 size unknown", exc_info=True)
    return SourceFacts(modality="document", page_count=doc.page_count, extra=tuple(extra.items()))


def text_format(path: str, fmt: str | None) -> str:
    """The documents capability's format of a text source (markdown, text, code, html, docx); "text" by default."""
    return fmt or format_of(os.path.basename(path)) or "text"


def read_text(path: str, fmt: str | None = None) -> str:
    """The text of a text source as the documents capability numbers its lines: Markdown, plain text and code
    decoded (BOM, UTF-8, else detected), ``\\r\\n``/``\\r`` as ``\\n``, the final line end dropped; HTML, DOCX and
    other formats through the documents extractor (their pages joined by a line end). EXTRACTION_FAILED when the
    file is binary, too large or unreadable."""
    fmt = text_format(path, fmt)
    if fmt in ("markdown", "text", "code"):
        try:
            return newlines(decode(read_bounded(path, TEXT_MAX_BYTES))[0])
        except ExtractionFailed as exc:
            raise failed("reading the text", str(exc)) from None
        except OSError as exc:
            raise failed("reading the text", exc.strerror or str(exc)) from None
    done = extract_file(os.path.abspath(path), ExtractOptions(ocr=False))
    if done.error_code:
        raise failed("extracting the text", done.error or done.error_code)
    return "\n".join(page.text for page in done.pages)


def line_count(text: str) -> int:
    """Lines of text already normalised (``newlines``): one more than its line ends; an empty text has none."""
    return len(text.split("\n")) if text else 0


def probe(path: str, modality: str, *, fmt: str | None = None, text: str | None = None) -> SourceFacts:
    """What the source at ``path`` is, in ``modality``: page count (document; page 1's size in points in extra),
    line count (text; ``text`` is the extracted text for formats that need extracting), duration, width, height and
    chapter count (video / audio, by ffprobe), width and height as displayed (image, EXIF orientation applied).
    EXTRACTION_FAILED naming what the tool said for a corrupt or truncated file."""
    if modality == "document":
        doc = open_document(path, fmt)
        try:
            return document_facts(doc)
        finally:
            doc.close()
    if modality == "text":
        if text is None:
            text = read_text(path, fmt)
        return SourceFacts(modality="text", line_count=line_count(text),
                           extra=(("format", text_format(path, fmt)),))
    if modality in ("video", "audio"):
        return media_facts(ffprobe(path), modality)
    if modality == "image":
        return image_facts(path)
    raise CitationError("UNSUPPORTED_FORMAT", f"unknown modality {modality!r}; known: document, text, video, audio, "
                                              "image")


def image_facts(path: str) -> SourceFacts:
    """Width and height as displayed (EXIF orientations 5-8 swap them, as ``ImageOps.exif_transpose`` would), from
    the header alone."""
    try:
        img = open_image(path)
    except MediaError as exc:
        raise failed("Pillow", str(exc)) from None
    try:
        width, height = img.size
        orientation = exif_orientation(img)
        fmt = img.format
    finally:
        img.close()
    if orientation in ROTATED:
        width, height = height, width
    return SourceFacts(modality="image", width=width, height=height,
                       extra=(("format", fmt), ("orientation", orientation)))

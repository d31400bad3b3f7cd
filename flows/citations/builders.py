"""Maps built locally: what a source is (:func:`probe`) and its tree of nodes (:func:`build`), per modality.

- document (PyMuPDF: PDF, EPUB, XPS ...): ``outline`` (the table of contents, nested; a node's pages run from its page
  to the page before the next entry at the same or a higher level) or ``windows`` of N pages;
- text (Markdown, plain text, code; HTML / DOCX through their extracted text): ``headings`` (Markdown ATX headings
  outside fences, nested; a node's lines run to the line before the next heading at the same or a higher level) or
  ``windows`` of N lines, numbered as the documents capability numbers them (decoded, ``\\r\\n`` as ``\\n``, the
  final line end not a line);
- video: container ``chapters``, ``scenes`` (cuts where ffmpeg's scene score passes a threshold, on frames scaled
  down first), or ``windows`` of N seconds;
- audio: ``chapters``, ``silences`` (segments of sound between the silences ffmpeg's silencedetect finds; the
  strategy may be named ``scenes``), or ``windows``;
- image: the whole image (regions come from agents).

``auto`` takes the first that applies, in the orders above. A strategy that cannot apply to the modality is
UNSUPPORTED_FORMAT naming the ones that can; a corrupt file is EXTRACTION_FAILED with what ffprobe / PyMuPDF /
Pillow said. Maps larger than ``model.MAX_NODES`` are coarsened (windows doubled, short scenes merged, the deepest
outline level dropped), never refused.

ffmpeg and ffprobe run as argument lists on ``file:`` + the absolute path (a name like ``-x.mp4`` is never an option),
with a timeout, and are killed when ``should_cancel()`` turns true (``flows.outcomes.Cancelled`` is raised). Their
stderr is parsed line by line as it comes, never held whole.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from flows.citations.model import DEFAULT_WINDOW, MAX_NODES, Location, Node, SourceFacts
from store.errors import CitationError, InvalidInput

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 30.0  # seconds ffprobe may take
# seconds a scan (scene cuts, silences) may take: a base plus a share of the source's duration (a scan decodes it all)
SCAN_TIMEOUT_BASE = 120.0
SCAN_TIMEOUT_PER_SECOND = 1.0

SCENE_THRESHOLD = 0.3  # ffmpeg scene score (0-1) above which a frame starts a new scene
SCENE_WIDTH = 160  # frames are scaled to this width before scoring: the score needs shapes and colours, not detail
MIN_SCENE = 1.0  # seconds: a shorter scene is merged into the one before it
SILENCE_NOISE_DB = -35  # silencedetect's noise floor
SILENCE_MIN = 0.5  # seconds of quiet that count as a silence
MIN_SEGMENT = 0.5  # seconds: a shorter sound between silences is merged into its neighbour
TEXT_MAX_BYTES = 50 * 1024 * 1024  # a text source larger than this is refused (as the documents capability does)
SLUG_MAX = 40

APPLICABLE: dict[str, tuple[str, ...]] = {
    "document": ("auto", "outline", "windows"),
    "text": ("auto", "headings", "windows"),
    "video": ("auto", "chapters", "scenes", "windows"),
    "audio": ("auto", "chapters", "silences", "scenes", "windows"),
    "image": ("auto",),
}


@dataclass
class Built:
    """A map built from a file: what it came from (``origin``, one of ``model.ORIGINS``), its title, its node tree
    and the facts of the source it was built from."""

    origin: str
    title: str
    nodes: list[Node]
    facts: SourceFacts


# ---------------------------------------------------------------------------------------------------------- helpers

def _failed(what: str, said: str) -> CitationError:
    return CitationError("EXTRACTION_FAILED", f"{what}: {said}")


def _unsupported(modality: str, strategy: str, reason: str | None = None) -> CitationError:
    allowed = ", ".join(APPLICABLE[modality])
    if modality == "image" and strategy != "auto":
        return CitationError("UNSUPPORTED_FORMAT", f"strategy {strategy!r} does not apply to an image: an image is "
                                                   "mapped whole (strategy auto); regions of an image come from "
                                                   "agents: supply them with map-put", field="strategy")
    why = reason or f"strategy {strategy!r} does not apply to a {modality}"
    return CitationError("UNSUPPORTED_FORMAT", f"{why}; strategies for a {modality}: {allowed}", field="strategy")


def slug(title: str | None, fallback: str) -> str:
    """A node id part from a title: lower case, runs of anything but [a-z0-9] as one "_", at most 40 characters;
    ``fallback`` when nothing is left ("Ünïcode — 2" -> "n_code_2"; "" -> fallback)."""
    text = re.sub(r"[^a-z0-9]+", "_", (title or "").lower()).strip("_")
    text = text[:SLUG_MAX].rstrip("_")
    return text or fallback


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[:SLUG_MAX - len(suffix)] + suffix
    taken.add(name)
    return name


def clock(seconds: float, *, up: bool = False) -> str:
    """``75`` -> "1:15", ``3725`` -> "1:02:05": whole seconds, rounded down (a span's start) or up (``up``: its
    end), so a title's span always covers the node's."""
    total = math.ceil(seconds - 1e-6) if up else math.floor(seconds + 1e-6)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _t(value: float) -> float:
    return round(float(value), 3)


def _whole_window(window: float | None, modality: str, unit: str) -> int:
    if window is None:
        return int(DEFAULT_WINDOW[modality])
    if not math.isfinite(window) or window < 1 or float(window) != int(window):
        raise InvalidInput(f"window must be a whole number of {unit} of at least 1, got {window!r}", field="window")
    return int(window)


def _seconds_window(window: float | None, modality: str) -> float:
    if window is None:
        return float(DEFAULT_WINDOW[modality])
    if not math.isfinite(window) or window <= 0:
        raise InvalidInput(f"window must be a number of seconds above 0, got {window!r}", field="window")
    return float(window)


def _check_window(window: float | None) -> None:
    if window is not None and (not isinstance(window, (int, float)) or not math.isfinite(window) or window <= 0):
        raise InvalidInput(f"window must be a number above 0, got {window!r}", field="window")


# ------------------------------------------------------------------------------------------------- tree from a toc

@dataclass
class _Entry:
    level: int
    title: str
    first: int
    last: int = 0
    children: list["_Entry"] = field(default_factory=list)


def _ranges(items: Sequence[tuple[int, str, int]], extent: int) -> list[_Entry]:
    """Nested entries from flat (level, title, start) items in order: an entry runs from its start to the item
    before the next one at the same or a higher level (never before its own start), else to ``extent``."""
    entries = [_Entry(level, title, start) for level, title, start in items]
    # the next item at the same or a higher level (smaller or equal level number), found with a stack in one pass
    pending: list[_Entry] = []
    for entry in entries:
        while pending and pending[-1].level >= entry.level:
            done = pending.pop()
            done.last = max(done.first, entry.first - 1)
        pending.append(entry)
    for entry in pending:
        entry.last = max(entry.first, extent)
    roots: list[_Entry] = []
    stack: list[_Entry] = []
    for entry in entries:
        while stack and stack[-1].level >= entry.level:
            stack.pop()
        (stack[-1].children if stack else roots).append(entry)
        stack.append(entry)
    return roots


def _depth(entries: list[_Entry]) -> int:
    return max((1 + _depth(e.children) for e in entries), default=0)


def _count(entries: list[_Entry]) -> int:
    return sum(1 + _count(e.children) for e in entries)


def _prune(entries: list[_Entry], keep: int) -> None:
    for entry in entries:
        if keep <= 1:
            entry.children = []
        else:
            _prune(entry.children, keep - 1)


def _nodes(entries: list[_Entry], modality: str, kind: str, parent: str = "") -> list[Node]:
    taken: set[str] = set()
    out = []
    for entry in entries:
        node_id = (parent + "." if parent else "") + _unique(slug(entry.title, kind), taken)
        span = [entry.first, entry.last]
        location = Location(modality=modality, pages=span) if modality == "document" else \
            Location(modality=modality, lines=span)  # type: ignore[arg-type]
        out.append(Node(id=node_id, title=entry.title, type=kind, location=location,
                        children=_nodes(entry.children, modality, kind, node_id)))
    return out


def _outline_nodes(items: list[tuple[int, str, int]], extent: int, modality: str) -> list[Node]:
    roots = _ranges(items, extent)
    depth = _depth(roots)
    while _count(roots) > MAX_NODES and depth > 1:  # too many: the deepest level goes
        depth -= 1
        _prune(roots, depth)
    if _count(roots) > MAX_NODES:
        roots = roots[:MAX_NODES]
    return _nodes(roots, modality, "section")


def _count_windows(extent: float, size: float) -> int:
    return max(1, math.ceil(extent / size - 1e-9))


def _coarsen(extent: float, size: float) -> float:
    while _count_windows(extent, size) > MAX_NODES:
        size *= 2
    return size


def _unit_windows(extent: int, size: int, modality: str, label: str) -> list[Node]:
    """Windows of ``size`` pages or lines over 1..extent ("Pages 1-10", "Lines 51-100")."""
    if extent < 1:
        return []
    size = int(_coarsen(extent, size))
    out = []
    for i, first in enumerate(range(1, extent + 1, size), start=1):
        span = [first, min(extent, first + size - 1)]
        location = Location(modality=modality, pages=span) if modality == "document" else \
            Location(modality=modality, lines=span)  # type: ignore[arg-type]
        out.append(Node(id=f"w{i}", title=f"{label} {span[0]}-{span[1]}", type="window", location=location))
    return out


def _time_windows(duration: float, size: float, modality: str) -> list[Node]:
    """Windows of ``size`` seconds over the duration, the last one shorter ("0:00-1:00", "1:00-1:30")."""
    size = _coarsen(duration, size)
    out = []
    count = _count_windows(duration, size)
    for i in range(count):
        start, end = i * size, min(duration, (i + 1) * size)
        if end - start <= 0:
            break
        out.append(Node(id=f"w{i + 1}", title=f"{clock(start)}-{clock(end, up=True)}", type="window",
                        location=Location(modality=modality, start=_t(start), end=_t(end))))  # type: ignore[arg-type]
    return out


# ---------------------------------------------------------------------------------------------- running ffmpeg

def _ffmpeg_lines(cmd: list[str], *, timeout: float, should_cancel: Callable[[], bool], what: str) -> Iterator[str]:
    """Run ``cmd`` (a list, no shell) and yield its stderr line by line as it comes. A watcher kills it when
    ``should_cancel()`` turns true (Cancelled) or the timeout passes (EXTRACTION_FAILED "timed out"); a failure is
    EXTRACTION_FAILED with ffmpeg's last lines. Stdout is discarded."""
    from flows.outcomes import Cancelled

    if should_cancel():
        raise Cancelled(f"{what} not started: cancel requested")
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:
        raise _failed(f"cannot start {what}", exc.strerror or str(exc)) from None
    stopped: list[str] = []
    finished = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not finished.wait(0.1):
            if should_cancel():
                stopped.append("cancelled")
            elif time.monotonic() > deadline:
                stopped.append("timeout")
            if stopped:
                proc.kill()
                return

    watcher = threading.Thread(target=watch, name=f"{what}-watch", daemon=True)
    watcher.start()
    tail: collections.deque[str] = collections.deque(maxlen=4)
    try:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                tail.append(line)
                yield line
        proc.wait()
    finally:
        finished.set()
        if proc.poll() is None:  # the consumer stopped early or raised
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        watcher.join()
    if stopped and stopped[0] == "cancelled":
        raise Cancelled(f"{what} stopped: cancel requested")
    if stopped:
        raise _failed(what, f"timed out after {timeout:g} s")
    if proc.returncode != 0:
        said = next((ln for ln in reversed(tail) if "error" in ln.lower() or "invalid" in ln.lower()), None)
        said = (said or (tail[-1] if tail else f"exit status {proc.returncode}"))
        if said.startswith("file:") and ": " in said:
            said = said.rsplit(": ", 1)[-1]
        raise _failed(what, f"failed: {said[:200]}")


def _scan_timeout(duration: float | None) -> float:
    return SCAN_TIMEOUT_BASE + SCAN_TIMEOUT_PER_SECOND * (duration or 0.0)


_PTS = re.compile(r"\bpts_time:\s*(-?[0-9.]+(?:e[-+]?\d+)?)")
_SILENCE_START = re.compile(r"silence_start:\s*(-?[0-9.]+(?:e[-+]?\d+)?)")
_SILENCE_END = re.compile(r"silence_end:\s*(-?[0-9.]+(?:e[-+]?\d+)?)")


def scene_cuts(path: str, *, duration: float | None = None,
               threshold: float = SCENE_THRESHOLD, should_cancel: Callable[[], bool] = lambda: False) -> list[float]:
    """Seconds from the start of the file (ffmpeg's timeline: the container's start time already removed) where a
    new scene starts, by ffmpeg's scene score (the ``select`` filter) above ``threshold``.

    Decoding is nearly all the cost (the score on a 720p frame is cheap next to decoding it), so the decoder does
    less: ``-skip_frame noref`` decodes no frame other frames do not reference (H.264/HEVC B-frames: a cut is found
    at most a frame or two late, and encoders start a new scene on a reference frame anyway), ``-skip_loop_filter
    all`` skips the deblocking filter (invisible to a whole-frame difference). Frames are scaled to 160 px wide
    before scoring, audio / subtitles / data are not decoded, decoding is threaded. Measured on a 720p
    H.264 of 10 minutes (x264 veryfast, B-frames): 19.7 s of CPU against 39.4 s for ``select='gt(scene,0.3)'`` alone,
    the same cuts; on B-frame MPEG-4 / MPEG-2 cuts come at most 2 frames late, on MJPEG / VP9 exact. The
    selected frames' times come from ``showinfo`` on stderr, read line by line."""
    from flows.classify.media.common import MediaError, input_path, tool

    try:
        ffmpeg = tool("ffmpeg")
    except MediaError as exc:
        raise _failed("ffmpeg", str(exc)) from None
    graph = f"scale={SCENE_WIDTH}:-2:flags=fast_bilinear,select='gt(scene\\,{threshold:g})',showinfo"
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-nostats", "-loglevel", "info", "-threads", "0",
           "-skip_loop_filter", "all", "-skip_frame", "noref", "-i", input_path(path), "-map", "0:v:0", "-an", "-sn", "-dn",
           "-vf", graph, "-f", "null", "-"]
    cuts = []
    for line in _ffmpeg_lines(cmd, timeout=_scan_timeout(duration), should_cancel=should_cancel,
                              what="ffmpeg scene detection"):
        if "Parsed_showinfo" not in line:
            continue
        found = _PTS.search(line)
        if found:
            cuts.append(float(found.group(1)))
    return sorted(c for c in cuts if c > 0)


def silences(path: str, *, duration: float | None = None,
             should_cancel: Callable[[], bool] = lambda: False) -> list[tuple[float, float]]:
    """(start, end) seconds of the silences ffmpeg's silencedetect finds (noise -35 dB, at least 0.5 s); a silence
    still open at the end runs to ``duration``."""
    from flows.classify.media.common import MediaError, input_path, tool

    try:
        ffmpeg = tool("ffmpeg")
    except MediaError as exc:
        raise _failed("ffmpeg", str(exc)) from None
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-nostats", "-loglevel", "info", "-threads", "0",
           "-i", input_path(path), "-map", "0:a:0", "-vn", "-sn", "-dn",
           "-af", f"silencedetect=noise={SILENCE_NOISE_DB}dB:d={SILENCE_MIN:g}", "-f", "null", "-"]
    out: list[tuple[float, float]] = []
    opened: float | None = None
    for line in _ffmpeg_lines(cmd, timeout=_scan_timeout(duration), should_cancel=should_cancel,
                              what="ffmpeg silence detection"):
        if "silencedetect" not in line:
            continue
        if (found := _SILENCE_START.search(line)) is not None:
            opened = max(0.0, float(found.group(1)))
        elif (found := _SILENCE_END.search(line)) is not None and opened is not None:
            out.append((opened, float(found.group(1))))
            opened = None
    if opened is not None and duration is not None and duration > opened:
        out.append((opened, duration))
    return out


def _merge_short(bounds: list[float], shortest: float) -> list[float]:
    """Scene boundaries [0, cut1, ..., duration] without cuts that would leave a scene shorter than ``shortest``
    (it joins the scene before it; a short last scene joins the one before)."""
    out = [bounds[0]]
    for cut in bounds[1:-1]:
        if cut - out[-1] >= shortest:
            out.append(cut)
    end = bounds[-1]
    if len(out) > 1 and end - out[-1] < shortest:
        out.pop()
    out.append(end)
    return out


def _sounds(quiet: list[tuple[float, float]], duration: float) -> list[tuple[float, float]]:
    """The spans of sound between silences, each at least MIN_SEGMENT long (a shorter one joins its neighbour)."""
    spans: list[tuple[float, float]] = []
    at = 0.0
    for start, end in sorted(quiet):
        if start > at:
            spans.append((at, min(start, duration)))
        at = max(at, end)
    if duration > at:
        spans.append((at, duration))
    merged: list[tuple[float, float]] = []
    for span in spans:
        if merged and (span[1] - span[0] < MIN_SEGMENT or merged[-1][1] - merged[-1][0] < MIN_SEGMENT):
            merged[-1] = (merged[-1][0], span[1])
        else:
            merged.append(span)
    return merged


# ------------------------------------------------------------------------------------------------ probing sources

def _ffprobe(path: str):
    from flows.classify.media import video
    from flows.classify.media.common import MediaError

    try:
        return video.probe(path, PROBE_TIMEOUT)
    except MediaError as exc:
        raise _failed("ffprobe", str(exc)) from None


def _tag(tags: dict[str, Any] | None, name: str) -> str | None:
    for key, value in (tags or {}).items():
        if key.lower() == name and isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _media_facts(info, modality: str) -> SourceFacts:
    duration = info.duration
    if duration is None or duration <= 0:
        raise _failed("ffprobe", "the file has no duration (corrupt, truncated or a still image)")
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
    if start_time:
        extra["start_time"] = start_time
    return SourceFacts(modality=modality, duration=round(duration, 3), width=width, height=height,
                       extra=tuple(extra.items()))


def _open_document(path: str, fmt: str | None):
    from flows.classify.media.common import MediaError
    from flows.classify.media.pdf import _mupdf_said, _pymupdf, open_pdf

    if fmt == "pdf" or (fmt is None and path.lower().endswith(".pdf")):
        try:
            return open_pdf(path)
        except MediaError as exc:
            raise _failed("PyMuPDF", str(exc)) from None
    pymupdf = _pymupdf()
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    try:
        doc = pymupdf.open(path)
    except Exception as exc:  # noqa: BLE001 - every "cannot open" of MuPDF
        raise _failed("PyMuPDF", f"cannot open: {(_mupdf_said(pymupdf) or str(exc))[:200]}") from None
    if doc.needs_pass:
        doc.close()
        raise _failed("PyMuPDF", "encrypted document: needs a password")
    try:
        pages = doc.page_count
    except Exception as exc:  # noqa: BLE001 - a reflowable document that cannot be laid out
        doc.close()
        raise _failed("PyMuPDF", f"cannot lay out the pages: {exc}") from None
    if pages < 1:
        doc.close()
        raise _failed("PyMuPDF", "no readable pages")
    return doc


def _document_facts(doc) -> SourceFacts:
    extra: dict[str, Any] = {}
    try:
        rect = doc[0].rect
        extra = {"page_width": round(rect.width, 2), "page_height": round(rect.height, 2)}
    except Exception:  # noqa: BLE001 - the size is a nicety
        log.debug("page 1 size unknown", exc_info=True)
    return SourceFacts(modality="document", page_count=doc.page_count, extra=tuple(extra.items()))


def _text_format(path: str, fmt: str | None) -> str:
    from flows.documents.formats import format_of

    return fmt or format_of(os.path.basename(path)) or "text"


def read_text(path: str, fmt: str | None = None) -> str:
    """The text of a text source as the documents capability numbers its lines: Markdown, plain text and code
    decoded (BOM, UTF-8, else detected), ``\\r\\n``/``\\r`` as ``\\n``, the final line end dropped; HTML, DOCX and
    other formats through the documents extractor (their pages joined by a line end). EXTRACTION_FAILED when the
    file is binary, too large or unreadable."""
    from flows.documents.extract import ExtractionFailed
    from flows.documents.extract.text import decode, newlines, read_bounded

    fmt = _text_format(path, fmt)
    if fmt in ("markdown", "text", "code"):
        try:
            return newlines(decode(read_bounded(path, TEXT_MAX_BYTES))[0])
        except ExtractionFailed as exc:
            raise _failed("reading the text", str(exc)) from None
        except OSError as exc:
            raise _failed("reading the text", exc.strerror or str(exc)) from None
    from flows.documents.extract import extract_file
    from flows.documents.model import ExtractOptions

    done = extract_file(os.path.abspath(path), ExtractOptions(ocr=False))
    if done.error_code:
        raise _failed("extracting the text", done.error or done.error_code)
    return "\n".join(page.text for page in done.pages)


def _line_count(text: str) -> int:
    return len(text.split("\n")) if text else 0


def probe(path: str, modality: str, *, fmt: str | None = None, text: str | None = None) -> SourceFacts:
    """What the source at ``path`` is, in ``modality``: page count (document; page 1's size in points in extra),
    line count (text; ``text`` is the extracted text for formats that need extracting), duration, width, height and
    chapter count (video / audio, by ffprobe), width and height as displayed (image, EXIF orientation applied).
    EXTRACTION_FAILED naming what the tool said for a corrupt or truncated file."""
    if modality == "document":
        doc = _open_document(path, fmt)
        try:
            return _document_facts(doc)
        finally:
            doc.close()
    if modality == "text":
        if text is None:
            text = read_text(path, fmt)
        return SourceFacts(modality="text", line_count=_line_count(text),
                           extra=(("format", _text_format(path, fmt)),))
    if modality in ("video", "audio"):
        return _media_facts(_ffprobe(path), modality)
    if modality == "image":
        return _image_facts(path)
    raise CitationError("UNSUPPORTED_FORMAT", f"unknown modality {modality!r}; known: document, text, video, audio, "
                                              "image")


def _image_facts(path: str) -> SourceFacts:
    from flows.classify.media.common import MediaError
    from flows.classify.media.images import _ROTATED, _orientation, open_image

    try:
        img = open_image(path)
    except MediaError as exc:
        raise _failed("Pillow", str(exc)) from None
    try:
        width, height = img.size
        orientation = _orientation(img)
        fmt = img.format
    finally:
        img.close()
    if orientation in _ROTATED:
        width, height = height, width
    return SourceFacts(modality="image", width=width, height=height,
                       extra=(("format", fmt), ("orientation", orientation)))


# ---------------------------------------------------------------------------------------------------- building maps

def _strategy(modality: str, strategy: str) -> str:
    if modality not in APPLICABLE:
        raise CitationError("UNSUPPORTED_FORMAT", f"unknown modality {modality!r}; known: "
                                                  f"{', '.join(APPLICABLE)}")
    if strategy not in APPLICABLE[modality]:
        raise _unsupported(modality, strategy)
    return strategy


def build(path: str, modality: str, *, strategy: str = "auto", window: float | None = None, fmt: str | None = None,
          text: str | None = None, should_cancel: Callable[[], bool] = lambda: False) -> Built:
    """Build the map of the file at ``path`` (checked by the caller: inside the roots, a regular file) in
    ``modality`` with ``strategy`` (``auto`` or one of :data:`APPLICABLE`'s for the modality) and ``window`` (pages,
    lines or seconds of the windows strategy; ``model.DEFAULT_WINDOW`` by default). ``text``: the extracted text of
    a text source whose format needs extracting (HTML, DOCX); read here otherwise."""
    strategy = _strategy(modality, strategy)
    _check_window(window)
    if modality == "document":
        return _build_document(path, strategy, window, fmt)
    if modality == "text":
        return _build_text(path, strategy, window, fmt, text)
    if modality in ("video", "audio"):
        return _build_media(path, modality, strategy, window, should_cancel)
    return Built(origin="whole", title=os.path.basename(path), facts=_image_facts(path),
                 nodes=[Node(id="image", title=os.path.basename(path), type="image",
                             location=Location(modality="image", bbox=[0.0, 0.0, 1.0, 1.0]))])


def _build_document(path: str, strategy: str, window: float | None, fmt: str | None) -> Built:
    size = _whole_window(window, "document", "pages")
    doc = _open_document(path, fmt)
    try:
        facts = _document_facts(doc)
        title = ((doc.metadata or {}).get("title") or "").strip() or os.path.basename(path)
        toc = doc.get_toc(simple=True) if strategy in ("auto", "outline") else []
    except CitationError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken outline or metadata
        raise _failed("PyMuPDF", f"cannot read the outline: {exc}") from None
    finally:
        doc.close()
    pages = facts.page_count or 0
    if strategy in ("auto", "outline") and toc:
        items, last_page = [], 1
        for level, name, page, *_ in toc:
            page = int(page) if isinstance(page, int) and 1 <= page <= pages else last_page  # no target: stay put
            last_page = page
            items.append((max(1, int(level)), str(name).strip(), page))
        return Built(origin="outline", title=title, nodes=_outline_nodes(items, pages, "document"), facts=facts)
    if strategy == "outline":
        raise _unsupported("document", "outline", "the document has no outline (table of contents)")
    return Built(origin="windows", title=title, nodes=_unit_windows(pages, size, "document", "Pages"), facts=facts)


def _build_text(path: str, strategy: str, window: float | None, fmt: str | None, text: str | None) -> Built:
    from flows.documents.extract.text import markdown_outline

    size = _whole_window(window, "text", "lines")
    fmt = _text_format(path, fmt)
    if text is None:
        text = read_text(path, fmt)
    lines = _line_count(text)
    facts = SourceFacts(modality="text", line_count=lines, extra=(("format", fmt),))
    title = os.path.basename(path)
    toc: list = []
    if fmt == "markdown":
        toc, meta = markdown_outline(text)
        title = str(meta.get("title") or "").strip() or title
    if strategy in ("auto", "headings") and toc:
        items = [(item.level, item.title, item.line) for item in toc]
        return Built(origin="headings", title=title, nodes=_outline_nodes(items, lines, "text"), facts=facts)
    if strategy == "headings":
        why = "the Markdown has no headings" if fmt == "markdown" else f"a {fmt} file has no headings (only " \
                                                                         "Markdown has)"
        raise _unsupported("text", "headings", why)
    return Built(origin="windows", title=title, nodes=_unit_windows(lines, size, "text", "Lines"), facts=facts)


def _chapter_nodes(chapters: list[dict[str, Any]], duration: float, modality: str) -> list[Node]:
    taken: set[str] = set()
    out = []
    for i, chapter in enumerate(chapters, start=1):
        try:
            start = float(chapter.get("start_time"))
            end = float(chapter.get("end_time"))
        except (TypeError, ValueError):
            continue
        start, end = max(0.0, start), min(duration, end)
        if end - start <= 0:
            continue
        name = _tag(chapter.get("tags"), "title") or f"Chapter {i}"
        out.append(Node(id=_unique(slug(name, "chapter"), taken), title=name, type="chapter",
                        location=Location(modality=modality, start=_t(start), end=_t(end))))  # type: ignore[arg-type]
    return out[:MAX_NODES]


def _span_nodes(spans: list[tuple[float, float]], modality: str, kind: str, label: str) -> list[Node]:
    return [Node(id=f"{kind}_{i}", title=f"{label} {i} ({clock(start)}-{clock(end, up=True)})", type=kind,
                 location=Location(modality=modality, start=_t(start), end=_t(end)))  # type: ignore[arg-type]
            for i, (start, end) in enumerate(spans, start=1)]


def _scene_spans(cuts: list[float], duration: float) -> list[tuple[float, float]]:
    bounds = _merge_short([0.0, *[c for c in cuts if 0 < c < duration], duration], MIN_SCENE)
    shortest = MIN_SCENE
    while len(bounds) - 1 > MAX_NODES:  # too many scenes: merge more
        shortest *= 2
        bounds = _merge_short(bounds, shortest)
    return list(zip(bounds[:-1], bounds[1:]))


def _build_media(path: str, modality: str, strategy: str, window: float | None,
                 should_cancel: Callable[[], bool]) -> Built:
    size = _seconds_window(window, modality)
    info = _ffprobe(path)
    facts = _media_facts(info, modality)
    duration = float(facts.duration or 0.0)
    title = _tag(info.format.get("tags"), "title") or os.path.basename(path)
    if strategy in ("auto", "chapters"):
        chapters = _chapter_nodes(info.data.get("chapters") or [], duration, modality)
        if chapters:
            return Built(origin="chapters", title=title, nodes=chapters, facts=facts)
        if strategy == "chapters":
            raise _unsupported(modality, "chapters", f"the {modality} has no chapters")
    if strategy in ("auto", "scenes", "silences"):
        if modality == "video":
            cuts = scene_cuts(path, duration=duration, should_cancel=should_cancel)
            spans = _scene_spans(cuts, duration)
            if len(spans) > 1 or strategy == "scenes":
                return Built(origin="scenes", title=title, nodes=_span_nodes(spans, modality, "scene", "Scene"),
                             facts=facts)
        else:
            spans = _sounds(silences(path, duration=duration, should_cancel=should_cancel),
                            duration)
            while len(spans) > MAX_NODES:
                spans = [(a[0], b[1]) for a, b in zip(spans[::2], spans[1::2])] + \
                    ([spans[-1]] if len(spans) % 2 else [])
            if len(spans) > 1 or (strategy != "auto" and spans):
                return Built(origin="silences", title=title,
                             nodes=_span_nodes(spans, modality, "segment", "Segment"), facts=facts)
            if strategy != "auto":
                raise _unsupported(modality, strategy, "the audio is silent throughout: no segment of sound")
    return Built(origin="windows", title=title, nodes=_time_windows(duration, size, modality), facts=facts)

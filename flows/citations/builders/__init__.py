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
with a timeout, and are killed when ``should_cancel()`` turns true (``flows.core.outcomes.Cancelled`` is raised). Their
stderr is parsed line by line as it comes, never held whole.

Modules: ``sources`` (probing: pages, lines, duration, size), ``scan`` (ffmpeg scene cuts and silences), ``tree``
(slugs, nested ranges, windows, coarsening); this one picks the strategy and assembles the map.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from flows.citations.builders.scan import scene_cuts, scene_spans, silences, sounds
from flows.citations.builders.sources import (document_facts, failed, ffprobe, image_facts, line_count, media_facts,
                                              open_document, probe, read_text, tag, text_format)
from flows.citations.builders.tree import (check_window, clock, outline_nodes, rounded, seconds_window, slug,
                                           time_windows, unique_id, unit_windows, whole_window)
from flows.citations.model import MAX_NODES, Location, Node, SourceFacts
from flows.documents.extract.text import markdown_outline
from store.errors import CitationError

__all__ = ["APPLICABLE", "Built", "build", "probe", "read_text", "scene_cuts", "silences", "slug", "clock"]

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


def _unsupported(modality: str, strategy: str, reason: str | None = None) -> CitationError:
    allowed = ", ".join(APPLICABLE[modality])
    if modality == "image" and strategy != "auto":
        return CitationError("UNSUPPORTED_FORMAT", f"strategy {strategy!r} does not apply to an image: an image is "
                                                   "mapped whole (strategy auto); regions of an image come from "
                                                   "agents: supply them with map-put", field="strategy")
    why = reason or f"strategy {strategy!r} does not apply to a {modality}"
    return CitationError("UNSUPPORTED_FORMAT", f"{why}; strategies for a {modality}: {allowed}", field="strategy")


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
    check_window(window)
    if modality == "document":
        return _build_document(path, strategy, window, fmt)
    if modality == "text":
        return _build_text(path, strategy, window, fmt, text)
    if modality in ("video", "audio"):
        return _build_media(path, modality, strategy, window, should_cancel)
    return Built(origin="whole", title=os.path.basename(path), facts=image_facts(path),
                 nodes=[Node(id="image", title=os.path.basename(path), type="image",
                             location=Location(modality="image", bbox=[0.0, 0.0, 1.0, 1.0]))])


def _build_document(path: str, strategy: str, window: float | None, fmt: str | None) -> Built:
    size = whole_window(window, "document", "pages")
    doc = open_document(path, fmt)
    try:
        facts = document_facts(doc)
        title = ((doc.metadata or {}).get("title") or "").strip() or os.path.basename(path)
        toc = doc.get_toc(simple=True) if strategy in ("auto", "outline") else []
    except CitationError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken outline or metadata
        raise failed("PyMuPDF", f"cannot read the outline: {exc}") from None
    finally:
        doc.close()
    pages = facts.page_count or 0
    if strategy in ("auto", "outline") and toc:
        items, last_page = [], 1
        for level, name, page, *_ in toc:
            page = int(page) if isinstance(page, int) and 1 <= page <= pages else last_page  # no target: stay put
            last_page = page
            items.append((max(1, int(level)), str(name).strip(), page))
        return Built(origin="outline", title=title, nodes=outline_nodes(items, pages, "document"), facts=facts)
    if strategy == "outline":
        raise _unsupported("document", "outline", "the document has no outline (table of contents)")
    return Built(origin="windows", title=title, nodes=unit_windows(pages, size, "document", "Pages"), facts=facts)


def _build_text(path: str, strategy: str, window: float | None, fmt: str | None, text: str | None) -> Built:
    size = whole_window(window, "text", "lines")
    fmt = text_format(path, fmt)
    if text is None:
        text = read_text(path, fmt)
    lines = line_count(text)
    facts = SourceFacts(modality="text", line_count=lines, extra=(("format", fmt),))
    title = os.path.basename(path)
    toc: list = []
    if fmt == "markdown":
        toc, meta = markdown_outline(text)
        title = str(meta.get("title") or "").strip() or title
    if strategy in ("auto", "headings") and toc:
        items = [(item.level, item.title, item.line) for item in toc]
        return Built(origin="headings", title=title, nodes=outline_nodes(items, lines, "text"), facts=facts)
    if strategy == "headings":
        why = "the Markdown has no headings" if fmt == "markdown" else f"a {fmt} file has no headings (only " \
                                                                         "Markdown has)"
        raise _unsupported("text", "headings", why)
    return Built(origin="windows", title=title, nodes=unit_windows(lines, size, "text", "Lines"), facts=facts)


def _chapter_nodes(chapters: list[dict[str, Any]], duration: float, modality: str) -> list[Node]:
    taken: set[str] = set()
    out = []
    for i, chapter in enumerate(chapters, start=1):
        try:
            start = float(chapter.get("start_time"))  # type: ignore[arg-type]  # None: TypeError, skipped
            end = float(chapter.get("end_time"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
        start, end = max(0.0, start), min(duration, end)
        if end - start <= 0:
            continue
        name = tag(chapter.get("tags"), "title") or f"Chapter {i}"
        out.append(Node(id=unique_id(slug(name, "chapter"), taken), title=name, type="chapter",
                        location=Location(modality=modality,
                                          start=rounded(start), end=rounded(end))))
    return out[:MAX_NODES]


def _span_nodes(spans: list[tuple[float, float]], modality: str, kind: str, label: str) -> list[Node]:
    return [Node(id=f"{kind}_{i}", title=f"{label} {i} ({clock(start)}-{clock(end, up=True)})", type=kind,
                 location=Location(modality=modality, start=rounded(start), end=rounded(end)))
            for i, (start, end) in enumerate(spans, start=1)]


def _build_media(path: str, modality: str, strategy: str, window: float | None,
                 should_cancel: Callable[[], bool]) -> Built:
    size = seconds_window(window, modality)
    info = ffprobe(path)
    facts = media_facts(info, modality)
    duration = float(facts.duration or 0.0)
    title = tag(info.format.get("tags"), "title") or os.path.basename(path)
    if strategy in ("auto", "chapters"):
        chapters = _chapter_nodes(info.data.get("chapters") or [], duration, modality)
        if chapters:
            return Built(origin="chapters", title=title, nodes=chapters, facts=facts)
        if strategy == "chapters":
            raise _unsupported(modality, "chapters", f"the {modality} has no chapters")
    if strategy in ("auto", "scenes", "silences"):
        if modality == "video":
            cuts = scene_cuts(path, duration=duration, frame_rate=dict(facts.extra).get("frame_rate"),
                              should_cancel=should_cancel)
            spans = scene_spans(cuts, duration)
            if len(spans) > 1 or strategy == "scenes":
                return Built(origin="scenes", title=title, nodes=_span_nodes(spans, modality, "scene", "Scene"),
                             facts=facts)
        else:
            spans = sounds(silences(path, duration=duration, should_cancel=should_cancel), duration)
            if len(spans) > 1 or (strategy != "auto" and spans):
                return Built(origin="silences", title=title,
                             nodes=_span_nodes(spans, modality, "segment", "Segment"), facts=facts)
            if strategy != "auto":
                raise _unsupported(modality, strategy, "the audio is silent throughout: no segment of sound")
    return Built(origin="windows", title=title, nodes=time_windows(duration, size, modality), facts=facts)

"""How the documents' hits are cited: the modality a document is cited in, the resource ids of the files of a
search's hits, and the boolean search's matches with the address ``resolve`` accepts beside each.

The address model and the resource ids are flows' shared ones (``flows.addresses``), so documents cite without
depending on the citations capability; the semantic index cites its hits with these same functions.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Iterable

from sqlalchemy.engine import Engine

from flows.addresses.ids import reserve_ids
from flows.addresses.model import hit_address
from flows.documents.formats import format_of
from flows.documents.model import PAGED_FORMATS, LineMatch, SearchOutcome
from flows.documents.search import SourcedMatch


def document_modality(path: str) -> str:
    """The modality a file the documents capability reads is cited in: "document" for paged formats (PDF, EPUB,
    ...), "image" for an image read with OCR, "text" for the rest (Markdown, plain text, code, HTML, DOCX)."""
    fmt = format_of(PurePath(path).name)
    if fmt == "image":
        return "image"
    return "document" if fmt in PAGED_FORMATS else "text"


def hit_ids(engine: Engine, hits: Iterable[tuple[int, str]]) -> dict[int, str]:
    """entry id -> resource id for the ``(entry id, absolute path)`` of a search's hits, in one ``reserve_ids``
    call (ids reserved for the entries that have none), so each hit's address is one ``resolve`` accepts."""
    items = {int(entry_id): (int(entry_id), path, document_modality(path)) for entry_id, path in hits}
    return reserve_ids(engine, list(items.values())) if items else {}


def _source(match: LineMatch) -> tuple[int, str] | None:
    """The ``(entry id, absolute path)`` a match came from, when it knows them (a SourcedMatch: the index's)."""
    if isinstance(match, SourcedMatch) and match.entry_id is not None and match.path is not None:
        return match.entry_id, match.path
    return None


def cited_matches(engine: Engine, outcomes: Iterable[SearchOutcome]) -> list[list[dict[str, Any]]]:
    """The matches of each SearchOutcome as the tools show them, each with the ``citation`` ``resolve`` accepts
    (``doc://<resource id>#pages=P`` on paged formats, ``text://<resource id>#lines=L-L`` else): the files'
    resource ids come from one lookup for all the matches (:func:`hit_ids`)."""
    outcomes = list(outcomes)
    sources = [s for o in outcomes for s in map(_source, o.matches) if s is not None]
    ids = hit_ids(engine, sources) if sources else {}
    out = []
    for outcome in outcomes:
        shown = []
        for m in outcome.matches:
            item = m.as_dict()
            source = _source(m)
            if source is not None and source[0] in ids:
                entry_id, path = source
                item["citation"] = hit_address(ids[entry_id], document_modality(path), page=m.page,
                                               line_start=m.line, line_end=m.line)
            shown.append(item)
        out.append(shown)
    return out

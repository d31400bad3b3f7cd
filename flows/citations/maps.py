"""Maps as stored and as built, for the citation service and the ``map`` outcome: rows of ``map_nodes`` to Node trees
and back (with each node's virtual address), a source's facts as recorded, the text of formats the documents
capability extracts (HTML, DOCX: cited by the lines of that text), and building a map (``builders``) and saving it
(``store.citations``). Heavy work (hashing, probing, building) runs with no transaction open."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from sqlalchemy.engine import Engine

from flows.addresses.model import MODALITY_SCHEME, Address
from flows.citations import builders
from flows.citations.model import Location, Node, SourceFacts
from flows.documents import executor as doc_exec
from flows.documents.formats import format_of
from flows.media.hashing import hash_file
from store import citations as store
from store.documents import entry_lines
from store.errors import CitationError

log = logging.getLogger(__name__)

EXTENTS = ("page_count", "line_count", "duration", "width", "height")
TEXT_FORMATS = ("markdown", "text", "code")  # text read from the file itself; others' text comes from extraction
BUILT = ("outline", "headings", "chapters", "scenes", "silences", "windows", "whole")
CITABLE = ("PDF, EPUB and other paged documents (doc://), Markdown, plain text, code, HTML and DOCX (text://), "
           "video (video://), audio (audio://) and images (image://)")


def iso(ts: float | None) -> str:
    """``2025-02-16T14:32:10Z`` (UTC, whole seconds), as reference 003 writes created_at."""
    return datetime.fromtimestamp(ts or 0.0, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def location_json(location: Location) -> str:
    """A location as stored (``map_nodes.location_json``): its fields of its modality, no virtual_address, keys
    sorted, so equal locations are equal strings (an address finds its node by it)."""
    return json.dumps(location.model_dump(exclude_none=True, exclude={"virtual_address"}), sort_keys=True,
                      separators=(",", ":"))


def flatten(nodes: list[Node]) -> Iterable[dict[str, Any]]:
    """The tree as flat rows in pre-order (parents first, siblings in order), each with its parent's id."""
    def walk(items: list[Node], parent: str | None):
        for node in items:
            yield {"node_id": node.id, "parent_node_id": parent, "title": node.title, "kind": node.type,
                   "location_json": location_json(node.location), "summary": node.summary}
            yield from walk(node.children, node.id)

    return walk(nodes, None)


def virtual_address(location: dict[str, Any], resource_id: str) -> str:
    """The address of a stored location (what ``Location.to_address(...).format()`` gives, without building a
    Location: a 300-node map shows 300 of them)."""
    pages, lines, bbox = location.get("pages"), location.get("lines"), location.get("bbox")
    start, end = location.get("start"), location.get("end")
    t = None
    if start is not None or end is not None:
        t = (float(start or 0.0), float(end if end is not None else start or 0.0))
    return Address(MODALITY_SCHEME[location["modality"]], resource_id,
                   pages=((pages[0], pages[-1]),) if pages else None, t=t,
                   bbox=tuple(float(v) for v in bbox) if bbox else None,  # type: ignore[arg-type]
                   lines=(lines[0], lines[-1]) if lines else None).format()


def node_dict(row: dict[str, Any], resource_id: str) -> dict[str, Any]:
    location = json.loads(row["location_json"])
    location["virtual_address"] = virtual_address(location, resource_id)
    out: dict[str, Any] = {"id": row["node_id"], "title": row["title"], "type": row["kind"], "location": location}
    if row.get("summary") is not None:
        out["summary"] = row["summary"]
    return out


def tree(rows: list[dict[str, Any]], resource_id: str) -> list[Node]:
    """The map's nodes rebuilt from flat rows in pre-order, in one pass, each location with its address."""
    top: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        node = node_dict(row, resource_id)
        node["children"] = []
        by_id[row["node_id"]] = node
        parent = by_id.get(row["parent_node_id"]) if row["parent_node_id"] is not None else None
        (parent["children"] if parent is not None else top).append(node)
    return [Node.model_validate(n) for n in top]


def facts_of(kind: str, metadata_json: str | None) -> SourceFacts | None:
    """The facts recorded on a resource row (None when there are none)."""
    if not metadata_json:
        return None
    stored = json.loads(metadata_json).get("facts")
    if stored is None:
        return None
    return SourceFacts(modality=kind, **{k: stored.get(k) for k in EXTENTS},
                       extra=tuple((k, v) for k, v in stored.items() if k not in EXTENTS))


def metadata_of(facts: SourceFacts, window: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"facts": facts.as_dict()}
    if window is not None:
        out["window"] = window
    return out


def window_of(metadata_json: str | None) -> float | None:
    return json.loads(metadata_json).get("window") if metadata_json else None


# --- reading a source's text, facts and content hash (no transaction open) --------------------------------------------


def needs_extraction(modality: str, fmt: str | None) -> bool:
    return modality == "text" and fmt not in TEXT_FORMATS


def entry_row(entry_id: int, path: str, size: int, mtime: float) -> dict[str, Any]:
    return {"id": entry_id, "kind": "file", "name": os.path.basename(path), "path": path, "size": size,
            "mtime": mtime}


def ensure_text(engine: Engine, entry_id: int, path: str, size: int, mtime: float) -> None:
    """Make the documents capability's extraction of a document (HTML, DOCX) current: extracted now when missing
    or stale. EXTRACTION_FAILED when it cannot be read."""
    options = doc_exec.options_for(None)
    current, failed = doc_exec.ensure_extracted(engine, [entry_row(entry_id, path, size, mtime)], options=options)
    if entry_id in failed or entry_id not in current:
        raise CitationError("EXTRACTION_FAILED", f"{path}: its text could not be read "
                            f"({failed.get(entry_id, 'extraction did not finish')})")


def extracted_text(engine: Engine, entry_id: int, path: str, size: int, mtime: float) -> str:
    """The text of a document whose lines come from the documents capability (HTML, DOCX), as one string."""
    ensure_text(engine, entry_id, path, size, mtime)
    return "\n".join(text for _, text, _, _ in entry_lines(engine, entry_id))


def text_lines_for(engine: Engine, entry_id: int) -> Callable[[int, int], list[str]]:
    """Lines ``first``-``last`` (1-based inclusive) of an extracted document, as the documents capability numbers
    them: what extraction cuts a text address of an HTML or DOCX file from."""
    def lines(first: int, last: int) -> list[str]:
        return [text for _, text, _, _ in entry_lines(engine, entry_id, line_from=first, line_to=last)]

    return lines


def text_kw(engine: Engine, modality: str, fmt: str | None, entry_id: int, path: str, size: int,
             mtime: float) -> dict[str, Any]:
    if needs_extraction(modality, fmt):
        return {"text": extracted_text(engine, entry_id, path, size, mtime)}
    return {}


def probe_source(engine: Engine, entry_id: int, path: str, modality: str, size: int, mtime: float) -> SourceFacts:
    """What the file is (``builders.probe``), with the extracted text for HTML / DOCX."""
    fmt = format_of(os.path.basename(path))
    return builders.probe(path, modality, fmt=fmt, **text_kw(engine, modality, fmt, entry_id, path, size, mtime))


def build_source(engine: Engine, entry_id: int, path: str, modality: str, size: int, mtime: float, *,
                 strategy: str = "auto", window: float | None = None,
                 should_cancel: Callable[[], bool] = lambda: False):
    """The map of the file built locally (``builders.build``), with the extracted text for HTML / DOCX."""
    fmt = format_of(os.path.basename(path))
    return builders.build(path, modality, strategy=strategy, window=window, fmt=fmt, should_cancel=should_cancel,
                          **text_kw(engine, modality, fmt, entry_id, path, size, mtime))


def hash_of(path: str) -> str:
    """The file's content hash (``xxh128:...``, as ``entries.hash`` holds it)."""
    return hash_file(path)


def save_built(engine: Engine, map_id: int, built, *, strategy: str, window: float | None, size: int, mtime: float,
               source_hash: str, entry_id: int | None) -> float:
    """Store a built map (``builders.Built``) as the resource's map; outputs of another source version lose their
    artifact rows. Returns created_at."""
    created = store.save_map(engine, map_id, kind=built.facts.modality, origin=built.origin, title=built.title,
                             strategy=strategy, source_size=size, source_mtime=mtime, source_hash=source_hash,
                             metadata=metadata_of(built.facts, window), nodes=flatten(built.nodes))
    if entry_id is not None:
        with engine.begin() as conn:
            store.drop_old_extracts(conn, entry_id, source_hash)
    return created

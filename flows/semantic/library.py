"""What the semantic tools show: reference 002's get_file_details (a file's details and text, or one of its chunks
with lines of context), and the views of search hits the search tools return (reference 002's chunk objects for
``search_documents``, our hits with scores and citations for ``search``). Plain functions over the store; the MCP
tools (mcp_server/tools/semantic.py, documents.py) are thin wrappers around them.

Paths are the document tools' (flows.documents.paths.DocumentPaths): relative to the root holding them (the root's
name first with several roots), absolute paths inside the roots accepted; shown the same way. A path that names no
file is reference 002's INVALID_PATH; paths leaving the roots keep the document tools' codes
(PATH_TRAVERSAL_DETECTED, SYMLINK_NOT_ALLOWED).

A file that is in no collection of the semantic index still has details and text (from the documents capability,
read now if needed), with ``collections: []`` and a note saying so: an agent that names a file wants to read it.
Asking for a chunk of such a file is INDEX_NOT_FOUND.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from flows.documents import library as doc_library
from flows.documents.citing import document_modality, hit_ids
from flows.documents.paths import DocumentPaths
from flows.semantic.model import DEFAULT_COLLECTION, Hit, citation
from store.documents import entry_lines
from store.errors import DocumentError, InvalidInput
from store.models import Chunk, Collection, CollectionEntry, Entry

logger = logging.getLogger(__name__)

C = Collection.__table__
CE = CollectionEntry.__table__
K = Chunk.__table__
E = Entry.__table__

MAX_CONTEXT_LINES = 50


# the path errors of the document tools that mean "no such file" become reference 002's INVALID_PATH
_NOT_FOUND = ("DOCUMENT_NOT_FOUND", "COLLECTION_NOT_FOUND", "SCOPE_NOT_FOUND")


def locate(engine: Engine, paths: DocumentPaths, file_path: str, *, field: str = "filePath"
           ) -> doc_library.Located:
    """The document ``file_path`` names (flows.documents.library.locate), its errors in reference 002's words:
    INVALID_PATH for a missing file or a folder, UNSUPPORTED_FORMAT, and the roots' own refusals unchanged."""
    try:
        return doc_library.locate(engine, paths, file_path)
    except DocumentError as exc:
        if exc.code in _NOT_FOUND:
            raise DocumentError("INVALID_PATH", str(exc).removeprefix(f"{exc.code}: "), field=field,
                                details={"path": file_path}) from None
        if exc.field == "path":
            exc.field = field
        raise


def entry_collections(engine: Engine, entry_id: int | None, located: doc_library.Located | None = None
                      ) -> list[dict[str, Any]]:
    """The collections holding the entry: name, status (ok | empty | error), chunk_count, error, and ``current``
    (False when the file changed since it was embedded: update_index or the embed plan will redo it)."""
    if entry_id is None:
        return []
    with engine.connect() as conn:
        rows = conn.execute(
            select(C.c.name, CE.c.status, CE.c.chunk_count, CE.c.error, CE.c.work_key)
            .select_from(CE.join(C, C.c.id == CE.c.collection_id))
            .where(CE.c.entry_id == entry_id).order_by(C.c.name)).mappings().all()
    out = []
    for row in rows:
        item: dict[str, Any] = {"name": row["name"], "status": row["status"],
                                "chunk_count": int(row["chunk_count"] or 0)}
        if located is not None and row["work_key"]:
            item["current"] = str(row["work_key"]).startswith(f"{located.size}:{located.mtime}:")
        if row["error"]:
            item["error"] = row["error"]
        out.append(item)
    return out


def _choose(collections: list[dict[str, Any]], wanted: str | None, shown: str) -> dict[str, Any] | None:
    """The collection whose chunks get_file_details shows: the one asked for, else "default" when the file is in
    it, else the first (by name) holding it; None when the file is in none."""
    if wanted is not None:
        found = next((c for c in collections if c["name"] == wanted), None)
        if found is None:
            held = ", ".join(c["name"] for c in collections) or "none"
            raise DocumentError("INDEX_NOT_FOUND", f"{shown} is not indexed in collection {wanted!r} (collections "
                                f"holding it: {held}); index_files or update_index adds it", field="collection",
                                details={"path": shown, "collection": wanted})
        return found
    return next((c for c in collections if c["name"] == DEFAULT_COLLECTION), collections[0] if collections else None)


def _chunk(engine: Engine, collection: str, entry_id: int, index: int) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(K.c.id, K.c.chunk_index, K.c.start, K.c.end, K.c.page, K.c.page_end, K.c.line_start,
                   K.c.line_end, K.c.text)
            .select_from(K.join(C, C.c.id == K.c.collection_id))
            .where(C.c.name == collection, K.c.entry_id == entry_id, K.c.chunk_index == index)).mappings().first()
    return dict(row) if row else None


def _lines(engine: Engine, entry_id: int, first: int, last: int) -> list[str]:
    """Lines ``first``..``last`` (1-based, inclusive) of the stored text of the entry; [] when the range is empty."""
    if last < first:
        return []
    return [text for _, text, _, _ in entry_lines(engine, entry_id, line_from=first, line_to=last)]


def get_file_details(engine: Engine, paths: DocumentPaths, file_path: str, *, chunk_index: int | None = None,
                     context_lines: int = 3, collection: str | None = None, max_chars: int,
                     options: Any) -> dict[str, Any]:
    """Reference 002's get_file_details: the file (path, absolute path, size, modified, format, pages), the
    collections of the semantic index holding it (with their chunk counts) and

    - without ``chunk_index``: its whole text as read_document gives it (at most ``max_chars`` characters,
      ``truncated``), read now when the documents plan has not extracted it yet;
    - with ``chunk_index``: that chunk of the chosen collection (text, offsets, pages, lines, citation) and
      ``context_lines`` lines of the document before and after it.

    Errors: INVALID_PATH / UNSUPPORTED_FORMAT / the roots' refusals for the path; INDEX_NOT_FOUND for a chunk of a
    file no collection holds (or of a collection that does not hold it); InvalidInput naming the valid range for a
    chunk index out of range or bad context_lines."""
    if not 0 <= context_lines <= MAX_CONTEXT_LINES:
        raise InvalidInput(f"contextLines must be 0-{MAX_CONTEXT_LINES}, got {context_lines}", field="contextLines")
    located = locate(engine, paths, file_path)
    held = entry_collections(engine, located.entry_id, located)
    chosen = _choose(held, collection, located.shown)
    out: dict[str, Any] = {
        "path": located.shown, "absolute_path": located.path, "name": located.path.rsplit("/", 1)[-1],
        "size_bytes": located.size, "modified": doc_library.iso(located.mtime), "format": located.format,
        "collections": held, "collection": chosen["name"] if chosen else None,
        "chunk_count": chosen["chunk_count"] if chosen else 0,
    }
    notes = []
    if chosen is None:
        notes.append("this file is in no collection of the semantic index (index_files or update_index adds it); "
                     "its text is shown all the same")
    elif chosen.get("current") is False:
        notes.append(f"the file changed since collection {chosen['name']!r} embedded it: its chunks are of the "
                     "older text until update_index (or the embed plan) redoes it")

    if chunk_index is None:
        text = doc_library.read_document(engine, paths, file_path, None, max_chars=max_chars, options=options)
        out.update(content=text["content"], truncated=text["truncated"], char_count=text["char_count"],
                   total_pages=text["total_pages"])
        if text.get("note"):
            notes.append(text["note"])
    else:
        entry_id = located.entry_id
        if chosen is None or entry_id is None:  # entry_id None: a file the index does not know, so in no collection
            raise DocumentError("INDEX_NOT_FOUND", f"{located.shown} is in no collection of the semantic index, so "
                                "it has no chunks; index_files (its folder) or update_index (this file) adds it, "
                                "or call get_file_details without chunkIndex for its text", field="chunkIndex",
                                details={"path": located.shown})
        count = chosen["chunk_count"]
        row = _chunk(engine, chosen["name"], entry_id, chunk_index) if chunk_index >= 0 else None
        if row is None:
            valid = f"0-{count - 1}" if count else "none: the file has no text to chunk"
            raise InvalidInput(f"chunkIndex {chunk_index} is out of range for {located.shown} in collection "
                               f"{chosen['name']!r}; valid chunk indexes: {valid}", field="chunkIndex")
        resource_id = hit_ids(engine, [(entry_id, located.path)]).get(entry_id)
        before = _lines(engine, entry_id, max(1, row["line_start"] - context_lines), row["line_start"] - 1)
        after = _lines(engine, entry_id, row["line_end"] + 1, row["line_end"] + context_lines)
        out["chunk"] = {
            "index": row["chunk_index"], "text": row["text"], "start": row["start"], "end": row["end"],
            "page": row["page"], "page_end": row["page_end"], "line_start": row["line_start"],
            "line_end": row["line_end"],
            "citation": None if resource_id is None else citation(
                resource_id, row["page"], row["page_end"], row["line_start"], row["line_end"],
                document_modality(located.path)),
            "context_before": before, "context_after": after,
        }
    if notes:
        out["note"] = "; ".join(notes)
    return out


# --- search hits as the tools show them ---------------------------------------------------------------------------


def hit_view(hit: Hit, paths: DocumentPaths, resource_id: str | None) -> dict[str, Any]:
    """One hit of the ``search`` tool: the file (as the document tools show it, and absolute), the chunk, its
    scores and ranks, and where it is (pages, lines, and the citation ``resolve`` accepts: ``doc://<resource
    id>#pages=2-3`` ...; None only for a file deleted since the ranking)."""
    return {
        "file": paths.display(hit.path), "absolute_path": hit.path, "collection": hit.collection,
        "chunk_index": hit.chunk_index, "text": hit.text, "score": hit.score,
        "semantic_score": hit.semantic_score, "keyword_score": hit.keyword_score,
        "semantic_rank": hit.semantic_rank, "keyword_rank": hit.keyword_rank,
        "start": hit.start, "end": hit.end, "page": hit.page, "page_end": hit.page_end,
        "line_start": hit.line_start, "line_end": hit.line_end,
        "citation": None if resource_id is None else hit.citation(resource_id, document_modality(hit.path)),
    }


def search_view(engine: Engine, result: dict[str, Any], paths: DocumentPaths) -> dict[str, Any]:
    """flows.semantic.search.search's answer as the ``search`` tool returns it; the hits' files get their resource
    ids (flows.documents.citing.hit_ids: one lookup for the returned hits, ids reserved for files that had none)."""
    hits: list[Hit] = result.get("hits", [])
    resource_ids = hit_ids(engine, ((h.entry_id, h.path) for h in hits))
    out = {k: v for k, v in result.items() if k != "hits"}
    out["hits"] = [hit_view(h, paths, resource_ids.get(h.entry_id)) for h in hits]
    out["total_hits"] = len(out["hits"])
    return out


def semantic_documents_view(paths: DocumentPaths, result: dict[str, Any]) -> dict[str, Any]:
    """flows.semantic.search.semantic_search's answer (reference 002's chunk objects) as search_documents returns
    it: each filePath as the document tools show it (relative to its root), the absolute path beside it."""
    out = dict(result)
    out["results"] = [{**item, "filePath": paths.display(item["filePath"]), "absolutePath": item["filePath"]}
                      for item in result.get("results", [])]
    return out

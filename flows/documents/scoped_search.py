"""Searching the library as reference 001's ``search_documents`` and ``search_multiple`` answer: the scope a caller
names (global, a collection, one document) resolved inside the roots, the boolean search
(``flows.documents.search``) run in it, and its matches shown with their citations and a ``note`` when the results
may be incomplete (documents not indexed yet, or unreadable).
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from flows.documents.citing import cited_matches
from flows.documents.formats import format_of
from flows.documents.model import SearchOutcome
from flows.documents.paths import TOP, DocumentPaths
from flows.documents.query import parse_query
from flows.documents.reading import SUPPORTED
from flows.documents.search import search, search_many
from store.errors import DocumentError, InvalidInput
from store.models import Entry

E = Entry.__table__


@dataclass
class SearchScope:
    """Where a search looks, resolved: ``under`` (absolute folders) or ``entry_id`` (one document);
    ``unindexed`` names a document that exists but is not in the file index (nothing to search yet)."""

    under: list[str] | None = None
    entry_id: int | None = None
    unindexed: str | None = None


def resolve_scope(engine: Engine, paths: DocumentPaths, scope_type: str, path: str | None) -> SearchScope:
    """Reference 001's scope ({type: global | collection | document, path}) as the search takes it. A path that does
    not exist, a collection that is a file or a document that is a folder is SCOPE_NOT_FOUND; a path leaving the
    roots PATH_TRAVERSAL_DETECTED (SYMLINK_NOT_ALLOWED for a symlink)."""
    given = path or ""
    details = {"path": given}
    if scope_type == "global":
        if given.strip():
            raise InvalidInput("scope.path is for collection and document scopes; a global scope searches every "
                               "document (leave path out, or use type collection)", field="scope.path")
        return SearchScope(under=list(paths.roots.paths))
    if scope_type not in ("collection", "document"):
        raise InvalidInput(f"scope.type {scope_type!r} is not one of: global, collection, document",
                           field="scope.type")
    if scope_type == "document" and not given.strip():
        raise InvalidInput("scope.path is required for a document scope: the document's path, as find_document "
                           "shows it", field="scope.path")
    target = paths.resolve(given, field="scope.path", not_found="SCOPE_NOT_FOUND")
    if target == TOP:
        return SearchScope(under=list(paths.roots.paths))
    try:
        st = os.stat(target)
    except OSError:
        raise DocumentError("SCOPE_NOT_FOUND", f"scope path not found: {given}; list_collections browses the "
                            "collections, find_document finds documents by name", field="scope.path",
                            details=details) from None
    if scope_type == "collection":
        if not stat.S_ISDIR(st.st_mode):
            raise DocumentError("SCOPE_NOT_FOUND", f"{given} is a document, not a collection: use scope "
                                f"{{\"type\": \"document\", \"path\": \"{given}\"}}", field="scope.path",
                                details=details)
        return SearchScope(under=[target])
    if stat.S_ISDIR(st.st_mode):
        raise DocumentError("SCOPE_NOT_FOUND", f"{given} is a collection, not a document: use scope "
                            f"{{\"type\": \"collection\", \"path\": \"{given}\"}}", field="scope.path",
                            details=details)
    if format_of(os.path.basename(target)) is None:
        raise DocumentError("SCOPE_NOT_FOUND", f"{given} is not a document (documents are {SUPPORTED})",
                            field="scope.path", details=details)
    with engine.connect() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == target, E.c.kind == "file")).scalar()
    if entry_id is None:
        return SearchScope(unindexed=paths.display(target))
    return SearchScope(entry_id=entry_id)


def _note(pending: int, failed: int, unindexed: str | None) -> str | None:
    notes = []
    if unindexed:
        notes.append(f"{unindexed} is not in the file index yet, so there is nothing to search in it: index its "
                     "folder (the documents plan does so for the roots), then search again")
    elif pending:
        notes.append(f"{pending} document(s) in scope are not indexed yet (extraction is running or they changed): "
                     "the results may grow; search again later")
    if failed:
        notes.append(f"{failed} document(s) in scope could not be read and are not searched (get_document_info "
                     "says why)")
    return "; ".join(notes) or None


def _answer(engine: Engine, outcome: Any, unindexed: str | None = None) -> dict[str, Any]:
    """A SearchOutcome as search_documents answers it."""
    (matches,) = cited_matches(engine, [outcome])
    return {"query": outcome.query, "search_type": "boolean", "matches": matches,
            "total_matches": outcome.total_matches, "truncated": outcome.truncated,
            "pending_documents": outcome.pending_documents, "failed_documents": outcome.failed_documents,
            "note": _note(outcome.pending_documents, outcome.failed_documents, unindexed),
            "elapsed_ms": outcome.elapsed_ms}


def _unindexed_outcome(query: str, fuzzy: bool) -> Any:
    parse_query(query, fuzzy=fuzzy)  # a malformed query is still INVALID_QUERY
    return SearchOutcome(query=query, matches=[], total_matches=0, truncated=False, pending_documents=1)


def search_documents(engine: Engine, paths: DocumentPaths, query: str, scope: SearchScope, *,
                     context_lines: int = 5, max_results: int = 20, fuzzy: bool = False,
                     timeout: float | None = None, sort: str = "relevance") -> dict[str, Any]:
    """The boolean search (``flows.documents.search.search``) in ``scope``, answered as reference 001 shows it,
    plus ``pending_documents`` / ``failed_documents`` and a ``note`` when the results may be incomplete."""
    if scope.unindexed is not None:
        return _answer(engine, _unindexed_outcome(query, fuzzy), scope.unindexed)
    outcome = search(engine, query, under=scope.under, entry_id=scope.entry_id, context_lines=context_lines,
                     max_results=max_results, fuzzy=fuzzy, timeout=timeout, display=paths.display, sort=sort)
    return _answer(engine, outcome)


def search_multiple(engine: Engine, paths: DocumentPaths, queries: list[str], scope: SearchScope, *,
                    context_lines: int = 5, max_results_per_query: int = 20,
                    timeout: float | None = None, sort: str = "relevance") -> dict[str, Any]:
    """Each query searched at once (``flows.documents.search.search_many``), keyed by the query as given; a query
    that fails carries its ``error`` ({code, message}) and the others go on."""
    started = time.monotonic()
    unique = list(dict.fromkeys(queries))
    if scope.unindexed is not None:
        outcomes: dict[str, Any] = {}
        for q in unique:
            try:
                outcomes[q] = _unindexed_outcome(q, False)
            except DocumentError as exc:
                outcomes[q] = exc
    else:
        outcomes = search_many(engine, unique, under=scope.under, entry_id=scope.entry_id,
                               context_lines=context_lines, max_results=max_results_per_query, timeout=timeout,
                               display=paths.display, sort=sort)
    results: dict[str, Any] = {}
    failed = pending = 0
    found = [q for q in unique if not isinstance(outcomes[q], Exception)]
    shown = dict(zip(found, cited_matches(engine, (outcomes[q] for q in found))))
    for q in unique:
        outcome = outcomes[q]
        if isinstance(outcome, Exception):
            failed += 1
            code = getattr(outcome, "code", "SEARCH_FAILED")
            message = getattr(outcome, "message", None) or str(outcome)
            results[q] = {"query": q, "matches": [], "total_matches": 0, "truncated": False,
                          "error": {"code": code, "message": message}}
            continue
        pending = max(pending, outcome.pending_documents)
        results[q] = {"query": q, "matches": shown[q],
                      "total_matches": outcome.total_matches, "truncated": outcome.truncated,
                      "pending_documents": outcome.pending_documents, "failed_documents": outcome.failed_documents}
    out: dict[str, Any] = {"results": results, "search_duration_ms": round((time.monotonic() - started) * 1000),
                           "queries_completed": len(unique) - failed, "queries_failed": failed,
                           "pending_documents": pending}
    note = _note(pending, 0, scope.unindexed)
    if note:
        out["note"] = note
    return out

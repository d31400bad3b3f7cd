"""Boolean search over the extracted text, answered by the text engine (store.textindex): the index says which lines
match and how many, and reads the text of only the lines it returns (and of candidate lines it cannot decide alone,
which the line check of flows.documents.query decides, so results always equal a plain line scan).

``search`` catches the engine up with the store first (50 documents at most: a server's background thread indexes
the rest, and they, documents not extracted yet and unreadable ones are counted as pending / failed, so a search
never silently returns less), ranks the documents (BM25; ``sort="path"`` for path order) and returns the first
``max_results`` matches with their context. ``search_many`` runs several queries over one snapshot, each failing
alone: on every core (flows.documents.search_pool) over a large index, one after another over a small one.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from sqlalchemy.engine import Engine

from flows.documents import search_pool
from flows.documents.formats import EXTENSIONS
from flows.documents.model import PAGED_FORMATS, LineMatch, SearchOutcome
from flows.documents.query import compile_query, parse_query, to_node
from flows.documents.text_index import text_index
from store import documents as store
from store.errors import AssayError, DocumentError, InvalidInput
from store.marker import change_marker
from store.textindex import Result, Scope, SearchTimeout, Snapshot
from store.textindex import search as engine_search

log = logging.getLogger(__name__)

TIMEOUT_ENV = "ASSAY_SEARCH_TIMEOUT"
MAX_CONTEXT_LINES = 50
MAX_RESULTS = 10_000  # the tools allow 500 (reference 001); the CLI may print more, kept in memory all the same
SORTS = ("relevance", "path")
# search_many hands its queries to worker processes only over an index this large: on a small one a query takes a
# millisecond or two, less than a hand-off to another process costs
PARALLEL_MIN_LINES = 2_000_000


@dataclass
class SourcedMatch(LineMatch):
    """A matching line that also knows the entry and the absolute path it came from, so the tools can give it an
    address ``resolve`` accepts (flows.citations.ids: the file's resource id, its page or line)."""

    entry_id: int | None = None
    path: str | None = None


def _timeout(query: str, timeout: float) -> DocumentError:
    return DocumentError("SEARCH_TIMEOUT", f"the search took longer than {timeout:g} s ({TIMEOUT_ENV}); narrow the "
                                           "scope or the query", field="query",
                         details={"query": query, "timeout": timeout})


def _check_limits(context_lines: int, max_results: int, sort: str = "relevance") -> None:
    if not 0 <= context_lines <= MAX_CONTEXT_LINES:
        raise InvalidInput(f"context_lines must be from 0 to {MAX_CONTEXT_LINES}, got {context_lines}",
                           field="context_lines")
    if not 1 <= max_results <= MAX_RESULTS:
        raise InvalidInput(f"max_results must be from 1 to {MAX_RESULTS}, got {max_results}", field="max_results")
    if sort not in SORTS:
        raise InvalidInput(f"sort must be one of: {', '.join(SORTS)}; got {sort!r}", field="sort")


def search(engine: Engine, query: str, *, under: list[str] | None = None, entry_id: int | None = None,
           context_lines: int = 5, max_results: int = 20, fuzzy: bool = False, timeout: float | None = None,
           display: Callable[[str], str] = str, count_pending: bool = True, sort: str = "relevance",
           snapshot: Snapshot | None = None) -> SearchOutcome:
    """Every line in scope that matches ``query`` (reference 001's syntax), counted, the first ``max_results``
    returned with ``context_lines`` lines around them: the best documents first (``sort="path"``: in path order),
    each document's matches in line order. Scope: ``entry_id`` (one document), ``under`` (absolute directory
    paths), or everything. ``display`` turns a stored absolute path into the path the caller shows;
    ``count_pending`` False leaves pending_documents / failed_documents at 0 (search_many counts them once for all
    its queries); ``snapshot``: the engine's state to read (search_many takes one for all its queries). Raises
    DocumentError INVALID_QUERY (a malformed query) or SEARCH_TIMEOUT (past ``timeout`` seconds)."""
    started = time.monotonic()
    _check_limits(context_lines, max_results, sort)
    tree = parse_query(query, fuzzy=fuzzy)
    check = compile_query(tree)
    deadline = started + timeout if timeout else None
    snap = snapshot if snapshot is not None else text_index(engine).snapshot()
    scope = Scope(tuple(under) if under is not None else None, entry_id)
    try:
        result = engine_search(snap, to_node(tree), check, scope=scope, limit=max_results, context=context_lines,
                               sort=sort, deadline=deadline)
    except SearchTimeout:
        raise _timeout(query, timeout or 0.0) from None  # a deadline means a timeout was given
    pending, failed = _pending(engine, snap, under, entry_id) if count_pending else (0, 0)
    return _outcome(query, result, display, pending, failed, started)


def _outcome(query: str, result: Result, display: Callable[[str], str], pending: int, failed: int,
             started: float) -> SearchOutcome:
    matches: list[LineMatch] = [
        SourcedMatch(document=display(h.path), line=h.line, text=h.text, context_before=h.before,
                     context_after=h.after, page=h.page if h.format in PAGED_FORMATS else None, ocr=h.ocr,
                     entry_id=h.entry_id, path=h.path)
        for h in result.hits]
    elapsed_ms = (time.monotonic() - started) * 1000
    log.debug("search %r: %d matching lines, %d pending, %d failed, %.1f ms", query, result.total, pending, failed,
              elapsed_ms)
    return SearchOutcome(query=query, matches=matches, total_matches=result.total,
                         truncated=result.total > len(matches), pending_documents=pending, failed_documents=failed,
                         elapsed_ms=round(elapsed_ms, 1))


_counted: dict[tuple[str, tuple[str, ...] | None, int | None], tuple[Any, tuple[int, int]]] = {}
_counted_lock = threading.Lock()


def _pending(engine: Engine, snap: Snapshot, under: list[str] | None, entry_id: int | None) -> tuple[int, int]:
    """(pending, failed) in scope: documents not extracted yet or stale, and those extracted but not in the index
    yet (the engine is catching up), and those that could not be read. The store's counts (a join over the scope's
    entries: tens of milliseconds for 10,000 documents) are kept until anything is written to the store
    (store.marker)."""
    key = (engine.url.render_as_string(hide_password=True), tuple(under) if under is not None else None, entry_id)
    marker = change_marker(engine)
    with _counted_lock:
        hit = _counted.get(key)
    if hit is not None and hit[0] == marker:
        pending, failed = hit[1]
    else:
        pending, failed = store.pending_count(engine, under=under, entry_id=entry_id, extensions=EXTENSIONS)
        with _counted_lock:
            if len(_counted) >= 256:
                _counted.pop(next(iter(_counted)))
            _counted[key] = (marker, (pending, failed))
    if snap.queued:
        pending += store.searchable_count(engine, snap.queued, under=under, entry_id=entry_id)
    return pending, failed


def search_many(engine: Engine, queries: Iterable[str], *, under: list[str] | None = None,
                entry_id: int | None = None, context_lines: int = 5, max_results: int = 20, fuzzy: bool = False,
                timeout: float | None = None, display: Callable[[str], str] = str, sort: str = "relevance",
                parallel: bool = True) -> dict[str, SearchOutcome | AssayError]:
    """Run the queries (the options of :func:`search`) at once over one snapshot of the index: each in a worker
    process of flows.documents.search_pool (every core), or one after another when ``parallel`` is False or there
    is one. The result maps each query to its SearchOutcome, or to the error that stopped it (one failing query
    does not stop the others); what is not searchable yet is counted once for all of them."""
    unique = list(dict.fromkeys(queries))
    if not unique:
        return {}
    started = time.monotonic()
    _check_limits(context_lines, max_results, sort)
    index = text_index(engine)
    snap = index.snapshot()
    scope = Scope(tuple(under) if under is not None else None, entry_id)
    deadline = started + timeout if timeout else None
    results: dict[str, SearchOutcome | AssayError] = {}
    valid: list[str] = []
    for q in unique:
        try:
            parse_query(q, fuzzy=fuzzy)
            valid.append(q)
        except AssayError as exc:
            results[q] = exc
    pending, failed = _pending(engine, snap, under, entry_id)
    futures: dict[str, Future[Result]] = {}
    if parallel and len(valid) > 1 and search_pool.WORKERS > 1 and \
            sum(seg.lines for seg in snap.segments) >= PARALLEL_MIN_LINES:
        for q in valid:
            futures[q] = search_pool.submit(search_pool.job_of(
                snap, index.dir, q, fuzzy=fuzzy, scope=scope, limit=max_results, context=context_lines, sort=sort,
                deadline=deadline))
    for q in valid:
        try:
            future = futures.get(q)
            result = None
            if future is not None:
                try:
                    result = future.result()
                except (SearchTimeout, AssayError):
                    raise
                except Exception:  # the worker could not (a segment merged away meanwhile): answered here
                    log.info("search %r: its worker failed; answered in this process", q, exc_info=True)
            if result is None:
                tree = parse_query(q, fuzzy=fuzzy)
                result = engine_search(snap, to_node(tree), compile_query(tree), scope=scope, limit=max_results,
                                       context=context_lines, sort=sort, deadline=deadline)
            results[q] = _outcome(q, result, display, pending, failed, started)
        except SearchTimeout:
            results[q] = _timeout(q, timeout or 0.0)
        except Exception as exc:  # a failure on one query: reported with the query, the others go on
            log.exception("search %r failed", q)
            results[q] = AssayError(f"the search failed: {exc}")
    return {q: results[q] for q in unique}

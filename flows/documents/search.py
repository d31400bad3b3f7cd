"""Boolean search over the extracted text: the index narrows the search to candidate segments, the line check
decides, line by line, exactly as a plain scan of the same text would.

``search`` streams the candidates of the scope in (path, segment) order (SQLite: the FTS5 trigram index;
PostgreSQL: LIKE on ``folded`` under the pg_trgm index), checks the lines of each that could match, keeps the first
``max_results`` matches with their context (fetched from the neighbouring segments when a match sits at a segment's
edge) and counts the rest. It says how many documents in scope are not searchable yet (pending) or could not be
read (failed), so a search during extraction never silently returns less. ``search_many`` runs several queries at
once, each failing alone.
"""

from __future__ import annotations

import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from sqlalchemy.engine import Engine

from flows.documents.formats import EXTENSIONS
from flows.documents.model import PAGED_FORMATS, LineMatch, SearchOutcome
from flows.documents.query import (compile_query, line_needles, lines_holding, parse_query, prefilter,
                                   prefilter_terms)
from store import documents as store
from store.errors import AssayError, DocumentError, InvalidInput
from store.fold import fold

log = logging.getLogger(__name__)

TIMEOUT_ENV = "ASSAY_SEARCH_TIMEOUT"
MAX_CONTEXT_LINES = 50
MAX_RESULTS = 10_000  # the tools allow 500 (reference 001); the CLI may print more, kept in memory all the same
CONCURRENCY = 4  # queries of one search_many run at once


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


def _check_limits(context_lines: int, max_results: int) -> None:
    if not 0 <= context_lines <= MAX_CONTEXT_LINES:
        raise InvalidInput(f"context_lines must be from 0 to {MAX_CONTEXT_LINES}, got {context_lines}",
                           field="context_lines")
    if not 1 <= max_results <= MAX_RESULTS:
        raise InvalidInput(f"max_results must be from 1 to {MAX_RESULTS}, got {max_results}", field="max_results")


def search(engine: Engine, query: str, *, under: list[str] | None = None, entry_id: int | None = None,
           context_lines: int = 5, max_results: int = 20, fuzzy: bool = False, timeout: float | None = None,
           display: Callable[[str], str] = str, count_pending: bool = True) -> SearchOutcome:
    """Every line in scope that matches ``query`` (reference 001's syntax), counted, the first ``max_results``
    returned with ``context_lines`` lines around them, in (path, line) order. Scope: ``entry_id`` (one document),
    ``under`` (absolute directory paths), or everything. ``display`` turns a stored absolute path into the path
    the caller shows; ``count_pending`` False leaves pending_documents / failed_documents at 0 (search_many counts
    them once for all its queries). Raises DocumentError INVALID_QUERY (a malformed query) or SEARCH_TIMEOUT (past
    ``timeout`` seconds)."""
    started = time.monotonic()
    _check_limits(context_lines, max_results)
    tree = parse_query(query, fuzzy=fuzzy)
    check = compile_query(tree)
    needles = line_needles(tree)
    index = ({"match": prefilter(tree)} if engine.dialect.name == "sqlite" else {"like": prefilter_terms(tree)})
    deadline = started + timeout if timeout else None
    matches: list[LineMatch] = []
    total = 0
    candidates = store.candidate_segments(engine, under=under, entry_id=entry_id, **index)
    with contextlib.closing(candidates):
        for cand in candidates:  # a segment is at most ~32k characters: the deadline is looked at often enough
            if deadline is not None and time.monotonic() > deadline:
                raise _timeout(query, timeout or 0.0)  # a deadline means a timeout was given
            text = fold(cand.text)
            if needles is None:  # no needle every match holds (a NOT, a fuzzy term): every line is checked
                folded = text.split("\n")
                hits = [i for i, line in enumerate(folded) if check(line)]
            else:  # only the lines holding a needle every match must hold, found at C speed, are checked
                hits = [i for i, start, end in lines_holding(text, needles) if check(text[start:end])]
            total += len(hits)
            if hits and len(matches) < max_results:
                lines = cand.text.split("\n")
                for i in hits[:max_results - len(matches)]:
                    matches.append(_match(engine, cand, lines, i, context_lines, display))
    pending, failed = (store.pending_count(engine, under=under, entry_id=entry_id, extensions=EXTENSIONS)
                       if count_pending else (0, 0))
    elapsed_ms = (time.monotonic() - started) * 1000
    log.debug("search %r: %d matching lines, %d pending, %d failed, %.1f ms", query, total, pending, failed,
              elapsed_ms)
    return SearchOutcome(query=query, matches=matches, total_matches=total, truncated=total > len(matches),
                         pending_documents=pending, failed_documents=failed, elapsed_ms=round(elapsed_ms, 1))


def _match(engine: Engine, cand: store.Candidate, lines: list[str], i: int, context: int,
           display: Callable[[str], str]) -> LineMatch:
    """The match of line ``i`` of a candidate segment with its context, read from the neighbouring segments of the
    same document when the segment does not hold all of it (context never crosses into another document)."""
    number = cand.line_start + i
    before = lines[max(0, i - context):i]
    if context and len(before) < context and cand.line_start > 1:
        first = max(1, number - context)
        earlier = [t for _, t, _, _ in store.entry_lines(engine, cand.entry_id, line_from=first,
                                                         line_to=cand.line_start - 1)]
        before = earlier + before
    after = lines[i + 1:i + 1 + context]
    if context and len(after) < context:
        start = cand.line_start + len(lines)
        after += [t for _, t, _, _ in store.entry_lines(engine, cand.entry_id, line_from=start,
                                                        line_to=number + context)]
    return SourcedMatch(document=display(cand.path), line=number, text=lines[i], context_before=before,
                        context_after=after, page=cand.page if cand.format in PAGED_FORMATS else None, ocr=cand.ocr,
                        entry_id=cand.entry_id, path=cand.path)


def search_many(engine: Engine, queries: Iterable[str], **options: Any) -> dict[str, SearchOutcome | AssayError]:
    """Run each query (the same options as :func:`search`) at once in threads; the result maps each query to its
    SearchOutcome, or to the error that stopped it (one failing query does not stop the others)."""
    unique = list(dict.fromkeys(queries))
    if not unique:
        return {}

    def run(q: str) -> SearchOutcome | AssayError:
        try:
            return search(engine, q, count_pending=False, **options)
        except AssayError as exc:
            return exc
        except Exception as exc:  # a store failure on one query: reported with the query, the others go on
            log.exception("search %r failed", q)
            return AssayError(f"the search failed: {exc}")

    with ThreadPoolExecutor(max_workers=min(len(unique), CONCURRENCY), thread_name_prefix="search") as pool:
        results = dict(zip(unique, pool.map(run, unique)))
    # the same scope for every query: what is not searchable yet is counted once, not per query
    pending, failed = store.pending_count(engine, under=options.get("under"), entry_id=options.get("entry_id"),
                                          extensions=EXTENSIONS)
    for outcome in results.values():
        if isinstance(outcome, SearchOutcome):
            outcome.pending_documents, outcome.failed_documents = pending, failed
    return results

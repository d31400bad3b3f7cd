"""Search a semantic collection: by meaning (the query's vector against the chunks' in the hnswlib index), by words
(BM25 over the chunks' lines in the text engine the document search uses: flows.semantic.keywords) or both fused
by reciprocal rank (``hybrid``, the default), optionally
narrowed by filters: resource sets (with their child sets, through the DAG), a plan-language condition and path
scopes. ``search`` is our ``search`` tool's and ``assay ask``'s logic; ``semantic_search`` is reference 002's
``search_documents`` result over the same machinery.

Filters become the entry ids that pass all of them (SQL where the condition allows it, the rest in Python, as
plan-preview does), then the chunk ids of those entries in the collection: the vector index searches among those
only (hnswlib's filter) and the full-text search within those entries. Nothing here holds a store transaction or
waits on an indexing job: reads are short, and the vector index does its own locking.

Scores: ``semantic_score`` is the cosine similarity of chunk and query (the model's vectors are L2-normalised), also
for chunks only the keyword side found (read from their stored vectors), so a hybrid hit always shows how close in
meaning it is; ``keyword_score`` is the full-text score (higher is better); ``score`` ranks the hits: the cosine
(semantic), the full-text score (keyword) or the fused ``sum 1 / (RRF_K + rank)`` (hybrid). ``min_score`` is a
bound on the cosine, so it applies to semantic and hybrid searches; a keyword search has no cosine (it never loads
the model) and refuses it. A caller who names ``min_score`` gets exactly that bound, on every hit. Without it the
bound is fitted to the collection's model (flows.semantic.cutoff: above the score unrelated text reaches, and at
least half the best hit's margin over it), so a question with good answers never comes back empty and one without
comes back empty rather than with the nearest noise; in hybrid mode it judges only the hits the full-text side did
not find (a hit holding the query's words is evidence of its own). Every answer says which bound applied.
"""

from __future__ import annotations

import logging
import math
import os.path
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.engine import Engine

import flows.semantic.encoder as encoder_module
from dsl.conditions import Condition
from flows.documents.citing import document_modality, hit_ids
from flows.core import conditions as cond_sql
from flows.semantic import cutoff, keywords, vectors
from flows.semantic.model import DEFAULT_COLLECTION, RRF_K, Hit
from store import semantic as store_semantic
from store import sets as store_sets
from store.entries import T, iso, subtree_clause
from store.errors import DocumentError, InvalidInput
from store.models import CollectionEntry
from store.semantic import MAX_QUERY_WORDS

log = logging.getLogger(__name__)

MODES = ("semantic", "keyword", "hybrid")
MAX_LIMIT = 100
# Past this many characters a query is still answered, with a note: the model reads its first 256 word pieces (about
# 1,000 characters of English) anyway, and the keyword side its first store.semantic.MAX_QUERY_WORDS distinct words.
LONG_QUERY = 2000
QUERY_EXAMPLE = "e.g. 'how are invoices approved?' or 'INV-2024-0042'"

CE = CollectionEntry.__table__
_PAGE = 1000  # entries read at a time when a condition's residual is decided in Python


@dataclass(frozen=True)
class Filters:
    """What a search is narrowed to; the given parts AND together, None parts do not narrow.

    ``sets``: names of resource sets; an entry of any of them or of their child sets (through the DAG) passes.
    ``condition``: a plan-language condition, as text (``media_type = document and mtime > now - 30d``) or in the
    JSON object form (``{"all": ["size > 1MB", {"field": "extension", "op": "=", "value": ".pdf"}]}``).
    ``paths``: absolute folders or files; an entry at or under one of them passes.
    """

    sets: list[str] | None = None
    condition: str | dict | None = None
    paths: list[str] | None = None

    def empty(self) -> bool:
        return not self.sets and self.condition is None and not self.paths


# --- validation -------------------------------------------------------------------------------------------------


def check_query(query: Any) -> tuple[str, str | None]:
    """(the query stripped, a note when it is long); DocumentError INVALID_QUERY when there is nothing to ask."""
    if not isinstance(query, str):
        raise DocumentError("INVALID_QUERY", f"the query must be text, got {type(query).__name__}; ask in words, "
                                             f"{QUERY_EXAMPLE}", field="query")
    query = query.strip()
    if not query:
        raise DocumentError("INVALID_QUERY", f"the query is empty; ask in words, {QUERY_EXAMPLE}", field="query")
    note = None
    if len(query) > LONG_QUERY:
        note = (f"the query is {len(query):,} characters long: the model reads only its first 256 word pieces (about "
                f"1,000 characters) and the keyword search its first {MAX_QUERY_WORDS} distinct words; a short "
                "question ranks better")
    return query, note


def check_params(mode: Any, limit: Any, min_score: Any) -> None:
    """InvalidInput naming the parameter and what it accepts."""
    if mode not in MODES:
        raise InvalidInput(f"mode {mode!r} is not a search mode; use one of: {', '.join(MODES)} (hybrid fuses the "
                           "other two)", field="mode")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit {limit!r} is out of range; give a whole number from 1 to {MAX_LIMIT}",
                           field="limit")
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or math.isnan(min_score) \
                or not 0 <= min_score <= 1:
            raise InvalidInput(f"min_score {min_score!r} is out of range; give a cosine similarity from 0 to 1 "
                               "(e.g. 0.3), or leave it out", field="min_score")
        if mode == "keyword":
            raise InvalidInput("min_score bounds the cosine similarity, which a keyword search does not compute; "
                               "leave it out, or use mode semantic or hybrid", field="min_score")


def resolve_collection(engine: Engine, name: str | None) -> dict:
    """The collection named ``name``; with no name, ``default`` when it exists, else the only collection.
    DocumentError INDEX_NOT_FOUND (naming the collections that exist) otherwise."""
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput(f"collection {name!r} is not a collection name; leave it out for the default one",
                               field="collection")
        return store_semantic.require_collection(engine, name.strip())
    found = store_semantic.get_collection(engine, DEFAULT_COLLECTION)
    if found is not None:
        return found
    existing = store_semantic.list_collections(engine)
    if len(existing) == 1:
        return existing[0]
    names = sorted(c["name"] for c in existing)
    if not names:
        message = ("nothing has been indexed yet: no semantic collection exists; index a folder first (index_files, "
                   "or a plan with an embed outcome)")
    else:
        message = f"no collection was named and there is no {DEFAULT_COLLECTION!r} collection; name one of: " \
                  f"{', '.join(names)}"
    raise DocumentError("INDEX_NOT_FOUND", message, field="collection",
                                       details={"collections": names})


_CONDITION = None


def parse_condition(condition: Any):
    """A condition tree from text or the JSON object form, as a plan's ``when`` is read; InvalidInput with the
    parser's message (column, line and caret for text) when it does not parse or names unknown fields."""
    global _CONDITION
    if _CONDITION is None:
        _CONDITION = TypeAdapter(Condition)
    if isinstance(condition, str) and not condition.strip():
        raise InvalidInput("filters.condition is empty; give a condition such as "
                           "'media_type = document and mtime > now - 30d', or leave it out", field="condition")
    try:
        return _CONDITION.validate_python(condition)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            message = str(error.get("msg", "")).removeprefix("Value error, ")
            where = ".".join(str(p) for p in error.get("loc", ()) if not str(p).startswith(("function-", "tagged-")))
            problems.append(f"{where}: {message}" if where else message)
        raise InvalidInput("the condition (filters.condition) does not parse: " + "; ".join(problems),
                           field="condition") from None


# --- filters -> entry ids -> chunk ids --------------------------------------------------------------------------


def filter_entry_ids(engine: Engine, collection_id: int, filters: Filters, *, roots=None) -> list[int]:
    """The ids of the entries of the collection that pass every given filter (sets with their child sets,
    condition, paths). NotFound for an unknown set, InvalidInput for a bad condition or path."""
    where: list[ColumnElement[bool]] = [T.c.id.in_(select(CE.c.entry_id).where(CE.c.collection_id == collection_id))]
    residual = None
    now = time.time()
    with engine.connect() as conn:
        if filters.sets:
            names = [filters.sets] if isinstance(filters.sets, str) else list(filters.sets)
            set_ids: set[int] = set()
            for name in names:
                store_sets.check_name(name, field="filters.sets")
                set_ids.update(store_sets.closure_for(conn, name=name, include_children=True))
            where.append(T.c.id.in_(store_sets.entry_ids_in(sorted(set_ids))))
        if filters.paths:
            where.append(or_(*[subtree_clause(p) for p in _check_paths(filters.paths, roots)]))
        if filters.condition is not None:
            cond = parse_condition(filters.condition)
            push, residual = cond_sql.split(cond)
            where.append(cond_sql.SqlStore(engine, now=now).clause(push))
        if residual is None:
            return list(conn.execute(select(T.c.id).where(and_(*where)).order_by(T.c.id)).scalars())
    # the part Python decides (content, similarity, label fields): rows read a page at a time, each page a short
    # read, so no read stays open while the fields are evaluated
    ev = cond_sql.EvalStore(engine, now=now)
    passed: list[int] = []
    after = -1
    while True:
        with engine.connect() as conn:
            rows = conn.execute(select(T).where(and_(*where, T.c.id > after)).order_by(T.c.id)
                                .limit(_PAGE)).mappings().all()
        passed.extend(row["id"] for row in rows if ev.evaluate(residual, row))
        if len(rows) < _PAGE:
            return passed
        after = rows[-1]["id"]


def _check_paths(paths: Any, roots) -> list[str]:
    """The path filters as canonical absolute paths: confined to ``roots`` when given (Roots), else as given (the
    caller confined them), each absolute."""
    items = [paths] if isinstance(paths, str) else list(paths)
    out = []
    for i, path in enumerate(items):
        field = f"filters.paths[{i}]"
        if roots is not None:
            out.append(roots.resolve(path, field=field))
            continue
        if not isinstance(path, str) or not os.path.isabs(path):
            raise InvalidInput(f"{field} {path!r} is not an absolute path; give a folder or a file such as "
                               "/home/me/notes", field=field)
        out.append(os.path.normpath(path))
    return out


# --- the two sides and their fusion -----------------------------------------------------------------------------


def _cosines(engine: Engine, collection_id: int, chunk_ids: Sequence[int],
             query_vector: np.ndarray) -> dict[int, float]:
    """The cosine similarity of the query to each of ``chunk_ids``, from their stored vectors."""
    out: dict[int, float] = {}
    if not chunk_ids:
        return out
    wanted = np.asarray(sorted(set(int(c) for c in chunk_ids)), dtype=np.int64)
    for ids, matrix in store_semantic.iter_vectors(engine, collection_id, ids=wanted):
        for cid, sim in zip(ids.tolist(), (matrix @ query_vector).tolist()):
            out[int(cid)] = float(sim)
    return out


@dataclass
class _Scored:
    chunk_id: int
    score: float = 0.0
    semantic_score: float | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    keyword_rank: int | None = None


def rrf_fuse(semantic: Sequence[tuple[int, float]], keyword: Sequence[tuple[int, float]]) -> list[_Scored]:
    """Reciprocal-rank fusion of two ranked lists of (chunk id, score), best first: each chunk scores
    ``sum 1 / (RRF_K + rank)`` over the lists that hold it; ties keep the semantic side's order."""
    merged: dict[int, _Scored] = {}
    for rank, (cid, sim) in enumerate(semantic, 1):
        item = merged.setdefault(int(cid), _Scored(int(cid)))
        if item.semantic_rank is None:
            item.semantic_rank, item.semantic_score = rank, float(sim)
            item.score += 1.0 / (RRF_K + rank)
    for rank, (cid, score) in enumerate(keyword, 1):
        item = merged.setdefault(int(cid), _Scored(int(cid)))
        if item.keyword_rank is None:
            item.keyword_rank, item.keyword_score = rank, float(score)
            item.score += 1.0 / (RRF_K + rank)
    order = {cid: i for i, cid in enumerate(merged)}
    return sorted(merged.values(), key=lambda s: (-s.score, order[s.chunk_id]))


@dataclass(frozen=True)
class _Bound:
    """The cosine bound a search applied: the caller's, or fitted (flows.semantic.cutoff) from the model's noise
    ``floor`` and the ``best`` cosine of the semantic side."""

    min_score: float | None = None  # None: no bound (keyword mode)
    fitted: bool = False
    floor: float | None = None
    best: float | None = None


def _ranked(engine: Engine, collection: dict, query: str, mode: str, limit: int, min_score: float | None,
            entry_ids: list[int] | None, allowed: np.ndarray | None) -> tuple[list[_Scored], _Bound]:
    cid = collection["id"]
    if mode == "keyword":
        found = keywords.keyword_search(engine, collection, query, limit=limit, entry_ids=entry_ids)
        return [_Scored(int(c), float(s), keyword_score=float(s), keyword_rank=r)
                for r, (c, s) in enumerate(found, 1)], _Bound()
    # the query's vector by the collection's own model and backend (never another: the vectors would not compare)
    encoder = encoder_module.get_encoder(collection["model"], collection.get("backend"))
    qv = np.asarray(encoder.encode_query(query), dtype=np.float32)
    index = vectors.index_for(engine, collection)
    if mode == "semantic":
        sem = index.search(qv, limit, allowed=allowed)
        scored = [_Scored(int(c), float(s), semantic_score=float(s), semantic_rank=r)
                  for r, (c, s) in enumerate(sem, 1)]
    else:
        depth = max(5 * limit, 50)
        sem = index.search(qv, depth, allowed=allowed)
        kw = keywords.keyword_search(engine, collection, query, limit=depth, entry_ids=entry_ids)
        scored = rrf_fuse(sem, kw)
        # the cosine of chunks only the keyword side found: of all of them when min_score must judge them, else of
        # those that can be shown (a read of at most 2 * limit vectors)
        shown = scored if min_score is not None else scored[:2 * limit]
        missing = [s.chunk_id for s in shown if s.semantic_score is None]
        cosines = _cosines(engine, cid, missing, qv)
        for s in scored:
            if s.semantic_score is None:
                s.semantic_score = cosines.get(s.chunk_id)
    if min_score is not None:
        bound = _Bound(min_score)
        return [s for s in scored if s.semantic_score is not None and s.semantic_score >= min_score], bound
    floor = cutoff.noise_floor(collection, index, encoder)
    best = float(sem[0][1]) if sem else None
    fitted = cutoff.fitted_min_score([] if best is None else [best], floor)
    bound = _Bound(fitted, True, floor, best)
    return [s for s in scored if s.keyword_rank is not None
            or (s.semantic_score is not None and s.semantic_score >= fitted)], bound


def _nothing_close(bound: _Bound, model: str, mode: str) -> str:
    """Why a fitted bound left nothing."""
    words = "no chunk holds the query's words, and " if mode == "hybrid" else ""
    return (f"{words}none is closer in meaning than unrelated text: the best scored {bound.best:.3f}, under the "
            f"cut-off {bound.floor:.2f} fitted to model {model} (what unrelated text reaches); give min_score "
            "(minScore in search_documents) to see the nearest ones")


def _hits(engine: Engine, collection: dict, scored: Sequence[_Scored], limit: int) -> list[Hit]:
    """The first ``limit`` of ``scored`` as Hits, one per chunk; chunks deleted since the ranking (a file re-indexed
    meanwhile) are skipped, and the next ones read in their place."""
    hits: list[Hit] = []
    seen: set[int] = set()
    batch = max(2 * limit, 20)
    for pos in range(0, len(scored), batch):
        part = [s for s in scored[pos:pos + batch] if s.chunk_id not in seen]
        rows = store_semantic.chunk_rows(engine, [s.chunk_id for s in part])
        for s in part:
            row = rows.get(s.chunk_id)
            if row is None or s.chunk_id in seen:
                continue
            seen.add(s.chunk_id)
            hits.append(Hit(chunk_id=s.chunk_id, entry_id=int(row["entry_id"]), path=row["path"],
                            collection=collection["name"], chunk_index=int(row["chunk_index"]), text=row["text"],
                            start=int(row["start"]), end=int(row["end"]), line_start=int(row["line_start"]),
                            line_end=int(row["line_end"]), page=row.get("page"), page_end=row.get("page_end"),
                            score=float(s.score), semantic_score=s.semantic_score, keyword_score=s.keyword_score,
                            semantic_rank=s.semantic_rank, keyword_rank=s.keyword_rank))
            if len(hits) == limit:
                return hits
    return hits


def search(engine: Engine, query: str, *, collection: str | None = None, mode: str = "hybrid", limit: int = 10,
           min_score: float | None = None, filters: Filters | None = None, roots=None) -> dict[str, Any]:
    """The best ``limit`` chunks of the collection for ``query`` by ``mode``, among the entries that pass
    ``filters``, with a cosine of at least ``min_score`` (None: the bound fitted to the model; see the module
    docstring). Returns {query, mode, collection, hits (Hit, best first), elapsed_ms, candidates (chunks the filters
    allowed; None without filters), min_score (the bound applied, None in keyword mode), min_score_fitted (whether
    it was fitted), note (when present: why there may be few or no hits)}. ``roots`` (a flows.core.roots.Roots),
    when given, confines the path filters."""
    started = time.perf_counter()
    query, note = check_query(query)
    check_params(mode, limit, min_score)
    coll = resolve_collection(engine, collection)
    notes = [note] if note else []
    entry_ids = allowed = None
    candidates = None
    if filters is not None and not filters.empty():
        entry_ids = filter_entry_ids(engine, coll["id"], filters, roots=roots)
        allowed = np.asarray(store_semantic.allowed_chunk_ids(engine, coll["id"], entry_ids), dtype=np.int64)
        candidates = int(allowed.size)
        if not candidates:
            notes.append(f"no chunk of collection {coll['name']!r} passes the filters ({len(entry_ids)} indexed "
                         "entries do); loosen them, or index the files they name")
    bound = _Bound(min_score)
    if candidates == 0:
        scored: list[_Scored] = []
    else:
        scored, bound = _ranked(engine, coll, query, mode, limit, min_score, entry_ids, allowed)
    hits = _hits(engine, coll, scored, limit)
    if not hits and not notes:
        if bound.fitted and bound.best is not None:
            notes.append(_nothing_close(bound, coll["model"], mode))
        elif min_score is not None and mode != "keyword":
            notes.append(f"no chunk reached min_score {min_score} (cosine similarity); lower it to see the nearest "
                         "ones")
        elif mode == "keyword":
            notes.append("no indexed chunk holds any of the query's words; try mode hybrid or semantic")
        else:
            notes.append(f"collection {coll['name']!r} has no chunks yet (still indexing, or its files had no text)")
    out: dict[str, Any] = {"query": query, "mode": mode, "collection": coll["name"], "hits": hits,
                           "elapsed_ms": round((time.perf_counter() - started) * 1000, 1), "candidates": candidates,
                           "min_score": None if bound.min_score is None else round(bound.min_score, 4),
                           "min_score_fitted": bound.fitted}
    if notes:
        out["note"] = "; ".join(notes)
    log.debug("search %r (%s, %s): %d hits in %.1f ms", query[:80], mode, coll["name"], len(hits), out["elapsed_ms"])
    return out


# --- reference 002's search_documents ---------------------------------------------------------------------------


def _citation(hit: Hit, resource_ids: dict[int, str]) -> str | None:
    """The hit's address in the resource its file is cited as (None for a file deleted since the ranking)."""
    resource_id = resource_ids.get(hit.entry_id)
    return None if resource_id is None else hit.citation(resource_id, document_modality(hit.path))


def semantic_search(engine: Engine, query: str, *, limit: int = 10, min_score: float | None = None,
                    include_metadata: bool = True, collection: str | None = None) -> dict[str, Any]:
    """Reference 002's ``search_documents``: the chunks most similar in meaning to ``query`` with their cosine
    scores, at least ``min_score``: exactly the one given (0 for every chunk), or with None (the default) the
    cut-off fitted to the model (flows.semantic.cutoff; the reference's example 0.7 was meant for another model and
    returned nothing for real questions with ours). The answer's ``minScore`` is the cut-off applied and
    ``minScoreFitted`` says whether it was fitted. INDEX_NOT_FOUND before anything was indexed."""
    result = search(engine, query, collection=collection, mode="semantic", limit=limit, min_score=min_score)
    hits: list[Hit] = result["hits"]
    states: dict[int, dict] = {}
    resource_ids: dict[int, str] = {}
    if include_metadata and hits:
        with engine.connect() as conn:
            ids = sorted({h.entry_id for h in hits})
            states = {r["id"]: dict(r) for r in conn.execute(
                select(T.c.id, T.c.size, T.c.mtime).where(T.c.id.in_(ids))).mappings()}
        resource_ids = hit_ids(engine, ((h.entry_id, h.path) for h in hits))  # each citation names its resource
    results = []
    for h in hits:
        item: dict[str, Any] = {"id": str(h.chunk_id), "filePath": h.path, "chunkIndex": h.chunk_index,
                                "content": h.text, "score": round(float(h.score), 6)}
        if include_metadata:
            state = states.get(h.entry_id, {})
            item["metadata"] = {"fileSize": state.get("size"), "lastModified": iso(state.get("mtime")),
                                "chunkOffset": h.start, "page": h.page, "pageEnd": h.page_end,
                                "lineStart": h.line_start, "lineEnd": h.line_end,
                                "citation": _citation(h, resource_ids)}
        results.append(item)
    out = {"query": result["query"], "search_type": "semantic", "collection": result["collection"],
           "results": results, "total_results": len(results), "minScore": result["min_score"],
           "minScoreFitted": result["min_score_fitted"], "elapsed_ms": result["elapsed_ms"]}
    if result.get("note"):
        out["note"] = result["note"]
    return out

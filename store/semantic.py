"""The store side of the semantic index: collections, their entries' chunks and vectors, keyword search over chunks.

A collection (``collections``) records the model and backend its vectors came from; asking for it with another model
is refused (MODEL_MISMATCH), so vectors of two models never mix. Each embedded entry has a ``collection_entries`` row
(its work key, status, chunk count), its ``chunks`` (text and place) and one ``embeddings`` row per chunk (float32
little-endian bytes, L2-normalised).

Writes are short set-based transactions: :func:`replace_entries` swaps the chunks of a few entries at once and bumps
``collections.version`` (chunk deletions bump it too, by trigger, so an entry deleted by cascade marks its collections
changed). The hnswlib file of a collection (``flows.semantic.vectors``) records the version it holds and catches up
from here when it is behind. Reads stream vectors in batches (:func:`iter_vectors`) and never hold a collection.

Keyword search ranks chunks by BM25 over SQLite's FTS5 table ``chunk_fts`` (``score = -bm25``) or by ``ts_rank_cd``
over PostgreSQL's ``chunks.tsv``; a natural-language query becomes the OR of its words, each quoted, so no query
syntax from the caller reaches the full-text engine.

The store does not import ``flows`` at run time; ``ChunkSpan`` is only read by attribute.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np
from sqlalchemy import Integer, any_, bindparam, delete, func, insert, select, update
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from store.entries import existing_ids
from store.errors import DocumentError, InvalidInput
from store.models import Chunk, Collection, CollectionEntry, Embedding, Entry

if TYPE_CHECKING:  # the store never imports flows at run time
    from flows.semantic.model import ChunkSpan

log = logging.getLogger(__name__)

C = Collection.__table__
CE = CollectionEntry.__table__
K = Chunk.__table__
V = Embedding.__table__
E = Entry.__table__

_CHUNK = 500  # ids per IN (...) list
MAX_QUERY_WORDS = 64  # distinct words of a keyword query at most (a 10,000-character query stays one small MATCH)
_WORD = re.compile(r"[^\W_]+")  # unicode letters and digits
_RETRIES = 3  # a write that lost a race with an entry's deletion (foreign key) is retried without that entry


@dataclass
class EntryChunks:
    """What to store for one entry in a collection: its work key, status (ok | empty | error), the error text, its
    chunks and their vectors (``(len(chunks), dim)`` float32, L2-normalised; None or empty when there are none)."""

    entry_id: int
    work_key: str
    status: str = "ok"
    error: str | None = None
    chunks: list["ChunkSpan"] = field(default_factory=list)
    vectors: np.ndarray | None = None


@dataclass
class Replaced:
    """What a write changed in a collection, for the in-memory index (``VectorIndex.apply``): the chunk ids added
    with their vectors (same order), the chunk ids removed, and the collection's version before and after the write
    (``previous`` lets the index tell whether another writer slipped in between: then it catches up from the
    store instead of trusting ``version``)."""

    added_ids: np.ndarray
    vectors: np.ndarray
    removed_ids: np.ndarray
    version: int | None = None
    previous: int | None = None

    @classmethod
    def removal(cls, removed_ids: np.ndarray, dim: int = 0) -> "Replaced":
        """What :func:`remove_entries` changed, for ``VectorIndex.apply``."""
        return cls(_ids(()), np.zeros((0, dim), dtype=np.float32), np.asarray(removed_ids, dtype=np.int64))


def _ids(values: Iterable[int]) -> np.ndarray:
    return np.fromiter((int(v) for v in values), dtype=np.int64)


def vector_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def vector_of(blob: bytes, dim: int | None = None) -> np.ndarray:
    v = np.frombuffer(blob, dtype="<f4")
    if dim is not None and v.size != dim:
        raise ValueError(f"a stored vector has {v.size} numbers where the collection's dimension is {dim}")
    return v.astype(np.float32, copy=False)


# --- collections --------------------------------------------------------------------------------------------------


def _collection_dict(row: Any) -> dict[str, Any]:
    d = dict(row._mapping)
    d["folders"] = json.loads(d.pop("folders_json", None) or "[]")
    return d


def get_collection(engine: Engine, name: str) -> dict[str, Any] | None:
    """The collection named ``name`` (its row, ``folders`` parsed), or None."""
    with engine.connect() as conn:
        row = conn.execute(select(C).where(C.c.name == name)).first()
    return _collection_dict(row) if row is not None else None


def collection_by_id(engine: Engine, collection_id: int) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(C).where(C.c.id == collection_id)).first()
    return _collection_dict(row) if row is not None else None


def collection_version(engine: Engine, collection_id: int) -> int | None:
    """The collection's version (one indexed read: every search asks it), None if the collection is gone."""
    with engine.connect() as conn:
        return conn.execute(select(C.c.version).where(C.c.id == collection_id)).scalar()


def collection_names(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(C.c.name).order_by(C.c.name)).scalars())


def ensure_collection(engine: Engine, name: str, *, model: str, backend: str, dim: int, chunk_size: int = 1000,
                      overlap: int = 200) -> dict[str, Any]:
    """The collection ``name``, created with this model, backend and chunking if it does not exist. Two callers
    creating it at once both get the one row (the unique name decides, the loser reads the winner's row). An
    existing collection made with another model, backend or dimension is refused with MODEL_MISMATCH naming both:
    its vectors could not be compared with new ones. A different chunking is recorded (entries re-chunk by their
    work keys)."""
    if not name or not isinstance(name, str):
        raise InvalidInput(f"a collection name must be a non-empty string, got {name!r}", field="collection")
    existing = get_collection(engine, name)
    if existing is None:
        at = time.time()
        try:
            with engine.begin() as conn:
                conn.execute(insert(C).values(name=name, model=model, backend=backend, dim=int(dim),
                                              chunk_size=int(chunk_size), overlap=int(overlap), version=0,
                                              folders_json="[]", created_at=at, updated_at=at))
            log.info("collection %r created (model %s, backend %s, dim %d)", name, model, backend, dim)
        except IntegrityError:  # created by another job meanwhile
            log.debug("collection %r was created concurrently", name)
        existing = get_collection(engine, name)
        if existing is None:  # created and dropped again meanwhile: one more try settles it
            return ensure_collection(engine, name, model=model, backend=backend, dim=dim, chunk_size=chunk_size,
                                     overlap=overlap)
    if existing["model"] != model or existing["backend"] != backend or int(existing["dim"]) != int(dim):
        raise DocumentError(
            "MODEL_MISMATCH",
            f"collection {name!r} holds vectors of model {existing['model']} (backend {existing['backend']}, "
            f"dimension {existing['dim']}); this request asked for {model} (backend {backend}, dimension {dim}); "
            f"use another collection, or ask for {existing['model']} with backend {existing['backend']}",
            field="collection", details={"collection": name, "model": existing["model"],
                                         "backend": existing["backend"], "requested_model": model,
                                         "requested_backend": backend})
    if (existing["chunk_size"], existing["overlap"]) != (int(chunk_size), int(overlap)):
        with engine.begin() as conn:
            conn.execute(update(C).where(C.c.id == existing["id"])
                         .values(chunk_size=int(chunk_size), overlap=int(overlap), updated_at=time.time()))
        existing.update(chunk_size=int(chunk_size), overlap=int(overlap))
    return existing


def require_collection(engine: Engine, name: str) -> dict[str, Any]:
    """The collection ``name``, else INDEX_NOT_FOUND naming the collections that exist (or saying there is none yet
    and that index_files builds one)."""
    found = get_collection(engine, name)
    if found is not None:
        return found
    names = collection_names(engine)
    if names:
        hint = f"the collections are: {', '.join(names)}"
    else:
        hint = "no collection exists yet; index_files (or a plan with an embed outcome) builds one"
    raise DocumentError("INDEX_NOT_FOUND", f"there is no semantic index (collection) {name!r}; {hint}",
                        field="collection", details={"collection": name, "collections": names})


def list_collections(engine: Engine) -> list[dict[str, Any]]:
    """Every collection with its counts: ``documents`` (entries with chunks), ``entries`` (every entry it tried,
    empty and failed ones included), ``errors`` and ``chunks``."""
    ent = (select(CE.c.collection_id, func.count().label("entries"),
                  func.sum(func.coalesce((CE.c.status == "ok").cast(Integer), 0)).label("documents"),
                  func.sum(func.coalesce((CE.c.status == "error").cast(Integer), 0)).label("errors"),
                  func.sum(CE.c.chunk_count).label("chunks"))
           .group_by(CE.c.collection_id).subquery())
    q = (select(C, ent.c.entries, ent.c.documents, ent.c.errors, ent.c.chunks)
         .outerjoin(ent, ent.c.collection_id == C.c.id).order_by(C.c.name))
    with engine.connect() as conn:
        out = []
        for row in conn.execute(q):
            d = _collection_dict(row)
            for k in ("entries", "documents", "errors", "chunks"):
                d[k] = int(d.get(k) or 0)
            out.append(d)
    return out


def add_folder(engine: Engine, collection_id: int, folder: str) -> None:
    """Record ``folder`` among the collection's indexed roots (``folders``), once."""
    with engine.begin() as conn:
        raw = conn.execute(select(C.c.folders_json).where(C.c.id == collection_id)).scalar()
        if raw is None:
            return
        folders = json.loads(raw or "[]")
        if folder not in folders:
            folders.append(folder)
            conn.execute(update(C).where(C.c.id == collection_id)
                         .values(folders_json=json.dumps(folders), updated_at=time.time()))


def drop_collection(engine: Engine, collection_id: int) -> None:
    """Delete a collection with its entries' rows, chunks and vectors (by cascade; explicit for the chunks so the
    keyword index's triggers run). The hnswlib file is the caller's (flows.semantic.vectors.drop_index)."""
    with engine.begin() as conn:
        conn.execute(delete(V).where(V.c.collection_id == collection_id))
        conn.execute(delete(K).where(K.c.collection_id == collection_id))
        conn.execute(delete(CE).where(CE.c.collection_id == collection_id))
        conn.execute(delete(C).where(C.c.id == collection_id))


# --- entries ------------------------------------------------------------------------------------------------------


def entry_keys(engine: Engine, collection_id: int, entry_ids: Iterable[int]) -> dict[int, str]:
    """The work key each of ``entry_ids`` was embedded with in the collection (entries never embedded are absent)."""
    ids = list(entry_ids)
    out: dict[int, str] = {}
    with engine.connect() as conn:
        for i in range(0, len(ids), _CHUNK):
            out.update(conn.execute(select(CE.c.entry_id, CE.c.work_key).where(
                CE.c.collection_id == collection_id, CE.c.entry_id.in_(ids[i:i + _CHUNK]))).all())
    return out


def entry_states(engine: Engine, collection_id: int, entry_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The ``collection_entries`` rows of ``entry_ids`` (work key, status, error, chunk count, updated_at)."""
    ids = list(entry_ids)
    out: dict[int, dict[str, Any]] = {}
    with engine.connect() as conn:
        for i in range(0, len(ids), _CHUNK):
            for row in conn.execute(select(CE).where(CE.c.collection_id == collection_id,
                                                     CE.c.entry_id.in_(ids[i:i + _CHUNK]))):
                out[row.entry_id] = dict(row._mapping)
    return out


def _bump(conn: Connection, collection_id: int) -> int:
    """Bump the collection's version as the transaction's first write (so SQLite takes the write lock on a fresh
    snapshot and PostgreSQL locks the row: writers of one collection queue here) and return the new version."""
    version = conn.execute(update(C).where(C.c.id == collection_id)
                           .values(version=C.c.version + 1, updated_at=time.time())
                           .returning(C.c.version)).scalar()
    if version is None:
        raise DocumentError("INDEX_NOT_FOUND", f"collection id {collection_id} no longer exists (it was dropped)",
                            field="collection")
    return int(version)


def _chunk_ids_of(conn: Connection, collection_id: int, entry_ids: Sequence[int]) -> list[int]:
    out: list[int] = []
    for i in range(0, len(entry_ids), _CHUNK):
        out.extend(conn.execute(select(K.c.id).where(K.c.collection_id == collection_id,
                                                     K.c.entry_id.in_(entry_ids[i:i + _CHUNK]))).scalars())
    return out


def _delete_entries(conn: Connection, collection_id: int, entry_ids: Sequence[int], *, rows: bool) -> None:
    """Delete the chunks (their vectors go by cascade; SQLite runs with foreign_keys=ON) and, with ``rows``, the
    collection_entries rows of ``entry_ids`` in the collection."""
    for i in range(0, len(entry_ids), _CHUNK):
        part = entry_ids[i:i + _CHUNK]
        conn.execute(delete(K).where(K.c.collection_id == collection_id, K.c.entry_id.in_(part)))
        if rows:
            conn.execute(delete(CE).where(CE.c.collection_id == collection_id, CE.c.entry_id.in_(part)))


def _check(item: EntryChunks) -> np.ndarray | None:
    n = len(item.chunks)
    if n == 0:
        return None
    if item.vectors is None or len(item.vectors) != n:
        got = 0 if item.vectors is None else len(item.vectors)
        raise ValueError(f"entry {item.entry_id}: {n} chunks but {got} vectors")
    return np.asarray(item.vectors, dtype=np.float32)


def replace_entries(engine: Engine, collection_id: int, items: Sequence[EntryChunks]) -> Replaced:
    """Store ``items`` in the collection in ONE short transaction: each entry's old chunks (and vectors) out, its
    new chunks and vectors in, its collection_entries row (work key, status, error, chunk count) written, the
    collection's version bumped. The heavy work (chunking, embedding) is done before; callers pass a few dozen
    entries per call. An entry deleted meanwhile is dropped from the batch (its chunks would break the foreign
    key), never failing the others. An entry listed twice keeps its last item. Returns what changed, for the
    in-memory index."""
    last: dict[int, EntryChunks] = {}
    for item in items:
        last[int(item.entry_id)] = item
    checked = {eid: _check(item) for eid, item in last.items()}
    dim = next((v.shape[1] for v in checked.values() if v is not None), 0)
    for attempt in range(_RETRIES):
        try:
            return _replace(engine, collection_id, last, checked, dim)
        except IntegrityError:
            if attempt == _RETRIES - 1:
                raise
            log.info("an entry went away while its chunks were written; retrying without it")
    raise AssertionError("unreachable")


def _replace(engine: Engine, collection_id: int, items: dict[int, EntryChunks],
             vectors: dict[int, np.ndarray | None], dim: int) -> Replaced:
    with engine.begin() as conn:
        version = _bump(conn, collection_id)
        live = existing_ids(conn, list(items))
        gone = set(items) - live
        if gone:
            log.info("%d entries not embedded into collection %d: they were removed meanwhile", len(gone),
                     collection_id)
        eids = sorted(live)
        removed = _chunk_ids_of(conn, collection_id, eids)
        _delete_entries(conn, collection_id, eids, rows=True)
        rows = [{"collection_id": collection_id, "entry_id": eid, "chunk_index": int(c.index), "start": int(c.start),
                 "end": int(c.end), "page": c.page, "page_end": c.page_end, "line_start": int(c.line_start),
                 "line_end": int(c.line_end), "text": c.text}
                for eid in eids for c in items[eid].chunks]
        added: list[int] = []
        if rows:
            result = conn.execute(insert(K).returning(K.c.id, sort_by_parameter_order=True), rows)
            added = [int(r[0]) for r in result]
            stacked = np.concatenate([vectors[eid] for eid in eids if vectors[eid] is not None])
            conn.execute(insert(V), [{"chunk_id": cid, "collection_id": collection_id, "vector": vector_bytes(v)}
                                     for cid, v in zip(added, stacked)])
        else:
            stacked = np.zeros((0, dim), dtype=np.float32)
        at = time.time()
        states = [{"collection_id": collection_id, "entry_id": eid, "work_key": items[eid].work_key,
                   "status": items[eid].status, "error": items[eid].error, "chunk_count": len(items[eid].chunks),
                   "updated_at": at} for eid in eids]
        if states:
            conn.execute(insert(CE), states)
        final = int(conn.execute(select(C.c.version).where(C.c.id == collection_id)).scalar())
    return Replaced(_ids(added), stacked, _ids(removed), version=final, previous=version - 1)


def remove_entries(engine: Engine, collection_id: int, entry_ids: Iterable[int]) -> np.ndarray:
    """Take ``entry_ids`` out of the collection (chunks, vectors, collection_entries rows) in one transaction;
    returns the removed chunk ids (for ``VectorIndex.apply``). The version is bumped by the chunk deletion trigger."""
    ids = sorted({int(e) for e in entry_ids})
    if not ids:
        return _ids(())
    with engine.begin() as conn:
        removed = _chunk_ids_of(conn, collection_id, ids)
        _delete_entries(conn, collection_id, ids, rows=True)
    return _ids(removed)


# --- reads --------------------------------------------------------------------------------------------------------


def _decode(blobs: Sequence[bytes], dim: int | None) -> np.ndarray:
    if not blobs:
        return np.zeros((0, dim or 0), dtype=np.float32)
    joined = np.frombuffer(b"".join(blobs), dtype="<f4")
    return joined.reshape(len(blobs), -1).astype(np.float32, copy=False)


def iter_vectors(engine: Engine, collection_id: int, *, batch: int = 8192,
                 ids: Iterable[int] | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The collection's stored vectors in batches of at most ``batch``: ``(chunk ids int64, vectors float32 (n,
    dim))``, in chunk id order; with ``ids`` only those chunks (ids not in the collection are skipped). Each batch
    is one short read (keyset by chunk id), so memory stays one batch and no transaction stays open."""
    if ids is not None:
        wanted = np.unique(np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64))
        step = min(batch, _CHUNK)
        got_ids: list[int] = []
        blobs: list[bytes] = []
        for i in range(0, len(wanted), step):
            part = [int(x) for x in wanted[i:i + step]]
            with engine.connect() as conn:
                for cid, blob in conn.execute(select(V.c.chunk_id, V.c.vector).where(
                        V.c.collection_id == collection_id, V.c.chunk_id.in_(part)).order_by(V.c.chunk_id)):
                    got_ids.append(int(cid))
                    blobs.append(bytes(blob))
            if len(got_ids) >= batch:
                yield _ids(got_ids), _decode(blobs, None)
                got_ids, blobs = [], []
        if got_ids:
            yield _ids(got_ids), _decode(blobs, None)
        return
    after = -1
    while True:
        with engine.connect() as conn:
            rows = conn.execute(select(V.c.chunk_id, V.c.vector).where(
                V.c.collection_id == collection_id, V.c.chunk_id > after).order_by(V.c.chunk_id).limit(batch)).all()
        if not rows:
            return
        yield _ids(r[0] for r in rows), _decode([bytes(r[1]) for r in rows], None)
        after = int(rows[-1][0])
        if len(rows) < batch:
            return


def chunk_ids(engine: Engine, collection_id: int) -> np.ndarray:
    """Every chunk id of the collection that has a vector (one query, ids only: the vector index diffs its own ids
    against these to catch up)."""
    with engine.connect() as conn:
        result = conn.execute(select(V.c.chunk_id).where(V.c.collection_id == collection_id))
        parts = [np.fromiter((r[0] for r in rows), dtype=np.int64)
                 for rows in iter(lambda: result.fetchmany(65536), [])]
    return np.concatenate(parts) if parts else _ids(())


def vector_count(engine: Engine, collection_id: int) -> int:
    """How many vectors the collection holds (one count over the embeddings' collection index)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(V).where(V.c.collection_id == collection_id))
                   .scalar() or 0)


def chunk_rows(engine: Engine, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The chunks ``ids`` with their entry's path: ``{id: {id, collection_id, entry_id, chunk_index, start, end,
    page, page_end, line_start, line_end, text, path}}`` (ids that no longer exist are absent)."""
    wanted = sorted({int(i) for i in ids})
    cols = [K.c.id, K.c.collection_id, K.c.entry_id, K.c.chunk_index, K.c.start, K.c.end, K.c.page, K.c.page_end,
            K.c.line_start, K.c.line_end, K.c.text, E.c.path]
    out: dict[int, dict[str, Any]] = {}
    with engine.connect() as conn:
        for i in range(0, len(wanted), _CHUNK):
            for row in conn.execute(select(*cols).join(E, E.c.id == K.c.entry_id)
                                    .where(K.c.id.in_(wanted[i:i + _CHUNK]))):
                out[int(row.id)] = dict(row._mapping)
    return out


def entry_chunks(engine: Engine, collection_id: int, entry_id: int) -> list[dict[str, Any]]:
    """The chunks of one entry in the collection, in order (without vectors)."""
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(
            select(K.c.id, K.c.chunk_index, K.c.start, K.c.end, K.c.page, K.c.page_end, K.c.line_start,
                   K.c.line_end, K.c.text)
            .where(K.c.collection_id == collection_id, K.c.entry_id == entry_id).order_by(K.c.chunk_index))]


def entry_vectors(engine: Engine, collection_id: int, entry_id: int) -> np.ndarray:
    """The vectors of one entry's chunks in the collection, in chunk order: ``(n, dim)`` float32 (n = 0 if none)."""
    with engine.connect() as conn:
        blobs = [bytes(b) for b in conn.execute(
            select(V.c.vector).join(K, K.c.id == V.c.chunk_id)
            .where(K.c.collection_id == collection_id, K.c.entry_id == entry_id).order_by(K.c.chunk_index))
            .scalars()]
        dim = conn.execute(select(C.c.dim).where(C.c.id == collection_id)).scalar() if not blobs else None
    return _decode(blobs, dim)


def _entry_filter(conn: Connection, entry_ids: Sequence[int]):
    """``chunks.entry_id`` among ``entry_ids`` as ONE bound parameter, whatever their number: a JSON array read by
    json_each on SQLite, an array with ANY on PostgreSQL (a ranked query cannot be split into IN lists)."""
    ids = [int(e) for e in entry_ids]
    if conn.dialect.name == "postgresql":
        return K.c.entry_id == any_(bindparam("entry_ids", ids, type_=ARRAY(Integer)))
    each = func.json_each(bindparam("entry_ids", json.dumps(ids))).table_valued("value")
    return K.c.entry_id.in_(select(each.c.value))


def allowed_chunk_ids(engine: Engine, collection_id: int, entry_ids: Iterable[int]) -> np.ndarray:
    """The chunk ids of the collection that belong to ``entry_ids`` (what a filter permits), sorted."""
    ids = list({int(e) for e in entry_ids})
    if not ids:
        return _ids(())
    with engine.connect() as conn:
        result = conn.execute(select(K.c.id).where(K.c.collection_id == collection_id, _entry_filter(conn, ids)))
        found = np.fromiter((r[0] for r in result), dtype=np.int64)
    found.sort()
    return found


# English function words: in an OR query each matches most chunks, so BM25 must score nearly all of them (0.6-0.9 s
# at 100,000 chunks for a question holding "the") while adding almost nothing to the ranking. PostgreSQL's
# to_tsquery('english', ...) drops the same kind of words itself.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves
""".split())


def query_words(query: str, limit: int = MAX_QUERY_WORDS) -> list[str]:
    """The distinct words (unicode letters and digits, lower-cased) of ``query`` in order, at most ``limit``, without
    English function words (``STOPWORDS``) unless the query holds nothing else ("to be or not to be")."""
    seen: dict[str, None] = {}
    common: dict[str, None] = {}
    for m in _WORD.finditer(query or ""):
        word = m.group(0).lower()
        (common if word in STOPWORDS else seen).setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen) or list(common)[:limit]


def fts_match(words: Sequence[str]) -> str:
    """An FTS5 MATCH string: the OR of the words, each double-quoted (a word holds no quote: only letters/digits)."""
    return " OR ".join(f'"{w}"' for w in words)


def keyword_search(engine: Engine, collection_id: int, query: str, *, limit: int,
                   entry_ids: Iterable[int] | None = None) -> list[tuple[int, float]]:
    """The collection's chunks best matching ``query``'s words (any of them; a query with no words finds nothing),
    best first, at most ``limit``: ``(chunk id, score)`` with higher = better (SQLite: -BM25 over chunk_fts;
    PostgreSQL: ts_rank_cd of the chunk's tsvector). ``entry_ids`` restricts the hits to those entries."""
    words = query_words(query)
    if not words or limit <= 0:
        return []
    ids = None if entry_ids is None else list(entry_ids)
    if ids is not None and not ids:
        return []
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            tsq = " | ".join(words)  # letters and digits only: no tsquery operator can get through
            q = sql_text(
                "SELECT c.id, ts_rank_cd(c.tsv, q) AS score FROM chunks c, to_tsquery('english', :tsq) q "
                "WHERE c.collection_id = :cid AND c.tsv @@ q"
                + (" AND c.entry_id = ANY(:entry_ids)" if ids is not None else "")
                + " ORDER BY score DESC, c.id LIMIT :limit")
            params: dict[str, Any] = {"tsq": tsq, "cid": collection_id, "limit": int(limit)}
            if ids is not None:
                q = q.bindparams(bindparam("entry_ids", type_=ARRAY(Integer)))
                params["entry_ids"] = [int(e) for e in ids]
        else:
            q = sql_text(
                "SELECT c.id, -bm25(chunk_fts) AS score FROM chunk_fts JOIN chunks c ON c.id = chunk_fts.rowid "
                "WHERE chunk_fts MATCH :m AND c.collection_id = :cid"
                + (" AND c.entry_id IN (SELECT value FROM json_each(:entry_ids))" if ids is not None else "")
                + " ORDER BY bm25(chunk_fts), c.id LIMIT :limit")
            params = {"m": fts_match(words), "cid": collection_id, "limit": int(limit)}
            if ids is not None:
                params["entry_ids"] = json.dumps([int(e) for e in ids])
        return [(int(cid), float(score)) for cid, score in conn.execute(q, params)]

"""The entries of a collection: their state (work key, status, chunk count) and the writes that replace or remove
their chunks and vectors.

Writes are short set-based transactions: :func:`replace_entries` swaps the chunks of a few entries at once and bumps
``collections.version`` (chunk deletions bump it too, by trigger, so an entry deleted by cascade marks its collections
changed). Each returns what changed (:class:`Replaced`) for the in-memory vector index.

The store does not import ``flows``: a chunk to store is read by attribute (:class:`ChunkText`;
``flows.semantic.model.ChunkSpan`` is one).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, Sequence

import numpy as np
from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from store.entries import existing_ids
from store.errors import DocumentError
from store.models import Chunk, Collection, CollectionEntry, Embedding
from store.semantic.vectors import id_array, vector_bytes

log = logging.getLogger(__name__)

C = Collection.__table__
CE = CollectionEntry.__table__
K = Chunk.__table__
V = Embedding.__table__

_CHUNK = 500  # ids per IN (...) list
_RETRIES = 3  # a write that lost a race with an entry's deletion (foreign key) is retried without that entry


class ChunkText(Protocol):
    """One chunk of a document's text to store, as the store reads it: ``index`` (0, 1, ... within the document),
    character offsets ``start`` / ``end`` into the document's text, ``line_start`` / ``line_end`` (1-based,
    inclusive), ``page`` / ``page_end`` (paged formats, else None) and its ``text``."""

    @property
    def index(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def line_start(self) -> int: ...
    @property
    def line_end(self) -> int: ...
    @property
    def page(self) -> int | None: ...
    @property
    def page_end(self) -> int | None: ...
    @property
    def text(self) -> str: ...


@dataclass
class EntryChunks:
    """What to store for one entry in a collection: its work key, status (ok | empty | error), the error text, its
    chunks and their vectors (``(len(chunks), dim)`` float32, L2-normalised; None or empty when there are none)."""

    entry_id: int
    work_key: str
    status: str = "ok"
    error: str | None = None
    chunks: Sequence[ChunkText] = field(default_factory=list)
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
        return cls(id_array(()), np.zeros((0, dim), dtype=np.float32), np.asarray(removed_ids, dtype=np.int64))


def entry_keys(engine: Engine, collection_id: int, entry_ids: Iterable[int]) -> dict[int, str]:
    """The work key each of ``entry_ids`` was embedded with in the collection (entries never embedded are absent)."""
    ids = list(entry_ids)
    out: dict[int, str] = {}
    with engine.connect() as conn:
        for i in range(0, len(ids), _CHUNK):
            rows = conn.execute(select(CE.c.entry_id, CE.c.work_key).where(
                CE.c.collection_id == collection_id, CE.c.entry_id.in_(ids[i:i + _CHUNK])))
            out.update((int(entry_id), str(key)) for entry_id, key in rows)
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
        final = int(conn.execute(select(C.c.version).where(C.c.id == collection_id)).scalar_one())
    return Replaced(id_array(added), stacked, id_array(removed), version=final, previous=version - 1)


def remove_entries(engine: Engine, collection_id: int, entry_ids: Iterable[int]) -> np.ndarray:
    """Take ``entry_ids`` out of the collection (chunks, vectors, collection_entries rows) in one transaction;
    returns the removed chunk ids (for ``VectorIndex.apply``). The version is bumped by the chunk deletion trigger."""
    ids = sorted({int(e) for e in entry_ids})
    if not ids:
        return id_array(())
    with engine.begin() as conn:
        removed = _chunk_ids_of(conn, collection_id, ids)
        _delete_entries(conn, collection_id, ids, rows=True)
    return id_array(removed)

"""A collection's stored vectors: their form in the store (float32, little endian, L2-normalised) and their reads.

Reads stream vectors in batches (:func:`iter_vectors`), each one short read, and never hold a collection.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from store.models import Chunk, Collection, Embedding

C = Collection.__table__
K = Chunk.__table__
V = Embedding.__table__

_CHUNK = 500  # ids per IN (...) list


def id_array(values: Iterable[int]) -> np.ndarray:
    return np.fromiter((int(v) for v in values), dtype=np.int64)


def vector_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def vector_of(blob: bytes, dim: int | None = None) -> np.ndarray:
    v = np.frombuffer(blob, dtype="<f4")
    if dim is not None and v.size != dim:
        raise ValueError(f"a stored vector has {v.size} numbers where the collection's dimension is {dim}")
    return v.astype(np.float32, copy=False)


def decode_vectors(blobs: Sequence[bytes], dim: int | None) -> np.ndarray:
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
                yield id_array(got_ids), decode_vectors(blobs, None)
                got_ids, blobs = [], []
        if got_ids:
            yield id_array(got_ids), decode_vectors(blobs, None)
        return
    after = -1
    while True:
        with engine.connect() as conn:
            rows = conn.execute(select(V.c.chunk_id, V.c.vector).where(
                V.c.collection_id == collection_id, V.c.chunk_id > after).order_by(V.c.chunk_id).limit(batch)).all()
        if not rows:
            return
        yield id_array(r[0] for r in rows), decode_vectors([bytes(r[1]) for r in rows], None)
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
    return np.concatenate(parts) if parts else id_array(())


def vector_count(engine: Engine, collection_id: int) -> int:
    """How many vectors the collection holds (one count over the embeddings' collection index)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(V).where(V.c.collection_id == collection_id))
                   .scalar() or 0)


def entry_vectors(engine: Engine, collection_id: int, entry_id: int) -> np.ndarray:
    """The vectors of one entry's chunks in the collection, in chunk order: ``(n, dim)`` float32 (n = 0 if none)."""
    with engine.connect() as conn:
        blobs = [bytes(b) for b in conn.execute(
            select(V.c.vector).join(K, K.c.id == V.c.chunk_id)
            .where(K.c.collection_id == collection_id, K.c.entry_id == entry_id).order_by(K.c.chunk_index))
            .scalars()]
        dim = conn.execute(select(C.c.dim).where(C.c.id == collection_id)).scalar() if not blobs else None
    return decode_vectors(blobs, dim)

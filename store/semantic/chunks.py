"""A collection's chunks as rows: by id with their entry's path, an entry's in order, those a filter permits."""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

import numpy as np
from sqlalchemy import ColumnElement, Integer, any_, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection, Engine

from store.models import Chunk, Entry
from store.semantic.vectors import id_array

K = Chunk.__table__
E = Entry.__table__

_CHUNK = 500  # ids per IN (...) list


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


def _entry_filter(conn: Connection, entry_ids: Sequence[int]) -> ColumnElement[bool]:
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
        return id_array(())
    with engine.connect() as conn:
        result = conn.execute(select(K.c.id).where(K.c.collection_id == collection_id, _entry_filter(conn, ids)))
        found = np.fromiter((r[0] for r in result), dtype=np.int64)
    found.sort()
    return found

"""Generated artifacts (thumbnails, timeline frames, extracted metadata) attached to entries."""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection, Engine

from store.models import Artifact, Entry, MetadataValue

A = Artifact.__table__


def list_artifacts(engine: Engine, *, entry_id: int) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(A).where(A.c.entry_id == entry_id).order_by(A.c.type, A.c.id)).mappings().all()
    return [dict(r) | {"value": json.loads(r["value_json"] or "{}")} for r in rows]


def count_artifacts(engine: Engine, *, artifact_type: str | None = None) -> int:
    stmt = select(func.count()).select_from(A)
    if artifact_type:
        stmt = stmt.where(A.c.type == artifact_type)
    with engine.connect() as conn:
        return conn.execute(stmt).scalar_one()


# --- writes (the classifier's results; short transactions the caller opens) ----------------------------------------

M = MetadataValue.__table__
E = Entry.__table__
_CHUNK = 500


def replace_artifacts(conn: Connection, *, entry_id: int, types: Sequence[str], rows: Iterable[dict[str, Any]]) -> int:
    """Delete ``entry_id``'s artifacts of ``types`` and insert ``rows`` (type, mime_type, cache_path, source_hash,
    value): what one operation made of one file replaces what it made before. The cache files of the old rows become
    orphans if nothing else points at them; the cache sweep removes them."""
    if types:
        conn.execute(delete(A).where(A.c.entry_id == entry_id, A.c.type.in_(list(types))))
    now = time.time()
    values = [{"entry_id": entry_id, "type": r["type"], "mime_type": r.get("mime_type"),
               "cache_path": r.get("cache_path"), "source_hash": r.get("source_hash"),
               "value_json": json.dumps(r.get("value") or {}, default=str), "created_at": now} for r in rows]
    if values:
        conn.execute(insert(A), values)
    return len(values)


def replace_metadata(conn: Connection, *, entry_id: int, values: dict[str, Any]) -> int:
    """Replace every metadata_values row of ``entry_id`` with ``values`` (numbers go to num_value, the rest to
    text_value; None is left out)."""
    conn.execute(delete(M).where(M.c.entry_id == entry_id))
    rows = []
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (int, float)):
            rows.append({"entry_id": entry_id, "key": str(key), "num_value": float(value), "text_value": None})
        else:
            rows.append({"entry_id": entry_id, "key": str(key), "num_value": None, "text_value": str(value)})
    if rows:
        conn.execute(insert(M), rows)
    return len(rows)


def set_entry_hash(conn: Connection, *, entry_id: int, content_hash: str | None) -> None:
    conn.execute(update(E).where(E.c.id == entry_id).values(hash=content_hash))


# --- reads for the cache sweep and db-diagnose ---------------------------------------------------------------------


def referenced_cache_paths(conn: Connection, paths: Sequence[str]) -> set[str]:
    """Which of ``paths`` some artifacts row points at (asked in chunks of 500)."""
    found: set[str] = set()
    paths = list(paths)
    for i in range(0, len(paths), _CHUNK):
        found.update(conn.execute(select(A.c.cache_path).where(A.c.cache_path.in_(paths[i:i + _CHUNK])))
                     .scalars())
    return found


def iter_artifact_cache_paths(engine: Engine, *, batch: int = 1000) -> Iterator[tuple[int, int, str]]:
    """(artifact id, entry id, cache path) of every artifact with a cache file, in id order, read in keyset batches
    so the table is never held in memory."""
    after = 0
    while True:
        with engine.connect() as conn:
            rows = conn.execute(select(A.c.id, A.c.entry_id, A.c.cache_path)
                                .where(A.c.id > after, A.c.cache_path.is_not(None))
                                .order_by(A.c.id).limit(batch)).all()
        if not rows:
            return
        yield from ((r[0], r[1], r[2]) for r in rows)
        after = rows[-1][0]
        if len(rows) < batch:
            return

"""Writes of generated artifacts (thumbnails, timeline frames, extracted metadata) and the cache sweep's reads; the
read queries of tools and resources are in store.metadata."""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine

from store.models import Artifact, Entry, MetadataValue

A = Artifact.__table__


# --- writes (the classifier's results; short transactions the caller opens) ----------------------------------------

M = MetadataValue.__table__
E = Entry.__table__
_CHUNK = 500


def delete_artifacts(conn: Connection, *, entry_ids: Sequence[int], types: Sequence[str]) -> None:
    """Delete the artifacts of ``types`` of ``entry_ids`` (what an operation made before it ran again). Their cache
    files become orphans if nothing else points at them; the cache sweep removes them."""
    entry_ids = list(entry_ids)
    for i in range(0, len(entry_ids), _CHUNK):
        conn.execute(delete(A).where(A.c.entry_id.in_(entry_ids[i:i + _CHUNK]), A.c.type.in_(list(types))))


def insert_artifacts(conn: Connection, rows: Iterable[dict[str, Any]]) -> int:
    """Insert artifact rows (entry_id, type, mime_type, cache_path, source_hash, value) in one statement."""
    now = time.time()
    values = [{"entry_id": r["entry_id"], "type": r["type"], "mime_type": r.get("mime_type"),
               "cache_path": r.get("cache_path"), "source_hash": r.get("source_hash"),
               "value_json": json.dumps(r.get("value") or {}, default=str), "created_at": now} for r in rows]
    if values:
        conn.execute(insert(A), values)
    return len(values)


def _metadata_row(entry_id: int, key: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, (int, float)):
        return {"entry_id": entry_id, "key": str(key), "num_value": float(value), "text_value": None}
    return {"entry_id": entry_id, "key": str(key), "num_value": None, "text_value": str(value)}


def replace_metadata_many(conn: Connection, values_by_entry: dict[int, dict[str, Any]]) -> int:
    """Replace every metadata_values row of each entry with its values (numbers go to num_value, the rest to
    text_value; None is left out): one DELETE and one INSERT for the lot."""
    entry_ids = list(values_by_entry)
    for i in range(0, len(entry_ids), _CHUNK):
        conn.execute(delete(M).where(M.c.entry_id.in_(entry_ids[i:i + _CHUNK])))
    rows = [row for entry_id, values in values_by_entry.items() for key, value in values.items()
            if (row := _metadata_row(entry_id, key, value)) is not None]
    if rows:
        conn.execute(insert(M), rows)
    return len(rows)


def set_entry_hashes(conn: Connection, hashes: dict[int, str | None]) -> None:
    """Set entries.hash of each entry (one executemany)."""
    if hashes:
        conn.execute(update(E).where(E.c.id == bindparam("eid")).values(hash=bindparam("content_hash")),
                     [{"eid": entry_id, "content_hash": h} for entry_id, h in hashes.items()])


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

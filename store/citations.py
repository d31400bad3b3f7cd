"""The store of citation maps (``flows.citations``): resources (``resource_maps``: a readable id per file, its
source's state and its map's fields) and their nodes (``map_nodes``, one row per node, ``ordinal`` its place in a
pre-order walk so one ordered query rebuilds the tree), and the ``extract`` artifacts that point at resolved outputs
in the content cache.

Reads are single queries (a virtual resolve reads one resource row joined with its entry, then one node); writes
are short transactions, nodes inserted in batches. Deleting an entry deletes its resource row, the row its nodes and
the entry its artifacts (foreign keys with ON DELETE CASCADE). The store does not import ``flows``: nodes come and
go as flat row dicts (``node_id``, ``parent_node_id``, ``title``, ``kind``, ``location_json``, ``summary``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Sequence

from sqlalchemy import ColumnElement, Select, and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine

from store.entries import subtree_clause
from store.models import Artifact, Entry, MapNodeRow, ResourceMapRow

R = ResourceMapRow.__table__
N = MapNodeRow.__table__
E = Entry.__table__
A = Artifact.__table__

NODE_BATCH = 500  # nodes per INSERT (executemany)
EXTRACT = "extract"  # artifacts.type of a resolved output
NODE_FIELDS = ("node_id", "parent_node_id", "title", "kind", "location_json", "summary")

_RESOURCE_COLUMNS = (R.c.id, R.c.resource_id, R.c.entry_id, R.c.kind, R.c.origin, R.c.source_size, R.c.source_mtime,
                     R.c.source_hash, R.c.title, R.c.strategy, R.c.stale, R.c.metadata_json, R.c.created_at,
                     R.c.updated_at, E.c.path, E.c.name, E.c.size, E.c.mtime, E.c.media_type)


def _resource_query() -> Select[Any]:
    return select(*_RESOURCE_COLUMNS).select_from(R.outerjoin(E, E.c.id == R.c.entry_id))


def resource(conn: Connection, resource_id: str) -> dict[str, Any] | None:
    """The resource row of ``resource_id`` with its entry's path, name, size, mtime and media_type, in one query;
    ``id`` is the map id (resource_maps.id). None when there is none."""
    row = conn.execute(_resource_query().where(R.c.resource_id == resource_id)).mappings().first()
    return dict(row) if row is not None else None


def resource_by_entry(conn: Connection, entry_id: int) -> dict[str, Any] | None:
    """The resource row of entry ``entry_id`` (as :func:`resource`), None when the entry has no resource id."""
    row = conn.execute(_resource_query().where(R.c.entry_id == entry_id)).mappings().first()
    return dict(row) if row is not None else None


def resources_by_entries(conn: Connection, entry_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """entry id -> resource row (as :func:`resource`) of the entries that have one, asked in chunks of 500."""
    ids = sorted({int(e) for e in entry_ids})
    out: dict[int, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        for row in conn.execute(_resource_query().where(R.c.entry_id.in_(ids[i:i + 500]))
                                .order_by(R.c.id.desc())).mappings():
            out[int(row["entry_id"])] = dict(row)  # newest first: the oldest row wins, as ids.existing_ids
    return out


def list_resource_ids(conn: Connection, under: Sequence[str] | None = None, *, limit: int = 1000,
                      offset: int = 0) -> tuple[list[str], int]:
    """(resource ids sorted, total) of the resources whose entry lies at or under one of the absolute paths
    ``under`` (None: every resource with an entry), ``limit`` from ``offset``."""
    where: list[ColumnElement[bool]] = [R.c.entry_id.is_not(None)]
    if under is not None:
        if not under:
            return [], 0
        where.append(or_(*(subtree_clause(p.rstrip("/") or "/") for p in under)))
    base = select(R.c.resource_id).select_from(R.join(E, E.c.id == R.c.entry_id)).where(and_(*where))
    total = conn.execute(select(func.count()).select_from(base.subquery())).scalar_one()
    ids = list(conn.execute(base.order_by(R.c.resource_id).limit(limit).offset(offset)).scalars())
    return ids, int(total)


def resource_ids(conn: Connection, *, limit: int = 3) -> tuple[list[str], int]:
    """(the first ``limit`` resource ids sorted, how many there are): what an error about an unknown id names."""
    total = conn.execute(select(func.count()).select_from(R)).scalar_one()
    ids = list(conn.execute(select(R.c.resource_id).order_by(R.c.resource_id).limit(limit)).scalars())
    return ids, int(total)


def update_source(conn: Connection, map_id: int, *, size: int, mtime: float, source_hash: str | None = None,
                  metadata: dict[str, Any] | None = None, stale: bool | None = None) -> None:
    """Record what the source is now (size, mtime; the hash and facts when given; stale when given)."""
    values: dict[str, Any] = {"source_size": size, "source_mtime": mtime, "updated_at": time.time()}
    if source_hash is not None:
        values["source_hash"] = source_hash
    if metadata is not None:
        values["metadata_json"] = json.dumps(metadata, default=str)
    if stale is not None:
        values["stale"] = 1 if stale else 0
    conn.execute(update(R).where(R.c.id == map_id).values(**values))


def mark_stale(conn: Connection, map_id: int, stale: bool = True) -> None:
    conn.execute(update(R).where(R.c.id == map_id).values(stale=1 if stale else 0, updated_at=time.time()))


def save_map(engine: Engine, map_id: int, *, kind: str, origin: str, title: str | None, strategy: str | None,
             source_size: int, source_mtime: float, source_hash: str | None, metadata: dict[str, Any],
             nodes: Iterable[dict[str, Any]]) -> float:
    """Replace the map of resource ``map_id``: its fields and ALL its nodes (flat rows in pre-order; their ordinal
    is their position), in one short transaction, nodes inserted ``NODE_BATCH`` at a time. Returns created_at."""
    now = time.time()
    with engine.begin() as conn:
        conn.execute(update(R).where(R.c.id == map_id).values(
            kind=kind, origin=origin, title=title, strategy=strategy, source_size=source_size,
            source_mtime=source_mtime, source_hash=source_hash, stale=0,
            metadata_json=json.dumps(metadata, default=str), created_at=now, updated_at=now))
        conn.execute(delete(N).where(N.c.map_id == map_id))
        batch: list[dict[str, Any]] = []
        for ordinal, node in enumerate(nodes):
            batch.append({"map_id": map_id, "ordinal": ordinal, **{k: node.get(k) for k in NODE_FIELDS}})
            if len(batch) >= NODE_BATCH:
                conn.execute(insert(N), batch)
                batch = []
        if batch:
            conn.execute(insert(N), batch)
    return now


def delete_map(engine: Engine, map_id: int) -> bool:
    """Forget the map of resource ``map_id`` (its nodes and map fields); the resource id stays reserved. True if
    it had one."""
    with engine.begin() as conn:
        origin = conn.execute(select(R.c.origin).where(R.c.id == map_id)).scalar_one_or_none()
        if origin is None:
            return False
        conn.execute(delete(N).where(N.c.map_id == map_id))
        conn.execute(update(R).where(R.c.id == map_id).values(origin="none", title=None, strategy=None, stale=0,
                                                               updated_at=time.time()))
    return bool(origin != "none")


def _node(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in ("node_id", "parent_node_id", "ordinal", "title", "kind", "location_json",
                                "summary")}


def load_nodes(conn: Connection, map_id: int) -> list[dict[str, Any]]:
    """Every node of the map as a flat row, in pre-order (by ordinal): parents before their children."""
    rows = conn.execute(select(N.c.node_id, N.c.parent_node_id, N.c.ordinal, N.c.title, N.c.kind, N.c.location_json,
                               N.c.summary).where(N.c.map_id == map_id).order_by(N.c.ordinal)).mappings()
    return [_node(r) for r in rows]


def node(conn: Connection, map_id: int, node_id: str, *, children: bool = True) -> dict[str, Any] | None:
    """One node (flat row) by id, with ``children``: its children's ids in order (ix_map_nodes_parent; not asked
    for when ``children`` is False)."""
    row = conn.execute(select(N.c.node_id, N.c.parent_node_id, N.c.ordinal, N.c.title, N.c.kind, N.c.location_json,
                              N.c.summary).where(N.c.map_id == map_id, N.c.node_id == node_id)).mappings().first()
    if row is None:
        return None
    out = _node(row)
    if not children:
        return out
    out["children"] = list(conn.execute(select(N.c.node_id).where(N.c.map_id == map_id,
                                                                  N.c.parent_node_id == node_id)
                                        .order_by(N.c.ordinal)).scalars())
    return out


def node_ids(conn: Connection, map_id: int, *, limit: int = 10) -> tuple[list[str], int]:
    """(the first ``limit`` node ids in map order, how many nodes the map has)."""
    total = conn.execute(select(func.count()).select_from(N).where(N.c.map_id == map_id)).scalar_one()
    ids = list(conn.execute(select(N.c.node_id).where(N.c.map_id == map_id).order_by(N.c.ordinal)
                            .limit(limit)).scalars())
    return ids, int(total)


def node_at(conn: Connection, map_id: int, location_json: str) -> dict[str, Any] | None:
    """The first node (in map order) whose stored location equals ``location_json`` exactly, None if none."""
    row = conn.execute(select(N.c.node_id, N.c.parent_node_id, N.c.ordinal, N.c.title, N.c.kind, N.c.location_json,
                              N.c.summary).where(N.c.map_id == map_id, N.c.location_json == location_json)
                       .order_by(N.c.ordinal).limit(1)).mappings().first()
    return _node(row) if row is not None else None


# --- extract artifacts: resolved outputs in the content cache --------------------------------------------------------


def record_extract(engine: Engine, entry_id: int, *, mime_type: str, cache_path: str, source_hash: str,
                   address: str, exact: bool) -> bool:
    """Point an ``extract`` artifact of ``entry_id`` at ``cache_path`` unless one already does, and delete the
    entry's extract artifacts of another source version (their files become orphans the cache sweep removes).
    True when a row was inserted. One short transaction."""
    with engine.begin() as conn:
        drop_old_extracts(conn, entry_id, source_hash)
        if conn.execute(select(A.c.id).where(A.c.entry_id == entry_id, A.c.type == EXTRACT,
                                             A.c.cache_path == cache_path).limit(1)).first() is not None:
            return False
        if conn.execute(select(E.c.id).where(E.c.id == entry_id)).first() is None:
            return False  # deleted meanwhile: its artifact would break the foreign key
        conn.execute(insert(A).values(entry_id=entry_id, type=EXTRACT, mime_type=mime_type, cache_path=cache_path,
                                      source_hash=source_hash,
                                      value_json=json.dumps({"address": address, "exact": bool(exact)}),
                                      created_at=time.time()))
    return True


def drop_old_extracts(conn: Connection, entry_id: int, source_hash: str) -> int:
    """Delete the entry's extract artifacts made from another version of its source; returns how many."""
    return conn.execute(delete(A).where(A.c.entry_id == entry_id, A.c.type == EXTRACT,
                                        or_(A.c.source_hash.is_(None), A.c.source_hash != source_hash))).rowcount


def extracts(conn: Connection, entry_id: int) -> list[dict[str, Any]]:
    """The entry's extract artifacts (cache_path, mime_type, source_hash, value), oldest first."""
    rows = conn.execute(select(A.c.cache_path, A.c.mime_type, A.c.source_hash, A.c.value_json)
                        .where(A.c.entry_id == entry_id, A.c.type == EXTRACT).order_by(A.c.id)).mappings()
    return [{"cache_path": r["cache_path"], "mime_type": r["mime_type"], "source_hash": r["source_hash"],
             "value": json.loads(r["value_json"] or "{}")} for r in rows]

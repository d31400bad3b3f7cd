"""What the store held for a trashed file or folder that nothing can make again, kept with its trash operation
(table ``file_operation_kept``) so the undo that brings the files back brings that back too.

Derived data (thumbnails, metadata values, extracted text, chunks and vectors, labels, maps a plan builds) is made
again by indexing and re-running plans; what a person or an agent gave cannot be: set memberships, and citation maps
an agent supplied (``origin`` "agent", with their resource id). :func:`keep` copies them, by each entry's path
relative to the trashed path, before the file moves (a crash that leaves the store's entries deleted by the
recovery loses nothing); :func:`restore` puts them on the entries the restored files have after indexing, matched by
path. Both are set-based: a folder's memberships go in and come back in one statement each, whatever their number.

A membership whose set was deleted meanwhile is not restored (its set's name is reported); a set is the same set
when its id and name are the ones kept and it was made before the membership was added (SQLite gives a new set the
id of the last one deleted: a set deleted and made again under its name is another set). A map is not
restored when its resource id was taken meanwhile or the entry has a resource of its own now.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Text, and_, delete, exists, func, insert, literal, select, update
from sqlalchemy.engine import Connection

from store.entries import T, subtree_clause
from store.models import MapNodeRow, ResourceMapRow, ResourceSet, SetMember, now
from store.models.file_operations import KeptItem

K = KeptItem.__table__
M = SetMember.__table__
S = ResourceSet.__table__
R = ResourceMapRow.__table__
N = MapNodeRow.__table__

MEMBERSHIP, MAP = "membership", "map"
AGENT = "agent"  # resource_maps.origin of a map an agent supplied (flows.citations.model)
# a kept map's fields: all of resource_maps but its id and entry (new ones on restore)
MAP_FIELDS = ("resource_id", "kind", "origin", "source_size", "source_mtime", "source_hash", "title", "strategy",
              "stale", "metadata_json", "created_at", "updated_at")
NODE_FIELDS = ("node_id", "parent_node_id", "ordinal", "title", "kind", "location_json", "summary")
BATCH = 500  # maps per query, kept rows per executemany


def keep(conn: Connection, *, operation_id: int, path: str) -> dict[str, int]:
    """Copy what cannot be made again of ``path`` and the entries under it to trash operation ``operation_id``:
    every set membership (one INSERT ... SELECT) and every map an agent supplied; how many of each."""
    rel = func.substr(T.c.path, len(path) + 1)  # "" for path itself, "/a/b" under it (SQL counts characters)
    members = select(literal(operation_id), rel, literal(MEMBERSHIP, Text), M.c.set_id, S.c.name, M.c.added_at) \
        .select_from(M.join(T, T.c.id == M.c.entry_id).join(S, S.c.id == M.c.set_id)).where(subtree_clause(path))
    kept = conn.execute(insert(K).from_select(["operation_id", "rel", "kind", "ref_id", "name", "at"], members)
                        .execution_options(preserve_rowcount=True))  # INSERT counts need asking
    maps = _keep_maps(conn, operation_id, path)
    return {"memberships": int(kept.rowcount or 0), "maps": maps}


def _keep_maps(conn: Connection, operation_id: int, path: str) -> int:
    rows = [dict(r) for r in conn.execute(
        select(R, T.c.path.label("entry_path")).select_from(R.join(T, T.c.id == R.c.entry_id))
        .where(subtree_clause(path), R.c.origin == AGENT)).mappings()]
    kept = 0
    for i in range(0, len(rows), BATCH):
        batch = rows[i:i + BATCH]
        nodes: dict[int, list[dict[str, Any]]] = {r["id"]: [] for r in batch}
        for n in conn.execute(select(N).where(N.c.map_id.in_(list(nodes))).order_by(N.c.map_id, N.c.ordinal)
                              ).mappings():
            nodes[n["map_id"]].append({k: n[k] for k in NODE_FIELDS})
        conn.execute(insert(K), [
            {"operation_id": operation_id, "rel": r["entry_path"][len(path):], "kind": MAP, "ref_id": None,
             "name": r["resource_id"], "at": r["created_at"],
             "payload_json": json.dumps({"map": {k: r[k] for k in MAP_FIELDS}, "nodes": nodes[r["id"]]})}
            for r in batch])
        kept += len(batch)
    return kept


def restore(conn: Connection, *, operation_id: int, path: str) -> dict[str, Any]:
    """Put back what trash operation ``operation_id`` kept on the entries at ``path`` and under it now (the restored
    files, indexed): ``memberships`` and ``maps`` restored, ``setsGone`` (names of sets deleted meanwhile, whose
    memberships were not restored), ``mapsSkipped`` (resource id: why not) and ``notIndexed`` (kept memberships
    whose file has no entry: its folder is not indexed)."""
    here = literal(path, Text) + K.c.rel
    same_set = and_(S.c.id == K.c.ref_id, S.c.name == K.c.name, S.c.created_at <= K.c.at)
    of_op = and_(K.c.operation_id == operation_id, K.c.kind == MEMBERSHIP)
    rows = select(K.c.ref_id, T.c.id, K.c.at) \
        .select_from(K.join(T, and_(T.c.path == here, subtree_clause(path))).join(S, same_set)) \
        .where(of_op, ~exists().where(M.c.set_id == K.c.ref_id, M.c.entry_id == T.c.id))
    put = conn.execute(insert(M).from_select(["set_id", "entry_id", "added_at"], rows)
                       .execution_options(preserve_rowcount=True))
    restored = int(put.rowcount or 0)
    if restored:
        conn.execute(update(S).where(S.c.id.in_(select(K.c.ref_id).where(of_op))).values(updated_at=now()))
    gone = sorted(conn.execute(select(K.c.name).where(of_op, ~exists().where(same_set)).distinct()).scalars())
    missing = conn.execute(select(func.count()).select_from(K).where(
        of_op, ~exists().where(T.c.path == here))).scalar_one()
    maps, skipped = _restore_maps(conn, operation_id, path)
    return {"memberships": restored, "setsGone": gone, "notIndexed": int(missing), "maps": maps,
            "mapsSkipped": skipped}


def _restore_maps(conn: Connection, operation_id: int, path: str) -> tuple[int, dict[str, str]]:
    kept = [dict(r) for r in conn.execute(
        select(K.c.rel, K.c.name, K.c.payload_json, T.c.id.label("entry_id"))
        .select_from(K.outerjoin(T, and_(T.c.path == literal(path, Text) + K.c.rel, subtree_clause(path))))
        .where(K.c.operation_id == operation_id, K.c.kind == MAP).order_by(K.c.id)).mappings()]
    skipped: dict[str, str] = {}
    restored = 0
    for i in range(0, len(kept), BATCH):
        batch = kept[i:i + BATCH]
        names = [k["name"] for k in batch]
        entries = [k["entry_id"] for k in batch if k["entry_id"] is not None]
        taken = set(conn.execute(select(R.c.resource_id).where(R.c.resource_id.in_(names))).scalars())
        held = set(conn.execute(select(R.c.entry_id).where(R.c.entry_id.in_(entries))).scalars())
        ready = []
        for k in batch:
            if k["entry_id"] is None:
                skipped[k["name"]] = f"{path}{k['rel']} is not in the index (its folder is not indexed)"
            elif k["name"] in taken:
                skipped[k["name"]] = f"the resource id {k['name']} was given to another file meanwhile"
            elif k["entry_id"] in held:
                skipped[k["name"]] = f"{path}{k['rel']} has a resource of its own now"
            else:
                ready.append(k)
        if not ready:
            continue
        payloads = [json.loads(k["payload_json"]) for k in ready]
        ids = conn.execute(insert(R).returning(R.c.id, sort_by_parameter_order=True),
                           [{**p["map"], "entry_id": k["entry_id"]} for k, p in zip(ready, payloads)]).scalars()
        nodes = [{**n, "map_id": map_id} for map_id, p in zip(list(ids), payloads) for n in p["nodes"]]
        for j in range(0, len(nodes), BATCH):
            conn.execute(insert(N), nodes[j:j + BATCH])
        restored += len(ready)
    return restored, skipped


def forget(conn: Connection, operation_ids: Sequence[int]) -> int:
    """Drop what operations ``operation_ids`` kept (restored by their undo, or emptied from the trash for good);
    how many rows."""
    if not operation_ids:
        return 0
    return int(conn.execute(delete(K).where(K.c.operation_id.in_(list(operation_ids)))).rowcount or 0)


def counts(conn: Connection, operation_id: int) -> dict[str, int]:
    """How many memberships and maps operation ``operation_id`` keeps."""
    rows = conn.execute(select(K.c.kind, func.count()).where(K.c.operation_id == operation_id).group_by(K.c.kind))
    found = {kind: int(n) for kind, n in rows}
    return {"memberships": found.get(MEMBERSHIP, 0), "maps": found.get(MAP, 0)}

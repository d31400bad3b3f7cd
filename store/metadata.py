"""Read queries over what classifiers wrote: artifacts (thumbnails, timeline frames, contact sheets, metadata records),
content hashes (``entries.hash``) and duplicate groups.

Every listing is one page (LIMIT/OFFSET) with its total, never the whole table; a page of entries gets its thumbnails
in one query (``thumbnails_for``), not one per entry. ``scope`` is an optional SQL clause on the entries table (the
configured roots) so a resource shows only what the caller may see; beyond it, every reader here keeps to the
entries the current caller may see (store.visibility): an entry id outside a limited user's roots has no artifacts,
and duplicates are counted among that user's entries only.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Sequence

from sqlalchemy import ColumnElement, and_, case, func, select
from sqlalchemy.engine import Engine, RowMapping

from store.entries import T
from store.errors import InvalidInput
from store.models import Artifact
from store.visibility import limited, visible_clause, visible_where

A = Artifact.__table__

HASH_PATTERN = re.compile(r"xxh128:[0-9a-f]{32}")
HASH_SHAPE = "'xxh128:' followed by 32 lower-case hex digits, e.g. xxh128:0123456789abcdef0123456789abcdef"
# inspect's order: the thumbnail, the timeline frames, the contact sheet, the metadata record, anything else
TYPE_ORDER = {"thumbnail": 0, "video-timeline": 1, "timeline-sheet": 2, "metadata": 3}
LISTING_SORTS = ("newest", "path")


def check_hash(value: str) -> str:
    """``value`` when it has the shape of a content hash; InvalidInput saying what one looks like otherwise."""
    if not HASH_PATTERN.fullmatch(value or ""):
        raise InvalidInput(f"{value!r} is not a content hash; a hash is {HASH_SHAPE} (inspect's 'hash' field)",
                           field="hash")
    return value


def _artifact(row: RowMapping) -> dict[str, Any]:
    return {"id": row["id"], "entry_id": row["entry_id"], "type": row["type"], "mime_type": row["mime_type"],
            "cache_path": row["cache_path"], "source_hash": row["source_hash"],
            "value": json.loads(row["value_json"] or "{}"), "created_at": row["created_at"]}


def sort_artifacts(artifacts: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Artifacts of one entry in inspect's order; timeline frames by frame number."""
    return sorted(artifacts, key=lambda a: (TYPE_ORDER.get(a["type"], 9), a["type"],
                                            (a["value"] or {}).get("frame", 0) if isinstance(a["value"], dict) else 0,
                                            a["id"]))


def entry_artifacts(engine: Engine, *, entry_id: int) -> list[dict[str, Any]]:
    """Every artifact of one entry, in inspect's order (none for an entry the caller may not see)."""
    stmt = select(A).where(A.c.entry_id == entry_id)
    if limited():
        stmt = stmt.join(T, T.c.id == A.c.entry_id).where(visible_clause(T.c.path))
    with engine.connect() as conn:
        rows = conn.execute(stmt).mappings().all()
    return sort_artifacts(_artifact(r) for r in rows)


def thumbnails_for(engine: Engine, entry_ids: Sequence[int]) -> dict[int, str]:
    """entry id -> thumbnail cache path, for a page of entries, in one query (of the entries the caller may see)."""
    if not entry_ids:
        return {}
    stmt = select(A.c.entry_id, A.c.cache_path).where(A.c.entry_id.in_(list(entry_ids)), A.c.type == "thumbnail",
                                                       A.c.cache_path.is_not(None))
    if limited():
        stmt = stmt.join(T, T.c.id == A.c.entry_id).where(visible_clause(T.c.path))
    with engine.connect() as conn:
        return {r.entry_id: r.cache_path for r in conn.execute(stmt)}


def duplicate_count(engine: Engine, *, entry_id: int, hash_: str | None) -> int:
    """How many other entries the caller may see have the same content hash (0 when the entry has none yet)."""
    if not hash_:
        return 0
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T)
                            .where(T.c.hash == hash_, T.c.id != entry_id, visible_clause(T.c.path))).scalar_one()


def list_artifacts(engine: Engine, *, scope: ColumnElement[bool] | None = None, artifact_type: str | None = None,
                   sort: str = "newest", limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """One page of artifacts with their entry's path, newest first (``sort="newest"``) or by path then type; and the
    total. ``artifact_type`` keeps one type (``thumbnail``)."""
    if sort not in LISTING_SORTS:
        raise InvalidInput(f"sort {sort!r} is not supported; use one of: {', '.join(LISTING_SORTS)}", field="sort")
    where = visible_where(T.c.path)
    if scope is not None:
        where.append(scope)
    if artifact_type:
        where.append(A.c.type == artifact_type)
    order = ([A.c.id.desc()] if sort == "newest"
             else [T.c.path, case(*((A.c.type == t, n) for t, n in TYPE_ORDER.items()), else_=9), A.c.id])
    joined = A.join(T, A.c.entry_id == T.c.id)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(joined).where(*where)).scalar_one()
        rows = conn.execute(select(A, T.c.path, T.c.hash).select_from(joined).where(*where)
                            .order_by(*order).limit(limit).offset(offset)).mappings().all()
    return [_artifact(r) | {"path": r["path"], "hash": r["hash"]} for r in rows], total


def entries_with_hash(engine: Engine, *, hash_: str, scope: ColumnElement[bool] | None = None,
                      limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
    """The entries whose content hash is ``hash_`` (by path, at most ``limit``) with their artifacts, and how many
    there are."""
    check_hash(hash_)
    where = [T.c.hash == hash_, visible_clause(T.c.path)] + ([scope] if scope is not None else [])
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(T).where(*where)).scalar_one()
        entries = [dict(r) for r in conn.execute(
            select(T.c.id, T.c.path, T.c.size, T.c.mtime, T.c.mime, T.c.media_type).where(*where)
            .order_by(T.c.path).limit(limit)).mappings()]
        ids = [e["id"] for e in entries]
        rows = conn.execute(select(A).where(A.c.entry_id.in_(ids))).mappings().all() if ids else []
    by_entry: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_entry.setdefault(r["entry_id"], []).append(_artifact(r))
    for e in entries:
        e["artifacts"] = sort_artifacts(by_entry.get(e["id"], []))
    return entries, total


def duplicate_groups(engine: Engine, *, scope: ColumnElement[bool] | None = None, limit: int = 50, offset: int = 0,
                     paths_per_group: int = 100) -> tuple[list[dict[str, Any]], int]:
    """Groups of files with the same content hash (two or more), largest wasted space first (size × (count − 1)),
    each with its size, count, wasted bytes and up to ``paths_per_group`` paths; and the number of groups."""
    where = [T.c.hash.is_not(None), T.c.kind == "file", visible_clause(T.c.path)]
    where += [scope] if scope is not None else []
    count = func.count().label("count")
    size = func.max(T.c.size).label("size")
    wasted = (func.max(T.c.size) * (func.count() - 1)).label("wasted")
    grouped = select(T.c.hash, count, size, wasted).where(*where).group_by(T.c.hash).having(func.count() > 1)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(grouped.subquery())).scalar_one()
        groups = [dict(r) for r in conn.execute(
            grouped.order_by(wasted.desc(), T.c.hash).limit(limit).offset(offset)).mappings()]
        for g in groups:
            g["paths"] = list(conn.execute(select(T.c.path).where(and_(*where), T.c.hash == g["hash"])
                                           .order_by(T.c.path).limit(paths_per_group)).scalars())
    return [{"hash": g["hash"], "size": g["size"], "count": g["count"], "wastedBytes": g["wasted"],
             "paths": g["paths"], "pathsShown": len(g["paths"])} for g in groups], total

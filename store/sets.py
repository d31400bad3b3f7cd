"""Resource sets: named sets of entries arranged in a DAG (a set may have several parents; no cycles).

Core graph functions live here; every aggregate over a set and its descendants selects entries with
``entry_ids_in(set_ids)``, an ``IN (subquery)`` over membership, so an entry reachable by two paths counts once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import literal, select
from sqlalchemy.engine import Connection

from store.errors import NotFound
from store.models import ResourceSet, SetEdge, SetMember

S = ResourceSet.__table__
E = SetEdge.__table__
M = SetMember.__table__


def get_set(conn: Connection, *, name: str) -> dict[str, Any] | None:
    row = conn.execute(select(S).where(S.c.name == name)).mappings().first()
    return dict(row) if row else None


def require_set(conn: Connection, *, name: str, field: str = "name") -> dict[str, Any]:
    row = get_set(conn, name=name)
    if row is None:
        raise NotFound(f"resource-set {name!r} not found; resource-set-list shows the existing sets, "
                       "resource-set-create makes one", field=field)
    return row


def descendant_ids(conn: Connection, *, set_id: int, depth: int | None = None, include_self: bool = True) -> list[int]:
    """Ids of the sets below ``set_id`` down to ``depth`` edges (None: all), each once."""
    return _walk(conn, start=set_id, depth=depth, include_self=include_self, down=True)


def ancestor_ids(conn: Connection, *, set_id: int, depth: int | None = None, include_self: bool = False) -> list[int]:
    return _walk(conn, start=set_id, depth=depth, include_self=include_self, down=False)


def _walk(conn: Connection, *, start: int, depth: int | None, include_self: bool, down: bool) -> list[int]:
    src, dst = (E.c.parent_id, E.c.child_id) if down else (E.c.child_id, E.c.parent_id)
    base = select(literal(start).label("id"), literal(0).label("lvl")).cte("walk", recursive=True)
    step = select(dst.label("id"), (base.c.lvl + 1).label("lvl")).join_from(base, E, src == base.c.id)
    if depth is not None:
        step = step.where(base.c.lvl < depth)
    walk = base.union(step)  # UNION (not ALL): the DAG is acyclic, and duplicates are dropped as they appear
    rows = conn.execute(select(walk.c.id).distinct().where(walk.c.id != start if not include_self else True))
    return [r[0] for r in rows]


def would_create_cycle(conn: Connection, *, parent_id: int, child_id: int) -> bool:
    """An edge parent -> child closes a cycle iff parent is child itself or already below child."""
    return parent_id == child_id or parent_id in descendant_ids(conn, set_id=child_id)


def entry_ids_in(set_ids: list[int]):
    """A subquery of the distinct entry ids that belong to any of ``set_ids``."""
    return select(M.c.entry_id).where(M.c.set_id.in_(set_ids))


def closure_for(conn: Connection, *, name: str, include_children: bool, depth: int | None = None) -> list[int]:
    """The set ids a query over ``name`` covers: the set alone, or with its descendants (to ``depth``)."""
    root = require_set(conn, name=name)
    if not include_children:
        return [root["id"]]
    return descendant_ids(conn, set_id=root["id"], depth=depth)



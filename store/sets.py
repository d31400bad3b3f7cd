"""Resource sets: named sets of entries arranged in a DAG (a set may have several parents; no cycles).

Two layers: connection-level functions (``get_set``, ``ensure_set``, ``add_members_from``, the graph walks) that
other modules compose inside their own transactions, and engine-level functions named after the tools
(``create_set``, ``list_sets``, ``describe_set``, ``modify_members``, ``delete_set``, ``add_child``, ``remove_child``,
``children_of``, ``parents_of``), each one transaction.

Counting: a set's ``entry_count`` is its own members; ``child_count`` its direct children. Every aggregate over a set
and its descendants selects entries with ``entry_ids_in(set_ids)``, an ``IN (subquery)`` over membership, so an entry
reachable by two paths counts once.

Visibility: every count, page and total of members a tool or resource reads covers only the entries the current
caller may see (store.visibility; a guarded server's user limited to some roots), through :func:`from_members` and
``visible_clause`` on the joined entry's path. The connection-level functions that plans and outcomes compose
(``entry_ids_in``, ``add_members_from``, ...) are not narrowed: they write, and what they write is decided by paths.
"""

from __future__ import annotations

import re
from typing import Any, Iterator, Sequence

from sqlalchemy import ColumnElement, Select, Table, delete, exists, func, literal, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from store.entries import T, driver_connection, entry_public, iso
from store.errors import AlreadyExists, Conflict, InvalidInput, NotFound
from store.models import ResourceSet, SetEdge, SetMember, now
from store.visibility import limited, visible_clause

S = ResourceSet.__table__
E = SetEdge.__table__
M = SetMember.__table__

NAME_RULE = ("1-128 characters: letters A-Z a-z, digits, '-', '_' and '.', starting with a letter or digit "
             "(so the name works unchanged in synthesis://resource-sets/{name} URIs)")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
OPERATIONS = ("add", "remove")
_CHUNK = 500  # bound parameters per IN (...) list


# --- connection level ---------------------------------------------------------------------------------------------


def check_name(name: Any, *, field: str = "name") -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidInput(f"{field} {name!r} is not a valid resource-set name; use {NAME_RULE}", field=field)
    return name


def get_set(conn: Connection, *, name: str) -> dict[str, Any] | None:
    row = conn.execute(select(S).where(S.c.name == name)).mappings().first()
    return dict(row) if row else None


def require_set(conn: Connection, *, name: str, field: str = "name") -> dict[str, Any]:
    row = get_set(conn, name=name)
    if row is None:
        raise NotFound(f"resource-set {name!r} not found; resource-set-list shows the existing sets, "
                       "resource-set-create makes one", field=field)
    return row


def ensure_set(conn: Connection, *, name: str, description: str | None = None) -> dict[str, Any]:
    """The set called ``name``, created (with a checked name) if missing; for outcomes that fill sets."""
    row = get_set(conn, name=name)
    if row is not None:
        return row
    check_name(name)
    conn.execute(S.insert().values(name=name, description=description, created_at=now(), updated_at=now()))
    return require_set(conn, name=name)


def descendant_ids(conn: Connection, *, set_id: int, depth: int | None = None, include_self: bool = True) -> list[int]:
    """Ids of the sets below ``set_id`` down to ``depth`` edges (None: all), each once."""
    return [i for i, _ in _levels(conn, start=set_id, depth=depth, down=True, include_self=include_self)]


def ancestor_ids(conn: Connection, *, set_id: int, depth: int | None = None, include_self: bool = False) -> list[int]:
    return [i for i, _ in _levels(conn, start=set_id, depth=depth, down=False, include_self=include_self)]


def _levels(conn: Connection, *, start: int, depth: int | None, down: bool,
            include_self: bool = False) -> list[tuple[int, int]]:
    """(set id, shortest distance from ``start``) for the sets reached along edges (down or up) within ``depth``."""
    src, dst = (E.c.parent_id, E.c.child_id) if down else (E.c.child_id, E.c.parent_id)
    base = select(literal(start).label("id"), literal(0).label("lvl")).cte("walk", recursive=True)
    step = select(dst.label("id"), (base.c.lvl + 1).label("lvl")).join_from(base, E, src == base.c.id)
    if depth is not None:
        step = step.where(base.c.lvl < depth)
    walk = base.union(step)  # UNION (not ALL): the DAG is acyclic, and duplicates are dropped as they appear
    stmt = select(walk.c.id, func.min(walk.c.lvl).label("lvl")).group_by(walk.c.id)
    if not include_self:
        stmt = stmt.where(walk.c.id != start)
    return [(r[0], r[1]) for r in conn.execute(stmt)]


def _path_down(conn: Connection, *, start: int, goal: int) -> list[int] | None:
    """The shortest chain of set ids start -> ... -> goal along edges, or None (breadth-first, each set once)."""
    if start == goal:
        return [start]
    previous: dict[int, int | None] = {start: None}
    frontier = [start]
    while frontier:
        reached: list[int] = []
        for chunk in _chunks(frontier):
            for parent, child in conn.execute(select(E.c.parent_id, E.c.child_id).where(E.c.parent_id.in_(chunk))):
                if child in previous:
                    continue
                previous[child] = parent
                if child == goal:
                    chain = [child]
                    while previous[chain[-1]] is not None:
                        chain.append(previous[chain[-1]])
                    return chain[::-1]
                reached.append(child)
        frontier = reached
    return None


def cycle_path(conn: Connection, *, parent_id: int, child_id: int) -> list[int] | None:
    """The cycle an edge parent -> child would close, as ids [parent, child, ..., parent], or None."""
    back = _path_down(conn, start=child_id, goal=parent_id)
    return None if back is None else [parent_id, *back]


def would_create_cycle(conn: Connection, *, parent_id: int, child_id: int) -> bool:
    """An edge parent -> child closes a cycle iff parent is child itself or already below child."""
    return cycle_path(conn, parent_id=parent_id, child_id=child_id) is not None


def entry_ids_in(set_ids: list[int]) -> Select[Any]:
    """A subquery of the distinct entry ids that belong to any of ``set_ids``."""
    return select(M.c.entry_id).where(M.c.set_id.in_(set_ids))


def from_members(stmt: Select[Any]) -> Select[Any]:
    """``stmt`` (a select of aggregates over memberships) FROM ``set_members``, of the entries the current caller
    may see: the membership index alone when nothing is limited, else joined to the entries and narrowed."""
    if not limited():
        return stmt.select_from(M)
    return stmt.select_from(M.join(T, T.c.id == M.c.entry_id)).where(visible_clause(T.c.path))


def closure_for(conn: Connection, *, name: str, include_children: bool, depth: int | None = None) -> list[int]:
    """The set ids a query over ``name`` covers: the set alone, or with its descendants (to ``depth``)."""
    root = require_set(conn, name=name)
    if not include_children:
        return [root["id"]]
    return descendant_ids(conn, set_id=root["id"], depth=depth)


def add_members_from(conn: Connection, *, set_id: int, entry_ids: Select[Any]) -> int:
    """Add the entries selected by ``entry_ids`` (a one-column select of entry ids) to a set; returns how many were
    new. One INSERT ... SELECT, so callers can add a whole query result without loading it."""
    ids = entry_ids.subquery()
    already = exists().where(M.c.set_id == set_id, M.c.entry_id == ids.c[0])
    source = select(literal(set_id), ids.c[0], literal(now())).where(~already).distinct()
    ins = M.insert().from_select(["set_id", "entry_id", "added_at"], source)
    added = conn.execute(ins.execution_options(preserve_rowcount=True)).rowcount or 0  # INSERT counts need asking
    if added:
        _touch(conn, set_id)
    return added


def add_member_ids(conn: Connection, *, set_id: int, entry_ids: Sequence[int]) -> int:
    """Add the entries ``entry_ids`` (existing entry ids) to a set; returns how many were new. One lookup of the
    current members and one multi-row INSERT per chunk (the plan engine's hot path)."""
    added = 0
    stamp = now()
    if conn.dialect.name == "sqlite":  # the hot path: the driver's executemany, INSERT OR IGNORE counts new rows
        cursor = driver_connection(conn).cursor()
        try:
            cursor.executemany("INSERT OR IGNORE INTO set_members (set_id, entry_id, added_at) VALUES (?, ?, ?)",
                               [(set_id, i, stamp) for i in entry_ids])
            added = int(cursor.rowcount)
        finally:
            cursor.close()
        if added:
            _touch(conn, set_id)
        return added
    for part in _chunks(list(entry_ids)):
        present = set(conn.execute(select(M.c.entry_id).where(M.c.set_id == set_id, M.c.entry_id.in_(part)))
                      .scalars())
        new = [{"set_id": set_id, "entry_id": i, "added_at": stamp} for i in dict.fromkeys(part) if i not in present]
        if new:
            conn.execute(M.insert(), new)
            added += len(new)
    if added:
        _touch(conn, set_id)
    return added


def remove_member_ids(conn: Connection, *, set_id: int, entry_ids: Sequence[int]) -> int:
    removed = 0
    for part in _chunks(list(entry_ids)):
        removed += conn.execute(delete(M).where(M.c.set_id == set_id, M.c.entry_id.in_(part))).rowcount or 0
    if removed:
        _touch(conn, set_id)
    return removed


def remove_members_from(conn: Connection, *, set_id: int, entry_ids: Select[Any]) -> int:
    removed = conn.execute(delete(M).where(M.c.set_id == set_id, M.c.entry_id.in_(entry_ids))).rowcount or 0
    if removed:
        _touch(conn, set_id)
    return removed


def _touch(conn: Connection, set_id: int) -> None:
    conn.execute(update(S).where(S.c.id == set_id).values(updated_at=now()))


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _summaries(conn: Connection, where: ColumnElement[bool] | None = None) -> list[dict[str, Any]]:
    """name, description, entry_count, child_count, parent_count and times of the sets matching ``where``."""
    entry_count = from_members(select(func.count())).where(M.c.set_id == S.c.id).scalar_subquery()
    child_count = select(func.count()).select_from(E).where(E.c.parent_id == S.c.id).scalar_subquery()
    parent_count = select(func.count()).select_from(E).where(E.c.child_id == S.c.id).scalar_subquery()
    stmt = select(S.c.id, S.c.name, S.c.description, S.c.created_at, S.c.updated_at,
                  entry_count.label("entry_count"), child_count.label("child_count"),
                  parent_count.label("parent_count")).order_by(S.c.name)
    if where is not None:
        stmt = stmt.where(where)
    return [{"id": row["id"], "name": row["name"], "description": row["description"],
             "entry_count": row["entry_count"], "child_count": row["child_count"],
             "parent_count": row["parent_count"], "created_at": iso(row["created_at"]),
             "updated_at": iso(row["updated_at"])} for row in conn.execute(stmt).mappings()]


def _public(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "id"}


def _neighbour_names(conn: Connection, *, set_id: int, down: bool) -> list[str]:
    mine, other = (E.c.parent_id, E.c.child_id) if down else (E.c.child_id, E.c.parent_id)
    stmt = select(S.c.name).join(E, other == S.c.id).where(mine == set_id).order_by(S.c.name)
    return list(conn.scalars(stmt))


def _entries_page(conn: Connection, *, set_ids: list[int], limit: int, offset: int) -> list[dict[str, Any]]:
    stmt = (select(T).where(T.c.id.in_(entry_ids_in(set_ids)), visible_clause(T.c.path)).order_by(T.c.path)
            .limit(limit).offset(offset))
    return [entry_public(r) for r in conn.execute(stmt).mappings()]


def _check_depth(depth: int | None) -> int | None:
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InvalidInput(f"depth must be a whole number of 1 or more, or null for no limit; got {depth!r}",
                           field="depth")
    return depth


def _check_page(limit: int, offset: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= 10000:
        raise InvalidInput(f"limit must be between 1 and 10000, got {limit!r}", field="limit")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset!r}", field="offset")


# --- engine level: one transaction per tool call --------------------------------------------------------------------


def create_set(engine: Engine, *, name: str, description: str | None = None) -> dict[str, Any]:
    check_name(name)
    with engine.begin() as conn:
        if get_set(conn, name=name) is not None:
            raise AlreadyExists(f"resource-set {name!r} already exists; resource-set-get shows it, "
                                "resource-set-delete removes it", field="name")
        stamp = now()
        conn.execute(S.insert().values(name=name, description=description, created_at=stamp, updated_at=stamp))
        summary = _summaries(conn, S.c.name == name)[0]
    return _public(summary)


def list_sets(engine: Engine) -> list[dict[str, Any]]:
    """Every set with its counts, by name (sets are few; their members are counted in SQL, never loaded)."""
    with engine.connect() as conn:
        return [_public(s) for s in _summaries(conn)]


def describe_set(engine: Engine, *, name: str, include_entries: bool = False, limit: int = 100,
                 offset: int = 0) -> dict[str, Any]:
    """A set's metadata, its direct parents and children, and optionally one page of its own entries (by path).

    ``total_entry_count`` counts the distinct entries of the set and all its descendants (an entry in two
    descendants counts once).
    """
    _check_page(limit, offset)
    with engine.connect() as conn:
        row = require_set(conn, name=name)
        summary = _summaries(conn, S.c.id == row["id"])[0]
        closure = descendant_ids(conn, set_id=row["id"])
        total = conn.execute(select(func.count()).select_from(T).where(T.c.id.in_(entry_ids_in(closure)),
                                                                       visible_clause(T.c.path)))
        result = {**_public(summary), "total_entry_count": total.scalar_one(),
                  "parents": _neighbour_names(conn, set_id=row["id"], down=False),
                  "children": _neighbour_names(conn, set_id=row["id"], down=True)}
        if include_entries:
            entries = _entries_page(conn, set_ids=[row["id"]], limit=limit, offset=offset)
            result.update(entries=entries, limit=limit, offset=offset,
                          hasMore=offset + len(entries) < summary["entry_count"])
    return result


def check_operation(operation: Any) -> str:
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise InvalidInput(f"operation {operation!r} is not supported; use \"add\" or \"remove\"",
                           field="operation")
    return operation


def modify_members(engine: Engine, *, name: str, operation: str, paths: Sequence[str]) -> dict[str, Any]:
    """Add or remove indexed entries, named by their (already resolved) paths, to or from a set.

    A directory path adds or removes that directory's own entry, not its subtree. Adding a member twice and removing a
    non-member change nothing and are counted as ``unchanged``. Paths not in the index are listed in ``notFound``; if
    no path at all is in the index, nothing is changed and :class:`NotFound` is raised.
    """
    check_operation(operation)
    unique = list(dict.fromkeys(paths))
    if not unique:
        raise InvalidInput("paths must name at least one indexed entry", field="paths")
    changed = 0
    found: set[str] = set()
    with engine.begin() as conn:
        row = require_set(conn, name=name)
        for chunk in _chunks(unique):
            found.update(conn.scalars(select(T.c.path).where(T.c.path.in_(chunk))))
            ids = select(T.c.id).where(T.c.path.in_(chunk))
            if operation == "add":
                changed += add_members_from(conn, set_id=row["id"], entry_ids=ids)
            else:
                changed += remove_members_from(conn, set_id=row["id"], entry_ids=ids)
        missing = [p for p in unique if p not in found]
        if not found:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise NotFound(f"none of the paths is in the index ({shown}); index them (or a folder above them) "
                           "with the index tool first", field="paths")
        entry_count = conn.execute(from_members(select(func.count())).where(M.c.set_id == row["id"])).scalar_one()
    return {"name": name, "operation": operation, "requested": len(unique),
            "added": changed if operation == "add" else 0, "removed": changed if operation == "remove" else 0,
            "unchanged": len(found) - changed, "notFound": missing, "entry_count": entry_count}


def delete_set(engine: Engine, *, name: str) -> dict[str, Any]:
    """Delete a set with its edges and memberships; its entries and the sets it was linked to stay."""
    with engine.begin() as conn:
        row = require_set(conn, name=name)
        sid = row["id"]
        edges = conn.execute(delete(E).where((E.c.parent_id == sid) | (E.c.child_id == sid))).rowcount or 0
        members = conn.execute(delete(M).where(M.c.set_id == sid)).rowcount or 0
        conn.execute(delete(S).where(S.c.id == sid))
    return {"name": name, "deleted": True, "memberships_removed": members, "edges_removed": edges}


def _insert_ignore(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


def add_child(engine: Engine, *, parent: str, child: str) -> dict[str, Any]:
    """Add the edge parent -> child. Idempotent: an existing edge is kept and reported with ``created: false``.

    An edge that would close a cycle (a set under itself, directly or through other sets) is refused with
    :class:`Conflict` naming the cycle. The edge is written before the check, inside the transaction, so a concurrent
    writer cannot slip a cycle in between (SQLite holds its write lock from the insert; PostgreSQL locks the table).
    """
    with engine.begin() as conn:
        p = require_set(conn, name=parent, field="parent")
        c = require_set(conn, name=child, field="child")
        if p["id"] == c["id"]:
            raise Conflict(f"adding {parent} -> {child} would create a cycle: {parent} -> {child}; a set cannot be "
                           "its own child", field="child")
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("LOCK TABLE set_edges IN SHARE ROW EXCLUSIVE MODE")
        ins = _insert_ignore(conn, E).values(parent_id=p["id"], child_id=c["id"], created_at=now())
        created = conn.execute(ins.execution_options(preserve_rowcount=True)).rowcount == 1
        if created:
            cycle = cycle_path(conn, parent_id=p["id"], child_id=c["id"])
            if cycle is not None:
                names = dict(conn.execute(select(S.c.id, S.c.name).where(S.c.id.in_(cycle))).tuples().all())
                chain = " -> ".join(names[i] for i in cycle)
                raise Conflict(f"adding {parent} -> {child} would create a cycle: {chain}; "
                               "a resource-set DAG cannot contain cycles", field="child")
            _touch(conn, p["id"])
    return {"parent": parent, "child": child, "created": created}


def remove_child(engine: Engine, *, parent: str, child: str) -> dict[str, Any]:
    """Remove the edge parent -> child; NotFound if there is no such edge (saying so if the reverse edge exists)."""
    with engine.begin() as conn:
        p = require_set(conn, name=parent, field="parent")
        c = require_set(conn, name=child, field="child")
        gone = conn.execute(delete(E).where(E.c.parent_id == p["id"], E.c.child_id == c["id"])).rowcount
        if not gone:
            reverse = conn.execute(select(E.c.parent_id).where(E.c.parent_id == c["id"],
                                                               E.c.child_id == p["id"])).first()
            hint = (f"; {parent} is a child of {child} — swap parent and child to remove that edge" if reverse
                    else "; resource-children shows a set's children")
            raise NotFound(f"{child} is not a child of {parent}{hint}", field="child")
        _touch(conn, p["id"])
    return {"parent": parent, "child": child, "removed": True}


def children_of(engine: Engine, *, name: str, depth: int | None = 1, include_entries: bool = False,
                limit: int = 100) -> dict[str, Any]:
    """The sets below ``name`` within ``depth`` edges (None: all), each once, nearest first then by name.

    Each child has its own ``entry_count`` and ``child_count``, ``depth`` (shortest distance from ``name``) and
    ``parents`` (its direct parents among ``name`` and the listed sets, so a multi-level answer keeps the DAG's
    shape). With ``include_entries`` each child carries up to ``limit`` of its own entries (by path) and
    ``entries_has_more``.
    """
    return _neighbours(engine, name=name, depth=depth, down=True, include_entries=include_entries, limit=limit)


def parents_of(engine: Engine, *, name: str, depth: int | None = 1) -> dict[str, Any]:
    """The sets above ``name`` within ``depth`` edges (None: all ancestors), each once, nearest first."""
    return _neighbours(engine, name=name, depth=depth, down=False, include_entries=False, limit=1)


def _neighbours(engine: Engine, *, name: str, depth: int | None, down: bool, include_entries: bool,
                limit: int) -> dict[str, Any]:
    _check_depth(depth)
    _check_page(limit, 0)
    key, link = ("children", "parents") if down else ("parents", "children")
    with engine.connect() as conn:
        row = require_set(conn, name=name)
        levels = dict(_levels(conn, start=row["id"], depth=depth, down=down))
        nodes: list[dict[str, Any]] = []
        for chunk in _chunks(list(levels)):
            nodes.extend(_summaries(conn, S.c.id.in_(chunk)))
        known = {row["id"]: name, **{n["id"]: n["name"] for n in nodes}}
        # the edges among the start and the listed sets, pointing back towards the start
        links: dict[int, list[str]] = {}
        near, far = (E.c.parent_id, E.c.child_id) if down else (E.c.child_id, E.c.parent_id)
        for chunk in _chunks(list(levels)):
            for a, b in conn.execute(select(near, far).where(far.in_(chunk))):
                if a in known:
                    links.setdefault(b, []).append(known[a])
        for node in nodes:
            node["depth"] = levels[node["id"]]
            node[link] = sorted(links.get(node["id"], []))
            if include_entries:
                node["entries"] = _entries_page(conn, set_ids=[node["id"]], limit=limit, offset=0)
                node["entries_has_more"] = node["entry_count"] > len(node["entries"])
    nodes.sort(key=lambda n: (n["depth"], n["name"]))
    return {"resource_set": name, "depth": depth, key: [_public(n) for n in nodes]}

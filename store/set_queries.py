"""Queries over one resource set, alone or with its descendants: metric sums, ranges, exact and pattern matches,
multi-filter search and statistics.

Every query selects entries through :meth:`Scope.select`: a join from one set's memberships, or ``entries.id IN
(membership subquery over the set ids)`` for several, so an entry reachable by two paths of the DAG counts once; every
aggregate runs in SQL. Fields, metrics, modes and sort keys are looked up in fixed tables here; what a caller sends
only ever reaches SQL as a bound parameter.

Every page, count and sum covers only the entries the current caller may see (store.visibility): :meth:`Scope.select`
and :meth:`Scope.count_members` narrow themselves, so a set whose members lie under other roots than a limited user's
shows that user only the members under theirs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sqlalchemy import ColumnElement, Select, case, exists, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from store.entries import T, entry_public, iso, subtree_clause
from store.errors import InvalidInput, check_choice
from store.filters import EntryFilter, check_range, normalize_extension, parse_end_time, parse_time
from store.patterns import match_clause
from store.sets import E, M, S, descendant_ids, from_members, require_set
from store.visibility import visible_clause

log = logging.getLogger(__name__)

KINDS = ("file", "directory", "symlink", "other")

# metric -> what it measures (resource-sum, metrics/{metric}, stats)
METRICS: dict[str, str] = {
    "size": "total bytes, each byte once: a member directory counts with its whole subtree, and members inside "
            "it are not added again",
    "count": "number of entries of any kind",
    "files": "number of file entries",
    "directories": "number of directory entries",
    "symlinks": "number of symbolic links",
}

# resource-metric-range: numeric entry fields
RANGE_METRICS: dict[str, Any] = {"size": T.c.size, "depth": T.c.depth, "mtime": T.c.mtime, "ctime": T.c.ctime}

# resource-time-range: time fields; added_at is when the entry joined the set (membership), not an entry column
TIME_FIELDS: dict[str, Any] = {"mtime": T.c.mtime, "ctime": T.c.ctime, "indexed_at": T.c.indexed_at,
                               "added_at": None}

# resource-is: exact match
IS_FIELDS: dict[str, Any] = {
    "kind": T.c.kind, "path": T.c.path, "parent": T.c.parent, "name": T.c.name, "extension": T.c.extension,
    "media_type": T.c.media_type, "mime": T.c.mime, "hash": T.c.hash, "size": T.c.size, "depth": T.c.depth,
}
PATH_FIELDS = ("path", "parent")  # values that are paths: the tool confines them to the roots first
_INT_FIELDS = ("size", "depth")

# resource-fuzzy-match: text fields (modes: store.patterns.MATCH_MODES)
TEXT_FIELDS: dict[str, Any] = {
    "path": T.c.path, "name": T.c.name, "parent": T.c.parent, "extension": T.c.extension, "kind": T.c.kind,
    "media_type": T.c.media_type, "mime": T.c.mime, "hash": T.c.hash,
}

# resource-search: sort keys
SEARCH_SORTS: dict[str, Any] = {"size": T.c.size, "name": T.c.name, "mtime": T.c.mtime, "path": T.c.path,
                                "ctime": T.c.ctime}

MAX_LIMIT = 10000

Result = TypeVar("Result")


def run(engine: Engine, query: Callable[..., Result], /, **kwargs: Any) -> Result:
    """One of the queries below on a connection of its own: ``run(engine, set_stats, name="photos")`` (what the tools
    and resources call; a caller holding a connection calls the query itself)."""
    with engine.connect() as conn:
        return query(conn, **kwargs)


def _check_page(limit: int, offset: int) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", field="limit")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"offset must be an integer of 0 or more, got {offset!r}", field="offset")


# --- scope: the sets a query covers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    name: str
    set_id: int
    set_ids: list[int]
    include_children: bool

    def select(self, *columns: Any, joined: list[ColumnElement[bool]] | None = None) -> Select[Any]:
        """SELECT ``columns`` over the covered sets' entries the caller may see, each once; ``joined`` filters the
        memberships.

        One set: a join from its memberships (unique per set, so nothing repeats). Several: ``id IN`` the union of
        their memberships, so an entry reached by two paths of the DAG still comes once.
        """
        joined = joined or []
        if len(self.set_ids) == 1:
            return (select(*columns).select_from(M.join(T, T.c.id == M.c.entry_id))
                    .where(M.c.set_id == self.set_ids[0], *joined, visible_clause(T.c.path)))
        return select(*columns).select_from(T).where(
            T.c.id.in_(select(M.c.entry_id).where(M.c.set_id.in_(self.set_ids), *joined)), visible_clause(T.c.path))

    def count_members(self, joined: list[ColumnElement[bool]] | None = None) -> Select[Any]:
        """The number of distinct entries the caller may see: from the membership index alone when nothing is
        limited."""
        stmt = select(func.count() if len(self.set_ids) == 1 else func.count(func.distinct(M.c.entry_id)))
        return from_members(stmt).where(M.c.set_id.in_(self.set_ids), *(joined or []))


def scope_for(conn: Connection, *, name: str, include_children: bool, depth: int | None = None) -> Scope:
    if depth is not None and (not isinstance(depth, int) or depth < 0):
        raise InvalidInput(f"depth must be 0 or more (or null for no limit), got {depth!r}", field="depth")
    root = require_set(conn, name=name)
    ids = descendant_ids(conn, set_id=root["id"], depth=depth) if include_children else [root["id"]]
    return Scope(name=root["name"], set_id=root["id"], set_ids=ids, include_children=include_children)


# --- metrics ----------------------------------------------------------------------------------------------------


def _metric_column(metric: str) -> ColumnElement[Any]:
    if metric == "size":
        return func.coalesce(func.sum(case((T.c.kind == "file", T.c.size), else_=0)), 0)
    if metric == "count":
        return func.count()
    kind = {"files": "file", "directories": "directory", "symlinks": "symlink"}[metric]
    return func.coalesce(func.sum(case((T.c.kind == kind, 1), else_=0)), 0)


MAX_DIRECTORY_MEMBERS = 500


def size_total(conn: Connection, scope: "Scope") -> int:
    """The bytes the set's entries stand for, each byte once.

    A directory entry's size is the total of its subtree, so a directory member counts with its whole subtree, and
    members inside a member directory (files or directories) are not added again. With no directory members this is
    the sum of the member files' sizes.
    """
    dirs = conn.execute(
        scope.select(T.c.path, T.c.size).where(T.c.kind == "directory").order_by(T.c.path)
        .limit(MAX_DIRECTORY_MEMBERS + 1)
    ).all()
    if not dirs:
        return int(conn.execute(scope.select(_metric_column("size"))).scalar_one() or 0)
    if len(dirs) > MAX_DIRECTORY_MEMBERS:  # too many to list: a correlated test per entry instead
        D, MD = T.alias("d"), M.alias("md")
        covered = exists(select(1).select_from(MD.join(D, D.c.id == MD.c.entry_id)).where(
            MD.c.set_id.in_(scope.set_ids), D.c.kind == "directory", D.c.id != T.c.id,
            T.c.path > D.c.path + "/", T.c.path < D.c.path + "0", visible_clause(D.c.path)))
        stmt = scope.select(func.coalesce(func.sum(
            case((T.c.kind.in_(("file", "directory")), T.c.size), else_=0)), 0)).where(~covered)
        return int(conn.execute(stmt).scalar_one() or 0)
    tops: list[tuple[str, int]] = []  # directories not inside another member directory (sorted paths: parents first)
    for path, size in dirs:
        if not tops or not (path.startswith(tops[-1][0].rstrip("/") + "/") or tops[-1][0] == "/"):
            tops.append((path, size))
    outside = [~subtree_clause(path) for path, _ in tops]
    rest = conn.execute(scope.select(_metric_column("size")).where(*outside)).scalar_one() or 0
    return int(rest) + sum(int(size) for _, size in tops)


def metric_value(conn: Connection, *, set_ids: list[int], metric: str) -> int:
    """``metric`` over the entries of ``set_ids`` (each entry once), computed in SQL."""
    check_choice(metric, METRICS, field="metric", what="metric")
    if not set_ids:
        return 0
    scope = Scope(name="", set_id=set_ids[0], set_ids=list(set_ids), include_children=len(set_ids) > 1)
    if metric == "size":
        return size_total(conn, scope)
    # count: membership alone answers it, from the primary key
    stmt = scope.count_members() if metric == "count" else scope.select(_metric_column(metric))
    return int(conn.execute(stmt).scalar_one() or 0)


def child_sets(conn: Connection, *, set_id: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(S.c.id, S.c.name).join(E, E.c.child_id == S.c.id).where(E.c.parent_id == set_id).order_by(S.c.name)
    ).mappings()
    return [dict(r) for r in rows]


def resource_sum(conn: Connection, *, name: str, metric: str, include_children: bool = True,
                 depth: int | None = None) -> dict[str, Any]:
    """The metric over the set (with its descendants to ``depth``), and the same for each direct child."""
    check_choice(metric, METRICS, field="metric", what="metric")
    scope = scope_for(conn, name=name, include_children=include_children, depth=depth)
    breakdown = []
    if include_children and (depth is None or depth >= 1):
        below = None if depth is None else depth - 1
        for child in child_sets(conn, set_id=scope.set_id):
            ids = descendant_ids(conn, set_id=child["id"], depth=below)
            breakdown.append({"name": child["name"], "value": metric_value(conn, set_ids=ids, metric=metric)})
    return {
        "resource_set": scope.name, "metric": metric,
        "value": metric_value(conn, set_ids=scope.set_ids, metric=metric),
        "breakdown": breakdown,
        "direct_value": metric_value(conn, set_ids=[scope.set_id], metric=metric),
        "include_children": include_children, "depth": depth, "sets_counted": len(scope.set_ids),
    }


# --- pages of matching entries ------------------------------------------------------------------------------------


def _page(conn: Connection, *, scope: Scope, where: list[ColumnElement[bool]], limit: int, offset: int,
          order: list[Any] | None = None, joined: list[ColumnElement[bool]] | None = None) -> dict[str, Any]:
    """One page of the scope's entries matching ``where``, with the total count (both in SQL)."""
    _check_page(limit, offset)
    order = order or [T.c.path.asc()]
    filtered = bool(where or joined)
    # Sort and skip over ids alone, then read the full rows of the page: the sorter carries (key, id) rather than
    # whole rows, which matters for deep offsets. With filters the total rides along as a window count over the same
    # scan (one pass instead of two); without, it comes from the membership index alone.
    columns = [T.c.id.label("page_id")] + ([func.count().over().label("page_total")] if filtered else [])
    ids = (scope.select(*columns, joined=joined).where(*where).order_by(*order)
           .limit(limit).offset(offset).subquery())
    extra = [ids.c.page_total] if filtered else []
    rows = conn.execute(select(T, *extra).join(ids, T.c.id == ids.c.page_id).order_by(*order)).mappings().all()
    if offset == 0 and len(rows) < limit:
        total = len(rows)  # the whole result fits on this page
    elif filtered and rows:
        total = rows[0]["page_total"]
    elif filtered:  # past the end: no row to carry the total
        total = conn.execute(scope.select(func.count(), joined=joined).where(*where)).scalar_one()
    else:
        total = conn.execute(scope.count_members()).scalar_one()
    entries = [entry_public(r) for r in rows]
    return {
        "resource_set": scope.name, "include_children": scope.include_children, "entries": entries,
        "total_count": total, "returned_count": len(entries), "offset": offset, "limit": limit,
        "has_more": offset + len(entries) < total,
    }


def time_range(conn: Connection, *, name: str, field: str, min: Any = None, max: Any = None,
               include_children: bool = True, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Entries whose time ``field`` lies in [min, max] (a bare max date includes that whole day)."""
    check_choice(field, TIME_FIELDS, field="field", what="time field")
    lo = parse_time(min, field="min") if min is not None else None
    hi = parse_end_time(max, field="max") if max is not None else None
    check_range(lo, hi, times=True)
    scope = scope_for(conn, name=name, include_children=include_children)
    # added_at is a membership time: the entry joined one of the covered sets within the range
    column = M.c.added_at if field == "added_at" else TIME_FIELDS[field]
    bounds = ([column >= lo] if lo is not None else []) + ([column <= hi] if hi is not None else [])
    joined, where = (bounds, []) if field == "added_at" else ([], bounds)
    page = _page(conn, scope=scope, where=where, joined=joined, limit=limit, offset=offset)
    return {**page, "field": field, "min": iso(lo), "max": iso(hi)}


def metric_range(conn: Connection, *, name: str, metric: str, min: int | float | None = None,
                 max: int | float | None = None, include_children: bool = True, limit: int = 100,
                 offset: int = 0) -> dict[str, Any]:
    """Entries whose numeric ``metric`` lies in [min, max], largest first."""
    check_choice(metric, RANGE_METRICS, field="metric", what="metric for a range")
    for label, value in (("min", min), ("max", max)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise InvalidInput(f"{label} must be a number, got {value!r}", field=label)
    check_range(min, max)
    column = RANGE_METRICS[metric]
    where = ([column >= min] if min is not None else []) + ([column <= max] if max is not None else [])
    scope = scope_for(conn, name=name, include_children=include_children)
    page = _page(conn, scope=scope, where=where, limit=limit, offset=offset, order=[column.desc(), T.c.path.asc()])
    return {**page, "metric": metric, "min": min, "max": max}


def field_is(conn: Connection, *, name: str, field: str, value: Any, include_children: bool = True,
             limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """Entries whose ``field`` equals ``value`` exactly (case-sensitive; an extension may be given as 'jpg')."""
    check_choice(field, IS_FIELDS, field="field", what="field")
    wanted: Any = value
    if field in _INT_FIELDS:
        try:
            wanted = int(str(value).strip())
        except ValueError:
            raise InvalidInput(f"value must be a whole number for field {field!r}, got {value!r}",
                               field="value") from None
    elif not isinstance(value, str):
        raise InvalidInput(f"value must be a string for field {field!r}, got {value!r}", field="value")
    elif field == "kind":
        check_choice(value, KINDS, field="value", what="kind")
    elif field == "extension":
        wanted = normalize_extension(value)
    scope = scope_for(conn, name=name, include_children=include_children)
    page = _page(conn, scope=scope, where=[IS_FIELDS[field] == wanted], limit=limit, offset=offset)
    return {**page, "field": field, "value": wanted if field in _INT_FIELDS else str(wanted)}


def fuzzy_match(conn: Connection, *, name: str, field: str, pattern: str, mode: str = "contains",
                case_sensitive: bool = False, include_children: bool = True, limit: int = 100,
                offset: int = 0) -> dict[str, Any]:
    """Entries whose text ``field`` matches ``pattern`` in ``mode`` (see MATCH_MODES)."""
    check_choice(field, TEXT_FIELDS, field="field", what="text field")
    clause = match_clause(TEXT_FIELDS[field], pattern=pattern, mode=mode, case_sensitive=case_sensitive,
                          dialect=conn.dialect.name)
    scope = scope_for(conn, name=name, include_children=include_children)
    try:
        page = _page(conn, scope=scope, where=[clause], limit=limit, offset=offset)
    except DBAPIError as exc:  # a pattern Python accepts but the database's regex engine rejects
        if mode not in ("regex", "glob"):
            raise
        raise InvalidInput(f"pattern {pattern!r} was rejected by the database: {exc.orig}", field="pattern") from None
    return {**page, "field": field, "pattern": pattern, "mode": mode, "case_sensitive": case_sensitive}


# --- search -------------------------------------------------------------------------------------------------------


def search(conn: Connection, *, name: str, filters: EntryFilter | None = None, include_children: bool = False,
           sort_by: str = "size", sort_desc: bool = True, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """One page of the set's entries matching every filter, sorted, with the total count."""
    check_choice(sort_by, SEARCH_SORTS, field="sort_by", what="sort field")
    flt = (filters or EntryFilter()).check(where=None)  # keys named as the tool's parameters are
    where = flt.clauses()
    scope = scope_for(conn, name=name, include_children=include_children)
    column = SEARCH_SORTS[sort_by]
    order = [column.desc() if sort_desc else column.asc(), T.c.id.asc()]
    page = _page(conn, scope=scope, where=where, limit=limit, offset=offset, order=order)
    return {**page, "sort_by": sort_by, "sort_desc": sort_desc}


# --- statistics ---------------------------------------------------------------------------------------------------


def set_stats(conn: Connection, *, name: str, top: int = 10) -> dict[str, Any]:
    """Counts, sizes, time span and the largest media-type / extension groups of a set with its descendants."""
    scope = scope_for(conn, name=name, include_children=True)
    is_file = T.c.kind == "file"

    def count_of(kind: str) -> ColumnElement[Any]:
        return func.coalesce(func.sum(case((T.c.kind == kind, 1), else_=0)), 0)

    row = conn.execute(
        scope.select(func.count().label("count"), count_of("file").label("files"),
                     count_of("directory").label("directories"), count_of("symlink").label("symlinks"),
                     _metric_column("size").label("total_size"),
                     func.min(T.c.mtime).label("min_mtime"), func.max(T.c.mtime).label("max_mtime"),
                     func.max(case((is_file, T.c.size), else_=None)).label("largest_file_size"))
    ).mappings().one()
    direct = conn.execute(from_members(select(func.count())).where(M.c.set_id == scope.set_id)).scalar_one()

    def groups(column: ColumnElement[Any], label: str, *, files_only: bool) -> list[dict[str, Any]]:
        key = func.coalesce(column, "")
        stmt = (scope.select(key.label("key"), func.count().label("count"),
                             func.coalesce(func.sum(T.c.size), 0).label("size"))
                .group_by(key)
                .order_by(func.count().desc(), key.asc()).limit(top))
        if files_only:
            stmt = stmt.where(is_file)
        return [{label: r.key or None, "count": r.count, "size": int(r.size)} for r in conn.execute(stmt)]

    return {
        "resource_set": scope.name,
        "sets_counted": len(scope.set_ids),
        "child_count": len(child_sets(conn, set_id=scope.set_id)),
        "direct_count": direct,
        "count": row["count"], "files": int(row["files"]), "directories": int(row["directories"]),
        "symlinks": int(row["symlinks"]), "total_size": size_total(conn, scope),
        "largest_file_size": row["largest_file_size"],
        "min_mtime": iso(row["min_mtime"]), "max_mtime": iso(row["max_mtime"]),
        "by_media_type": groups(T.c.media_type, "media_type", files_only=True),
        "by_extension": groups(T.c.extension, "extension", files_only=True),
    }


def set_metric(conn: Connection, *, name: str, metric: str) -> dict[str, Any]:
    """The resource-sum value of ``metric`` for a set with all its descendants."""
    check_choice(metric, METRICS, field="metric", what="metric")
    scope = scope_for(conn, name=name, include_children=True)
    return {"resource_set": scope.name, "metric": metric,
            "value": metric_value(conn, set_ids=scope.set_ids, metric=metric),
            "description": METRICS[metric], "sets_counted": len(scope.set_ids)}


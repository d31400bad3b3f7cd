"""Saved queries: a named EntryFilter, checked when saved, run with pagination against the entries table.

A query is checked as resource-search checks its parameters (the same EntryFilter: ranges non-empty, times readable,
unknown keys refused); its paths (``path_prefix``, ``parent``) are confined to the roots by the ``resolve_path``
its caller passes, and a new query's name follows the rule of set and plan names. A query runs over the entries the
current caller may see (store.visibility): a limited user running a query saved by another finds only what lies under
their own roots.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable

from sqlalchemy import and_, delete, func, insert, select, true, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from store.entries import T, entry_public, iso
from store.errors import AlreadyExists, InvalidInput, NotFound
from store.filters import EntryFilter
from store.models import SavedQuery
from store.visibility import visible_clause

Q = SavedQuery.__table__
MAX_NAME = 200
_SHOWN = 20  # names listed in a NotFound message
NAME_RULE = ("1-128 characters: letters A-Z a-z, digits, '-', '_' and '.', starting with a letter or digit "
             "(the rule of resource-set and plan names, so a plan's query source can name it)")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# path keys of a query body -> whether the last component is followed (a prefix need not name an existing entry)
PATH_KEYS = {"path_prefix": False, "parent": True}
# resolve_path(path, field=..., follow_last=...) -> the canonical path inside the roots, or PathNotAllowed
PathResolver = Callable[..., str]


def check_name(name: Any, *, field: str = "name") -> str:
    """A name to look a query up by (queries saved by older versions may have names the new rule refuses)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"{field} must be a non-empty query name such as \"large-videos\"", field=field)
    clean = name.strip()
    if len(clean) > MAX_NAME:
        raise InvalidInput(f"{field} is {len(clean)} characters long; at most {MAX_NAME} are allowed", field=field)
    return clean


def check_new_name(name: Any, *, field: str = "name") -> str:
    """The name of a query being created: the rule of resource-set and plan names."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidInput(f"{field} {name!r} is not a valid query name; use {NAME_RULE}", field=field)
    return name


def parse_query(query: Any, *, field: str = "query", resolve_path: PathResolver | None = None) -> dict[str, Any]:
    """The query body as stored: validated by EntryFilter (unknown keys rejected, ranges non-empty), unset keys
    dropped, and paths made canonical inside the roots by ``resolve_path`` when given.

    A JSON text holding an object is accepted too (clients sometimes send the object serialised).
    """
    if isinstance(query, str):
        try:
            query = json.loads(query)
        except ValueError:
            raise InvalidInput(f"{field} must be an object such as "
                               '{"kind": "file", "extension": ".mp4", "min_size": 1073741824}, '
                               "or that object as JSON text; the text given is not valid JSON", field=field) from None
    if query is None:
        raise InvalidInput(f"{field} is required: an object of filters such as "
                           '{"kind": "file", "extension": ".mp4"}', field=field)
    body = EntryFilter.parse(query, where=field).model_dump(exclude_none=True)
    if resolve_path is not None:
        for key, follow_last in PATH_KEYS.items():
            if key in body:
                given = body[key]
                resolved = resolve_path(given, field=f"{field}.{key}", follow_last=follow_last)
                # a prefix ending in "/" means "inside this folder": keep the slash normalisation removed
                body[key] = resolved + "/" if key == "path_prefix" and given.endswith("/") and resolved != "/" \
                    else resolved
    return body


def _public(row: Any) -> dict[str, Any]:
    return {
        "name": row["name"], "description": row["description"], "query": json.loads(row["query_json"]),
        "createdAt": iso(row["created_at"]), "updatedAt": iso(row["updated_at"]),
        "lastExecutedAt": iso(row["last_executed_at"]), "executionCount": row["execution_count"],
    }


def _not_found(conn: Connection, name: str) -> NotFound:
    names = list(conn.execute(select(Q.c.name).order_by(Q.c.name).limit(_SHOWN + 1)).scalars())
    total = conn.execute(select(func.count()).select_from(Q)).scalar_one()
    if not names:
        known = "there are no saved queries yet; query-create makes one"
    else:
        more = f" (and {total - _SHOWN} more; query-list shows all)" if total > _SHOWN else ""
        known = "saved queries: " + ", ".join(names[:_SHOWN]) + more
    return NotFound(f"saved query {name!r} not found; {known}", field="name")


def _require(conn: Connection, name: str) -> Any:
    row = conn.execute(select(Q).where(Q.c.name == name)).mappings().first()
    if row is None:
        raise _not_found(conn, name)
    return row


def create_query(engine: Engine, *, name: str, query: Any, description: str | None = None,
                 resolve_path: PathResolver | None = None) -> dict[str, Any]:
    name = check_new_name(name)
    body = parse_query(query, resolve_path=resolve_path)
    now = time.time()
    try:
        with engine.begin() as conn:
            if conn.execute(select(Q.c.id).where(Q.c.name == name)).first() is not None:
                raise _exists(name)
            conn.execute(insert(Q).values(name=name, description=description, query_json=json.dumps(body),
                                          created_at=now, updated_at=now, execution_count=0))
            return _public(_require(conn, name))
    except IntegrityError:  # a concurrent create of the same name won the race
        raise _exists(name) from None


def _exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"a saved query named {name!r} already exists; use query-update to change it, "
                         "or choose another name", field="name")


def get_query(engine: Engine, *, name: str) -> dict[str, Any]:
    name = check_name(name)
    with engine.connect() as conn:
        return _public(_require(conn, name))


def list_queries(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [_public(r) for r in conn.execute(select(Q).order_by(Q.c.name)).mappings()]


def update_query(engine: Engine, *, name: str, description: str | None = None, query: Any = None,
                 resolve_path: PathResolver | None = None) -> dict[str, Any]:
    """Change the description and/or the query body; at least one must be given."""
    name = check_name(name)
    if description is None and query is None:
        raise InvalidInput("nothing to update: give description, query, or both", field="query")
    values: dict[str, Any] = {"updated_at": time.time()}
    if query is not None:
        values["query_json"] = json.dumps(parse_query(query, resolve_path=resolve_path))
    if description is not None:
        values["description"] = description
    with engine.begin() as conn:
        _require(conn, name)
        conn.execute(update(Q).where(Q.c.name == name).values(**values))
        return _public(_require(conn, name))


def delete_query(engine: Engine, *, name: str) -> dict[str, Any]:
    name = check_name(name)
    with engine.begin() as conn:
        row = _public(_require(conn, name))
        conn.execute(delete(Q).where(Q.c.name == name))
    return row


def execute_query(engine: Engine, *, name: str, limit: int = 100, offset: int = 0) -> dict[str, Any]:
    """One page of the entries the saved query matches (ordered by path), with the total and hasMore: of those the
    current caller may see."""
    name = check_name(name)
    if not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be 1 or more, got {limit!r}", field="limit")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset!r}", field="offset")
    with engine.begin() as conn:
        row = _require(conn, name)
        body = json.loads(row["query_json"])
        try:
            flt = EntryFilter.parse(body, where="query")
        except InvalidInput as exc:  # saved by an older version whose filters differed
            raise InvalidInput(f"saved query {name!r} is no longer valid ({exc.message}); fix it with query-update",
                               field="name") from None
        where = and_(true(), *flt.clauses(), visible_clause(T.c.path))
        total = conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()
        rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(limit).offset(offset)).mappings().all()
        conn.execute(update(Q).where(Q.c.id == row["id"]).values(
            last_executed_at=time.time(), execution_count=Q.c.execution_count + 1))
    entries = [entry_public(r) for r in rows]
    return {"name": name, "query": body, "entries": entries, "total": total,
            "hasMore": offset + len(entries) < total, "offset": offset, "limit": limit}

"""Sources (reference 000, "Source Management"): named folders kept in the index, ``live`` (watched) or ``manual``
(indexed when started). One row per source; its scans are summed on the row (count, total duration, last time).

Engine-level, keyword-only functions, each one transaction; callers decide what "missing" means (``get_source``
returns None, ``require_source`` raises :class:`NotFound` naming the sources that exist).
"""

from __future__ import annotations

import json
import re
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from store.entries import iso
from store.errors import AlreadyExists, InvalidInput, NotFound, check_choice
from store.models import Source, now

S = Source.__table__
TYPES = ("live", "manual")
STATUSES = ("running", "stopped", "error")
NAME_RULE = ("1-128 characters: letters A-Z a-z, digits, '-', '_' and '.', starting with a letter or digit")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_UPDATABLE = ("path", "enabled", "config", "status", "last_error", "entries_indexed")


def check_name(name: Any, *, field: str = "name") -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidInput(f"{field} {name!r} is not a valid source name; use {NAME_RULE}", field=field)
    return name


def check_type(type: Any) -> str:
    return check_choice(type, TYPES, field="type", what="source type (live: watched for changes; manual: indexed "
                                                         "when source-start is called)")


def _row(row: RowMapping) -> dict[str, Any]:
    out = dict(row)
    out["config"] = json.loads(out.pop("config_json") or "{}")
    return out


def get_source(engine: Engine, *, name: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(S).where(S.c.name == name)).mappings().first()
    return _row(row) if row else None


def source_names(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.scalars(select(S.c.name).order_by(S.c.name)))


def require_source(engine: Engine, *, name: str, field: str = "name") -> dict[str, Any]:
    row = get_source(engine, name=name)
    if row is None:
        names = source_names(engine)
        known = f"existing sources: {', '.join(names)}" if names else "there are no sources yet"
        raise NotFound(f"source {name!r} not found; {known} (source-create makes one)", field=field)
    return row


def create_source(engine: Engine, *, name: str, type: str, path: str, enabled: bool = True,
                  config: dict[str, Any] | None = None) -> dict[str, Any]:
    check_name(name)
    check_type(type)
    stamp = now()
    try:
        with engine.begin() as conn:
            conn.execute(insert(S).values(name=name, type=type, path=path, enabled=enabled,
                                          config_json=json.dumps(config or {}, sort_keys=True), status="stopped",
                                          created_at=stamp, updated_at=stamp))
    except IntegrityError:
        raise AlreadyExists(f"source {name!r} already exists; source-get shows it, source-delete removes it",
                            field="name") from None
    return require_source(engine, name=name)


def list_sources(engine: Engine, *, type: str | None = None, enabled: bool | None = None) -> list[dict[str, Any]]:
    stmt = select(S).order_by(S.c.name)
    if type is not None:
        stmt = stmt.where(S.c.type == check_type(type))
    if enabled is not None:
        stmt = stmt.where(S.c.enabled.is_(enabled))
    with engine.connect() as conn:
        return [_row(r) for r in conn.execute(stmt).mappings()]


def update_source(engine: Engine, *, name: str, **values: Any) -> dict[str, Any]:
    """Change some of path, enabled, config (a dict), status, last_error, entries_indexed."""
    unknown = [k for k in values if k not in _UPDATABLE]
    if unknown:
        raise InvalidInput(f"cannot update {', '.join(unknown)} of a source; updatable: {', '.join(_UPDATABLE)}")
    if "status" in values:
        check_choice(values["status"], STATUSES, field="status", what="source status")
    if "config" in values:
        values["config_json"] = json.dumps(values.pop("config") or {}, sort_keys=True)
    with engine.begin() as conn:
        res = conn.execute(update(S).where(S.c.name == name).values(**values, updated_at=now()))
    if not res.rowcount:
        require_source(engine, name=name)  # raises NotFound naming the existing sources
    return require_source(engine, name=name)


def set_status(engine: Engine, *, name: str, status: str, error: str | None = None) -> None:
    """Record a status; ``last_error`` is set with ``error`` and cleared when a source starts running."""
    values: dict[str, Any] = {"status": check_choice(status, STATUSES, field="status", what="source status")}
    if error is not None or status == "running":
        values["last_error"] = error
    with engine.begin() as conn:
        conn.execute(update(S).where(S.c.name == name).values(**values, updated_at=now()))


def record_scan(engine: Engine, *, name: str, duration_ms: int, entries_indexed: int, error: str | None = None,
                at: float | None = None) -> dict[str, Any]:
    """Add one finished scan to the source's totals (a failed scan counts too, and leaves its error)."""
    with engine.begin() as conn:
        res = conn.execute(update(S).where(S.c.name == name).values(
            total_scans=S.c.total_scans + 1, total_scan_ms=S.c.total_scan_ms + max(int(duration_ms), 0),
            last_scan_at=at if at is not None else now(), entries_indexed=entries_indexed, last_error=error,
            updated_at=now(),
        ))
    if not res.rowcount:
        require_source(engine, name=name)
    return require_source(engine, name=name)


def delete_source(engine: Engine, *, name: str) -> dict[str, Any]:
    row = require_source(engine, name=name)
    with engine.begin() as conn:
        conn.execute(S.delete().where(S.c.id == row["id"]))
    return row


def reset_running(engine: Engine) -> int:
    """Sources left ``running`` by a process that ended are ``stopped`` now (start-up puts live ones back)."""
    with engine.begin() as conn:
        res = conn.execute(update(S).where(S.c.status == "running").values(status="stopped", updated_at=now()))
    return res.rowcount or 0


def average_scan_ms(row: dict[str, Any]) -> int:
    return int(row["total_scan_ms"] / row["total_scans"]) if row["total_scans"] else 0


def source_public(row: dict[str, Any]) -> dict[str, Any]:
    """The fields every source tool returns."""
    config = row["config"]
    return {
        "name": row["name"], "type": row["type"], "path": row["path"], "enabled": bool(row["enabled"]),
        "status": row["status"], "watch_recursive": bool(config.get("watch_recursive", True)),
        "debounce_ms": int(config.get("debounce_ms", 500)), "entries_indexed": row["entries_indexed"],
        "last_scan_at": iso(row["last_scan_at"]), "total_scans": row["total_scans"],
        "average_scan_duration_ms": average_scan_ms(row), "last_error": row["last_error"],
        "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
    }

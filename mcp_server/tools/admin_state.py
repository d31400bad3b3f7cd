"""What the admin tools report about the running server (reference 004's server introspection): who it is and how it
is set up, what it uses (memory, connections, disk), who has been calling it and what went wrong, and its effective
settings with secrets hidden. Read from the app, its guard (mcp_server/guard: activity, log records, audit log) and
the capability modules that own each kind of file; nothing here changes anything."""

from __future__ import annotations

import logging
import os
import platform
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psutil
from sqlalchemy.engine import Engine
from sqlalchemy.pool import QueuePool

from flows.classify.operator import cache_usage
from flows.core.capability import data_dir
from flows.core.disk_usage import Usage, file_usage
from flows.documents.operator import text_index_status
from flows.semantic.operator import model_exports_usage, vector_index_status
from flows.semantic.paths import model_cache_dir
from mcp_server.guard.middleware import Guard
from mcp_server.tools import default_groups
from store import cache
from store.audit import REDACTED, SECRET_NAMES
from store.diagnostics import database_location, database_size, masked_url
from store.engine import database_file
from store.entries import iso
from store.errors import Conflict

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

log = logging.getLogger(__name__)

T = TypeVar("T")

VERSION = "0.1.0"  # the version the server announces (mcp_server/app.py, pyproject.toml)
SESSION_IDLE_SECONDS = 1800.0  # a session unseen this long is listed as inactive
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:)[^@/\s]+@")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


def guard_of(app: AssayApp) -> Guard:
    """The server's guard (made by build_server before any call)."""
    if app.guard is None:
        raise Conflict("this server has no guard yet (it is made when the server is built)")
    return app.guard


# --- server info --------------------------------------------------------------------------------------------------


def server_info(app: AssayApp) -> dict[str, Any]:
    settings, guard = app.settings, guard_of(app)
    started = guard.activity.started
    host = f"[{settings.host}]" if ":" in settings.host and not settings.host.startswith("[") else settings.host
    methods = []
    if settings.server.auth:
        methods.append("local API tokens (assay tokens create)")
        if settings.guard.jwt_issuer:
            methods.append(f"JWT access tokens of {settings.guard.jwt_issuer}")
    return {
        "version": VERSION, "started_at": iso(started), "uptime_seconds": round(time.time() - started, 3),
        "pid": os.getpid(), "python_version": platform.python_version(), "transport": settings.transport,
        "address": f"http://{host}:{settings.port}/mcp" if settings.transport == "http" else None,
        "public_url": settings.public_url,
        "auth": {"required": settings.server.auth and settings.transport == "http", "methods": methods,
                 "jwt_issuer": settings.guard.jwt_issuer, "local_permissions": sorted(guard.local_permissions)},
        "store": {"backend": app.engine.dialect.name, "url": masked_url(app.engine),
                  "location": database_location(app.engine)},
        "audit_url": guard.audit.url if guard.audit is not None else None,
        "data_dir": str(settings.data_dir), "roots": list(app.roots.paths),
        "tool_groups": list(settings.tool_groups or default_groups(settings.server.auth)),
        "prefect_url": app.prefect_url, "sessions": len(guard.activity.sessions),
        "requests": dict(guard.activity.totals)}


# --- memory and disk ----------------------------------------------------------------------------------------------


def rss_bytes() -> int:
    """The server process's resident memory now."""
    return int(psutil.Process().memory_info().rss)


def _process() -> dict[str, Any]:
    process = psutil.Process()
    memory = process.memory_info()
    try:
        open_files: int | None = len(process.open_files())
    except psutil.Error:
        open_files = None
    return {"rss_bytes": memory.rss, "vms_bytes": memory.vms, "threads": process.num_threads(),
            "open_files": open_files}


def _pool(engine: Engine) -> dict[str, Any]:
    pool = engine.pool
    if isinstance(pool, QueuePool):
        return {"status": pool.status(), "size": pool.size(), "checked_out": pool.checkedout(),
                "overflow": max(pool.overflow(), 0)}
    return {"status": pool.status(), "size": None, "checked_out": None, "overflow": None}


def _store_disk(engine: Engine) -> dict[str, Any]:
    path = database_file(engine)
    if path is None:
        return {"path": masked_url(engine), "files": None, "bytes": database_size(engine)}
    used = Usage()
    for suffix in ("", "-wal", "-shm"):
        used += file_usage(f"{path}{suffix}")
    return {"path": str(path), **used.as_dict()}


def memory_stats(app: AssayApp) -> dict[str, Any]:
    """Process memory, the store's pool, disk per kind of file, the indexes' state and the in-memory counts; a
    part that cannot be measured is named in ``problems`` and left out."""
    guard = guard_of(app)
    problems: list[str] = []

    def measured(what: str, read: Callable[[], T]) -> T | None:
        try:
            return read()
        except Exception as exc:  # one unreadable part does not hide the others; it is named
            log.warning("get_memory_stats: %s could not be measured", what, exc_info=True)
            problems.append(f"{what}: {type(exc).__name__}: {exc}")
            return None

    disk: dict[str, Any] = {}
    store = measured("store", lambda: _store_disk(app.engine))
    if store is not None:
        disk["store"] = store
    artifacts = measured("artifact cache", lambda: cache_usage(data_dir()))
    if artifacts is not None:
        disk["artifact_cache"] = {"path": str(cache.cache_dir(data_dir())), **artifacts.as_dict()}
    text = measured("text index", lambda: text_index_status(app.engine))
    if text is not None:
        disk["text_index"] = {"path": text["directory"], "files": text["files"], "bytes": text["bytes"]}
    vectors = measured("vector index", lambda: vector_index_status(app.engine))
    if vectors is not None:
        disk["vector_index"] = {"path": vectors["directory"], "files": vectors["files"], "bytes": vectors["bytes"]}
    models = measured("model exports", lambda: (model_cache_dir(), model_exports_usage()))
    if models is not None:
        disk["model_exports"] = {"path": str(models[0]), **models[1].as_dict()}
    counts = {"sessions": len(guard.activity.sessions), "recent_requests": len(guard.activity.requests),
              "log_records": len(guard.log.records)}
    if guard.audit is not None:
        audit = guard.audit.stats()
        counts.update(audit_written=audit["written"], audit_queued=audit["queued"], audit_dropped=audit["dropped"])
    return {"process": _process(), "pool": _pool(app.engine), "disk": disk, "text_index": text,
            "vector_index": vectors, "counts": counts, "problems": problems}


# --- callers --------------------------------------------------------------------------------------------------------


def sessions(app: AssayApp, idle_after: float = SESSION_IDLE_SECONDS) -> dict[str, Any]:
    rows = guard_of(app).activity.session_list(idle_after=idle_after)
    listed = [{**r, "first_seen": iso(r["first_seen"]), "last_seen": iso(r["last_seen"])} for r in rows]
    return {"sessions": listed, "total": len(listed), "active": sum(1 for r in rows if r["active"]),
            "idle_after_seconds": idle_after}


def recent_requests(app: AssayApp, *, limit: int, user: str | None) -> dict[str, Any]:
    activity = guard_of(app).activity
    rows = activity.recent_requests(limit, user=user)
    return {"requests": [{**r, "time": iso(r["time"])} for r in rows], "total": len(rows),
            "kept": len(activity.requests)}


def recent_errors(app: AssayApp, *, limit: int) -> dict[str, Any]:
    """Newest first, merged: calls that did not end ok, log records at WARNING and above, the audit writer's
    failures."""
    guard = guard_of(app)
    found: list[tuple[float, dict[str, Any]]] = []
    for r in guard.activity.recent_requests(limit, errors_only=True):
        code = f" ({r['error_code']})" if r["error_code"] else ""
        found.append((r["time"], {"source": "request", "message": f"{r['kind']} {r['name']} ended {r['outcome']}"
                                  f"{code} after {r['duration_ms']:g} ms", "level": r["outcome"],
                                  "name": r["name"], "user": r["user"]}))
    for rec in guard.log.recent(limit, min_level=logging.WARNING):
        message = rec["message"] + (f" [{rec['exception']}]" if rec.get("exception") else "")
        found.append((rec["time"], {"source": "log", "message": message, "level": rec["level"],
                                    "name": rec["logger"]}))
    if guard.audit is not None:
        for err in guard.audit.errors(limit):
            found.append((err["time"], {"source": "audit", "message": err["message"], "level": "ERROR",
                                        "name": "audit log"}))
    found.sort(key=lambda item: item[0], reverse=True)
    errors = [{"time": iso(t), **e} for t, e in found[:limit]]
    return {"errors": errors, "total": len(errors)}


# --- settings -------------------------------------------------------------------------------------------------------


def names_secret(key: str) -> bool:
    """Whether a setting's name says it holds a secret (the audit log's list: password, secret, token, ...)."""
    normalised = _NOT_ALNUM.sub("", key.lower())
    return any(name in normalised for name in SECRET_NAMES)


def hide_url_password(text: str) -> str:
    """``text`` with the password of any URL in it (``scheme://user:password@host``) replaced by ``***``."""
    return _URL_PASSWORD.sub(lambda m: m["head"] + "***@", text)


def redacted(value: Any, path: str, hidden: list[str]) -> Any:
    """A copy of a settings tree with secrets hidden: the text (or list, or object) of a key naming a secret
    replaced by [redacted] (a flag such as cors_credentials is left alone), URL passwords by ***; the dotted keys
    hidden are added to ``hidden``."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if names_secret(str(key)) and isinstance(item, (str, list, dict)) and item:  # a flag is no secret
                out[key] = REDACTED
                hidden.append(where)
            else:
                out[key] = redacted(item, where, hidden)
        return out
    if isinstance(value, list):
        return [redacted(item, f"{path}[{i}]", hidden) for i, item in enumerate(value)]
    if isinstance(value, str):
        masked = hide_url_password(value)
        if masked != value:
            hidden.append(path)
        return masked
    return value


def config(app: AssayApp) -> dict[str, Any]:
    """The effective settings, secrets hidden, with the values they imply (the store's URL, the roots in effect,
    the audit database)."""
    hidden: list[str] = []
    settings = app.settings
    guard = app.guard
    derived = {"store_url": settings.db_url, "effective_roots": settings.effective_roots,
               "audit_url": guard.audit.url if guard is not None and guard.audit is not None else None}
    return {"settings": redacted(settings.model_dump(mode="json"), "", hidden),
            "derived": redacted(derived, "derived", hidden), "redacted": hidden}

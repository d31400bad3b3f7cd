"""What assay put in the trash, listed and emptied: the tools ``trash-list`` and ``trash-empty``, and the retention
that empties what has been there longer than ``trash.retention_days`` (default 30; checked at start and hourly).

The journal is the list: every ``trash`` operation done and neither undone nor purged (store.file_journal.trashed).
Only what assay trashed is ever emptied: a freedesktop Trash is shared with the desktop, whose own trashed files are
the user's business. Emptying deletes the file (or tree) and its info file for good (flows.fileops.trash.purge), then
marks the operation ``purged`` (undo refuses it, saying when). A file already gone from the trash (the desktop emptied
it) is marked purged too; one in a trash this machine cannot see (another machine's volume, on a cluster) is left for
a process that can.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Engine

from flows.core.settings import current
from flows.fileops import trash
from store import file_journal, kept
from store.entries import iso
from store.errors import AssayError, InvalidInput, NotFound

log = logging.getLogger("assay.trash")

DAY = 86400.0
RETENTION_EVERY = 3600.0  # seconds between two looks of the retention
MAX_LIST = 1000


def _item(row: dict[str, Any]) -> dict[str, Any]:
    where = row["dst"]
    present = os.path.lexists(where)
    return {"operationId": row["id"], "path": row["src"], "trashedTo": where, "trashedAt": iso(row["finished_at"]),
            "kind": row["kind"], "size": row["size"], "callId": row["call_id"], "tool": row["tool"],
            "executionId": row["execution_id"], "caller": row["caller"],
            "inTrash": present, "note": None if present else _absent(where)}


def _absent(where: str) -> str:
    if not os.path.isdir(os.path.dirname(os.path.dirname(where))):
        return "its trash is not visible on this machine"
    return "no longer in the trash (emptied outside assay)"


def _cutoff(older_than_days: float | None, now: float | None) -> float | None:
    if older_than_days is None:
        return None
    if older_than_days < 0:
        raise InvalidInput(f"olderThanDays must be 0 or more, got {older_than_days}", field="olderThanDays")
    return (time.time() if now is None else now) - older_than_days * DAY


def listing(engine: Engine, *, path: str | None = None, older_than_days: float | None = None, limit: int = 100,
            offset: int = 0, now: float | None = None) -> dict[str, Any]:
    """What assay trashed and has not been restored or emptied, oldest first: where each came from, where it is,
    when it went, and whether it is still there; narrowed to ``path`` (what came from it or under it) and to what
    has been there more than ``older_than_days``."""
    if not 1 <= limit <= MAX_LIST:
        raise InvalidInput(f"limit must be 1 to {MAX_LIST}, got {limit}", field="limit")
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}", field="offset")
    rows = file_journal.trashed(engine, path=path, before=_cutoff(older_than_days, now), limit=limit + 1,
                                offset=offset)
    items = [_item(r) for r in rows[:limit]]
    days = current().trash.retention_days
    return {"items": items, "count": len(items), "hasMore": len(rows) > limit, "limit": limit, "offset": offset,
            "retentionDays": days,
            "retention": (f"assay empties what it trashed after {days:g} days" if days
                          else "kept until trash-empty (retention 0)")}


def empty(engine: Engine, *, operation_ids: Sequence[int] | None = None, path: str | None = None,
          older_than_days: float | None = None, everything: bool = False, dry_run: bool = False,
          by: str = "trash-empty", now: float | None = None) -> dict[str, Any]:
    """Delete for good what assay trashed, as selected: the operations ``operation_ids``, what came from ``path``
    or under it, what has been in the trash more than ``older_than_days`` (several narrow together), or
    ``everything`` (said explicitly: nothing selected is an error, not all). ``by`` is written on each operation
    (the tool call, or the retention). Each item says what happened; the rest go on when one fails."""
    selected = operation_ids is not None or path is not None or older_than_days is not None
    if not selected and not everything:
        raise InvalidInput("trash-empty needs what to empty: operationIds, path or olderThanDays, or all: true for "
                           "everything assay trashed", field="all")
    if selected and everything:
        raise InvalidInput("all: true empties everything assay trashed; give it alone, or narrow with "
                           "operationIds, path or olderThanDays instead", field="all")
    rows = file_journal.trashed(engine, path=path, before=_cutoff(older_than_days, now), ids=operation_ids)
    if operation_ids is not None:
        unknown = sorted(set(operation_ids) - {r["id"] for r in rows})
        if unknown:
            raise NotFound(f"operation(s) {', '.join(map(str, unknown))} are not in the trash (not trash operations, "
                           f"already restored or emptied, or not yours to see): trash-list shows what is",
                           field="operationIds")
    results = [_empty_one(engine, row, by=by, dry_run=dry_run) for row in rows]
    counts = {s: sum(1 for r in results if r["status"] == s) for s in ("purged", "gone", "skipped", "error", "preview")}
    return {"results": results, "dryRun": dry_run, "purgedCount": counts["purged"] + counts["gone"],
            "errorCount": counts["error"], "skippedCount": counts["skipped"],
            "bytesFreed": sum(r["bytesFreed"] or 0 for r in results)}


def _empty_one(engine: Engine, row: dict[str, Any], *, by: str, dry_run: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": row["id"], "path": row["src"], "trashedTo": row["dst"], "bytesFreed": None,
                           "error": None}
    where = row["dst"]
    if not os.path.isdir(os.path.dirname(os.path.dirname(where))):
        return {**out, "status": "skipped", "error": f"{_absent(where)}: left for a server that sees it"}
    if dry_run:
        return {**out, "status": "preview" if os.path.lexists(where) else "gone", "bytesFreed": row["size"]}
    status = "purged" if os.path.lexists(where) else "gone"  # gone: emptied outside assay; the journal says so now
    try:
        out["bytesFreed"] = trash.purge(where)  # a file gone leaves its info file, if any: removed too
    except NotFound:
        status = "gone"
    except (OSError, AssayError) as exc:
        return {**out, "status": "error", "error": str(exc)}
    note = f"emptied from the trash by {by}" if status == "purged" else f"gone from the trash when {by} looked"
    with engine.begin() as conn:
        if file_journal.mark_purged(conn, [row["id"]], note=note):
            kept.forget(conn, [row["id"]])  # what undo would have put back: no undo now
    return {**out, "status": status}


def purge_expired(engine: Engine, days: float, *, now: float | None = None) -> dict[str, Any]:
    """The retention's one look: empty what assay trashed more than ``days`` days ago (0: nothing)."""
    if days <= 0:
        return {"results": [], "dryRun": False, "purgedCount": 0, "errorCount": 0, "skippedCount": 0,
                "bytesFreed": 0}
    return empty(engine, older_than_days=days, by=f"the retention ({days:g} days)", now=now)


class Retention:
    """A daemon thread that runs :func:`purge_expired` at start and every ``every`` seconds with the setting of the
    moment (``trash.retention_days``); a failed look is logged and the next one tried."""

    def __init__(self, engine: Engine, every: float = RETENTION_EVERY) -> None:
        self.engine, self.every = engine, every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="assay-trash-retention", daemon=True)

    def start(self) -> Retention:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                result = purge_expired(self.engine, current().trash.retention_days)
                if result["purgedCount"] or result["errorCount"]:
                    log.info("trash retention: %d emptied (%d bytes), %d failed", result["purgedCount"],
                             result["bytesFreed"], result["errorCount"])
            except Exception:
                log.exception("trash retention failed; it tries again in %.0f s", self.every)
            self.stopped.wait(self.every)


_lock = threading.Lock()
_running: dict[str, Retention] = {}


def start_retention(engine: Engine) -> Retention:
    """The serving process's retention for the store ``engine`` opens: one thread per store however often a process
    starts serving it (tests start many servers in one process); a newer engine for the same store takes over."""
    key = engine.url.render_as_string(hide_password=True)
    with _lock:
        running = _running.get(key)
        if running is not None and running.thread.is_alive():
            running.engine = engine
            return running
        _running[key] = Retention(engine).start()
        return _running[key]

"""The move journal: a rename or move is written down in the store before the disk changes, and crossed out in the
transaction that brings the store in step, so one a crash cut between the two is finished (or undone) at the next
start (flows/fileops/recovery.py).

A call of rename-files or move-files that changes the disk gets a row in the runs table (kind ``move``), made at its
first item; its ``params_json`` holds the item in flight, ``{"from", "to", "made", "mode", "copying"}`` (``made``:
the folders created for the target; ``copying``: the move crosses filesystems, so the source is removed only after
its copy is in place), or ``null`` between items. Items run one after the other, so at most one is in flight per
call. The row is finished (completed) when the call returns; a process that died leaves it pending or running, the
server's start-up reaper marks it failed, and the recovery then settles its item.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, Engine

from store import jobs as store_jobs
from store.errors import FileOperationError

KIND = "move"
J = store_jobs.J


class MoveJournal:
    """The journal of one call (``tool``: rename-files or move-files); its row is made at the first ``begin``."""

    def __init__(self, engine: Engine, tool: str) -> None:
        self.engine = engine
        self.tool = tool
        self.job_id: int | None = None
        self.intent: dict[str, Any] | None = None
        self.items = 0
        self.stuck = False  # an item's store update failed: its item stays in flight for the next start

    def begin(self, *, src: str, dst: str, made: list[str], mode: str) -> None:
        """Write the item down (committed) before the first change to the disk."""
        if self.stuck:
            raise FileOperationError(f"not moved: the store could not follow an earlier item of this call "
                                     f"({self.intent and self.intent['from']}); the next server start finishes "
                                     "that one", field="from")
        if self.job_id is None:
            self.job_id = store_jobs.create_job(self.engine, root=src, kind=KIND, params={"tool": self.tool,
                                                                                         "in_flight": None})
            store_jobs.mark_running(self.engine, job_id=self.job_id)
        self._write(self.job_id, {"from": src, "to": dst, "made": made, "mode": mode, "copying": False})

    def copying(self) -> None:
        """The item crosses filesystems: its source is copied, then removed (committed before the copy starts)."""
        if self.job_id is not None and self.intent is not None:
            self._write(self.job_id, {**self.intent, "copying": True})

    def done(self, conn: Connection) -> None:
        """Cross the item out, inside the transaction that brought the store in step with the disk."""
        if self.job_id is not None:
            self.items += 1
            self.intent = None
            settle(conn, self.job_id, current_path=None)

    def abandon(self) -> None:
        """The item failed before the disk changed: cross it out."""
        if self.job_id is not None:
            self.intent = None
            with self.engine.begin() as conn:
                settle(conn, self.job_id, current_path=None)

    def close(self) -> None:
        """The call returned: its row is completed, or failed with its item still in flight when the store could
        not follow it (the next start settles it)."""
        if self.job_id is not None:
            store_jobs.finish_job(self.engine, job_id=self.job_id, status="failed" if self.stuck else "completed",
                                  progress=100.0, files=self.items,
                                  error_message="the store could not follow a move; the next server start "
                                                "finishes it" if self.stuck else None)

    def _write(self, job_id: int, intent: dict[str, Any]) -> None:
        self.intent = intent
        with self.engine.begin() as conn:
            conn.execute(update(J).where(J.c.id == job_id).values(
                params_json=json.dumps({"tool": self.tool, "in_flight": intent}), current_path=intent["from"]))


def in_flight(conn: Connection, job_id: int) -> dict[str, Any] | None:
    """The item in flight of run ``job_id`` (None between items)."""
    raw = conn.execute(select(J.c.params_json).where(J.c.id == job_id)).scalar()
    intent: dict[str, Any] | None = json.loads(raw or "{}").get("in_flight")
    return intent


def settle(conn: Connection, job_id: int, **values: Any) -> None:
    """Cross out the item in flight of run ``job_id`` (inside the caller's transaction)."""
    params = json.loads(conn.execute(select(J.c.params_json).where(J.c.id == job_id)).scalar() or "{}")
    conn.execute(update(J).where(J.c.id == job_id).values(params_json=json.dumps({**params, "in_flight": None}),
                                                          **values))


def interrupted(engine: Engine) -> list[tuple[int, dict[str, Any]]]:
    """(run id, item) of the move runs a dead process left with an item in flight: those no longer pending or
    running (the start-up reaper marked them failed), so no live call is touched."""
    with engine.connect() as conn:
        rows = conn.execute(select(J.c.id, J.c.params_json).where(
            J.c.kind == KIND, J.c.status.not_in(store_jobs.ACTIVE), J.c.params_json.like('%"in_flight": {%'))).all()
    out = []
    for job_id, raw in rows:
        intent = json.loads(raw or "{}").get("in_flight")
        if intent:
            out.append((int(job_id), intent))
    return out


def record_outcome(conn: Connection, job_id: int, message: str) -> None:
    """What the recovery did with run ``job_id``'s item, on its row, the item crossed out."""
    settle(conn, job_id, error_message=message, completed_at=time.time())

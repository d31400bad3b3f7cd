"""Job rows: created pending, moved to running, finished as completed / failed / cancelled, with progress between."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Iterable

from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.engine import Engine

from store.entries import T as E
from store.entries import iso
from store.errors import InvalidInput, NotFound
from store.models import Job, JobIssue
from store.models.columns import inserted_id

J = Job.__table__
JI = JobIssue.__table__
STATUSES = ("pending", "running", "completed", "failed", "cancelled")
ACTIVE = ("pending", "running")


def create_job(engine: Engine, *, root: str, kind: str = "index", params: dict[str, Any] | None = None) -> int:
    with engine.begin() as conn:
        return inserted_id(conn.execute(
            insert(J).values(kind=kind, root=root, status="pending", params_json=json.dumps(params or {}),
                             created_at=time.time())))


def parse_job_id(job_id: str | int, *, field: str = "jobId") -> int:
    try:
        value = int(str(job_id).strip())
    except ValueError:
        raise InvalidInput(f"{field} {job_id!r} is not a job id; job ids are whole numbers such as \"123\"",
                           field=field) from None
    if value < 1:
        raise InvalidInput(f"{field} must be a positive whole number, got {job_id!r}", field=field)
    return value


def get_job(engine: Engine, *, job_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(select(J).where(J.c.id == job_id)).mappings().first()
    if row is None:
        raise NotFound(f"no job with id {job_id}; list-jobs shows the existing ones", field="jobId")
    return dict(row)


def mark_running(engine: Engine, *, job_id: int, flow_run_id: str | None = None) -> bool:
    """Move a pending job to running; False if it was cancelled before it started."""
    with engine.begin() as conn:
        res = conn.execute(
            update(J).where(J.c.id == job_id, J.c.status == "pending", J.c.cancel_requested.is_(False))
            .values(status="running", started_at=time.time(), flow_run_id=flow_run_id)
        )
        return bool(res.rowcount)


def set_runs_on(engine: Engine, *, job_id: int, runs_on: str | None) -> None:
    """Record where run ``job_id`` runs: "pool:<name>" for a flow run handed to a work pool."""
    with engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job_id).values(runs_on=runs_on))


def heartbeat(engine: Engine, *, job_id: int) -> None:
    """The flow running job ``job_id`` on a work pool is alive (renewed every few seconds while it runs)."""
    with engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job_id).values(heartbeat_at=time.time()))


def reopen_lost(engine: Engine, *, job_id: int) -> bool:
    """A running job whose flow stopped renewing its heartbeat (its machine is gone) is made pending again, to be
    handed to another worker; False when it finished meanwhile."""
    with engine.begin() as conn:
        return bool(conn.execute(update(J).where(J.c.id == job_id, J.c.status == "running").values(
            status="pending", heartbeat_at=None)).rowcount)


def set_flow_run(engine: Engine, *, job_id: int, flow_run_id: str | None) -> None:
    with engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job_id).values(flow_run_id=flow_run_id))


def update_progress(engine: Engine, *, job_id: int, **values: Any) -> None:
    with engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job_id).values(**values))


def finish_job(engine: Engine, *, job_id: int, status: str, error_message: str | None = None, **values: Any) -> None:
    done = time.time()
    with engine.begin() as conn:
        started = conn.execute(select(J.c.started_at, J.c.created_at).where(J.c.id == job_id)).first()
        begin = (started[0] or started[1]) if started else done
        conn.execute(
            update(J).where(J.c.id == job_id).values(
                status=status, error_message=error_message, completed_at=done,
                duration_ms=int((done - begin) * 1000), **values,
            )
        )


def request_cancel(engine: Engine, *, job_id: int) -> dict[str, Any]:
    """Ask a job to stop. A pending job is cancelled at once; a running one stops at its next check."""
    get_job(engine, job_id=job_id)  # NotFound for an unknown id
    with engine.begin() as conn:  # one conditional update: a job that ends meanwhile is not marked
        asked = conn.execute(
            update(J).where(J.c.id == job_id, J.c.status.in_(ACTIVE)).values(cancel_requested=True)
        ).rowcount
        conn.execute(
            update(J).where(J.c.id == job_id, J.c.status == "pending")
            .values(status="cancelled", completed_at=time.time(), duration_ms=0)
        )
    job = get_job(engine, job_id=job_id)
    if not asked:
        return {**job, "cancelled": False,
                "message": f"job {job_id} is already {job['status']}; only pending or running jobs can be cancelled"}
    if job["status"] == "cancelled":
        return {**job, "cancelled": True, "message": "cancelled before it started"}
    return {**job, "cancelled": True,
            "message": "cancellation requested: the walk stops within one batch of entries; job-progress shows "
                       "the final status"}


def cancel_requested(engine: Engine, *, job_id: int) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(select(J.c.cancel_requested).where(J.c.id == job_id)).scalar())


def cancel_check(engine: Engine, *, job_id: int, event: threading.Event | None = None,
                 every: int = 5) -> Callable[[], bool]:
    """A cheap "should this job stop?" for its loop: the in-process ``event`` at every call, the store's
    cancel_requested flag (another process, or a lost event, may have asked there) at every ``every``-th call."""
    calls = 0

    def check() -> bool:
        nonlocal calls
        calls += 1
        if event is not None and event.is_set():
            return True
        return calls % every == 0 and cancel_requested(engine, job_id=job_id)

    return check


def record_issues(engine: Engine, *, job_id: int, issues: Iterable[tuple[str, str]]) -> int:
    rows = [{"job_id": job_id, "path": p, "reason": r, "created_at": time.time()} for p, r in issues]
    if rows:
        with engine.begin() as conn:
            conn.execute(insert(JI), rows)
    return len(rows)


def job_issues(engine: Engine, *, job_id: int, limit: int = 20) -> list[dict[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(select(JI.c.path, JI.c.reason).where(JI.c.job_id == job_id).order_by(JI.c.id).limit(limit))
        return [{"path": p, "reason": r} for p, r in rows]


def unreadable_paths(engine: Engine, *, job_id: int, limit: int = 100) -> list[tuple[str, str]]:
    """(path, reason) of the folders job ``job_id`` could not read."""
    with engine.connect() as conn:
        rows = conn.execute(select(JI.c.path, JI.c.reason)
                            .where(JI.c.job_id == job_id, JI.c.reason.startswith("unreadable"))
                            .order_by(JI.c.id).limit(limit))
        return [(p, r) for p, r in rows]


def list_jobs(engine: Engine, *, active_only: bool = False, status: str | None = None,
              min_progress: float | None = None, max_progress: float | None = None, limit: int = 50,
              kind: str | None = "index") -> tuple[list[dict[str, Any]], int]:
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"status {status!r} is not a job status; use one of: {', '.join(STATUSES)}", field="status")
    for name, value in (("minProgress", min_progress), ("maxProgress", max_progress)):
        if value is not None and not 0 <= value <= 100:
            raise InvalidInput(f"{name} must be between 0 and 100, got {value}", field=name)
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1, got {limit}", field="limit")
    clauses = []
    if kind:
        clauses.append(J.c.kind == kind)
    if active_only:
        clauses.append(J.c.status.in_(ACTIVE))
    if status:
        clauses.append(J.c.status == status)
    if min_progress is not None:
        clauses.append(J.c.progress >= min_progress)
    if max_progress is not None:
        clauses.append(J.c.progress <= max_progress)
    where = and_(True, *clauses)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(J).where(where)).scalar_one()
        rows = conn.execute(select(J).where(where).order_by(J.c.id.desc()).limit(limit)).mappings().all()
    return [dict(r) for r in rows], total


def _ancestors(path: str) -> list[str]:
    out = [path]
    current = path
    while current not in ("/", ""):
        current = current.rsplit("/", 1)[0] or "/"
        out.append(current)
    return out


def fresh_scan_of(engine: Engine, *, path: str, max_age: float, now: float | None = None) -> dict[str, Any] | None:
    """The completed index job that scanned ``path`` completely within ``max_age`` seconds, or None.

    ``path`` counts as scanned completely when it is in the store with nothing missing from its listing (no
    ``scan_error``: not unreadable, not left incomplete by a stopped walk), the newest completed index job of it or
    of a folder above it finished within ``max_age``, and no index job of it, above it or inside it started since
    without completing (cancelled, failed or still running). A folder created after its parent's scan is not in the
    store, so it is never skipped."""
    now = time.time() if now is None else now
    above = _ancestors(path)
    with engine.connect() as conn:
        entry = conn.execute(select(E.c.scan_error).where(E.c.path == path)).first()
        if entry is None or entry[0] is not None:
            return None
        last = conn.execute(
            select(J).where(J.c.kind == "index", J.c.status == "completed", J.c.root.in_(above))
            .order_by(J.c.completed_at.desc()).limit(1)
        ).mappings().first()
        if last is None or last["completed_at"] is None or now - last["completed_at"] >= max_age:
            return None
        covering = or_(J.c.root.in_(above), and_(J.c.root > path.rstrip("/") + "/", J.c.root < path.rstrip("/") + "0"))
        unfinished = conn.execute(
            select(J.c.id).where(J.c.kind == "index", J.c.id > last["id"], J.c.status != "completed", covering)
            .limit(1)
        ).first()
    return None if unfinished is not None else dict(last)


def reap_orphans(engine: Engine) -> int:
    """Jobs left pending/running by a process that died are marked failed at start-up (nothing runs them now). Runs
    on a work pool (``runs_on`` "pool:<name>") are not: they run on the pool's workers, which finish their rows."""
    with engine.begin() as conn:
        res = conn.execute(
            update(J).where(or_(J.c.status == "pending", J.c.status == "running"),
                            or_(J.c.runs_on.is_(None), ~J.c.runs_on.startswith("pool:"))).values(
                status="failed", error_message="the server stopped while this job was running; run it again",
                completed_at=time.time(),
            )
        )
        return res.rowcount or 0


def job_public(job: dict[str, Any]) -> dict[str, Any]:
    """The shape job tools and synthesis://jobs resources return."""
    return {
        "jobId": str(job["id"]), "id": job["id"], "kind": job["kind"], "root": job["root"], "status": job["status"],
        "progress": round(job["progress"], 1), "files": job["files"], "directories": job["directories"],
        "totalSize": job["total_size"], "removed": job["removed"], "errors": job["error_count"],
        "error": job["error_message"], "currentPath": job["current_path"],
        "createdAt": iso(job["created_at"]), "startedAt": iso(job["started_at"]),
        "completedAt": iso(job["completed_at"]), "durationMs": job["duration_ms"],
        "flowRunId": job["flow_run_id"], "statusUrl": f"synthesis://jobs/{job['id']}",
    }


def reopen_job(engine: Engine, *, job_id: int) -> None:
    """Make a finished job pending again (a retry of its run: Prefect's Retry reruns the same flow run)."""
    with engine.begin() as conn:
        conn.execute(update(J).where(J.c.id == job_id).values(
            status="pending", cancel_requested=False, error_message=None, completed_at=None, duration_ms=None,
            progress=0.0))


def find_by_flow_run(engine: Engine, *, flow_run_id: str) -> dict[str, Any] | None:
    """The job a Prefect flow run is running, if it got as far as recording itself."""
    with engine.connect() as conn:
        row = conn.execute(select(J).where(J.c.flow_run_id == flow_run_id).order_by(J.c.id.desc()).limit(1)) \
            .mappings().first()
    return dict(row) if row else None

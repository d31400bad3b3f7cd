"""Plans, their executions and per-entry outcome records.

A plan row keeps the canonical plan object (``definition_json``, what ``dsl.Plan.to_object`` gives) beside the columns
tools filter on (mode, status). An execution row carries reference 000's counters (entries_processed,
entries_matched, outcomes_applied, status running | success | partial | error, error_message, duration_ms) and a
summary per source, rule and outcome. Outcome records hold one work key per (entry state, outcome parameters), so a
re-run on unchanged files repeats no outcome work.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Sequence

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from store.entries import iso
from store.errors import AlreadyExists, InvalidInput, NotFound
from store.models import Job, OutcomeRecord, Plan, PlanExecution
from store.models.columns import inserted_id

P = Plan.__table__
X = PlanExecution.__table__
R = OutcomeRecord.__table__
EXECUTION_STATUSES = ("running", "success", "partial", "error")
_SHOWN = 20
_CHUNK = 500


def _not_found(conn: Connection, name: str) -> NotFound:
    names = list(conn.execute(select(P.c.name).order_by(P.c.name).limit(_SHOWN + 1)).scalars())
    if not names:
        known = "there are no plans yet; plan-create makes one"
    else:
        known = "plans: " + ", ".join(names[:_SHOWN]) + (" ..." if len(names) > _SHOWN else "")
    return NotFound(f"plan {name!r} not found; {known}", field="name")


def _row(conn: Connection, name: str) -> dict[str, Any]:
    row = conn.execute(select(P).where(P.c.name == name)).mappings().first()
    if row is None:
        raise _not_found(conn, name)
    return dict(row)


def plan_public(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "description": row["description"], "mode": row["mode"],
            "status": row["status"], "definition": json.loads(row["definition_json"]),
            "origin_path": row["origin_path"], "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"])}


def save_plan(engine: Engine, *, definition: dict[str, Any], create: bool | None,
              origin_path: str | None = None) -> dict[str, Any]:
    """Store the canonical plan object ``definition``; ``create`` refuses an existing name, else it must exist
    (upsert: pass create=None)."""
    name = definition["name"]
    values = {"description": definition.get("description"), "mode": definition.get("mode", "oneshot"),
              "status": definition.get("status", "active"), "definition_json": json.dumps(definition),
              "updated_at": time.time()}
    if origin_path is not None:
        values["origin_path"] = origin_path
    try:
        with engine.begin() as conn:
            exists = conn.execute(select(P.c.id).where(P.c.name == name)).first() is not None
            if exists and create is True:
                raise AlreadyExists(f"a plan named {name!r} already exists; plan-update changes it, plan-delete "
                                    "removes it", field="name")
            if not exists and create is False:
                raise _not_found(conn, name)
            if exists:
                conn.execute(update(P).where(P.c.name == name).values(**values))
            else:
                conn.execute(insert(P).values(name=name, created_at=values["updated_at"], **values))
            return plan_public(_row(conn, name))
    except IntegrityError:
        raise AlreadyExists(f"a plan named {name!r} already exists", field="name") from None


def get_plan(engine: Engine, *, name: str) -> dict[str, Any]:
    with engine.connect() as conn:
        return plan_public(_row(conn, name))


def find_plan(engine: Engine, *, name: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(P).where(P.c.name == name)).mappings().first()
    return plan_public(dict(row)) if row else None


def list_plans(engine: Engine, *, status: str | None = None) -> list[dict[str, Any]]:
    stmt = select(P).order_by(P.c.name)
    if status is not None:
        stmt = stmt.where(P.c.status == status)
    with engine.connect() as conn:
        return [plan_public(dict(r)) for r in conn.execute(stmt).mappings()]


def delete_plan(engine: Engine, *, name: str) -> dict[str, Any]:
    with engine.begin() as conn:
        row = _row(conn, name)
        executions = conn.execute(select(func.count()).select_from(X).where(X.c.plan_id == row["id"])).scalar_one()
        conn.execute(delete(R).where(R.c.execution_id.in_(select(X.c.id).where(X.c.plan_id == row["id"]))))
        conn.execute(delete(X).where(X.c.plan_id == row["id"]))
        conn.execute(delete(P).where(P.c.id == row["id"]))
    return {**plan_public(row), "executions_removed": executions}


def count_plans(engine: Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(P)).scalar_one()


# --- executions ---------------------------------------------------------------------------------------------------


def start_execution(engine: Engine, *, plan_name: str, trigger: str = "manual") -> int:
    with engine.begin() as conn:
        row = _row(conn, plan_name)
        return inserted_id(conn.execute(insert(X).values(plan_id=row["id"], plan_name=plan_name, status="running",
                                                         trigger=trigger, started_at=time.time(), summary_json="{}")))


def update_execution(engine: Engine, *, execution_id: int, summary: dict[str, Any] | None = None,
                     **values: Any) -> None:
    if summary is not None:
        values["summary_json"] = json.dumps(summary)
    with engine.begin() as conn:
        conn.execute(update(X).where(X.c.id == execution_id).values(**values))


def finish_execution(engine: Engine, *, execution_id: int, status: str, error_message: str | None = None,
                     summary: dict[str, Any] | None = None, **counters: Any) -> dict[str, Any]:
    if status not in EXECUTION_STATUSES:
        raise InvalidInput(f"execution status {status!r} is not one of {', '.join(EXECUTION_STATUSES)}")
    done = time.time()
    with engine.begin() as conn:
        started = conn.execute(select(X.c.started_at).where(X.c.id == execution_id)).scalar_one()
        values = dict(status=status, error_message=error_message, completed_at=done,
                      duration_ms=int((done - started) * 1000), **counters)
        if summary is not None:
            values["summary_json"] = json.dumps(summary)
        conn.execute(update(X).where(X.c.id == execution_id).values(**values))
    return get_execution(engine, execution_id=execution_id)


def run_of_execution(engine: Engine, *, execution_id: int) -> int | None:
    """The run (a row of the runs table, ``store.jobs``) that carries execution ``execution_id``."""
    with engine.connect() as conn:
        row = conn.execute(select(X.c.run_id).where(X.c.id == execution_id)).first()
    if row is None:
        raise NotFound(f"no plan execution with id {execution_id}", field="execution_id")
    run_id: int | None = row[0]
    return run_id


def execution_public(row: dict[str, Any]) -> dict[str, Any]:
    return {"execution_id": row["id"], "plan_name": row["plan_name"], "status": row["status"],
            "trigger": row["trigger"], "entries_processed": row["entries_processed"],
            "entries_matched": row["entries_matched"], "outcomes_applied": row["outcomes_applied"],
            "error_message": row["error_message"], "flow_run_id": row["flow_run_id"],
            "started_at": int(row["started_at"]), "started_at_iso": iso(row["started_at"]),
            "completed_at": iso(row["completed_at"]), "duration_ms": row["duration_ms"],
            "summary": json.loads(row["summary_json"] or "{}")}


def get_execution(engine: Engine, *, execution_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        row = conn.execute(select(X).where(X.c.id == execution_id)).mappings().first()
    if row is None:
        raise NotFound(f"no plan execution with id {execution_id}", field="execution_id")
    return execution_public(dict(row))


def list_executions(engine: Engine, *, plan_name: str | None = None, status: str | None = None,
                    limit: int = 10, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    where = []
    if plan_name is not None:
        where.append(X.c.plan_name == plan_name)
    if status is not None:
        where.append(X.c.status == status)
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(X).where(*where)).scalar_one()
        rows = conn.execute(select(X).where(*where).order_by(X.c.id.desc()).limit(limit).offset(offset)).mappings()
        return [execution_public(dict(r)) for r in rows], total


def delete_execution(engine: Engine, *, execution_id: int) -> None:
    with engine.begin() as conn:
        conn.execute(delete(R).where(R.c.execution_id == execution_id))
        conn.execute(delete(X).where(X.c.id == execution_id))


def reap_running(engine: Engine) -> int:
    """Executions left running by a server that stopped are marked as errors (at server start); those running on a
    work pool are not (its workers finish them)."""
    jobs = Job.__table__
    on_pool = select(jobs.c.id).where(jobs.c.runs_on.startswith("pool:"))
    with engine.begin() as conn:
        return conn.execute(update(X).where(X.c.status == "running",
                                            or_(X.c.run_id.is_(None), X.c.run_id.not_in(on_pool))).values(
            status="error", completed_at=time.time(),
            error_message="the server stopped before this execution finished")).rowcount or 0


# --- outcome records (work keys) ----------------------------------------------------------------------------------


def known_work_keys(conn: Connection, keys: Sequence[str], *, statuses: Sequence[str] = ("applied",)) -> set[str]:
    """Which of ``keys`` already have a record in one of ``statuses`` (by default: applied; failed attempts are
    tried again)."""
    found: set[str] = set()
    for i in range(0, len(keys), _CHUNK):
        part = keys[i:i + _CHUNK]
        found.update(conn.execute(select(R.c.work_key).where(R.c.work_key.in_(part),
                                                              R.c.status.in_(list(statuses)))).scalars())
    return found


def record_outcomes(conn: Connection, rows: Iterable[dict[str, Any]]) -> int:
    """Insert outcome records (execution_id, entry_id, rule, outcome_type, work_key, status, detail); an existing
    work key is replaced (a failed attempt that now succeeded)."""
    rows = list(rows)
    if not rows:
        return 0
    keys = [r["work_key"] for r in rows]
    for i in range(0, len(keys), _CHUNK):
        conn.execute(delete(R).where(R.c.work_key.in_(keys[i:i + _CHUNK])))
    now = time.time()
    conn.execute(insert(R), [{**r, "created_at": now} for r in rows])
    return len(rows)

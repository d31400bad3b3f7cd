"""What the operator's job tools (reference 004: get_job_history, ``jobs://{job_id}/output``) read from the store
beyond store.jobs and store.plans: the index jobs a source started (its scans), and what one plan execution did to
its entries (outcome records by status, the failed ones with their reason).

Keyword-only, engine-level reads; callers decide what "missing" means.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from store.entries import iso
from store.models import Entry, Job, OutcomeRecord

J = Job.__table__
R = OutcomeRecord.__table__
E = Entry.__table__


def source_marker(name: str) -> str:
    """The text an index job's ``params_json`` holds when source ``name`` started it (``create_job`` writes
    ``json.dumps({"source": name})``; a source name has no quote or backslash, store.sources.NAME_RULE)."""
    return json.dumps({"source": name})[1:-1]


def source_scan_jobs(engine: Engine, *, name: str, limit: int = 20) -> tuple[list[dict[str, Any]], int]:
    """The index jobs source ``name`` started (a manual source's scans), newest first, at most ``limit``, with
    their total."""
    where = (J.c.kind == "index", J.c.params_json.contains(source_marker(name), autoescape=True))
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(J).where(*where)).scalar_one()
        rows = conn.execute(select(J).where(*where).order_by(J.c.id.desc()).limit(limit)).mappings().all()
    return [dict(r) for r in rows], int(total)


def execution_outcomes(engine: Engine, *, execution_id: int, limit: int = 50) -> dict[str, Any]:
    """What plan execution ``execution_id`` recorded per entry: ``counts`` of its outcome records by status
    (applied, error) and the ``failed`` ones (entry path, rule, outcome type, reason), newest first, at most
    ``limit``."""
    with engine.connect() as conn:
        counts = {status: int(n) for status, n in conn.execute(
            select(R.c.status, func.count()).where(R.c.execution_id == execution_id).group_by(R.c.status))}
        rows = conn.execute(
            select(R.c.entry_id, E.c.path, R.c.rule, R.c.outcome_type, R.c.detail, R.c.created_at)
            .select_from(R.outerjoin(E, E.c.id == R.c.entry_id))
            .where(R.c.execution_id == execution_id, R.c.status != "applied")
            .order_by(R.c.id.desc()).limit(limit)).mappings().all()
    failed = [{"entry_id": r["entry_id"], "path": r["path"], "rule": r["rule"], "outcome_type": r["outcome_type"],
               "reason": r["detail"], "at": iso(r["created_at"])} for r in rows]
    return {"counts": counts, "failed": failed}

"""A store made by the release before the runs table held plan executions (commit 9cbe7cf, made by
fixtures/make_store_9cbe7cf.py in a worktree of that commit) opens, keeps its history and gains its runs: every plan
execution has a row of kind "plan" in the runs table, with a status that says how it ended."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sqlalchemy import select

from store import jobs as store_jobs
from store import plans as store_plans
from store.engine import make_engine
from store.models import Job

FIXTURE = Path(__file__).parent / "fixtures" / "store-9cbe7cf.db"


def test_a_store_of_the_previous_release_opens_with_its_plan_executions_as_runs(tmp_path: Path) -> None:
    db = tmp_path / "assay.db"
    shutil.copy(FIXTURE, db)
    engine = make_engine(f"sqlite:///{db}")
    try:
        executions, total = store_plans.list_executions(engine, plan_name="notes", limit=10)
        assert total == 3
        assert [e["status"] for e in executions] == ["error", "success", "success"]
        runs = {}
        for e in executions:
            run_id = store_plans.run_of_execution(engine, execution_id=e["execution_id"])
            assert run_id is not None
            run = store_jobs.get_job(engine, job_id=run_id)
            assert run["kind"] == "plan" and run["root"] == "notes"
            assert json.loads(run["params_json"])["execution_id"] == e["execution_id"]
            runs[e["execution_id"]] = run["status"]
        assert runs == {1: "completed", 2: "completed", 3: "cancelled"}
        index_jobs, index_total = store_jobs.list_jobs(engine)  # the old index jobs are still index jobs
        assert index_total == 3 and {j["status"] for j in index_jobs} == {"completed"}
    finally:
        engine.dispose()
    engine = make_engine(f"sqlite:///{db}")  # opening again adds nothing
    try:
        with engine.connect() as conn:
            assert len(conn.execute(select(Job.__table__.c.id).where(Job.__table__.c.kind == "plan")).all()) == 3
    finally:
        engine.dispose()

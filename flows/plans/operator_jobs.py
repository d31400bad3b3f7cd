"""Background jobs as reference 004's operator sees them (list_jobs, get_job_history, trigger_job, enable_job,
disable_job, ``jobs://{job_id}/output``): assay's plans, its sources and the runs in flight, each under one id.

- ``plan:<name>``: a plan (oneshot or continuous; active, paused or disabled). Triggering executes it as
  plan-execute does; enabling / disabling sets its status active / paused as plan-update does (a paused continuous
  plan stops watching). Its history is its executions.
- ``source:<name>``: a source (live: watched; manual: indexed when started). Triggering starts it as source-start
  does; enabling / disabling sets whether it starts with the server and starts / stops a live one (disabling a
  manual one cancels its running scan). Its history is the index jobs it started; a live source's scans are its
  catch-ups, counted on the source.
- ``job:<id>``: one run (an index, classify or plan job of store.jobs): listed while it runs, its history is itself.
  A run is followed or cancelled (cancel-job), not triggered or enabled.

Everything goes through the services the plan and source tools use (flows.plans.service, flows.index.sources) and
the store's reads; nothing here runs or stops work itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flows.index.sources import SourceManager
from flows.plans.service import PlanService, merge_update
from store import jobs as store_jobs
from store import plans as store_plans
from store import sources as store_sources
from store.entries import iso
from store.errors import Conflict, InvalidInput, NotFound
from store.operator_jobs import execution_outcomes, source_scan_jobs

PLAN, SOURCE, RUN = "plan", "source", "job"
FORMS = "plan:<name> (a plan), source:<name> (a source) or job:<id> (one index, classify or plan run)"
RUNNING_SHOWN = 100


@dataclass(frozen=True)
class JobRef:
    kind: str  # plan | source | job
    key: str  # the plan's or source's name, or the run's id as text

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.key}"


def parse_job_id(job_id: str) -> JobRef:
    """``plan:<name>``, ``source:<name>`` or ``job:<id>``; InvalidInput naming the forms otherwise."""
    kind, sep, key = job_id.strip().partition(":")
    if sep and kind in (PLAN, SOURCE, RUN) and key:
        if kind == RUN:
            key = str(store_jobs.parse_job_id(key, field="job_id"))
        return JobRef(kind, key)
    hint = f"; did you mean job:{job_id.strip()}?" if job_id.strip().isdigit() else ""
    raise InvalidInput(f"job_id {job_id!r} is not a job id; use {FORMS}; list_jobs lists them{hint}",
                       field="job_id")


class OperatorJobs:
    """The job tools' one door, over the app's plan service and source manager."""

    def __init__(self, plans: PlanService, sources: SourceManager | None) -> None:
        self.plans = plans
        self.engine = plans.engine
        self._sources = sources

    @property
    def sources(self) -> SourceManager:
        if self._sources is None:
            raise Conflict("this server has no source manager", field="job_id")
        return self._sources

    # --- reading ------------------------------------------------------------------------------------------------

    @staticmethod
    def _not_found(exc: NotFound) -> NotFound:
        return NotFound(f"{exc.message}. Job ids: {FORMS}; list_jobs lists them", field="job_id")

    def _plan(self, ref: JobRef) -> dict[str, Any]:
        try:
            return store_plans.get_plan(self.engine, name=ref.key)
        except NotFound as exc:
            raise self._not_found(exc) from None

    def _source(self, ref: JobRef) -> dict[str, Any]:
        try:
            return self.sources.get(ref.key)
        except NotFound as exc:
            raise self._not_found(exc) from None

    def _job(self, ref: JobRef) -> dict[str, Any]:
        try:
            return store_jobs.get_job(self.engine, job_id=int(ref.key))
        except NotFound as exc:
            raise self._not_found(exc) from None

    def list_jobs(self) -> list[dict[str, Any]]:
        """Every plan, every source, then the runs pending or running (newest first, at most 100)."""
        out = [self._plan_job(row) for row in store_plans.list_plans(self.engine)]
        if self._sources is not None:
            for row in self._sources.list():
                scans, _ = source_scan_jobs(self.engine, name=row["name"], limit=1)
                out.append(_source_job(row, _job_run(scans[0]) if scans else None))
        rows, _ = store_jobs.list_jobs(self.engine, active_only=True, kind=None, limit=RUNNING_SHOWN)
        out += [_run_job(row) for row in rows]
        return out

    def _plan_job(self, row: dict[str, Any]) -> dict[str, Any]:
        executions, _ = store_plans.list_executions(self.engine, plan_name=row["name"], limit=1)
        last = _execution_run(executions[0]) if executions else None
        watching = self.plans.watching.is_watching(row["name"]) if self.plans.watching is not None else False
        return {"id": f"{PLAN}:{row['name']}", "type": PLAN, "name": row["name"], "status": row["status"],
                "enabled": row["status"] == "active", "mode": row["mode"], "path": row["origin_path"],
                "running": bool(last and last["status"] == "running") or watching, "watching": watching,
                "last_run": last, "description": row["description"]}

    def history(self, job_id: str, *, limit: int = 20) -> dict[str, Any]:
        """The runs of a job, newest first: a plan's executions, a source's index jobs, or one run itself."""
        ref = parse_job_id(job_id)
        if ref.kind == PLAN:
            self._plan(ref)
            executions, total = store_plans.list_executions(self.engine, plan_name=ref.key, limit=limit)
            return {"job_id": ref.id, "type": PLAN, "runs": [_execution_run(x) for x in executions], "total": total,
                    "note": None}
        if ref.kind == SOURCE:
            source = self._source(ref)
            jobs, total = source_scan_jobs(self.engine, name=ref.key, limit=limit)
            note = None
            if source["type"] == "live":
                note = (f"a live source's scans are its catch-ups, counted on it: {source['total_scans']} scan(s), "
                        f"the last at {source['last_scan_at'] or 'never'}; its watcher's counters are in "
                        f"jobs://{ref.id}/output")
            return {"job_id": ref.id, "type": SOURCE, "runs": [_job_run(j) for j in jobs], "total": total,
                    "note": note}
        job = self._job(ref)
        return {"job_id": ref.id, "type": RUN, "runs": [_job_run(job)], "total": 1, "note": None}

    def output(self, job_id: str) -> dict[str, Any]:
        """The latest run's output: a plan's latest execution with its summary and outcome records (counts, the
        failed ones), a source's state with its latest scan job and what it skipped, or one run with its issues."""
        ref = parse_job_id(job_id)
        if ref.kind == PLAN:
            plan = self._plan(ref)
            executions, total = store_plans.list_executions(self.engine, plan_name=ref.key, limit=1)
            if not executions:
                return {"job_id": ref.id, "status": plan["status"], "latest": None, "executions": 0,
                        "note": f"plan {ref.key!r} has not run yet; trigger_job {ref.id} runs it"}
            latest = executions[0]
            return {"job_id": ref.id, "status": plan["status"], "executions": total, "latest": latest,
                    "outcomes": execution_outcomes(self.engine, execution_id=latest["execution_id"])}
        if ref.kind == SOURCE:
            source = self._source(ref)
            jobs, total = source_scan_jobs(self.engine, name=ref.key, limit=1)
            scan = None
            if jobs:
                scan = {**store_jobs.job_public(jobs[0]),
                        "issues": store_jobs.job_issues(self.engine, job_id=jobs[0]["id"])}
            return {"job_id": ref.id, "source": source, "latest": scan, "scans": total}
        job = self._job(ref)
        return {"job_id": ref.id, "latest": {**store_jobs.job_public(job),
                                             "issues": store_jobs.job_issues(self.engine, job_id=job["id"])}}

    # --- acting -------------------------------------------------------------------------------------------------

    def trigger(self, job_id: str) -> dict[str, Any]:
        """Run a plan now (in the background: its execution id) or start a source (a manual one's scan job)."""
        ref = parse_job_id(job_id)
        if ref.kind == PLAN:
            row = self._plan(ref)
            if row["status"] != "active":
                raise Conflict(f"plan {ref.key!r} is {row['status']}, so it does not run; enable_job {ref.id} makes "
                               "it runnable again", field="job_id")
            execution = self.plans.execute(self.plans.load(ref.key), wait=False)
            run = self.plans.run_id(execution["execution_id"])
            return _acted(ref, "triggered", True, execution["status"],
                          f"execution {execution['execution_id']} started; get_job_history {ref.id} or "
                          f"jobs://{ref.id}/output follows it", execution_id=execution["execution_id"],
                          run=f"{RUN}:{run}" if run is not None else None)
        if ref.kind == SOURCE:
            self._source(ref)
            started = self.sources.start(ref.key)
            run = started.get("job_id")
            return _acted(ref, "triggered", bool(started["started"]), started["status"], started["message"],
                          run=f"{RUN}:{run}" if run is not None else None)
        raise _not_for_runs(ref, "triggered")

    def set_enabled(self, job_id: str, enabled: bool) -> dict[str, Any]:
        """Enable (status active; a source started with the server, a live one started now) or disable (status
        paused; a source not started with the server, stopped now) a plan or a source."""
        ref = parse_job_id(job_id)
        action = "enabled" if enabled else "disabled"
        if ref.kind == PLAN:
            row = self._plan(ref)
            wanted = "active" if enabled else "paused"
            if row["status"] == wanted:
                return _acted(ref, action, False, wanted, f"plan {ref.key!r} is already {wanted}")
            plan = merge_update(self.plans.load(ref.key), status=wanted)
            saved = self.plans.save(plan, create=False)
            note = ("it runs on trigger_job" + (" and watches its sources again" if plan.mode == "continuous" else "")
                    if enabled else "it no longer runs or watches (an execution in flight finishes)")
            return _acted(ref, action, True, saved["status"], f"plan {ref.key!r} is {saved['status']}: {note}")
        if ref.kind == SOURCE:
            source = self._source(ref)
            changed = source["enabled"] != enabled
            if changed:
                store_sources.update_source(self.engine, name=ref.key, enabled=enabled)
            message = f"source {ref.key!r} {'starts' if enabled else 'does not start'} with the server"
            if enabled and source["type"] == "live":
                started = self.sources.start(ref.key)
                changed = changed or bool(started["started"])
                message += f"; {started['message']}"
            elif not enabled:
                stopped = self.sources.stop(ref.key)
                changed = changed or bool(stopped["stopped"])
                message += f"; {stopped['message']}"
            elif source["type"] == "manual":
                message += f"; a manual source is indexed when started: trigger_job {ref.id}"
            return _acted(ref, action, changed, self.sources.get(ref.key)["status"], message)
        raise _not_for_runs(ref, action)


def _not_for_runs(ref: JobRef, action: str) -> InvalidInput:
    return InvalidInput(f"{ref.id} is one run, which cannot be {action}: only plan:<name> and source:<name> jobs "
                        f"can; cancel-job stops a run (job id {ref.key})", field="job_id")


def _acted(ref: JobRef, action: str, changed: bool, status: str, message: str, *, execution_id: int | None = None,
           run: str | None = None) -> dict[str, Any]:
    return {"job_id": ref.id, "action": action, "changed": changed, "status": status, "execution_id": execution_id,
            "run": run, "message": message}


def _source_job(row: dict[str, Any], scan: dict[str, Any] | None) -> dict[str, Any]:
    """A source as a job; its last run is its latest scan job, or for a live source its last catch-up (counted on
    the source, with no run of its own)."""
    last = scan
    if last is None and (row["last_scan_at"] or row["last_error"]):
        last = {"id": None, "status": "error" if row["last_error"] else "completed", "trigger": "watch",
                "started_at": None, "completed_at": row["last_scan_at"], "duration_ms": None,
                "counts": {"entries_indexed": row["entries_indexed"]}, "error": row["last_error"]}
    return {"id": f"{SOURCE}:{row['name']}", "type": SOURCE, "name": row["name"], "status": row["status"],
            "enabled": row["enabled"], "mode": row["type"], "path": row["path"], "running": row["status"] == "running",
            "watching": row["type"] == "live" and row["status"] == "running", "last_run": last,
            "run": f"{RUN}:{row['job_id']}" if row.get("job_id") else None}


def _run_job(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"{RUN}:{row['id']}", "type": RUN, "name": f"{row['kind']} {row['root']}", "status": row["status"],
            "enabled": None, "mode": row["kind"], "path": row["root"], "running": True, "watching": False,
            "last_run": _job_run(row), "progress": round(float(row["progress"] or 0.0), 1)}


def _execution_run(x: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"execution:{x['execution_id']}", "status": x["status"], "trigger": x["trigger"],
            "started_at": x["started_at_iso"], "completed_at": x["completed_at"], "duration_ms": x["duration_ms"],
            "counts": {"entries_processed": x["entries_processed"], "entries_matched": x["entries_matched"],
                       "outcomes_applied": x["outcomes_applied"]},
            "error": x["error_message"]}


def _job_run(j: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"{RUN}:{j['id']}", "status": j["status"], "trigger": j["kind"],
            "started_at": iso(j["started_at"] or j["created_at"]), "completed_at": iso(j["completed_at"]),
            "duration_ms": j["duration_ms"],
            "counts": {"files": j["files"], "directories": j["directories"], "removed": j["removed"],
                       "errors": j["error_count"]},
            "error": j["error_message"]}

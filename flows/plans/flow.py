"""A plan execution as one Prefect flow run named after the plan, its stages as named task runs:
``scan <source>``, ``match <rule>``, ``<outcome> <rule> [batch k]``; a markdown artifact summarises the run.

The stages are :class:`flows.plans.engine.PlanRun` methods; the flow passes only small values (the execution id and a stage's
arguments) and finds the run in a process-local registry, so nothing needs to serialise.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from flows.plans.engine import PlanRun, run_stages

_runs: dict[int, PlanRun] = {}
_lock = threading.Lock()
_flow = None


def _summary_markdown(row: dict[str, Any]) -> str:
    lines = [f"# Plan `{row['plan_name']}` — execution {row['execution_id']}", "",
             f"**{row['status']}** in {row['duration_ms']} ms: {row['entries_processed']} entries processed, "
             f"{row['entries_matched']} matched, {row['outcomes_applied']} outcomes applied.", ""]
    if row.get("error_message"):
        lines += [f"> {row['error_message']}", ""]
    summary = row.get("summary") or {}
    if summary.get("sources"):
        lines += ["| source | type | entries | added to target set |", "| --- | --- | --- | --- |"]
        for name, s in summary["sources"].items():
            lines.append(f"| {name} | {s.get('type')} | {s.get('entries')} | {s.get('added_to_target_set', '')} |")
        lines.append("")
    if summary.get("rules"):
        lines += ["| rule | matched | outcome | applied | unchanged | errors |", "| --- | --- | --- | --- | --- | --- |"]
        for name, r in summary["rules"].items():
            outcomes = r.get("outcomes") or [{}]
            for o in outcomes:
                lines.append(f"| {name} | {r.get('matched', '')} | {o.get('type', '—')} | {o.get('applied', '')} | "
                             f"{o.get('unchanged', '')} | {o.get('errors', '')} |")
    return "\n".join(lines)


def _build():
    from prefect import flow, task
    from prefect.artifacts import create_markdown_artifact
    from prefect.cache_policies import NO_CACHE

    @task(name="plan-stage", cache_policy=NO_CACHE, persist_result=False)
    def stage(execution_id: int, method: str, args: list) -> Any:
        """One stage of a plan execution."""
        return getattr(_runs[execution_id], method)(*args)

    @flow(name="assay-plan", flow_run_name="{plan_name}", persist_result=False, validate_parameters=False,
          log_prints=False)
    def plan_flow(plan_name: str, execution_id: int) -> dict:
        """Run one execution of an assay plan."""
        from prefect.runtime import flow_run

        from store import plans as store_plans

        run = _runs[execution_id]
        store_plans.update_execution(run.engine, execution_id=execution_id, flow_run_id=str(flow_run.get_id() or "") or None)

        def call(name: str, fn, args: tuple):
            return stage.with_options(task_run_name=name)(execution_id, fn.__name__, list(args))

        row = run_stages(run, task=call)
        key = re.sub(r"[^a-z0-9-]+", "-", f"plan-{plan_name}".lower()).strip("-")[:100]
        create_markdown_artifact(markdown=_summary_markdown(row), key=key,
                                 description=f"assay plan {plan_name}, execution {execution_id}")
        if row["status"] == "error":
            raise RuntimeError(f"plan {plan_name} execution {execution_id}: {row['error_message']}")
        return row

    return plan_flow


def plan_flow():
    global _flow
    with _lock:
        if _flow is None:
            _flow = _build()
        return _flow


def run_as_flow(run: PlanRun) -> None:
    """Run ``run`` as a Prefect flow run (the caller reads the execution row afterwards)."""
    from flows.prefect_support import flow_settings

    with _lock:
        _runs[run.execution_id] = run
    try:
        with flow_settings():
            plan_flow()(plan_name=run.plan.name, execution_id=run.execution_id)
    finally:
        with _lock:
            _runs.pop(run.execution_id, None)

"""A plan execution as one Prefect flow run named after the plan, its stages as task runs a person reads in the UI:
``scan <source>``, ``match <rule>``, ``<outcome> <rule> [batch k]``; a markdown artifact summarises the run.

Flow and tasks take only small values — the plan's name, the run's id in the runs table, the store's URL, a stage's
position — and find everything else in the store (:mod:`flows.plans.stages`), so the same flow runs when an agent
calls plan-execute (in the server's process), when a person presses Run on the plan's deployment in Prefect's UI or
retries a failed run there (in a subprocess the server's Prefect runner spawns), or on a worker. Given only the
plan's name, the flow opens an execution itself (trigger ``prefect``).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

import prefect
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import FlowRun
from prefect.exceptions import TerminationSignal
from prefect.runtime import flow_run as current_flow_run
from prefect.states import Cancelled as CancelledState
from prefect.states import State

from flows.core import hooks
from flows.core.pool import heartbeat
from flows.core.prefect import cancel_requested_in_prefect, stop_worker_processes
from flows.core.runner import JobKind
from flows.core.settings import current, run_settings
from flows.plans import execution, stages
from flows.plans.spread import SpreadStages, pool_name
from flows.plans.stages import PlanContext
from store import jobs as store_jobs
from store.engine import get_engine


@task(task_run_name="scan {source}", cache_policy=NO_CACHE, persist_result=False)
def scan(store: str, run_id: int, index: int, source: str) -> dict[str, Any]:
    """Index a source's folders (incrementally) and fill its target set."""
    return stages.scan_source(stages.context(store, run_id), index)


@task(task_run_name="match {rule}", cache_policy=NO_CACHE, persist_result=False)
def match(store: str, run_id: int, index: int, rule: str) -> dict[str, Any]:
    """Count and sample a rule's matches."""
    return stages.match_rule(stages.context(store, run_id), index)


@task(task_run_name="{outcome} {rule} [batch {k}]", cache_policy=NO_CACHE, persist_result=False)
def apply_outcome(store: str, run_id: int, position: int, after: str, k: int, outcome: str,
                  rule: str) -> dict[str, Any]:
    """Apply an outcome to the next batch of a rule's matches."""
    return stages.outcome_batch(stages.context(store, run_id), position, after, k)


class TaskStages:
    """The stages of :func:`flows.plans.execution.run_stages` as this flow's tasks."""

    def __init__(self, store: str, run_id: int) -> None:
        self.store, self.run_id = store, run_id

    def scan(self, ctx: PlanContext, index: int) -> dict[str, Any]:
        return scan(self.store, self.run_id, index, ctx.plan.sources[index].name)

    def match(self, ctx: PlanContext, index: int) -> dict[str, Any]:
        return match(self.store, self.run_id, index, ctx.rules[index].rule.name)

    def outcome(self, ctx: PlanContext, position: int, after: str, k: int) -> dict[str, Any]:
        spec = ctx.outcomes[position]
        return apply_outcome(self.store, self.run_id, position, after, k, spec.outcome.type, spec.rule)

    def batches(self, ctx: PlanContext, position: int) -> Iterator[tuple[int, dict[str, Any]]]:
        return execution.one_after_another(self, ctx, position)


def summary_markdown(row: dict[str, Any]) -> str:
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
        lines += ["| rule | matched | outcome | applied | unchanged | errors |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for name, r in summary["rules"].items():
            for o in r.get("outcomes") or [{}]:
                lines.append(f"| {name} | {r.get('matched', '')} | {o.get('type', '—')} | {o.get('applied', '')} | "
                             f"{o.get('unchanged', '')} | {o.get('errors', '')} |")
    return "\n".join(lines)


def _on_stopped_from_outside(flow: Any, flow_run: FlowRun, state: State) -> None:  # noqa: ARG001 (Prefect's hook)
    """Prefect's runner stopped the run's process (a Cancel in the UI) or the process crashed: the run's rows end if
    the process could not end them itself. Run by the runner in the server's process once that process is gone (the
    engine turns these hooks off inside a runner's subprocess), so it never races the run's own writes."""
    store = flow_run.parameters.get("store") or run_settings().store_url
    job = store_jobs.find_by_flow_run(get_engine(store), flow_run_id=str(flow_run.id))
    if job is not None and job["status"] in store_jobs.ACTIVE:
        message = ("cancelled from Prefect; outcomes applied so far were kept" if state.is_cancelled()
                   or state.is_cancelling() else f"the flow run crashed: {state.message}")
        execution.finish_failed(get_engine(store), job["id"], message,
                                status="cancelled" if state.is_cancelled() or state.is_cancelling() else "failed")


@prefect.flow(name="assay-plan", flow_run_name="{plan_name}", persist_result=False, validate_parameters=False,
      log_prints=False, on_cancellation=[_on_stopped_from_outside], on_crashed=[_on_stopped_from_outside])
def plan_flow(plan_name: str, run_id: int | None = None, store: str | None = None) -> Any:
    """Run one execution of an assay plan. From the UI give the plan's name; the rest is found in the store."""
    url = store or run_settings().store_url
    flow_run_id = str(current_flow_run.get_id() or "") or None
    if run_id is None:
        run_id = execution.open_from_name(get_engine(url), plan_name, trigger="prefect",
                                          roots=run_settings().effective_roots())
    hooks.register(run_id, external=cancel_requested_in_prefect(flow_run_id))
    try:
        pool = pool_name()
        if pool is None:
            row = execution.run_plan_job(url, run_id, stages_runner=TaskStages(url, run_id), flow_run_id=flow_run_id)
        else:  # on a pool's worker: its heartbeat tells the process that handed it over that it lives
            with heartbeat(get_engine(url), run_id, every=current().cluster.lease_seconds / 4):
                row = execution.run_plan_job(url, run_id, stages_runner=SpreadStages(TaskStages(url, run_id), pool),
                                             flow_run_id=flow_run_id)
    except TerminationSignal:
        # a SIGTERM: Prefect's runner cancelling the run it started in this process (a Cancel in the UI, the server
        # stopping). The rows are finished (run_plan_job); the worker processes (the classifier's, the extractors')
        # are ended now, not waited for at exit: their files in flight can outlast the runner's grace, after which
        # it kills this process and would leave them orphaned
        stop_worker_processes()
        raise
    finally:
        hooks.drop(run_id, external_only=True)
    key = re.sub(r"[^a-z0-9-]+", "-", f"plan-{plan_name}".lower()).strip("-")[:100]
    create_markdown_artifact(markdown=summary_markdown(row), key=key,
                             description=f"assay plan {plan_name}, execution {row['execution_id']}")
    if row["error_message"] in (execution.CANCELLED_MESSAGE, execution.NOT_STARTED_MESSAGE):
        return CancelledState(message=f"plan {plan_name} execution {row['execution_id']}: {row['error_message']}")
    if row["status"] == "error":
        raise RuntimeError(f"plan {plan_name} execution {row['execution_id']}: {row['error_message']}")
    return row


PLAN_JOBS = JobKind(
    name=execution.KIND, flow=plan_flow,
    parameters=lambda job, store: {"plan_name": job["root"], "run_id": job["id"], "store": store},
    run_plain=lambda store, job_id: execution.run_plan_job(store, job_id),
    finish_failed=lambda engine, job_id, message: execution.finish_failed(engine, job_id, message),
    deployment=lambda job: str(job["root"]))

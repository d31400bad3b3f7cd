"""One execution of a plan: its rows (an execution row with reference 000's counters, and a row of kind ``plan`` in
the runs table that the job runner follows), the order of its stages, and what it counts as they report.

``open_execution`` writes both rows; ``run_plan_job`` runs the execution a row describes, calling each stage through
``call(name, stage, args)`` (the Prefect flow makes each a named task run; without Prefect they are plain calls) and
accounting what each returns in a :class:`PlanRun`. Nothing here needs the process that opened the execution: a run
started from Prefect's UI, or retried there, does the same.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Protocol

from sqlalchemy.engine import Engine

from dsl.model import Plan
from dsl.outcomes import iter_outcomes
from flows.core import hooks
from flows.core.outcomes import Cancelled, installed_executors
from flows.plans import stages
from flows.plans.checks import validated
from flows.plans.exclusive import plan_exclusive
from flows.plans.stages import DEFAULT_BATCH, PlanContext
from flows.core.roots import Roots
from store import jobs as store_jobs
from store import plans as store_plans
from store.engine import get_engine
from store.errors import AssayError, Conflict

log = logging.getLogger(__name__)

KIND = "plan"


class Stages(Protocol):
    """How the stages run: plainly (:class:`DirectStages`) or as Prefect task runs (``flows.plans.flow``)."""

    def scan(self, ctx: PlanContext, index: int) -> dict[str, Any]: ...

    def match(self, ctx: PlanContext, index: int) -> dict[str, Any]: ...

    def outcome(self, ctx: PlanContext, position: int, after: str, k: int) -> dict[str, Any]: ...

    def batches(self, ctx: PlanContext, position: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every batch of outcome ``position`` as (k, what it did); the last has ``done``."""
        ...


def one_after_another(stages_: Stages, ctx: PlanContext, position: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """The batches of outcome ``position`` one after another along the path index, each through ``outcome``."""
    after, k = "", 1
    while True:
        out = stages_.outcome(ctx, position, after, k)
        yield k, out
        if out["done"]:
            return
        after, k = out["last"], k + 1


class DirectStages:
    def scan(self, ctx: PlanContext, index: int) -> dict[str, Any]:
        return stages.scan_source(ctx, index)

    def match(self, ctx: PlanContext, index: int) -> dict[str, Any]:
        return stages.match_rule(ctx, index)

    def outcome(self, ctx: PlanContext, position: int, after: str, k: int) -> dict[str, Any]:
        return stages.outcome_batch(ctx, position, after, k)

    def batches(self, ctx: PlanContext, position: int) -> Iterator[tuple[int, dict[str, Any]]]:
        return one_after_another(self, ctx, position)


def open_execution(engine: Engine, plan: Plan, *, trigger: str, roots: Roots | None,
                   restrict_ids: list[int] | None = None, scan: bool = True, batch_size: int = DEFAULT_BATCH,
                   id_batch_size: int | None = None) -> tuple[int, int]:
    """Write the execution row and its run row (the plan as it is now, the roots, the options, the clock that
    relative times in conditions read); returns (execution id, run id)."""
    execution_id = store_plans.start_execution(engine, plan_name=plan.name, trigger=trigger)
    params = {"execution_id": execution_id, "plan": plan.to_object(), "base_dir": plan.base_dir,
              "roots": list(roots.paths) if roots is not None else None,
              "restrict_ids": sorted(restrict_ids) if restrict_ids is not None else None, "scan": scan,
              "batch_size": batch_size, "id_batch_size": id_batch_size, "now": time.time(), "trigger": trigger}
    job_id = store_jobs.create_job(engine, root=plan.name, kind=KIND, params=params)
    store_plans.update_execution(engine, execution_id=execution_id, run_id=job_id)
    return execution_id, job_id


def stored_plan(engine: Engine, name: str) -> Plan:
    """The stored plan; a plan from a file resolves relative source paths against the file's folder."""
    row = store_plans.get_plan(engine, name=name)
    plan = Plan.model_validate(row["definition"])
    if row["origin_path"]:
        plan.with_base_dir(os.path.dirname(row["origin_path"]))
    return plan


def open_from_name(engine: Engine, name: str, *, trigger: str, roots: Roots) -> int:
    """Open an execution of the stored plan ``name`` (a run started from Prefect with the plan's name alone);
    returns the run's id. A paused or disabled plan, or one this installation cannot run, is refused."""
    plan = stored_plan(engine, name)
    if plan.status != "active":
        raise Conflict(f"plan {name!r} is {plan.status}, so it does not run; plan-update with status active makes "
                       "it runnable again", field="name")
    validated(plan, roots=roots)
    return open_execution(engine, plan, trigger=trigger, roots=roots)[1]


def execution_of(engine: Engine, job_id: int) -> int:
    job = store_jobs.get_job(engine, job_id=job_id)
    return int(json.loads(job["params_json"] or "{}")["execution_id"])


@dataclass
class OutcomeTally:
    applied: int = 0
    unchanged: int = 0
    skipped: int = 0  # work already done on an unchanged entry
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    batches: int = 0
    last_path: str = ""
    finished: bool = False


class PlanRun:
    """What an execution has done so far, from what its stages returned."""

    def __init__(self, ctx: PlanContext) -> None:
        self.ctx = ctx
        self.summary: dict[str, Any] = {"sources": {}, "rules": {}, "timings_ms": {}}
        self.processed = 0
        self.matched = [0] * len(ctx.rules)
        self.outcomes = [OutcomeTally() for _ in ctx.outcomes]
        self._total: int | None = None

    def scanned(self, index: int, info: dict[str, Any]) -> None:
        self.summary["sources"][self.ctx.plan.sources[index].name] = info

    def counted(self) -> None:
        sources = self.ctx.plan.sources
        if len(sources) == 1 and sources[0].name in self.summary["sources"]:
            self.processed = self.summary["sources"][sources[0].name]["entries"]
        else:
            self.processed = stages.count_candidates(self.ctx)

    def rule_matched(self, index: int, out: dict[str, Any]) -> None:
        self.matched[index] = out["matched"]
        spec = self.ctx.rules[index]
        self.summary["rules"][spec.rule.name] = {
            "matched": None if out["counted_by_outcome_batches"] else out["matched"], "samples": out["samples"],
            "outcomes": [], "duration_ms": out["duration_ms"]}

    def batch_done(self, position: int, out: dict[str, Any]) -> None:
        tally = self.outcomes[position]
        tally.batches += 1
        tally.applied += out["applied"]
        tally.unchanged += out["unchanged"]
        tally.skipped += out["skipped"]
        tally.errors += len(out["errors"])
        for entry_id, reason in out["errors"][: max(0, 5 - len(tally.error_samples))]:
            tally.error_samples.append(f"entry {entry_id}: {reason}")
        tally.last_path, tally.finished = out["last"], out["done"]
        spec = self.ctx.outcomes[position]
        rule_index = next(i for i, r in enumerate(self.ctx.rules) if r.rule.name == spec.rule)
        if self.ctx.rules[rule_index].counted_by == position:
            self.matched[rule_index] += out["ids"]

    def applied(self) -> int:
        return sum(o.applied for o in self.outcomes)

    def counters(self, *, exact: bool = True) -> dict[str, int]:
        """Reference 000's counters; an entry matched by two rules counts once (when every condition ran in SQL)."""
        matched = stages.distinct_matched(self.ctx, self.matched) if exact else sum(self.matched)
        return {"entries_processed": self.processed, "entries_matched": matched, "outcomes_applied": self.applied()}

    def outcome_summary(self) -> None:
        """Each rule's matched count and what each of its outcomes did, into the summary (again from the tallies
        when called twice: an error while finishing a run that had written its summary)."""
        rules = self.summary["rules"]
        for i, spec in enumerate(self.ctx.rules):
            rules.setdefault(spec.rule.name, {})["matched"] = self.matched[i]
        for entry in rules.values():
            entry["outcomes"] = []
        for done, tally in zip(self.ctx.outcomes, self.outcomes):
            rules.setdefault(done.rule, {"outcomes": []})["outcomes"].append({
                "type": done.outcome.type, "params": done.outcome.params(), "applied": tally.applied,
                "unchanged": tally.unchanged, "skipped_unchanged_entries": tally.skipped, "errors": tally.errors,
                "error_samples": tally.error_samples, "batches": tally.batches})

    def percent(self) -> float:
        """How far the execution is: each source, rule and outcome is one step; an outcome's step advances with the
        share of indexed paths its batches have passed (they go through the path index in order)."""
        ctx = self.ctx
        steps = len(ctx.plan.sources) + len(ctx.rules) + len(ctx.outcomes)
        done: float = len(self.summary["sources"]) + sum(1 for r in ctx.rules if r.rule.name in self.summary["rules"])
        for tally in self.outcomes:
            if tally.finished:
                done += 1.0
            elif tally.last_path:
                if self._total is None:
                    self._total = stages.total_entries(ctx)
                done += stages.rank(ctx, tally.last_path, self._total)
        return round(100.0 * done / steps, 1) if steps else 100.0

    def report(self, stage: str) -> None:
        percent = self.percent()
        store_jobs.update_progress(self.ctx.engine, job_id=self.ctx.job_id, progress=percent, current_path=stage)
        hooks.report(self.ctx.job_id, {"stage": stage, "percent": percent, "outcomes_applied": self.applied()})


def run_stages(run: PlanRun, runner: Stages | None = None) -> dict[str, Any]:
    """Run every stage in order and finish the execution row; returns it. Rule by rule, each matched just before its
    outcomes run: a rule after a classifier rule sees what the classifier wrote."""
    ctx, plan = run.ctx, run.ctx.plan
    engine = ctx.engine
    call = runner or DirectStages()
    started = time.perf_counter()
    try:
        for i, source in enumerate(plan.sources):
            run.scanned(i, call.scan(ctx, i))
            run.report(f"scan {source.name}")
        run.counted()
        store_plans.update_execution(engine, execution_id=ctx.execution_id, entries_processed=run.processed)
        for i, spec in enumerate(ctx.rules):
            run.rule_matched(i, call.match(ctx, i))
            run.report(f"match {spec.rule.name}")
            for position, outcome in enumerate(ctx.outcomes):
                if outcome.rule != spec.rule.name:
                    continue
                for k, out in call.batches(ctx, position):
                    run.batch_done(position, out)
                    run.report(f"{outcome.outcome.type} {outcome.rule} [batch {k}]")
                store_plans.update_execution(engine, execution_id=ctx.execution_id, outcomes_applied=run.applied())
        run.outcome_summary()
        counters = run.counters()
        errors = sum(o.errors for o in run.outcomes)
        status = "success" if counters["entries_matched"] > 0 or (not plan.rules and run.processed > 0) else "partial"
        message = None
        if errors:  # some entries failed an outcome (a corrupt video, say); the rest were done
            status = "partial"
            message = (f"{errors} outcome error(s), {counters['outcomes_applied']} applied; see "
                       "summary.rules.*.outcomes[].error_samples")
        elif status == "partial":
            message = "nothing matched" if plan.rules else "the sources yielded no entries"
        run.summary["timings_ms"]["total"] = int((time.perf_counter() - started) * 1000)
        return store_plans.finish_execution(engine, execution_id=ctx.execution_id, status=status,
                                            error_message=message, summary=run.summary, **counters)
    except Cancelled:
        run.outcome_summary()
        return store_plans.finish_execution(engine, execution_id=ctx.execution_id, status="error",
                                            error_message=CANCELLED_MESSAGE, summary=run.summary,
                                            **run.counters(exact=False))
    except AssayError as exc:  # ours, in its own words with its code: "NO_SPACE: the disk holding ... is full"
        run.outcome_summary()
        return store_plans.finish_execution(engine, execution_id=ctx.execution_id, status="error",
                                            error_message=str(exc), summary=run.summary,
                                            **run.counters(exact=False))
    except Exception as exc:
        log.exception("plan %s execution %s failed", plan.name, ctx.execution_id)
        run.outcome_summary()
        store_plans.finish_execution(engine, execution_id=ctx.execution_id, status="error",
                                     error_message=f"{type(exc).__name__}: {exc}", summary=run.summary,
                                     **run.counters(exact=False))
        raise
    except BaseException:
        # the process is being stopped under the execution: a SIGTERM (Prefect's runner cancelling the run it started
        # in this process, on a Cancel in the UI or as the server stops), a Ctrl-C. Its row ends now, with what it
        # counted, while the process still can; the outcomes it applied are kept
        run.outcome_summary()
        store_plans.finish_execution(engine, execution_id=ctx.execution_id, status="error",
                                     error_message=STOPPED_MESSAGE, summary=run.summary, **run.counters(exact=False))
        raise


CANCELLED_MESSAGE = "cancelled on request; outcomes applied so far were kept"
STOPPED_MESSAGE = "cancelled: the process running it was stopped; outcomes applied so far were kept"
NOT_STARTED_MESSAGE = "cancelled before it started"


def run_plan_job(store: str, job_id: int, *, stages_runner: Stages | None = None,
                 flow_run_id: str | None = None) -> dict[str, Any]:
    """Run the execution that run ``job_id`` describes, to its end; returns the execution row. A run already
    finished (a retry from Prefect) runs again under the same ids: work keys skip what was done."""
    engine = get_engine(store)
    job = store_jobs.get_job(engine, job_id=job_id)
    execution_id = execution_of(engine, job_id)
    if job["status"] not in store_jobs.ACTIVE:  # a retry of a finished run
        store_jobs.reopen_job(engine, job_id=job_id)
        store_plans.update_execution(engine, execution_id=execution_id, status="running", error_message=None,
                                     completed_at=None)
    if flow_run_id:  # known before it waits its turn: a run killed meanwhile is found by its flow run (flow.py)
        store_jobs.set_flow_run(engine, job_id=job_id, flow_run_id=flow_run_id)
        store_plans.update_execution(engine, execution_id=execution_id, flow_run_id=flow_run_id)
    # executions of one plan never overlap, in this process or another (flows.plans.exclusive); one cancelled while
    # it waits for its turn gives up waiting
    with plan_exclusive(engine, store, job["root"], give_up=hooks.cancel_check(engine, job_id=job_id)) as turn:
        if not turn or not store_jobs.mark_running(engine, job_id=job_id, flow_run_id=flow_run_id):
            if store_jobs.get_job(engine, job_id=job_id)["status"] in store_jobs.ACTIVE:  # cancelled in Prefect
                store_jobs.finish_job(engine, job_id=job_id, status="cancelled", error_message=NOT_STARTED_MESSAGE)
            return store_plans.finish_execution(engine, execution_id=execution_id, status="error",
                                                error_message=NOT_STARTED_MESSAGE)
        ctx = stages.context(store, job_id)
        run = PlanRun(ctx)
        _percent_for_items(run)
        try:
            row = run_stages(run, stages_runner)
        except Exception as exc:
            store_jobs.finish_job(engine, job_id=job_id, status="failed", error_message=f"{type(exc).__name__}: {exc}")
            raise
        except BaseException:  # the process is being stopped (see run_stages)
            store_jobs.finish_job(engine, job_id=job_id, status="cancelled", error_message=STOPPED_MESSAGE)
            raise
        finally:
            stages.forget(store, job_id)
            _after_run(ctx)
    if row["error_message"] == CANCELLED_MESSAGE:
        status = "cancelled"
    else:
        status = "failed" if row["status"] == "error" else "completed"
    done = {"progress": 100.0} if status == "completed" else {}
    store_jobs.finish_job(engine, job_id=job_id, status=status, error_message=row["error_message"], **done)
    return row


def _percent_for_items(run: PlanRun) -> None:
    """A long outcome batch reports each item it finished (``{"stage", "item"}``); the caller's progress callback
    gets those as the execution's percent, at most four times a second."""
    user = hooks.on_progress(run.ctx.job_id)
    if user is None:
        return
    last = 0.0

    def forward(value: dict[str, Any]) -> None:
        nonlocal last
        if "percent" not in value:
            now = time.monotonic()
            if now - last < 0.25:
                return
            last = now
            value = {"stage": value["stage"], "percent": run.percent(), "outcomes_applied": run.applied()}
        user(value)

    hooks.register(run.ctx.job_id, on_progress=forward)


def _after_run(ctx: PlanContext) -> None:
    """Each outcome type the plan used gets its ``after_run`` call, however the execution ended."""
    used = {o.type for rule in ctx.plan.rules for o in iter_outcomes(rule.outcomes)}
    for name in sorted(used):
        executor = installed_executors().get(name)
        if executor is not None:
            try:
                executor.after_run(ctx.engine)
            except Exception:  # noqa: BLE001 (a sweep that fails must not fail the execution)
                log.warning("after-run step of outcome %s failed", name, exc_info=True)


def finish_failed(engine: Engine, job_id: int, message: str, *, status: str = "failed") -> None:
    """A run whose flow died (or was killed) before it finished its rows: both end, as ``status``."""
    store_jobs.finish_job(engine, job_id=job_id, status=status, error_message=message)
    execution_id = execution_of(engine, job_id)
    if store_plans.get_execution(engine, execution_id=execution_id)["status"] == "running":
        store_plans.finish_execution(engine, execution_id=execution_id, status="error", error_message=message)

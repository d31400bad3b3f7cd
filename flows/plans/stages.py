"""The work of a plan execution's stages — ``scan <source>``, ``match <rule>``, ``<outcome> <rule> [batch k]`` — as
plain functions of a :class:`PlanContext` and a few small values, each returning a small dict of what it did.

A context is built from the store alone (:func:`context`: the run's row holds the plan as it was when the execution
started, the roots, the options and the execution's clock), so a stage runs the same in the process that started
the execution or in any other. Built contexts are kept per process while their run lasts (building one compiles the
rules' conditions: cheap, but not free per batch). Everything streams: the candidates of all sources are one SQL
condition, a rule's condition is pushed down to SQL where its fields are stored, the rest is evaluated in Python
over batches read by path (keyset pagination), and outcomes act on a batch at a time, set-based where they can.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Engine

from dsl.model import Plan, Rule
from dsl.outcomes import OutcomeBase
from flows.core import hooks
from flows.index.flow import run_index_job
from flows.core.outcomes import BatchResult, Cancelled, RunContext, batch_size_for, executor_for, installed_executors
from flows.core import conditions as cond_sql
from flows.plans.checks import resolved_paths
from flows.plans.selection import candidates_clause, is_watched, source_clause, work_key
from flows.core.roots import Roots
from store import jobs as store_jobs
from store import plans as store_plans
from store import sets as store_sets
from store.engine import get_engine
from store.entries import T, existing_ids
from store.errors import NotFound

DEFAULT_BATCH = 2000
ID_BATCH_FACTOR = 10
SAMPLE = 5


@dataclass(frozen=True)
class RuleSpec:
    rule: Rule
    push: Any  # SQL clause of the pushed-down part
    residual: Any  # condition evaluated in Python, or None
    counted_by: int | None  # the outcome whose batches count the matches (saves a counting pass)


@dataclass(frozen=True)
class OutcomeSpec:
    rule: str
    index: int
    outcome: OutcomeBase
    push: Any
    residual: Any


@dataclass
class PlanContext:
    """Everything a stage needs, built from the run's row."""

    engine: Engine
    job_id: int
    execution_id: int
    plan: Plan
    roots: Roots | None
    restrict_ids: list[int] | None
    scan: bool
    batch_size: int
    id_batch_size: int
    now: float
    rules: list[RuleSpec] = field(default_factory=list)
    outcomes: list[OutcomeSpec] = field(default_factory=list)
    should_cancel: Callable[[], bool] = lambda: False
    evaluator: Any = None  # cond_sql.EvalStore: conditions evaluated in Python, per entry

    @classmethod
    def build(cls, engine: Engine, job_id: int) -> "PlanContext":
        job = store_jobs.get_job(engine, job_id=job_id)
        params = json.loads(job["params_json"] or "{}")
        plan = Plan.model_validate(params["plan"])
        if params.get("base_dir"):
            plan.with_base_dir(params["base_dir"])
        batch = int(params.get("batch_size") or DEFAULT_BATCH)
        ctx = cls(engine=engine, job_id=job_id, execution_id=int(params["execution_id"]), plan=plan,
                  roots=Roots.of(params["roots"]) if params.get("roots") else None,
                  restrict_ids=params.get("restrict_ids"), scan=bool(params.get("scan", True)), batch_size=batch,
                  id_batch_size=int(params.get("id_batch_size") or batch * ID_BATCH_FACTOR),
                  now=float(params.get("now") or time.time()))
        ctx.should_cancel = hooks.cancel_check(engine, job_id=job_id)
        sql = cond_sql.SqlStore(engine, now=ctx.now)
        for rule in plan.rules:
            push, residual = cond_sql.split(rule.when)
            counted_by = None
            for j, outcome in enumerate(rule.outcomes):
                o_push, o_res = cond_sql.split(outcome.when) if outcome.when is not None else (None, None)
                ctx.outcomes.append(OutcomeSpec(rule.name, j, outcome, and_(sql.clause(push), sql.clause(o_push)),
                                                cond_sql.both(residual, o_res)))
                if counted_by is None and outcome.when is None and residual is None and _set_based(outcome):
                    counted_by = len(ctx.outcomes) - 1
            ctx.rules.append(RuleSpec(rule, sql.clause(push), residual, counted_by))
        ctx.evaluator = cond_sql.EvalStore(engine, now=ctx.now)
        return ctx

    def evaluate(self, condition: Any, row: Any) -> bool:
        return bool(self.evaluator.evaluate(condition, row))

    def candidates(self, conn: Any) -> Any:
        return candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids)

    def check_cancel(self) -> None:
        if self.should_cancel():
            raise Cancelled("cancelled on request")


def _set_based(outcome: OutcomeBase) -> bool:
    executor = installed_executors().get(outcome.type)
    return bool(executor and executor.set_based and not executor.records_work)


_contexts: dict[tuple[str, int], PlanContext] = {}
_contexts_lock = threading.Lock()


def context(store: str, job_id: int) -> PlanContext:
    """The context of run ``job_id`` in store ``store`` (built once per process while the run lasts)."""
    key = (store, job_id)
    with _contexts_lock:
        found = _contexts.get(key)
    if found is None:
        found = PlanContext.build(get_engine(store), job_id)
        with _contexts_lock:
            found = _contexts.setdefault(key, found)
    return found


def forget(store: str, job_id: int) -> None:
    with _contexts_lock:
        _contexts.pop((store, job_id), None)


# --- the stages -----------------------------------------------------------------------------------------------------


def scan_source(ctx: PlanContext, index: int) -> dict[str, Any]:
    """Index a filesystem source's paths (incrementally), then fill its target set; returns the source's summary."""
    started = time.perf_counter()
    source = ctx.plan.sources[index]
    engine = ctx.engine
    info: dict[str, Any] = {"type": source.type}
    if ctx.scan and source.type.startswith("filesystem.") and ctx.restrict_ids is None:
        jobs = []
        for root in resolved_paths(source, ctx.roots, ctx.plan.base_dir):
            if not os.path.lexists(root):
                raise NotFound(f"source {source.name!r}: {root} does not exist", field="sources")
            job_id = store_jobs.create_job(engine, root=root, params={"plan": ctx.plan.name, "source": source.name})
            job = run_index_job(engine, job_id=job_id, root=root, follow_symlinks=source.config.follow_symlinks,
                                cancel_event=hooks.cancel_event(ctx.job_id))
            if job["status"] == "cancelled":
                raise Cancelled("cancelled on request")
            if job["status"] != "completed":
                raise RuntimeError(f"indexing {root} for source {source.name!r} failed: {job['error_message']}")
            jobs.append({"jobId": job["id"], "root": root, "files": job["files"], "removed": job["removed"]})
        info["index_jobs"] = jobs
    with engine.begin() as conn:
        clause = source_clause(conn, source, roots=ctx.roots, base_dir=ctx.plan.base_dir,
                               watched=is_watched(ctx.plan, source))
        if ctx.restrict_ids is not None:
            clause = and_(clause, T.c.id.in_(list(ctx.restrict_ids)))
        info["entries"] = conn.execute(select(func.count()).select_from(T).where(clause)).scalar_one()
        if source.target_set:
            target = store_sets.ensure_set(conn, name=source.target_set)
            info["added_to_target_set"] = store_sets.add_members_from(
                conn, set_id=target["id"], entry_ids=select(T.c.id).where(clause))
    info["duration_ms"] = int((time.perf_counter() - started) * 1000)
    return info


def count_candidates(ctx: PlanContext) -> int:
    with ctx.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T).where(ctx.candidates(conn))).scalar_one()


def match_rule(ctx: PlanContext, index: int) -> dict[str, Any]:
    """Count (and sample) the rule's matches among the candidates; a rule counted by its outcome's batches only
    samples here."""
    started = time.perf_counter()
    spec = ctx.rules[index]
    matched, samples = 0, []
    if spec.residual is None:
        with ctx.engine.connect() as conn:
            where = and_(ctx.candidates(conn), spec.push)
            if spec.counted_by is None:
                matched = conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()
            # by path: the path index yields them in order, so the scan stops after a few matches
            samples = list(conn.execute(select(T.c.path).where(where).order_by(T.c.path).limit(SAMPLE)).scalars())
    else:
        for rows in _batches(ctx, spec.push):
            for row in rows:
                if ctx.evaluate(spec.residual, row):
                    matched += 1
                    if len(samples) < SAMPLE:
                        samples.append(row["path"])
    return {"matched": matched, "samples": samples, "counted_by_outcome_batches": spec.counted_by is not None,
            "duration_ms": int((time.perf_counter() - started) * 1000)}


def outcome_batch(ctx: PlanContext, position: int, after: str, k: int) -> dict[str, Any]:
    """Apply outcome ``position`` (over all rules, in order) to the next batch of its matches whose path sorts after
    ``after`` (keyset pagination along the path index); returns what it did: ``last``, ``done``, ``ids`` (entries
    in the batch), ``applied``, ``unchanged``, ``skipped``, ``errors`` [(entry id, reason)]."""
    ctx.check_cancel()
    spec = ctx.outcomes[position]
    executor = executor_for(spec.outcome)
    if spec.residual is None and executor.set_based and not executor.records_work:
        with ctx.engine.begin() as conn:  # a few set-based statements: one short transaction
            where = and_(ctx.candidates(conn), spec.push, T.c.path > after)
            batch = conn.execute(select(T.c.id, T.c.path).where(where).order_by(T.c.path)
                                 .limit(ctx.id_batch_size)).all()
            ids = [row[0] for row in batch]
            result = executor.apply_ids(conn, spec.outcome, ids)
        return _result(result, last=batch[-1][1] if batch else after, done=len(ids) < ctx.id_batch_size,
                       ids=len(ids))
    with ctx.engine.connect() as conn:  # read the batch; the outcome works and writes with no transaction open
        where = and_(ctx.candidates(conn), spec.push, T.c.path > after)
        limit = batch_size_for(spec.outcome, ctx.batch_size)
        rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(limit)).mappings().all()
    done = len(rows) < limit
    last = rows[-1]["path"] if rows else after
    if spec.residual is not None:
        rows = [r for r in rows if ctx.evaluate(spec.residual, r)]
    result = _apply_rows(ctx, spec, executor, rows, k)
    return _result(result, last=last, done=done, ids=len(rows))


@dataclass
class Pieces:
    """How many entries the pieces of a batch spread over a work pool take (:func:`outcome_range`): ``least`` at
    first, then as many as the pace seen does in ``seconds`` (at least ``least``, at most twice the last size, so
    a piece whose work was done already and skipped does not make the next one huge), a multiple of ``step`` (the
    worker's cores: a piece of even work ends with none of them idle). Kept over the batches a worker does one
    after another, so each starts at the pace of the last."""

    least: int
    seconds: float
    step: int = 1
    size: int = 0

    def next(self, limit: int) -> int:
        """Entries for the next piece, ``limit`` at most (the outcome's batch size)."""
        return max(1, min(limit, self.size or self.least))

    def took(self, entries: int, seconds: float) -> None:
        """A piece of ``entries`` entries took ``seconds``."""
        size = self.size or self.least
        wanted = entries * self.seconds / seconds if seconds > 0 else 2 * size
        self.size = max(self.least, min(2 * size, self.step * round(wanted / self.step)))


def outcome_range(ctx: PlanContext, position: int, after: str, until: str | None, k: int, *,
                  stop: Callable[[], bool] = lambda: False, pieces: Pieces | None = None) -> dict[str, Any]:
    """Apply outcome ``position`` to every match whose path sorts in (``after``, ``until``] (``until`` None: to the
    end), read in pieces of the outcome's batch size, or fewer as ``pieces`` says (a rest shorter than its least
    piece joins the piece before): one batch of an execution spread over a work pool (:mod:`flows.plans.spread`).
    ``stop()``, asked before each piece, true ends it early with ``stopped`` set and ``last`` the path the pieces
    done reached (its worker is stopping, or takes a lost batch first, and lets this one go; the next attempt goes
    on after ``last``)."""
    spec = ctx.outcomes[position]
    executor = executor_for(spec.outcome)
    limit = batch_size_for(spec.outcome, ctx.batch_size)
    total, ids, last = BatchResult(), 0, after
    while True:
        ctx.check_cancel()
        if stop():
            return {**_result(total, last=last, done=False, ids=ids), "stopped": True}
        size = pieces.next(limit) if pieces is not None else limit
        ahead = size if pieces is None else min(limit, size + pieces.least - 1)  # a shorter rest joins this piece
        started = time.monotonic()
        with ctx.engine.connect() as conn:
            where = and_(ctx.candidates(conn), spec.push, T.c.path > last)
            if until is not None:
                where = and_(where, T.c.path <= until)
            rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(ahead)).mappings().all()
        if not rows:
            break
        ended = len(rows) < ahead
        rows = rows if ended else rows[:size]
        last = rows[-1]["path"]
        read = len(rows)
        if spec.residual is not None:
            rows = [r for r in rows if ctx.evaluate(spec.residual, r)]
        result = _apply_rows(ctx, spec, executor, rows, k)
        total.applied += result.applied
        total.unchanged += result.unchanged
        total.skipped += result.skipped
        total.errors.extend(result.errors)
        ids += len(rows)
        if pieces is not None:
            pieces.took(read, time.monotonic() - started)
        if ended:
            break
    return _result(total, last=until if until is not None else last, done=True, ids=ids)


def _result(result: BatchResult, *, last: str, done: bool, ids: int) -> dict[str, Any]:
    return {"last": last, "done": done, "ids": ids, "applied": result.applied, "unchanged": result.unchanged,
            "skipped": result.skipped, "errors": [list(e) for e in result.errors]}


def _apply_rows(ctx: PlanContext, spec: OutcomeSpec, executor: Any, rows: Sequence[Any], k: int) -> BatchResult:
    keys: dict[int, str] = {}
    skipped = 0
    if executor.records_work and rows:
        keys = {r["id"]: work_key(r, spec.rule, spec.outcome, by_path=executor.keyed_by_path) for r in rows}
        with ctx.engine.connect() as conn:
            known = store_plans.known_work_keys(conn, list(keys.values()))
        before = len(rows)
        rows = [r for r in rows if keys[r["id"]] not in known]
        skipped = before - len(rows)
    stage = f"{spec.outcome.type} {spec.rule} [batch {k}]"
    run_ctx = RunContext(evaluate=ctx.evaluate, execution_id=ctx.execution_id, rule=spec.rule,
                         should_cancel=ctx.should_cancel, roots=ctx.roots,
                         on_item=lambda path: hooks.report(ctx.job_id, {"stage": stage, "item": path}))
    result = executor.run_batch(ctx.engine, spec.outcome, rows, run_ctx)
    result.skipped += skipped
    if executor.records_work and rows:
        failed = dict(result.errors)
        with ctx.engine.begin() as conn:
            alive = existing_ids(conn, [r["id"] for r in rows])  # an outcome may remove entries (a trashed file)
            rows = [r for r in rows if r["id"] in alive]
            store_plans.record_outcomes(conn, (
                {"execution_id": ctx.execution_id, "entry_id": r["id"], "rule": spec.rule,
                 "outcome_type": spec.outcome.type, "work_key": keys[r["id"]],
                 "status": "error" if r["id"] in failed else "applied", "detail": failed.get(r["id"])}
                for r in rows))
    return result


def _batches(ctx: PlanContext, push: Any) -> Iterator[list[Any]]:
    after = ""
    while True:
        ctx.check_cancel()
        with ctx.engine.connect() as conn:
            where = and_(ctx.candidates(conn), push, T.c.path > after)
            rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(ctx.batch_size)).mappings().all()
        if not rows:
            return
        yield list(rows)
        after = rows[-1]["path"]
        if len(rows) < ctx.batch_size:
            return


def distinct_matched(ctx: PlanContext, matched: list[int]) -> int:
    """Entries matched by any rule, counted once when every condition ran in SQL (else the sum per rule)."""
    if not ctx.rules:
        return 0
    if len(ctx.rules) == 1:
        return matched[0]
    if any(s.residual is not None for s in ctx.rules):
        return sum(matched)
    with ctx.engine.connect() as conn:
        where = and_(ctx.candidates(conn), or_(*(s.push for s in ctx.rules)))
        return conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()


def rank(ctx: PlanContext, path: str, total: int) -> float:
    """The share of indexed paths that sort at or before ``path`` (counted on the path index alone)."""
    if not total:
        return 0.0
    with ctx.engine.connect() as conn:
        before = conn.execute(select(func.count()).select_from(T).where(T.c.path <= path)).scalar() or 0
    return min(before / total, 1.0)


def total_entries(ctx: PlanContext) -> int:
    with ctx.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T)).scalar() or 0

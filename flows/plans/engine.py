"""Running plans: sources select candidate entries, each rule's condition picks matches, outcomes act on them.

Plain functions and one class, :class:`PlanRun`, whose methods are the stages a Prefect flow calls as named tasks
(``flows.plans.flow``): ``scan <source>``, ``match <rule>``, ``<outcome> <rule> [batch k]``. Everything streams: the
candidates of all sources are one SQL condition over the entries table (a union without duplicates), a rule's
condition is pushed down to SQL where its fields are stored, the rest is evaluated in Python over batches read by id
(keyset pagination), and outcomes act on a batch at a time, set-based where they can.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from sqlalchemy import and_, false, func, not_, or_, select, true
from sqlalchemy.engine import Connection, Engine

from dsl.conditions import iter_leaves
from dsl.errors import PlanValidationError, Problem
from dsl.fields import field_spec, missing_producer
from dsl.model import PARTIAL_NAMES, Plan, Rule, Source
from dsl.outcomes import OutcomeBase, iter_outcomes
from flows.plans import conditions as cond_sql
from flows.outcomes import BatchResult, Cancelled, RunContext, batch_size_for, executor_for, installed_executors
from flows.roots import Roots
from store import jobs as store_jobs
from store import plans as store_plans
from store import sets as store_sets
from store.entries import T, path_depth, subtree_clause
from store.errors import AssayError, InvalidInput, NotFound
from store.filters import EntryFilter
from store.patterns import match_clause
from store.queries import Q

log = logging.getLogger(__name__)

DEFAULT_BATCH = 2000
ID_BATCH_FACTOR = 10
SAMPLE = 5


# --- validation beyond the language: what this installation can run ---------------------------------------------


def check_plan(plan: Plan, *, roots: Roots | None = None) -> list[Problem]:
    """Problems that make ``plan`` unrunnable here: outcome types without an executor, fields whose producer is
    not installed, source paths outside the allowed roots."""
    installed_executors()  # the installed capabilities register their executors and their fields' producers
    problems: list[Problem] = []
    for i, source in enumerate(plan.sources):
        if source.type.startswith("filesystem."):
            for j, path in enumerate(source.config.paths):
                where = f"sources[{i}].config.paths[{j}]"
                try:
                    absolute = absolute_path(path, plan.base_dir, field="path")
                    if roots is not None:
                        roots.resolve(absolute, field="path")
                except AssayError as exc:
                    problems.append(Problem(exc.message, path=where))
    for i, rule in enumerate(plan.rules):
        _check_condition(rule.when, f"rules[{i}].when", problems)
        for j, outcome in enumerate(rule.outcomes):
            for k, item in enumerate(iter_outcomes([outcome])):
                where = f"rules[{i}].outcomes[{j}]" + ("" if k == 0 else f" (chained step {k})")
                if item.type not in installed_executors():
                    problems.append(Problem(
                        f"outcome type {item.type!r} is not installed in this version of assay; installed: "
                        f"{', '.join(installed_executors())}", path=where))
                if item.when is not None:
                    _check_condition(item.when, where + ".when", problems)
    return problems


def _check_condition(cond, where: str, problems: list[Problem]) -> None:
    for leaf in iter_leaves(cond):
        reason = missing_producer(field_spec(leaf.field))
        if reason:
            problems.append(Problem(reason, path=where))


def validated(plan: Plan, *, roots: Roots | None) -> Plan:
    problems = check_plan(plan, roots=roots)
    if problems:
        raise PlanValidationError(problems=problems)
    return plan


def absolute_path(path: str, base_dir: str | None, *, field: str) -> str:
    """``path`` with ``~`` expanded; a relative path is relative to the plan file's folder (plans in git can name
    folders beside them), and refused for a plan that came from no file."""
    expanded = os.path.expanduser(path)
    if os.path.isabs(expanded):
        return expanded
    if base_dir is None:
        raise InvalidInput(f"{path!r} is relative; give an absolute path (or ~/...): relative paths are "
                           "only for plan files, where they are relative to the file's folder", field=field)
    return os.path.normpath(os.path.join(base_dir, expanded))


def resolved_paths(source: Source, roots: Roots | None, base_dir: str | None = None) -> list[str]:
    out = []
    for j, path in enumerate(source.config.paths):
        absolute = absolute_path(path, base_dir, field=f"source {source.name} path")
        out.append(roots.resolve(absolute, field=f"source {source.name} path") if roots else absolute)
    return out


# --- selecting entries --------------------------------------------------------------------------------------------


def source_clause(conn: Connection, source: Source, *, roots: Roots | None, base_dir: str | None = None,
                  watched: bool = False):
    """SQL condition over the entries table for the entries ``source`` yields; a watched source never yields
    partial-download names (``*.part``, ...), whether the watcher or its catch-up scan indexed them."""
    cfg = source.config
    if source.type.startswith("filesystem."):
        dialect = conn.dialect.name
        parts = []
        for root in resolved_paths(source, roots, base_dir):
            is_dir = os.path.isdir(root)
            if not is_dir:  # a single file
                part = T.c.path == root
            elif cfg.recursive:
                # the range alone when the folder itself is not wanted: one index range, in path order, which the
                # batches page through (an OR with path = root would make SQLite sort instead)
                part = subtree_clause(root, include_root=cfg.include_directories)
            else:
                part = T.c.parent == root
            if cfg.max_depth is not None:
                part = and_(part, T.c.depth <= path_depth(root) + cfg.max_depth)
            if not cfg.include_hidden:
                part = and_(part, ~func.substr(T.c.path, len(root) + 1).contains("/.", autoescape=True))
            parts.append(part)
        clause = or_(*parts)
        for pattern in (*cfg.exclude, *(PARTIAL_NAMES if watched else ())):
            clause = and_(clause, not_(or_(
                match_clause(T.c.name, pattern=pattern, mode="glob", case_sensitive=True, dialect=dialect),
                match_clause(T.c.path, pattern=pattern, mode="glob", case_sensitive=True, dialect=dialect))))
    elif source.type == "selection_set":
        found = store_sets.get_set(conn, name=cfg.set)
        if found is None:
            raise NotFound(f"source {source.name!r}: resource set {cfg.set!r} does not exist; resource-set-list "
                           "shows the sets", field="sources")
        ids = store_sets.descendant_ids(conn, set_id=found["id"])
        clause = T.c.id.in_(store_sets.entry_ids_in(ids))
    else:  # query
        row = conn.execute(select(Q.c.query_json).where(Q.c.name == cfg.query)).first()
        if row is None:
            raise NotFound(f"source {source.name!r}: saved query {cfg.query!r} does not exist; query-list shows "
                           "the saved queries", field="sources")
        clause = and_(true(), *EntryFilter.parse(json.loads(row[0]), where=f"query {cfg.query}").clauses())
    if not cfg.include_directories:
        clause = and_(clause, T.c.kind != "directory")
    return clause


def candidates_clause(conn: Connection, plan: Plan, *, roots: Roots | None, restrict_ids=None):
    clause = or_(*(source_clause(conn, s, roots=roots, base_dir=plan.base_dir, watched=is_watched(plan, s))
                   for s in plan.sources)) if plan.sources else false()
    if restrict_ids is not None:
        clause = and_(clause, T.c.id.in_(list(restrict_ids)))
    return clause


def is_watched(plan: Plan, source: Source) -> bool:
    """Whether a continuous plan (or a filesystem.watch source) keeps watching ``source``."""
    return source.type == "filesystem.watch" or (plan.mode == "continuous" and source.type == "filesystem.index")


def work_key(row, rule: str, outcome: OutcomeBase) -> str:
    params = json.dumps(outcome.params(), sort_keys=True)
    text = f"{row['id']}|{row['path']}|{row['size']}|{row['mtime']}|{rule}|{params}"
    return hashlib.sha256(text.encode()).hexdigest()


# --- one execution -------------------------------------------------------------------------------------------------


@dataclass
class RuleState:
    rule: Rule
    push: Any  # SQL clause of the pushed-down part
    residual: Any  # condition evaluated in Python, or None
    matched: int = 0
    samples: list[str] = field(default_factory=list)
    counted_by: int | None = None  # the outcome whose batches count the matches (saves a counting pass)


@dataclass
class OutcomeState:
    rule: str
    index: int
    outcome: OutcomeBase
    push: Any
    residual: Any
    applied: int = 0
    unchanged: int = 0
    skipped: int = 0  # work already done on an unchanged entry
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    batches: int = 0
    last_path: str = ""
    finished: bool = False


class PlanRun:
    """The state of one execution of ``plan``; each public method is one stage (one Prefect task run)."""

    def __init__(self, engine: Engine, plan: Plan, *, roots: Roots | None, execution_id: int,
                 batch_size: int = DEFAULT_BATCH, id_batch_size: int | None = None, restrict_ids=None,
                 scan: bool = True,
                 cancel_event: threading.Event | None = None,
                 on_progress: Callable[[dict], None] | None = None) -> None:
        self.engine = engine
        self.plan = plan
        self.roots = roots
        self.execution_id = execution_id
        self.batch_size = batch_size
        self.id_batch_size = id_batch_size or batch_size * ID_BATCH_FACTOR  # set-based outcomes handle ids, not rows
        self.restrict_ids = restrict_ids
        self.scan = scan
        self.cancel_event = cancel_event
        self.on_progress = on_progress
        self.now = time.time()
        self.summary: dict[str, Any] = {"sources": {}, "rules": {}, "timings_ms": {}}
        self.processed = 0
        self.rules: list[RuleState] = []
        self.outcomes: list[OutcomeState] = []
        self.rules_by_name: dict[str, RuleState] = {}
        self._sql = cond_sql.SqlStore(engine, now=self.now)
        self._eval = cond_sql.EvalStore(engine, now=self.now)
        for rule in plan.rules:
            push, residual = cond_sql.split(rule.when)
            state = RuleState(rule, self._sql.clause(push), residual)
            self.rules.append(state)
            self.rules_by_name[rule.name] = state
            for j, outcome in enumerate(rule.outcomes):
                o_push, o_res = cond_sql.split(outcome.when) if outcome.when is not None else (None, None)
                self.outcomes.append(OutcomeState(rule.name, j, outcome,
                                                  and_(self._sql.clause(push), self._sql.clause(o_push)),
                                                  cond_sql.both(residual, o_res)))
                if state.counted_by is None and outcome.when is None and residual is None \
                        and self._set_based(outcome):
                    state.counted_by = len(self.outcomes) - 1

    # -- stages --

    @staticmethod
    def _set_based(outcome: OutcomeBase) -> bool:
        executor = installed_executors().get(outcome.type)
        return bool(executor and executor.set_based and not executor.records_work)

    def _check_cancel(self) -> None:
        if self.cancel_event is not None and self.cancel_event.is_set():
            raise Cancelled("cancelled on request")

    def scan_source(self, index: int) -> dict[str, Any]:
        """Index a filesystem source's paths (incrementally), then fill its target set."""
        started = time.perf_counter()
        source = self.plan.sources[index]
        info: dict[str, Any] = {"type": source.type}
        if self.scan and source.type.startswith("filesystem.") and self.restrict_ids is None:
            from flows.index.flow import run_index_job

            jobs = []
            for root in resolved_paths(source, self.roots, self.plan.base_dir):
                if not os.path.lexists(root):
                    raise NotFound(f"source {source.name!r}: {root} does not exist", field="sources")
                job_id = store_jobs.create_job(self.engine, root=root, params={"plan": self.plan.name,
                                                                                "source": source.name})
                job = run_index_job(self.engine, job_id=job_id, root=root,
                                    follow_symlinks=source.config.follow_symlinks,
                                    cancel_event=self.cancel_event)
                if job["status"] == "cancelled":
                    raise Cancelled("cancelled on request")
                if job["status"] != "completed":
                    raise RuntimeError(f"indexing {root} for source {source.name!r} failed: {job['error_message']}")
                jobs.append({"jobId": job["id"], "root": root, "files": job["files"], "removed": job["removed"]})
            info["index_jobs"] = jobs
        with self.engine.begin() as conn:
            clause = source_clause(conn, source, roots=self.roots, base_dir=self.plan.base_dir,
                                   watched=is_watched(self.plan, source))
            if self.restrict_ids is not None:
                clause = and_(clause, T.c.id.in_(list(self.restrict_ids)))
            info["entries"] = conn.execute(select(func.count()).select_from(T).where(clause)).scalar_one()
            if source.target_set:
                target = store_sets.ensure_set(conn, name=source.target_set)
                info["added_to_target_set"] = store_sets.add_members_from(
                    conn, set_id=target["id"], entry_ids=select(T.c.id).where(clause))
        info["duration_ms"] = int((time.perf_counter() - started) * 1000)
        self.summary["sources"][source.name] = info
        self._progress(stage=f"scan {source.name}")
        return info

    def count_candidates(self) -> int:
        if len(self.plan.sources) == 1 and self.plan.sources[0].name in self.summary["sources"]:
            self.processed = self.summary["sources"][self.plan.sources[0].name]["entries"]
            return self.processed
        with self.engine.connect() as conn:
            cand = candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids)
            self.processed = conn.execute(select(func.count()).select_from(T).where(cand)).scalar_one()
        return self.processed

    def match_rule(self, index: int) -> dict[str, Any]:
        """Count (and sample) the rule's matches among the candidates."""
        started = time.perf_counter()
        state = self.rules[index]
        if state.residual is None:
            with self.engine.connect() as conn:
                where = and_(candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids),
                             state.push)
                if state.counted_by is None:  # else the outcome's batches count the matches as they go
                    state.matched = conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()
                # by path: the path index yields them in order, so the scan stops after a few matches
                state.samples = list(conn.execute(select(T.c.path).where(where).order_by(T.c.path).limit(SAMPLE))
                                     .scalars())
        else:
            state.matched = 0
            for rows in self._batches(state.push):
                for row in rows:
                    if self._eval.evaluate(state.residual, row):
                        state.matched += 1
                        if len(state.samples) < SAMPLE:
                            state.samples.append(row["path"])
        self.summary["rules"][state.rule.name] = {"matched": None if state.counted_by is not None else state.matched,
                                                  "samples": state.samples,
                                                  "outcomes": [], "duration_ms":
                                                  int((time.perf_counter() - started) * 1000)}
        self._progress(stage=f"match {state.rule.name}")
        return {"matched": state.matched, "counted_by_outcome_batches": state.counted_by is not None}

    def outcome_batch(self, position: int, after: str) -> dict[str, Any]:
        """Apply outcome ``position`` (over all rules, in order) to the next batch of its matches whose path sorts
        after ``after`` (keyset pagination along the path index: each batch reads only its own part of the table);
        returns ``{"last", "done", "applied"}``."""
        self._check_cancel()
        state = self.outcomes[position]
        executor = executor_for(state.outcome)
        state.batches += 1
        if state.residual is None and executor.set_based and not executor.records_work:
            with self.engine.begin() as conn:  # a few set-based statements: one short transaction
                where = and_(candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids),
                             state.push, T.c.path > after)
                batch = conn.execute(select(T.c.id, T.c.path).where(where).order_by(T.c.path)
                                     .limit(self.id_batch_size)).all()
                ids = [row[0] for row in batch]
                result = executor.apply_ids(conn, state.outcome, ids)
            rule = self.rules_by_name[state.rule]
            if rule.counted_by == position:
                rule.matched += len(ids)
            state.last_path = batch[-1][1] if batch else state.last_path
            state.finished = len(ids) < self.id_batch_size
            self._account(state, result)
            return {"last": state.last_path, "done": state.finished, "applied": result.applied}
        with self.engine.connect() as conn:  # read the batch; the outcome works and writes with no transaction open
            where = and_(candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids),
                         state.push, T.c.path > after)
            limit = batch_size_for(state.outcome, self.batch_size)
            rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(limit)).mappings().all()
        done = len(rows) < limit
        last = rows[-1]["path"] if rows else state.last_path
        if state.residual is not None:
            rows = [r for r in rows if self._eval.evaluate(state.residual, r)]
        result = self._apply_rows(state, executor, rows)
        state.last_path = last
        state.finished = done
        self._account(state, result)
        return {"last": last, "done": done, "applied": result.applied}

    def _apply_rows(self, state: OutcomeState, executor, rows) -> BatchResult:
        keys: dict[int, str] = {}
        if executor.records_work and rows:
            keys = {r["id"]: work_key(r, state.rule, state.outcome) for r in rows}
            with self.engine.connect() as conn:
                done = store_plans.known_work_keys(conn, list(keys.values()))
            before = len(rows)
            rows = [r for r in rows if keys[r["id"]] not in done]
            state.skipped += before - len(rows)
        ctx = RunContext(evaluate=self._eval.evaluate, execution_id=self.execution_id, rule=state.rule,
                         should_cancel=self._cancel_requested,
                         on_item=lambda path: self._progress(stage=f"{state.outcome.type} {state.rule} "
                                                                   f"[batch {state.batches}]", throttle=True))
        result = executor.run_batch(self.engine, state.outcome, rows, ctx)
        state.skipped += result.skipped
        if executor.records_work and rows:
            failed = dict(result.errors)
            with self.engine.begin() as conn:
                store_plans.record_outcomes(conn, (
                    {"execution_id": self.execution_id, "entry_id": r["id"], "rule": state.rule,
                     "outcome_type": state.outcome.type, "work_key": keys[r["id"]],
                     "status": "error" if r["id"] in failed else "applied", "detail": failed.get(r["id"])}
                    for r in rows))
        return result

    def _cancel_requested(self) -> bool:
        return self.cancel_event is not None and self.cancel_event.is_set()

    def _account(self, state: OutcomeState, result: BatchResult) -> None:
        state.applied += result.applied
        state.unchanged += result.unchanged
        state.errors += len(result.errors)
        for entry_id, reason in result.errors[: max(0, 5 - len(state.error_samples))]:
            state.error_samples.append(f"entry {entry_id}: {reason}")
        self._progress(stage=f"{state.outcome.type} {state.rule} [batch {state.batches}]")

    def _batches(self, push) -> Iterator[list]:
        after = ""
        while True:
            self._check_cancel()
            with self.engine.connect() as conn:
                where = and_(candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids),
                             push, T.c.path > after)
                rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(self.batch_size)).mappings().all()
            if not rows:
                return
            yield rows
            after = rows[-1]["path"]
            if len(rows) < self.batch_size:
                return

    # -- results --

    def distinct_matched(self) -> int:
        if not self.rules:
            return 0
        if len(self.rules) == 1:
            return self.rules[0].matched
        if any(s.residual is not None for s in self.rules):
            return sum(s.matched for s in self.rules)
        with self.engine.connect() as conn:
            where = and_(candidates_clause(conn, self.plan, roots=self.roots, restrict_ids=self.restrict_ids),
                         or_(*(s.push for s in self.rules)))
            return conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()

    def counters(self) -> dict[str, int]:
        """Reference 000's counters; an entry matched by two rules counts once (when every condition ran in SQL)."""
        return {"entries_processed": self.processed, "entries_matched": self.distinct_matched(),
                "outcomes_applied": sum(o.applied for o in self.outcomes)}

    def outcome_summary(self) -> None:
        for state in self.rules:
            self.summary["rules"].setdefault(state.rule.name, {"outcomes": []})["matched"] = state.matched
        for o in self.outcomes:
            self.summary["rules"].setdefault(o.rule, {"outcomes": []})["outcomes"].append({
                "type": o.outcome.type, "params": o.outcome.params(), "applied": o.applied,
                "unchanged": o.unchanged, "skipped_unchanged_entries": o.skipped, "errors": o.errors,
                "error_samples": o.error_samples, "batches": o.batches})

    def percent(self) -> float:
        """How far the execution is: each source, rule and outcome is one step; an outcome's step advances with the
        position of its last batch in the id space (keyset batches go through the table in id order)."""
        steps = len(self.plan.sources) + len(self.rules) + len(self.outcomes)
        done = len(self.summary["sources"]) + sum(1 for r in self.rules if r.rule.name in self.summary["rules"])
        for o in self.outcomes:
            done += 1.0 if o.finished else (self._rank(o.last_path) if o.last_path else 0.0)
        return round(100.0 * done / steps, 1) if steps else 100.0

    _total: int | None = None

    def _rank(self, path: str) -> float:
        """The share of indexed paths that sort at or before ``path`` (counted on the path index alone)."""
        with self.engine.connect() as conn:
            if self._total is None:
                self._total = conn.execute(select(func.count()).select_from(T)).scalar() or 0
            before = conn.execute(select(func.count()).select_from(T).where(T.c.path <= path)).scalar() or 0
        return min(before / self._total, 1.0) if self._total else 0.0

    _last_progress = 0.0

    def _progress(self, *, stage: str, throttle: bool = False) -> None:
        if throttle:  # per-item calls from long outcome batches: at most four a second
            now = time.monotonic()
            if now - self._last_progress < 0.25:
                return
            self._last_progress = now
        if self.on_progress is not None:
            try:
                self.on_progress({"stage": stage, "percent": self.percent(),
                                  "outcomes_applied": sum(o.applied for o in self.outcomes)})
            except Exception:  # a progress consumer must never break a run
                log.debug("progress hook failed", exc_info=True)


def run_stages(run: PlanRun, *, task: Callable[[str, Callable, tuple], Any] | None = None) -> dict[str, Any]:
    """Run every stage of ``run`` in order; ``task(name, fn, args)`` wraps each stage (a Prefect task) or, when
    None, calls it directly. Returns the finished execution row. Afterwards each outcome type the plan used gets its
    ``after_run`` call (however the execution ended)."""
    try:
        return _run_stages(run, task=task)
    finally:
        used = {o.type for rule in run.plan.rules for o in iter_outcomes(rule.outcomes)}
        for name in sorted(used):
            executor = installed_executors().get(name)
            if executor is not None:
                try:
                    executor.after_run(run.engine)
                except Exception:
                    log.warning("after-run step of outcome %s failed", name, exc_info=True)


def _run_stages(run: PlanRun, *, task: Callable[[str, Callable, tuple], Any] | None = None) -> dict[str, Any]:
    call = task or (lambda name, fn, args: fn(*args))
    engine, plan = run.engine, run.plan
    started = time.perf_counter()
    try:
        for i, source in enumerate(plan.sources):
            call(f"scan {source.name}", run.scan_source, (i,))
        run.count_candidates()
        store_plans.update_execution(engine, execution_id=run.execution_id, entries_processed=run.processed)
        # rule by rule, each matched just before its outcomes run: a rule after a classifier rule sees what the
        # classifier wrote (rule 2 "width > 3000" after rule 1 extracted the metadata)
        for i, rule_state in enumerate(run.rules):
            call(f"match {rule_state.rule.name}", run.match_rule, (i,))
            for position, state in enumerate(run.outcomes):
                if state.rule != rule_state.rule.name:
                    continue
                after, k = "", 1
                while True:
                    out = call(f"{state.outcome.type} {state.rule} [batch {k}]", run.outcome_batch,
                               (position, after))
                    if out["done"]:
                        break
                    after, k = out["last"], k + 1
                store_plans.update_execution(engine, execution_id=run.execution_id,
                                             outcomes_applied=sum(o.applied for o in run.outcomes))
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
        return store_plans.finish_execution(engine, execution_id=run.execution_id, status=status,
                                            error_message=message, summary=run.summary, **counters)
    except Cancelled:
        run.outcome_summary()
        return store_plans.finish_execution(engine, execution_id=run.execution_id, status="error",
                                            error_message="cancelled on request; outcomes applied so far were kept",
                                            summary=run.summary, **_safe_counters(run))
    except AssayError as exc:
        return store_plans.finish_execution(engine, execution_id=run.execution_id, status="error",
                                            error_message=exc.message, summary=run.summary, **_safe_counters(run))
    except Exception as exc:
        log.exception("plan %s execution %s failed", plan.name, run.execution_id)
        store_plans.finish_execution(engine, execution_id=run.execution_id, status="error",
                                     error_message=f"{type(exc).__name__}: {exc}", summary=run.summary,
                                     **_safe_counters(run))
        raise


def _safe_counters(run: PlanRun) -> dict[str, int]:
    return {"entries_processed": run.processed, "entries_matched": sum(s.matched for s in run.rules),
            "outcomes_applied": sum(o.applied for o in run.outcomes)}

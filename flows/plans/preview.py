"""What a plan would do, changing nothing: ``preview_plan`` (per rule: matches, samples, and what each outcome
would change) and ``explain_path`` (for one entry: which sources yield it and, node by node, why each rule's
condition passes or fails)."""

from __future__ import annotations

import os
import time
from typing import Any

from sqlalchemy import and_, exists, func, select
from sqlalchemy.engine import Connection, Engine

from dsl.conditions import iter_leaves
from dsl.fields import field_spec
from dsl.model import Plan
from dsl.outcomes import ChainedOutcome, OutcomeBase, SelectionSetOutcome, iter_outcomes
from flows.core import conditions as cond_sql
from flows.core.outcomes import OutcomeExecutor, executor_for
from flows.plans.selection import candidates_clause, is_watched, source_clause, work_key
from flows.core.roots import Roots
from store import plans as store_plans
from store import sets as store_sets
from store.entries import T, entry_public, require_entry
from store.sets import M

NOTE = ("A preview reads the index as it is now: sources are not re-scanned (plan-execute scans filesystem "
        "sources first) and nothing is changed.")


def _count(conn: Connection, where) -> int:
    return conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()


def _describe(conn: Connection, outcome: OutcomeBase, where, evaluate_rows) -> dict[str, Any]:
    """What ``outcome`` would do to the entries selected by ``where`` (SQL) filtered by ``evaluate_rows``."""
    info: dict[str, Any] = {"type": outcome.type, "params": outcome.params()}
    if isinstance(outcome, SelectionSetOutcome):
        target = store_sets.get_set(conn, name=outcome.selectionSetName)
        if target is None:
            member = None
            info["set_exists"] = False
        else:
            member = exists().where(M.c.set_id == target["id"], M.c.entry_id == T.c.id)
            info["set_exists"] = True
        if evaluate_rows is None:
            if outcome.operation == "add":
                info["would_add"] = _count(conn, where if member is None else and_(where, ~member))
            else:
                info["would_remove"] = 0 if member is None else _count(conn, and_(where, member))
        else:
            info["would_apply_to"] = evaluate_rows(where)
        verb = "add to" if outcome.operation == "add" else "remove from"
        count = info.get("would_add", info.get("would_remove", info.get("would_apply_to")))
        info["summary"] = (f"{verb} set {outcome.selectionSetName}: {count} entr{'y' if count == 1 else 'ies'}"
                           + ("" if info["set_exists"] or outcome.operation != "add" else " (the set would be "
                                                                                           "created)"))
    elif isinstance(outcome, ChainedOutcome):
        info["steps"] = [_describe(conn, step, where, evaluate_rows) for step in outcome.outcomes]
        info["summary"] = "in order: " + "; ".join(s["summary"] for s in info["steps"])
    else:
        n = _count(conn, where) if evaluate_rows is None else evaluate_rows(where)
        info["would_apply_to"] = n
        info["summary"] = f"{outcome.type} on {n} entries (entries already done with these parameters are skipped)"
    return info


FILES_SHOWN = 200  # files a preview lists per outcome; the counts cover every match


def _per_file(conn: Connection, engine: Engine, executor: OutcomeExecutor, outcome: OutcomeBase, where, cond,
              ev: cond_sql.EvalStore, *, roots: Roots, rule: str, claimed: set[str]) -> dict[str, Any]:
    """What a file-by-file outcome (move, copy, rename, trash) would do: every match planned as the run plans it
    (files this rule already did with the same parameters are skipped, as the run skips them), counts per action,
    and the first FILES_SHOWN files with from, to, conflict and resolution."""
    info: dict[str, Any] = {"type": outcome.type, "params": outcome.params(), "files": [], "counts": {}}
    counts: dict[str, int] = info["counts"]
    after = ""
    while True:
        rows = [r for r in conn.execute(select(T).where(and_(where, T.c.path > after)).order_by(T.c.path)
                                        .limit(500)).mappings().all()]
        if not rows:
            break
        after = rows[-1]["path"]
        if cond is not None:
            rows = [r for r in rows if ev.evaluate(cond, r)]
        if executor.records_work and rows:
            keys = {r["id"]: work_key(r, rule, outcome, by_path=executor.keyed_by_path) for r in rows}
            done = store_plans.known_work_keys(conn, list(keys.values()))
            counts["done_before"] = counts.get("done_before", 0) + sum(1 for k in keys.values() if k in done)
            rows = [r for r in rows if keys[r["id"]] not in done]
        for item in executor.preview_rows(engine, outcome, rows, roots, claimed) or []:
            counts[item["action"]] = counts.get(item["action"], 0) + 1
            if item.get("conflict"):
                counts["conflicts"] = counts.get("conflicts", 0) + 1
            if len(info["files"]) < FILES_SHOWN:
                info["files"].append(item)
    info["summary"] = f"{outcome.type}: " + (", ".join(f"{n} {what}" for what, n in counts.items()) or "no files")
    return info


# --- conditions on fields an outcome of the same plan fills (width after a classifier rule) ----------------------


def _fields_of(cond) -> list[str]:
    """The fields ``cond`` tests, in order of appearance, once each."""
    return list(dict.fromkeys(leaf.field for leaf in iter_leaves(cond))) if cond is not None else []


def _filler(fields: list[str], outcomes: list[tuple[str, OutcomeBase]]) -> tuple[list[str], str, str] | None:
    """(the fields filled, the rule, the outcome type) of the first of ``outcomes`` ((rule name, outcome), in run
    order, chained steps included) that fills any of ``fields``; None when none does."""
    for rule_name, outcome in outcomes:
        for step in iter_outcomes([outcome]):
            filled = [f for f in fields if cond_sql.fills(step, field_spec(f))]
            if filled:
                return filled, rule_name, step.type
    return None


def _names(fields: list[str]) -> str:
    return ", ".join(fields)


def dependency_notes(plan: Plan) -> list[tuple[list[str], dict[int, str]]]:
    """For each rule: (notes on its condition, {outcome index: note on that outcome's condition}) where a condition
    tests fields that an outcome of the plan fills as it runs (``width`` after a ``classifier`` outcome). A preview
    changes nothing, so such a condition only sees entries processed before; plan-execute runs rules in order, each
    matched just before its outcomes, so a later rule (or a later outcome of the same rule) sees what an earlier one
    wrote, while a rule's own condition is tested before its own outcomes run."""
    out: list[tuple[list[str], dict[int, str]]] = []
    earlier: list[tuple[str, OutcomeBase]] = []
    for rule in plan.rules:
        own = [(rule.name, o) for o in rule.outcomes]
        notes: list[str] = []
        fields = _fields_of(rule.when)
        found = _filler(fields, earlier)
        if found:
            filled, by_rule, by_type = found
            notes.append(f"uses {_names(filled)}, filled by the {by_type} outcome of rule {by_rule!r}; entries it "
                         f"has not processed yet are counted as not matching here (plan-execute runs rule "
                         f"{by_rule!r} first, so more may match then)")
        found = _filler([f for f in fields if not found or f not in found[0]], own)
        if found:
            filled, _, by_type = found
            notes.append(f"its condition uses {_names(filled)}, which its own {by_type} outcome fills: the condition "
                         "is tested before that outcome runs, so only entries processed before can match (test "
                         "the result in a later rule to select on it in the same run)")
        outcome_notes: dict[int, str] = {}
        for j, outcome in enumerate(rule.outcomes):
            found = _filler(_fields_of(outcome.when), earlier + own[:j])
            if found:
                filled, by_rule, by_type = found
                by = (f"an earlier {by_type} outcome of this rule" if by_rule == rule.name
                      else f"the {by_type} outcome of rule {by_rule!r}")
                outcome_notes[j] = (f"its condition uses {_names(filled)}, filled by {by}; entries not processed yet "
                                    "are counted as not matching here (plan-execute runs that outcome first)")
        out.append((notes, outcome_notes))
        earlier += own
    return out


def preview_plan(engine: Engine, plan: Plan, *, roots: Roots, samples: int = 5) -> dict[str, Any]:
    now = time.time()
    sql = cond_sql.SqlStore(engine, now=now)
    ev = cond_sql.EvalStore(engine, now=now)
    out: dict[str, Any] = {"plan": plan.name, "note": NOTE, "sources": [], "rules": []}
    with engine.connect() as conn:
        for source in plan.sources:
            try:
                clause = source_clause(conn, source, roots=roots, base_dir=plan.base_dir,
                                       watched=is_watched(plan, source))
                out["sources"].append({"name": source.name, "type": source.type, "entries": _count(conn, clause),
                                       "target_set": source.target_set})
            except Exception as exc:  # a missing set or query: say so, keep previewing
                out["sources"].append({"name": source.name, "type": source.type, "error": str(exc)})
        try:
            cand = candidates_clause(conn, plan, roots=roots)
        except Exception as exc:
            out["error"] = str(exc)
            return out
        out["candidates"] = _count(conn, cand)
        claimed: set[str] = set()  # the places earlier file outcomes of this preview take
        for rule, (rule_notes, outcome_notes) in zip(plan.rules, dependency_notes(plan)):
            push, residual = cond_sql.split(rule.when)
            where = and_(cand, sql.clause(push))

            def python_count(w, residual=residual, extra=None) -> int:
                cond = cond_sql.both(residual, extra)
                n = 0
                for row in conn.execute(select(T).where(w).order_by(T.c.id)).mappings():
                    n += ev.evaluate(cond, row)
                return n

            if residual is None:
                matched = _count(conn, where)
                sample_rows = conn.execute(select(T).where(where).order_by(T.c.path).limit(samples)).mappings().all()
            else:
                matched, sample_rows = 0, []
                for row in conn.execute(select(T).where(where).order_by(T.c.path)).mappings():
                    if ev.evaluate(residual, row):
                        matched += 1
                        if len(sample_rows) < samples:
                            sample_rows.append(row)
            outcomes = []
            for j, outcome in enumerate(rule.outcomes):
                o_push, o_res = cond_sql.split(outcome.when) if outcome.when is not None else (None, None)
                o_where = and_(where, sql.clause(o_push))
                needs_python = residual is not None or o_res is not None
                executor = executor_for(outcome)
                if type(executor).preview_rows is not OutcomeExecutor.preview_rows:  # file by file (a move)
                    info = _per_file(conn, engine, executor, outcome, o_where, cond_sql.both(residual, o_res),
                                     ev, roots=roots, rule=rule.name, claimed=claimed)
                else:
                    info = _describe(conn, outcome, o_where,
                                     (lambda w, o_res=o_res: python_count(w, extra=o_res)) if needs_python else None)
                if j in outcome_notes:
                    info["note"] = outcome_notes[j]
                outcomes.append(info)
            item = {"name": rule.name, "matched": matched, "samples": [entry_public(r) for r in sample_rows],
                    "outcomes": outcomes}
            if rule_notes:
                item["notes"] = rule_notes
            out["rules"].append(item)
    return out


def _template_of(outcome: OutcomeBase) -> str | None:
    """The template a file outcome places files by (move and copy: ``to``; rename: ``name``)."""
    value = getattr(outcome, "to", None) or getattr(outcome, "name", None)
    return value if isinstance(value, str) else None


def explain_path(engine: Engine, plan: Plan, *, roots: Roots, path: str) -> dict[str, Any]:
    resolved = roots.resolve(os.path.expanduser(path), field="path", follow_last=False)
    row = require_entry(engine, path=resolved)
    now = time.time()
    ev = cond_sql.EvalStore(engine, now=now)
    result: dict[str, Any] = {"plan": plan.name, "path": resolved, "entry": entry_public(row), "sources": [],
                              "rules": []}
    with engine.connect() as conn:
        for source in plan.sources:
            try:
                clause = source_clause(conn, source, roots=roots, base_dir=plan.base_dir,
                                       watched=is_watched(plan, source))
                yielded = _count(conn, and_(clause, T.c.id == row["id"])) > 0
                result["sources"].append({"name": source.name, "type": source.type, "yields_entry": yielded})
            except Exception as exc:
                result["sources"].append({"name": source.name, "type": source.type, "error": str(exc)})
    result["is_candidate"] = any(s.get("yields_entry") for s in result["sources"])
    for rule, (rule_notes, outcome_notes) in zip(plan.rules, dependency_notes(plan)):
        tree = ev.explain(rule.when, row)
        outcomes: list[dict[str, Any]] = []
        for outcome in rule.outcomes:
            item: dict[str, Any] = {"type": outcome.type, "params": outcome.params()}
            if outcome.when is not None:
                item["when"] = ev.explain(outcome.when, row)
                item["passed"] = item["when"]["passed"]
            else:
                item["passed"] = True
            item["would_apply"] = bool(result["is_candidate"] and tree["passed"] and item["passed"])
            executor = executor_for(outcome)
            if item["would_apply"] and type(executor).preview_rows is not OutcomeExecutor.preview_rows:
                [placed] = executor.preview_rows(engine, outcome, [row], roots, set()) or [{}]
                item["file"] = {**placed, "rule": rule.name, "template": _template_of(outcome)}
            if len(outcomes) in outcome_notes:
                item["note"] = outcome_notes[len(outcomes)]
            outcomes.append(item)
        explained = {"name": rule.name, "matched": bool(result["is_candidate"] and tree["passed"]),
                     "condition_passed": tree["passed"], "condition": tree, "outcomes": outcomes}
        if rule_notes:  # the values seen are those stored now; an earlier outcome of the plan may change them
            explained["notes"] = rule_notes
        result["rules"].append(explained)
    if not result["is_candidate"]:
        result["note"] = ("no source of the plan yields this entry, so no rule acts on it (kind directory entries are "
                          "offered only with config.include_directories; hidden ones with include_hidden)")
    return result

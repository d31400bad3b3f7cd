"""What a plan would do, changing nothing: ``preview_plan`` (per rule: matches, samples, and what each outcome
would change) and ``explain_path`` (for one entry: which sources yield it and, node by node, why each rule's
condition passes or fails)."""

from __future__ import annotations

import os
import time
from typing import Any

from sqlalchemy import and_, exists, func, select
from sqlalchemy.engine import Connection, Engine

from dsl.model import Plan
from dsl.outcomes import ChainedOutcome, OutcomeBase, SelectionSetOutcome
from flows.plans import conditions as cond_sql
from flows.plans.engine import candidates_clause, is_watched, source_clause
from flows.roots import Roots
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
        for rule in plan.rules:
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
            for outcome in rule.outcomes:
                o_push, o_res = cond_sql.split(outcome.when) if outcome.when is not None else (None, None)
                o_where = and_(where, sql.clause(o_push))
                needs_python = residual is not None or o_res is not None
                outcomes.append(_describe(conn, outcome, o_where,
                                          (lambda w, o_res=o_res: python_count(w, extra=o_res)) if needs_python
                                          else None))
            out["rules"].append({"name": rule.name, "matched": matched,
                                 "samples": [entry_public(r) for r in sample_rows], "outcomes": outcomes})
    return out


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
    for rule in plan.rules:
        tree = ev.explain(rule.when, row)
        outcomes = []
        for outcome in rule.outcomes:
            item: dict[str, Any] = {"type": outcome.type, "params": outcome.params()}
            if outcome.when is not None:
                item["when"] = ev.explain(outcome.when, row)
                item["passed"] = item["when"]["passed"]
            else:
                item["passed"] = True
            item["would_apply"] = bool(result["is_candidate"] and tree["passed"] and item["passed"])
            outcomes.append(item)
        result["rules"].append({"name": rule.name, "matched": bool(result["is_candidate"] and tree["passed"]),
                                "condition_passed": tree["passed"], "condition": tree, "outcomes": outcomes})
    if not result["is_candidate"]:
        result["note"] = ("no source of the plan yields this entry, so no rule acts on it (kind directory entries are "
                          "offered only with config.include_directories; hidden ones with include_hidden)")
    return result

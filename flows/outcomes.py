"""Outcome executors: what a rule does to the entries it matched, one small class per outcome type, registered by
name (a plan naming a type with no executor is refused at validation: ``flows.plans.check_plan``).

An executor may apply an outcome set-based (``apply_sql``: one INSERT ... SELECT over a batch of matches, for outcomes
that are idempotent by nature, such as set membership) and must be able to apply it to a list of entry rows
(``apply_rows``: for matches filtered in Python, chained outcomes and watch events). Outcomes with expensive work
(thumbnails, embeddings) set ``records_work`` so each (entry state, outcome parameters) is done once: see
``flows.plans``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from sqlalchemy.engine import Connection

from dsl.outcomes import ChainedOutcome, OutcomeBase, SelectionSetOutcome
from store import sets as store_sets

log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    """What one outcome did to one batch."""

    applied: int = 0  # entries the outcome changed or produced something for
    unchanged: int = 0  # entries it had nothing to do for (already members, work already done)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (entry id, reason)
    failed_ids: set[int] = field(default_factory=set)


class OutcomeExecutor:
    type: ClassVar[str]
    records_work: ClassVar[bool] = False
    set_based: ClassVar[bool] = False  # applies to a list of entry ids in a few statements (``apply_ids``)

    def apply_ids(self, conn: Connection, outcome: OutcomeBase, ids: Sequence[int]) -> BatchResult:
        """Apply to the entries ``ids`` set-based (only for ``set_based`` executors)."""
        raise NotImplementedError

    def apply_rows(self, conn: Connection, outcome: OutcomeBase, rows: Sequence[Any], ctx: "RunContext") -> BatchResult:
        raise NotImplementedError


@dataclass
class RunContext:
    """What executors may need beyond the connection: the evaluator of per-outcome conditions."""

    evaluate: Callable[[Any, Any], bool]  # (condition, entry row) -> bool


EXECUTORS: dict[str, OutcomeExecutor] = {}


def register_executor(executor: OutcomeExecutor) -> OutcomeExecutor:
    if executor.type in EXECUTORS:
        raise ValueError(f"an executor for outcome type {executor.type!r} is already registered")
    EXECUTORS[executor.type] = executor
    return executor


def executor_for(outcome: OutcomeBase) -> OutcomeExecutor:
    try:
        return EXECUTORS[outcome.type]
    except KeyError:
        raise LookupError(f"outcome type {outcome.type!r} is not installed; installed: {', '.join(EXECUTORS)}") \
            from None


class SelectionSetExecutor(OutcomeExecutor):
    """Add matches to a set (created if missing) or remove them; idempotent, so no work records are needed."""

    type = "selection_set"
    set_based = True

    def apply_ids(self, conn: Connection, outcome: SelectionSetOutcome, ids: Sequence[int]) -> BatchResult:
        if not ids:
            return BatchResult()
        if outcome.operation == "add":
            target = store_sets.ensure_set(conn, name=outcome.selectionSetName)
            added = store_sets.add_member_ids(conn, set_id=target["id"], entry_ids=ids)
            return BatchResult(applied=added, unchanged=len(ids) - added)
        target = store_sets.get_set(conn, name=outcome.selectionSetName)
        if target is None:
            return BatchResult(unchanged=len(ids))
        removed = store_sets.remove_member_ids(conn, set_id=target["id"], entry_ids=ids)
        return BatchResult(applied=removed, unchanged=len(ids) - removed)

    def apply_rows(self, conn: Connection, outcome: SelectionSetOutcome, rows, ctx) -> BatchResult:
        return self.apply_ids(conn, outcome, [r["id"] for r in rows])


class ChainedExecutor(OutcomeExecutor):
    """Apply several outcomes in order; with stopOnError an entry that failed one skips the rest."""

    type = "chained"

    def apply_rows(self, conn: Connection, outcome: ChainedOutcome, rows, ctx) -> BatchResult:
        total = BatchResult()
        remaining = list(rows)
        for child in outcome.outcomes:
            chosen = [r for r in remaining if child.when is None or ctx.evaluate(child.when, r)]
            executor = executor_for(child)
            try:
                with conn.begin_nested():
                    result = executor.apply_rows(conn, child, chosen, ctx)
            except Exception as exc:  # the whole batch failed this step
                log.warning("chained outcome %s failed: %s", child.type, exc)
                result = BatchResult(errors=[(r["id"], f"{child.type}: {exc}") for r in chosen],
                                     failed_ids={r["id"] for r in chosen})
            total.applied += result.applied
            total.errors.extend(result.errors)
            total.failed_ids |= result.failed_ids
            if outcome.stopOnError and result.failed_ids:
                remaining = [r for r in remaining if r["id"] not in result.failed_ids]
        return total


register_executor(SelectionSetExecutor())
register_executor(ChainedExecutor())

"""The outcomes of the plans capability: ``selection_set`` (add matches to a set, or remove them) and ``chained``
(several outcomes in order), executors of the outcome registry (``flows.core.outcomes``) the capability declares."""

from __future__ import annotations

import logging
from typing import Sequence

from sqlalchemy.engine import Connection, Engine

from dsl.outcomes import ChainedOutcome, SelectionSetOutcome
from flows.core.outcomes import BatchResult, OutcomeExecutor, executor_for
from store import sets as store_sets

log = logging.getLogger(__name__)


class SelectionSetExecutor(OutcomeExecutor):
    """Add matches to a set (created if missing) or remove them; idempotent, so no work records are needed."""

    type = "selection_set"
    set_based = True

    # each executor narrows the outcome to its own type: executor_for() gives it only outcomes of that type
    def apply_ids(self, conn: Connection, outcome: SelectionSetOutcome,  # type: ignore[override]
                  ids: Sequence[int]) -> BatchResult:
        if not ids:
            return BatchResult()
        if outcome.operation == "add":
            target = store_sets.ensure_set(conn, name=outcome.selectionSetName)
            added = store_sets.add_member_ids(conn, set_id=target["id"], entry_ids=ids)
            return BatchResult(applied=added, unchanged=len(ids) - added)
        found = store_sets.get_set(conn, name=outcome.selectionSetName)
        if found is None:
            return BatchResult(unchanged=len(ids))
        removed = store_sets.remove_member_ids(conn, set_id=found["id"], entry_ids=ids)
        return BatchResult(applied=removed, unchanged=len(ids) - removed)

    def apply_rows(self, conn: Connection, outcome: SelectionSetOutcome, rows, ctx) -> BatchResult:  # type: ignore[override]
        return self.apply_ids(conn, outcome, [r["id"] for r in rows])


class ChainedExecutor(OutcomeExecutor):
    """Apply several outcomes in order; with stopOnError an entry that failed one skips the rest.

    Each step runs through its executor's ``run_batch`` (its own short transactions, heavy work outside them), so a
    step's per-outcome condition sees what the steps before it wrote (``when: width > 3000`` after a classifier)."""

    type = "chained"

    def run_batch(self, engine: Engine, outcome: ChainedOutcome, rows, ctx) -> BatchResult:  # type: ignore[override]
        total = BatchResult()
        remaining = list(rows)
        for child in outcome.outcomes:
            chosen = [r for r in remaining if child.when is None or ctx.evaluate(child.when, r)]
            executor = executor_for(child)
            try:
                result = executor.run_batch(engine, child, chosen, ctx)
            except Exception as exc:  # the whole step failed for this batch
                log.warning("chained outcome %s failed: %s", child.type, exc)
                result = BatchResult(errors=[(r["id"], f"{child.type}: {exc}") for r in chosen],
                                     failed_ids={r["id"] for r in chosen})
            total.applied += result.applied
            total.skipped += result.skipped
            total.errors.extend(result.errors)
            total.failed_ids |= result.failed_ids
            if outcome.stopOnError and result.failed_ids:
                remaining = [r for r in remaining if r["id"] not in result.failed_ids]
        return total

    def apply_rows(self, conn: Connection, outcome: ChainedOutcome, rows, ctx) -> BatchResult:  # type: ignore[override]
        raise TypeError("chained outcomes run through run_batch (each step writes in its own transactions)")

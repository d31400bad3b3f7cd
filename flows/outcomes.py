"""The outcome registry: what a rule does to the entries it matched, one small class per outcome type, registered by
name by the capability that provides it (``flows.capabilities``); a plan naming a type with no executor is refused at
validation (``flows.plans.engine.check_plan``).

An executor may apply an outcome set-based (``apply_sql``: one INSERT ... SELECT over a batch of matches, for outcomes
that are idempotent by nature, such as set membership) and must be able to apply it to a list of entry rows
(``apply_rows``: for matches filtered in Python, chained outcomes and watch events). Outcomes with expensive work
(thumbnails, embeddings) set ``records_work`` so each (entry state, outcome parameters) is done once: see
``flows.plans.engine``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from sqlalchemy.engine import Connection

from dsl.outcomes import OutcomeBase

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


def installed_executors() -> dict[str, OutcomeExecutor]:
    """Every registered executor, once the installed capabilities have registered theirs."""
    from flows.capabilities import load_capabilities

    load_capabilities()
    return EXECUTORS


def executor_for(outcome: OutcomeBase) -> OutcomeExecutor:
    installed_executors()
    try:
        return EXECUTORS[outcome.type]
    except KeyError:
        raise LookupError(f"outcome type {outcome.type!r} is not installed; installed: {', '.join(EXECUTORS)}") \
            from None

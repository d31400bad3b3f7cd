"""The outcome registry: what a rule does to the entries it matched, one small class per outcome type, registered by
type from the capability that declares it (``Capability.executors``, ``flows.core.capability``); a plan naming a type
with no executor is refused at validation (``flows.plans.checks.check_plan``).

An executor may apply an outcome set-based (``apply_ids``: a few statements over a batch of entry ids, for outcomes
that are idempotent by nature, such as set membership) and must be able to apply it to a list of entry rows
(``apply_rows``: for matches filtered in Python, chained outcomes and watch events).

The engine hands a batch to ``run_batch(engine, outcome, rows, ctx)``, outside any transaction. Its default opens one
short transaction around ``apply_rows``: right for outcomes that only write. An outcome with heavy work (decoding
media, running ffmpeg, embedding) overrides ``run_batch``: it does the work with no transaction open and writes the
results in short transactions of its own, so an index job, a watcher or a tool call never waits on it for long
(``flows.classify`` is the example). ``records_work`` makes the engine skip entries whose (state, outcome parameters)
were already done by the same rule; an executor may also keep its own work records (the classifier does, so chained
and tool-started work is skipped too) and report what it skipped in ``BatchResult.skipped``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

from sqlalchemy.engine import Connection, Engine

from dsl.outcomes import OutcomeBase, iter_outcomes
from flows.core.capability import Registry
from flows.core.roots import Roots
from store.errors import Cancelled  # noqa: F401  (re-exported: executors raise it)

log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    """What one outcome did to one batch."""

    applied: int = 0  # entries the outcome changed or produced something for
    unchanged: int = 0  # entries it had nothing to do for (already members, nothing applicable)
    skipped: int = 0  # entries whose work was already done in the same state (unchanged files)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (entry id, reason)
    failed_ids: set[int] = field(default_factory=set)


class OutcomeExecutor:
    type: ClassVar[str]
    records_work: ClassVar[bool] = False
    set_based: ClassVar[bool] = False  # applies to a list of entry ids in a few statements (``apply_ids``)
    batch_size: ClassVar[int | None] = None  # entries per batch (one Prefect task run); None: the engine's default
    keyed_by_path: ClassVar[bool] = True  # work keys include the path; False for outcomes that change it (move)

    def apply_ids(self, conn: Connection, outcome: OutcomeBase, ids: Sequence[int]) -> BatchResult:
        """Apply to the entries ``ids`` set-based (only for ``set_based`` executors)."""
        raise NotImplementedError

    def apply_rows(self, conn: Connection, outcome: OutcomeBase, rows: Sequence[Any], ctx: "RunContext") -> BatchResult:
        raise NotImplementedError

    def preview_rows(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], roots: Roots,
                     claimed: set[str]) -> list[dict[str, Any]] | None:
        """What the outcome would do to each of ``rows``, file by file, for outcomes whose effect differs per file
        (a move's destination, its conflict); ``claimed``: the places earlier rows of the same run take. None: the
        preview only counts the entries."""
        return None

    def after_run(self, engine: Engine) -> None:
        """Called once after a plan execution that used this outcome type ended, however it ended (the classifier
        sweeps its artifact cache here)."""

    def run_batch(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: "RunContext") -> BatchResult:
        """Apply to ``rows`` (entry rows), called with no transaction open. The default writes in one short
        transaction; executors with heavy work override this to work first and write in short batches after."""
        with engine.begin() as conn:
            return self.apply_rows(conn, outcome, rows, ctx)


class OutsideTransactionExecutor(OutcomeExecutor):
    """An executor whose heavy work (decoding, ffmpeg, text extraction) runs with no transaction open: ``work``
    does one batch and writes what it made in short transactions of its own. A batch cut short by a cancel
    request keeps what it wrote and ends the execution cancelled, not done."""

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: "RunContext") -> BatchResult:
        raise NotImplementedError

    def run_batch(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: "RunContext") -> BatchResult:
        result = self.work(engine, outcome, rows, ctx)
        if ctx.should_cancel():
            raise Cancelled("cancelled on request")
        return result

    def apply_rows(self, conn: Connection, outcome: OutcomeBase, rows: Sequence[Any],
                   ctx: "RunContext") -> BatchResult:  # pragma: no cover - run_batch is the entry
        raise NotImplementedError(f"{self.type} works outside transactions: call run_batch")


@dataclass
class RunContext:
    """What executors may need beyond the connection: the evaluator of per-outcome conditions, the execution they
    work for, a cancellation check and a progress hook for long batches."""

    evaluate: Callable[[Any, Any], bool]  # (condition, entry row) -> bool
    execution_id: int | None = None  # the plan execution (None for work started by a tool or the command line)
    rule: str | None = None
    should_cancel: Callable[[], bool] = lambda: False
    on_item: Callable[[str], None] | None = None  # called with an entry's path as each one is done
    roots: Roots | None = None  # the run's roots: where outcomes that place files may put them


_EXECUTORS: Registry[OutcomeExecutor] = Registry("outcome executor",
                                                 lambda capability: ((e.type, e) for e in capability.executors))
EXECUTORS = _EXECUTORS.entries  # outcome type -> its executor, as registered so far


def register_executor(executor: OutcomeExecutor) -> OutcomeExecutor:
    """Register one more executor (a capability declares its own instead); a type registered twice is an error."""
    return _EXECUTORS.add(executor.type, executor)


def installed_executors() -> dict[str, OutcomeExecutor]:
    """Every registered executor, once the installed capabilities have registered theirs."""
    return _EXECUTORS.all()


def executor_for(outcome: OutcomeBase) -> OutcomeExecutor:
    executor = _EXECUTORS.get(outcome.type)
    if executor is None:
        raise LookupError(f"outcome type {outcome.type!r} is not installed; installed: {', '.join(EXECUTORS)}")
    return executor


def batch_size_for(outcome: OutcomeBase, default: int) -> int:
    """Entries per batch for ``outcome``: the smallest its executors ask for (a chained outcome with a classifier step
    goes at the classifier's pace), at most ``default``."""
    sizes = [executor_for(o).batch_size for o in iter_outcomes([outcome])]
    return min([default, *(s for s in sizes if s)])

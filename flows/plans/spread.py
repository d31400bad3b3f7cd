"""A plan execution's outcome batches spread over the workers of a Prefect work pool.

When a serving process runs plans on a work pool (``cluster.work_pool``), an execution is a flow run of the plan's
deployment that one worker picks up: it scans and matches there, then cuts each heavy outcome's matches into
batches — ranges of the path index, (after, until] — written as rows of ``outcome_batches`` (:mod:`store.batches`),
and submits each as a background task run of the task ``assay-batch`` (``Task.delay``). Every ``assay worker``
serves that task (Prefect's task worker beside its process worker), so the batches go to whichever worker is free,
each a task run in Prefect's UI under the plan's flow run. Set-based outcomes (set membership: a few statements) are
not spread.

A worker claims its batch in the store (one conditional UPDATE: a batch is held by one attempt), renews the claim's
lease while it works, and records what it did; the flow that cut the batches follows their rows. A batch whose lease
ran out (its worker was killed, or its machine lost) is handed back: its old task run is marked Crashed and a new
one submitted, which another worker takes. Whatever the lost attempt had written is kept, and its files are skipped
by their work keys when the batch is done again, so every file is done once. A worker told to stop (SIGTERM) ends
its batch between pieces and hands it back the same way (``STOPPING``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time
from typing import Any, Iterator

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import WorkerFilter, WorkerFilterStatus
from prefect.runtime import task_run as current_task_run
from prefect.states import Crashed
from sqlalchemy import and_, func, select

from flows.core.outcomes import Cancelled, executor_for
from flows.core.settings import current
from flows.plans import execution, stages
from flows.plans.stages import PlanContext
from store import batches as store_batches
from store.engine import get_engine
from store.entries import T

log = logging.getLogger(__name__)

BATCHES_PER_WORKER = 4  # enough batches that the last one leaves no worker idle for long, few enough that
# Prefect's cost per batch (~150 ms: the hand-out, the task run's states) stays a few per cent of it
POLL_SECONDS = 0.25
STOPPING = threading.Event()  # set by `assay worker` on SIGTERM: batches in hand end between pieces, handed back


def worker_name() -> str:
    """This worker's name in the pool (``cluster.worker_name``, else ``<host>-<pid>``)."""
    return current().cluster.worker_name or f"{socket.gethostname()}-{os.getpid()}"


def pool_name() -> str | None:
    """The work pool this process's executions spread over (None: they run where they are)."""
    return current().cluster.work_pool


# --- the worker's side ----------------------------------------------------------------------------------------------


class Lease:
    """Renews a held batch's lease every ``every`` seconds in a thread, until stopped; ``lost`` once the batch was
    handed to another."""

    def __init__(self, engine: Any, batch_id: int, attempt: int, every: float) -> None:
        self.engine, self.held, self.every = engine, [(batch_id, attempt)], every
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"assay-lease-{batch_id}", daemon=True)

    def __enter__(self) -> "Lease":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _renew(self) -> None:
        while not self._stop.wait(self.every):
            try:
                if store_batches.heartbeat(self.engine, self.held):
                    self.lost = True
                    return
            except Exception:  # noqa: BLE001 (the store away for a moment: the next renewal tries again)
                log.warning("renewing the lease of batch %s failed", self.held[0][0], exc_info=True)


def run_batch(batch_id: int) -> dict[str, Any]:
    """Claim batch ``batch_id``, do it, record what it did; returns that (``claimed`` false when another holds it or
    it is no longer pending)."""
    settings = current()
    url = settings.db_url
    engine = get_engine(url)
    worker = worker_name()
    attempt = store_batches.claim(engine, batch_id, worker=worker, task_run_id=str(current_task_run.id or "") or None)
    if attempt is None:
        return {"claimed": False, "worker": worker}
    row = store_batches.get(engine, batch_id)
    assert row is not None
    out: dict[str, Any]
    with Lease(engine, batch_id, attempt, every=settings.cluster.lease_seconds / 4) as lease:
        try:
            ctx = stages.context(url, row["job_id"])
            out = stages.outcome_range(ctx, row["position"], row["after"], row["until"], row["k"],
                                       stop=lambda: STOPPING.is_set() or lease.lost)
        except Cancelled:
            out = {"cancelled": True, "applied": 0, "unchanged": 0, "skipped": 0, "errors": [], "ids": 0}
        except Exception as exc:  # noqa: BLE001 (recorded: the execution's flow ends with it)
            log.exception("batch %s failed on worker %s", batch_id, worker)
            out = {"failed": f"{type(exc).__name__}: {exc}"}
        finally:
            stages.forget(url, row["job_id"])
    if out.get("stopped"):
        store_batches.release(engine, batch_id, attempt, why="handed back")
        return {"claimed": True, "handed_back": True, "worker": worker}
    out["worker"] = worker
    out["errors"] = [[entry_id, f"{reason} (on worker {worker})"] for entry_id, reason in out.get("errors", [])]
    if not store_batches.finish(engine, batch_id, attempt, out):
        return {"claimed": True, "superseded": True, "worker": worker}
    return out


@task(name="assay-batch", task_run_name="{outcome} {rule} [batch {k}]", cache_policy=NO_CACHE, log_prints=False)
def batch_task(batch_id: int, outcome: str, rule: str, k: int, hand_out: int) -> dict[str, Any]:  # noqa: ARG001
    """One outcome batch of a plan execution, run by whichever worker of the pool takes it. ``outcome``, ``rule``
    and ``k`` name the run in the UI; ``hand_out`` counts the batch's task runs (a task worker caches results by
    their inputs: a batch handed out again must not find the first hand-out's)."""
    return run_batch(batch_id)


# --- the execution's side -------------------------------------------------------------------------------------------


def online_workers(pool: str) -> int:
    """How many workers of ``pool`` Prefect sees online (at least 1: the one running this)."""
    try:
        with get_client(sync_client=True) as client:
            workers = client.read_workers_for_work_pool(  # offset and limit given: the API refuses None for them
                pool, worker_filter=WorkerFilter(status=WorkerFilterStatus(any_=["ONLINE"])), offset=0, limit=200)
        return max(1, len(workers))
    except Exception:  # noqa: BLE001 (Prefect away for a moment: size the batches for one)
        log.warning("reading the workers of pool %s failed", pool, exc_info=True)
        return 1


def cut(ctx: PlanContext, position: int, size: int) -> list[tuple[str, str | None, int]]:
    """The matches of outcome ``position`` (before per-outcome conditions evaluated in Python) as ranges of the
    path index of ``size`` entries: (after, until, entries), the last open-ended."""
    spec = ctx.outcomes[position]
    ranges: list[tuple[str, str | None, int]] = []
    after = ""
    with ctx.engine.connect() as conn:
        base = and_(ctx.candidates(conn), spec.push)
        while True:
            until = conn.execute(select(T.c.path).where(base, T.c.path > after).order_by(T.c.path)
                                 .offset(size - 1).limit(1)).scalar()
            if until is None:
                rest = conn.execute(select(func.count()).select_from(T).where(base, T.c.path > after)).scalar_one()
                if rest:
                    ranges.append((after, None, int(rest)))
                return ranges
            ranges.append((after, until, size))
            after = until


def batch_entries(ctx: PlanContext, position: int, pool: str) -> tuple[int, int]:
    """(matches, entries per batch) for outcome ``position``: ``cluster.batch_entries`` when set, else enough
    batches for every online worker to take several, each at least ``cluster.min_batch_entries``."""
    spec = ctx.outcomes[position]
    with ctx.engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(T).where(and_(ctx.candidates(conn), spec.push))) \
            .scalar_one()
    cluster = current().cluster
    if cluster.batch_entries:
        return int(total), cluster.batch_entries
    per = math.ceil(total / (BATCHES_PER_WORKER * online_workers(pool))) if total else 1
    return int(total), max(cluster.min_batch_entries, per)


class SpreadStages:
    """The stages of an execution on a work pool: scan, match and set-based outcomes as ``inner`` runs them (task
    runs of this flow run), heavy outcomes' batches spread over the pool's workers."""

    def __init__(self, inner: execution.Stages, pool: str) -> None:
        self.inner, self.pool = inner, pool

    def scan(self, ctx: PlanContext, index: int) -> dict[str, Any]:
        return self.inner.scan(ctx, index)

    def match(self, ctx: PlanContext, index: int) -> dict[str, Any]:
        return self.inner.match(ctx, index)

    def outcome(self, ctx: PlanContext, position: int, after: str, k: int) -> dict[str, Any]:
        return self.inner.outcome(ctx, position, after, k)

    def batches(self, ctx: PlanContext, position: int) -> Iterator[tuple[int, dict[str, Any]]]:
        spec = ctx.outcomes[position]
        executor = executor_for(spec.outcome)
        if executor.set_based and not executor.records_work and spec.residual is None:
            return self.inner.batches(ctx, position)
        return self._spread(ctx, position)

    def _spread(self, ctx: PlanContext, position: int) -> Iterator[tuple[int, dict[str, Any]]]:
        spec = ctx.outcomes[position]
        cut_before = store_batches.of_position(ctx.engine, job_id=ctx.job_id, position=position)
        if cut_before:  # the run is retried (its flow run's machine stopped): its batches go on where they were
            store_batches.reopen(ctx.engine, job_id=ctx.job_id)
            ids = [row["id"] for row in cut_before]
        else:
            _, size = batch_entries(ctx, position, self.pool)
            ranges = cut(ctx, position, size)
            if not ranges:
                yield 1, {"last": "", "done": True, "ids": 0, "applied": 0, "unchanged": 0, "skipped": 0,
                          "errors": []}
                return
            ids = store_batches.create(ctx.engine, job_id=ctx.job_id, execution_id=ctx.execution_id,
                                       position=position, ranges=ranges)
        follow = _Following(ctx, position, ids, spec.outcome.type, spec.rule, online_workers(self.pool))
        yield from follow.until_done()


class _Following:
    """The batches of one outcome, submitted and followed to their end."""

    def __init__(self, ctx: PlanContext, position: int, ids: list[int], outcome: str, rule: str,
                 workers: int) -> None:
        self.ctx, self.position, self.ids, self.outcome, self.rule = ctx, position, ids, outcome, rule
        self.submitted: dict[int, int] = {}  # batch id -> task runs submitted for it
        self.waiting: list[tuple[int, int]] = []  # (batch id, k) not submitted yet, in order
        self.window = 2 * workers  # task runs submitted and not yet finished, at most
        self.task_runs: dict[int, str] = {}  # batch id -> its last task run
        self.last_activity = time.monotonic()  # when a batch of this outcome last started or ended
        self.until = {row["id"]: row["until"] for row in store_batches.of_position(ctx.engine, job_id=ctx.job_id,
                                                                                  position=position)}
        self.lease = current().cluster.lease_seconds

    def submit(self, batch_id: int, k: int) -> None:
        self.submitted[batch_id] = self.submitted.get(batch_id, 0) + 1
        future = batch_task.delay(batch_id, self.outcome, self.rule, k, self.submitted[batch_id])
        self.task_runs[batch_id] = str(future.task_run_id)

    def resubmit_untaken(self, rows: list[dict[str, Any]]) -> None:
        """Pending batches while none of this outcome runs or finished for two leases: their task runs went to a
        worker that stopped before it claimed them (a task worker takes its next run while it works on one). They
        are handed out again; a run that does reach a worker later finds its batch taken and does nothing."""
        now = time.monotonic()
        if any(row["status"] == store_batches.RUNNING for row in rows) or now - self.last_activity < 2 * self.lease:
            return
        waiting = {batch_id for batch_id, _ in self.waiting}
        for row in rows:
            if row["status"] == store_batches.PENDING and row["id"] not in waiting:
                _crashed({**row, "task_run_id": self.task_runs.get(row["id"]), "worker": "a stopped worker"})
                self.submit(row["id"], row["k"])
        self.last_activity = now

    def until_done(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Submit the batches a few at a time (``window``: two per online worker, so a batch handed out again is
        next in Prefect's queue, not behind all the others) and follow them to their end."""
        ctx = self.ctx
        for row in store_batches.of_position(ctx.engine, job_id=ctx.job_id, position=self.position):
            history = len(json.loads(row["history_json"] or "[]"))
            if row["status"] == store_batches.PENDING:
                self.submitted[row["id"]] = history
                self.waiting.append((row["id"], row["k"]))
            else:  # a retried run: held batches go on (or are handed out when their lease runs out), done ones count
                self.submitted[row["id"]] = history + 1
        done: set[int] = set()
        while len(done) < len(self.ids):
            if ctx.should_cancel():
                self.stop_all()
                raise Cancelled("cancelled on request")
            for lost in store_batches.expire(ctx.engine, job_id=ctx.job_id, lease_seconds=self.lease):
                _crashed(lost)
            rows = store_batches.of_position(ctx.engine, job_id=ctx.job_id, position=self.position)
            if any(row["status"] == store_batches.RUNNING for row in rows):
                self.last_activity = time.monotonic()
            self.resubmit_untaken(rows)
            waiting = {batch_id for batch_id, _ in self.waiting}
            in_flight = 0
            for row in rows:
                history = len(json.loads(row["history_json"] or "[]"))
                if row["status"] == store_batches.PENDING and row["id"] not in waiting \
                        and history >= self.submitted.get(row["id"], 0):
                    self.submit(row["id"], row["k"])  # handed back or lost: a new task run, first in the queue
                if row["status"] == store_batches.RUNNING or (row["status"] == store_batches.PENDING
                                                              and row["id"] not in waiting):
                    in_flight += 1
                elif row["status"] == store_batches.DONE and row["id"] not in done:
                    done.add(row["id"])
                    self.last_activity = time.monotonic()
                    out = json.loads(row["result_json"] or "{}")
                    if out.get("failed"):
                        self.stop_all()
                        raise RuntimeError(f"batch {row['k']} of {self.outcome} {self.rule} failed on worker "
                                           f"{row['worker']}: {out['failed']}")
                    if out.get("cancelled"):
                        self.stop_all()
                        raise Cancelled("cancelled on request")
                    yield row["k"], {**out, "last": self.frontier(done), "done": len(done) == len(self.ids)}
            while self.waiting and in_flight < self.window:
                batch_id, k = self.waiting.pop(0)
                self.submit(batch_id, k)
                in_flight += 1
            if len(done) < len(self.ids):
                time.sleep(POLL_SECONDS)

    def frontier(self, done: set[int]) -> str:
        """The path every batch before it has passed (the execution's percent follows it)."""
        last = ""
        for batch_id in self.ids:
            if batch_id not in done:
                break
            last = self.until[batch_id] or "\U0010ffff"
        return last

    def stop_all(self) -> None:
        """No more hand-outs: the batches no worker took are cancelled (those in hand end on the cancel flag)."""
        store_batches.cancel_pending(self.ctx.engine, job_id=self.ctx.job_id)


def _crashed(row: dict[str, Any]) -> None:
    """The task run of a batch whose worker stopped renewing its lease, marked Crashed in Prefect."""
    log.warning("batch %s (k %s) lost its worker %s; handing it to another", row["id"], row["k"], row["worker"])
    if not row.get("task_run_id"):
        return
    try:
        with get_client(sync_client=True) as client:
            client.set_task_run_state(row["task_run_id"], Crashed(
                message=f"worker {row['worker']} stopped renewing its lease on the batch; it was handed to "
                        "another worker"), force=True)
    except Exception:  # noqa: BLE001 (only the UI's view of the lost run lags)
        log.warning("marking task run %s crashed failed", row["task_run_id"], exc_info=True)

"""A plan execution's outcome batches spread over the workers of a Prefect work pool.

When a serving process runs plans on a work pool (``cluster.work_pool``), an execution is a flow run of the plan's
deployment that one worker picks up: it scans and matches there, then cuts each heavy outcome's matches into
batches — ranges of the path index, (after, until] — written as rows of ``outcome_batches`` (:mod:`store.batches`).
Set-based outcomes (set membership: a few statements) are not spread.

The batches go to the workers as *shares*: background task runs of the task ``assay-batches`` (``Task.delay``),
which every ``assay worker`` serves (Prefect's task worker beside its process worker), each a task run in Prefect's
UI under the plan's flow run. A share claims the run's next pending batch in the store (one conditional UPDATE: a
batch is held by one attempt), does it under a lease it renews, records what it did, and claims the next, until none
is pending. So Prefect's cost (a task run's hand-out and its states, ~150 ms) is paid per worker and outcome, not per
batch, and batches can be small: a worker that is free takes the next one at once, and the last ones leave no worker
idle for long. Prefect deals the shares; the store deals the batches (a worker holds up to three task runs at once,
the one it runs and two it has been sent, so binding a batch to a task run would let one worker hoard them).

A worker does a batch in pieces (``stages.Pieces``): at first, and at least, two entries for each of its cores, then
as many as take about ``PIECE_SECONDS`` at the pace seen; between two pieces it may let the batch go. A batch whose
holder is gone (its worker killed: on PostgreSQL its lock went with its connection; or its lease ran out: its machine
lost) is pending again, *lost*: its share's task run is marked Crashed and a new share handed out. A lost batch jumps
the queue, as the run waits for it: claims take it before the others, and a worker doing another batch asks between
pieces (at most every ``JUMP_SECONDS``, one read) whether one waits; if so it takes it and lets its own go,
*yielded*: pending again for whichever worker is free next, with no share of its own (the share that yielded it goes
on to it) and no worker yielding to it in turn. A worker redoing a lost batch yields to none. A worker told to stop
(SIGTERM) lets its batch go between pieces the same way, *handed back* (``STOPPING``). A batch let go records what
its attempts did and the path they reached, from where the next attempt goes on, adding up the counts. Whatever a
lost attempt had written is kept, and its files are skipped by their work keys when the batch is done again, so every
file is done once."""

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
from flows.workers import usable_cores
from store import batches as store_batches
from store.engine import get_engine
from store.entries import T

log = logging.getLogger(__name__)

BATCHES_PER_WORKER = 8  # enough batches that the last ones leave no worker idle for long; a batch costs a claim
# and a finish in the store (a few ms), not a task run
POLL_SECONDS = 0.25
PIECE_SECONDS = 0.3  # a batch's pieces last about this long: how long a lost batch may wait for a worker to take it,
# against each piece's fixed cost (its read, its last write, the cores idle while it drains: ~7 ms of CPU and more)
JUMP_SECONDS = 0.2  # a worker asks the store whether a lost batch waits at most this often
STOPPING = threading.Event()  # set by `assay worker` on SIGTERM: batches in hand end between pieces, handed back


def worker_name() -> str:
    """This worker's name in the pool (``cluster.worker_name``, else ``<host>-<pid>``)."""
    return current().cluster.worker_name or f"{socket.gethostname()}-{os.getpid()}"


def pool_name() -> str | None:
    """The work pool this process's executions spread over (None: they run where they are)."""
    return current().cluster.work_pool


# --- the worker's side ----------------------------------------------------------------------------------------------


class Lease:
    """Holds a batch while its worker does it: the store's lock on it (PostgreSQL: gone with this process, so a
    killed worker's batch is handed out again at once), and the lease renewed every ``every`` seconds in a thread,
    until stopped; ``lost`` once the batch was handed to another."""

    def __init__(self, engine: Any, held: store_batches.Held, every: float) -> None:
        self.engine, self.held, self.every = engine, [(held.batch_id, held.attempt)], every
        self.lost = False
        self._lock = held.lock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"assay-lease-{held.batch_id}", daemon=True)

    def __enter__(self) -> "Lease":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self._lock is not None:
            store_batches.let_go(self._lock, *self.held[0])

    def _renew(self) -> None:
        while not self._stop.wait(self.every):
            try:
                if store_batches.heartbeat(self.engine, self.held):
                    self.lost = True
                    return
            except Exception:  # noqa: BLE001 (the store away for a moment: the next renewal tries again)
                log.warning("renewing the lease of batch %s failed", self.held[0][0], exc_info=True)


class QueueJump:
    """Asked between the pieces of a batch (at most every ``JUMP_SECONDS``): takes a lost batch of the run when one
    waits (its worker was killed mid-batch), so it is redone now rather than after the batch in hand, which its
    worker then lets go (``yielded``). Off while the batch in hand is itself a lost one's redo: it waits for
    none."""

    def __init__(self, engine: Any, job_id: int, worker: str, task_run_id: str | None, *, on: bool) -> None:
        self.engine, self.job_id, self.worker, self.task_run_id, self.on = engine, job_id, worker, task_run_id, on
        self.asked = time.monotonic()  # the claim that gave the batch in hand took any lost one there was
        self.taken: store_batches.Held | None = None

    def __call__(self) -> bool:
        if not self.on or self.taken is not None or time.monotonic() - self.asked < JUMP_SECONDS:
            return self.taken is not None
        self.asked = time.monotonic()
        try:
            self.taken = store_batches.claim_lost(self.engine, job_id=self.job_id, worker=self.worker,
                                                  task_run_id=self.task_run_id)
        except Exception:  # noqa: BLE001 (the store away for a moment: the batch in hand goes on)
            log.warning("looking for a lost batch of run %s failed", self.job_id, exc_info=True)
        return self.taken is not None

    def give_back(self) -> None:
        """The lost batch taken is let go unstarted (the batch in hand could not be)."""
        held, self.taken = self.taken, None
        if held is None:
            return
        try:
            store_batches.release(self.engine, held.batch_id, held.attempt, why=store_batches.LOST)
        finally:
            if held.lock is not None:
                store_batches.let_go(held.lock, held.batch_id, held.attempt)


def pieces() -> stages.Pieces:
    """How a worker cuts its batches into pieces: at first, and at least, two entries for each of its cores (8 at
    least); then pieces of about ``PIECE_SECONDS``, a multiple of its cores."""
    cores = usable_cores()
    return stages.Pieces(least=cores * max(2, math.ceil(8 / cores)), seconds=PIECE_SECONDS, step=cores)


def run_batch(engine: Any, held: store_batches.Held, worker: str, task_run_id: str | None = None,
              cut: stages.Pieces | None = None) -> dict[str, Any]:
    """Do the batch ``held``, going on where earlier attempts let it go, and record what it did; returns that
    (``handed_back`` when its worker is stopping, ``yielded`` with the lost batch taken as ``next``, ``superseded``
    when it was handed to another meanwhile)."""
    settings = current()
    url = settings.db_url
    batch_id, attempt = held.batch_id, held.attempt
    out: dict[str, Any]
    with Lease(engine, held, every=settings.cluster.lease_seconds / 4) as lease:  # held until it is recorded
        row = store_batches.get(engine, batch_id)
        assert row is not None
        before = store_batches.progress(row["history_json"])
        jump = QueueJump(engine, row["job_id"], worker, task_run_id,
                         on=store_batches.last_outcome(row["history_json"]) != store_batches.LOST)
        try:
            ctx = stages.context(url, row["job_id"])
            out = stages.outcome_range(ctx, row["position"], before["last"] if before else row["after"],
                                       row["until"], row["k"], stop=lambda: STOPPING.is_set() or lease.lost or jump(),
                                       pieces=cut or pieces())
        except Cancelled:
            out = {"cancelled": True, "applied": 0, "unchanged": 0, "skipped": 0, "errors": [], "ids": 0}
        except Exception as exc:  # noqa: BLE001 (recorded: the execution's flow ends with it)
            log.exception("batch %s failed on worker %s", batch_id, worker)
            out = {"failed": f"{type(exc).__name__}: {exc}"}
        out["errors"] = [[entry_id, f"{reason} (on worker {worker})"] for entry_id, reason in out.get("errors", [])]
        if before is not None:
            out = with_earlier(before, out)
        if out.get("stopped"):
            why = store_batches.YIELDED if jump.taken is not None else store_batches.HANDED_BACK
            try:
                store_batches.release(engine, batch_id, attempt, why=why,
                                      did={key: out[key] for key in ("last", *TALLIES)})
            except BaseException:
                jump.give_back()
                raise
            if jump.taken is not None:
                return {"k": row["k"], "yielded": True, "next": jump.taken}
            return {"k": row["k"], "handed_back": True}
        out["worker"] = worker
        if not store_batches.finish(engine, batch_id, attempt, out):
            return {"k": row["k"], "superseded": True}
    return {"k": row["k"], **{key: out[key] for key in ("cancelled", "failed") if key in out}}


TALLIES = ("ids", "applied", "unchanged", "skipped", "errors")  # what a batch's attempts add up


def with_earlier(before: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """What an attempt did (``out``) with what the earlier ones had done (``before``, from the batch's history)."""
    return {**out, **{key: before[key] + out[key] for key in TALLIES if key in before and key in out}}


def run_share(job_id: int, *, worker: str | None = None, task_run_id: str | None = None) -> dict[str, Any]:
    """A worker's share of run ``job_id``'s batches: claim its next pending batch (a lost one first), do it, and the
    next, until none is pending (or this worker is stopping, or a batch failed or was cancelled); a batch it yields
    to a lost one is pending again, for whichever worker is free next. Returns the batches it did."""
    url = current().db_url
    engine = get_engine(url)
    worker = worker or worker_name()
    did: list[dict[str, Any]] = []
    held: store_batches.Held | None = None
    cut = pieces()  # kept from batch to batch: each starts at the pace of the last
    try:
        while True:
            if held is None:
                if STOPPING.is_set():
                    break
                held = store_batches.claim_next(engine, job_id=job_id, worker=worker, task_run_id=task_run_id)
                if held is None:
                    break
            out = run_batch(engine, held, worker, task_run_id, cut)
            held = out.pop("next", None)  # the lost batch it yielded to: done next, even when stopping (handed back)
            did.append(out)
            if out.get("handed_back") or out.get("cancelled") or out.get("failed"):
                break
    finally:
        stages.forget(url, job_id)
    return {"worker": worker, "batches": did}


@task(name="assay-batches", task_run_name="{plan} [share {n}]", cache_policy=NO_CACHE, log_prints=False)
def share_task(job_id: int, plan: str, n: str) -> dict[str, Any]:  # noqa: ARG001
    """One worker's share of a plan execution's outcome batches, run by whichever worker of the pool takes it: it
    does the execution's pending batches one after another until none is left. ``plan`` and ``n`` name the run in
    the UI (``n`` also keeps two shares' inputs apart: a task worker caches results by their inputs)."""
    return run_share(job_id, task_run_id=str(current_task_run.id or "") or None)


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
        follow = _Following(ctx, position, ids, online_workers(self.pool))
        yield from follow.until_done()


def needs_share(ended: list[dict[str, Any]]) -> bool:
    """Whether a batch whose attempts ``ended`` (its history since last seen) needs a share of its own to be done:
    not when each was yielded, as the share that yielded it goes on to the next pending batch once it has done the
    lost one it took (and any other share free before takes it)."""
    return any(entry.get("outcome") != store_batches.YIELDED for entry in ended)


class _Following:
    """The batches of one outcome, handed to the pool as workers' shares and followed to their end."""

    def __init__(self, ctx: PlanContext, position: int, ids: list[int], workers: int) -> None:
        self.ctx, self.position, self.ids = ctx, position, ids
        # shares handed out at first: a task worker holds up to three runs (the one it runs, the next it has taken,
        # one more Prefect has sent it), so 3 x workers - 2 shares reach every free worker however they are dealt
        self.first = max(2, 3 * workers - 2)
        self.shares = 0  # share task runs handed out for this outcome
        self.history: dict[int, int] = {}  # batch id -> times it was handed back or lost, as last seen
        self.last_activity = time.monotonic()  # when a batch of this outcome last ran or ended
        self.until = {row["id"]: row["until"] for row in store_batches.of_position(ctx.engine, job_id=ctx.job_id,
                                                                                  position=position)}
        self.lease = current().cluster.lease_seconds

    def hand_out(self, count: int) -> None:
        """``count`` more shares of this run's batches, to whichever workers take them."""
        for _ in range(count):
            self.shares += 1
            share_task.delay(self.ctx.job_id, self.ctx.plan.name, f"{self.position + 1}.{self.shares}")
        # the shares are out only now (a hand-out can take seconds on a loaded machine): "untaken" counts from here,
        # or a slow first hand-out would look like shares no worker took, and more would be handed out
        self.last_activity = time.monotonic()

    def resubmit_untaken(self, rows: list[dict[str, Any]]) -> None:
        """Pending batches while none of this outcome runs or ended for two leases: the shares went to workers that
        stopped before they took a batch. Shares are handed out again (one that still reaches a worker later finds
        nothing pending, or helps)."""
        now = time.monotonic()
        if now - self.last_activity < 2 * self.lease:
            return
        pending = sum(1 for row in rows if row["status"] == store_batches.PENDING)
        if pending:
            log.warning("%d batch(es) of run %s pending with no worker on them; handing out shares again", pending,
                        self.ctx.job_id)
            self.hand_out(min(pending, self.first))
        self.last_activity = now

    def until_done(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Hand out the first shares, then follow the batches to their end: a batch lost (its worker stopped
        renewing its lease) or handed back (its worker is stopping) is pending again, and gets a share of its
        own (a busy worker's share may take it first); one yielded to a lost batch gets none (``needs_share``)."""
        ctx = self.ctx
        rows = store_batches.of_position(ctx.engine, job_id=ctx.job_id, position=self.position)
        self.history = {row["id"]: len(json.loads(row["history_json"] or "[]")) for row in rows}
        pending = sum(1 for row in rows if row["status"] == store_batches.PENDING)
        if pending:
            self.hand_out(min(pending, self.first))
        done: set[int] = set()
        while len(done) < len(self.ids):
            if ctx.should_cancel():
                self.stop_all()
                raise Cancelled("cancelled on request")
            for lost in store_batches.expire(ctx.engine, job_id=ctx.job_id, lease_seconds=self.lease):
                _crashed(lost)
            rows = store_batches.of_position(ctx.engine, job_id=ctx.job_id, position=self.position)
            back = 0
            for row in rows:
                history = json.loads(row["history_json"] or "[]")
                seen, self.history[row["id"]] = self.history.get(row["id"], 0), len(history)
                back += needs_share(history[seen:])
                if row["status"] == store_batches.RUNNING:
                    self.last_activity = time.monotonic()
                elif row["status"] == store_batches.DONE and row["id"] not in done:
                    done.add(row["id"])
                    self.last_activity = time.monotonic()
                    out = json.loads(row["result_json"] or "{}")
                    if out.get("failed"):
                        self.stop_all()
                        raise RuntimeError(f"batch {row['k']} of {ctx.outcomes[self.position].outcome.type} "
                                           f"{ctx.outcomes[self.position].rule} failed on worker {row['worker']}: "
                                           f"{out['failed']}")
                    if out.get("cancelled"):
                        self.stop_all()
                        raise Cancelled("cancelled on request")
                    yield row["k"], {**out, "last": self.frontier(done), "done": len(done) == len(self.ids)}
            if back:
                self.hand_out(back)
            self.resubmit_untaken(rows)
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

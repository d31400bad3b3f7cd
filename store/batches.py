"""The outcome batches of executions spread over a work pool (``store.models.batches``): cut, handed out, held
under a lease its worker renews, finished once, and handed out again when their worker vanished.

Who may write what: the execution's flow cuts the batches (``create``) and hands out again the ones whose lease ran
out (``expire``); a worker claims a pending batch (``claim``, or a run's next one: ``claim_next``; pending → running,
under a new attempt), renews its lease while it works (``heartbeat``) and finishes it (``finish``) or lets it go
between pieces (``release``: its worker is stopping, or it yields to a lost batch it took with ``claim_lost``). Each
of these is one conditional UPDATE keyed by the attempt, so two processes never both own a batch: a worker whose
batch was handed out again finds its ``finish`` refused, and what it did is done again by the new holder (outcomes
are idempotent through their work keys).

A batch's ``history_json`` lists its earlier attempts, each with how it ended (``outcome``: lost, handed back,
yielded) and, for one let go between pieces, what the attempts had done until then (``did``: the path they reached
and their counts), from where the next attempt goes on. A pending batch whose last attempt was lost is taken before
the others of its run: its worker was killed mid-batch, and the run waits for it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from sqlalchemy import and_, func, insert, select, text, update
from sqlalchemy.engine import Connection, Engine

from store.models.batches import OutcomeBatch

B = OutcomeBatch.__table__

PENDING, RUNNING, DONE, CANCELLED = "pending", "running", "done", "cancelled"
LOST, HANDED_BACK, YIELDED = "lost", "handed back", "yielded"  # how an attempt that did not finish ended
_LOST_MARK = f'%"outcome": "{LOST}"%'  # history_json of a batch lost at some attempt (the last one: checked after)


def create(engine: Engine, *, job_id: int, execution_id: int, position: int,
           ranges: Iterable[tuple[str, str | None, int]]) -> list[int]:
    """Cut the batches of outcome ``position``: one per (after, until, entries); returns their ids in order."""
    rows = [{"job_id": job_id, "execution_id": execution_id, "position": position, "k": k, "after": after,
             "until": until, "entries": entries, "created_at": time.time()}
            for k, (after, until, entries) in enumerate(ranges, start=1)]
    if not rows:
        return []
    with engine.begin() as conn:
        conn.execute(insert(B), rows)
        return list(conn.execute(select(B.c.id).where(B.c.job_id == job_id, B.c.position == position)
                                 .order_by(B.c.k)).scalars())


def get(engine: Engine, batch_id: int) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(B).where(B.c.id == batch_id)).mappings().first()
    return dict(row) if row else None


def claim(engine: Engine, batch_id: int, *, worker: str, task_run_id: str | None) -> int | None:
    """Take pending batch ``batch_id`` for ``worker``; returns the attempt it now holds, or None when the batch is
    not pending (done, cancelled, or held by another)."""
    now = time.time()
    with engine.begin() as conn:
        done = conn.execute(update(B).where(B.c.id == batch_id, B.c.status == PENDING).values(
            status=RUNNING, attempt=B.c.attempt + 1, worker=worker, task_run_id=task_run_id, started_at=now,
            heartbeat_at=now, finished_at=None))
        if not done.rowcount:
            return None
        return int(conn.execute(select(B.c.attempt).where(B.c.id == batch_id)).scalar_one())


@dataclass
class Held:
    """A batch a worker claimed: its attempt, and on PostgreSQL the connection holding the batch's lock (``hold``)."""

    batch_id: int
    attempt: int
    lock: Connection | None = None


def claim_next(engine: Engine, *, job_id: int, worker: str, task_run_id: str | None) -> Held | None:
    """Take the next pending batch of run ``job_id`` for ``worker``, or None when none is pending: a lost one first
    (``claim_lost``), else the first (lowest outcome position, then k). On PostgreSQL the attempt's lock is taken
    before the claim, so a running batch whose lock is missing has lost its holder, with no moment in between. Two
    workers asking at once each get another batch: the conditional UPDATE decides, and the one that lost tries the
    next."""
    while True:
        with engine.connect() as conn:
            lost = _lost(conn, job_id)
            pending = list(conn.execute(select(B.c.id, B.c.attempt).where(B.c.job_id == job_id, B.c.status == PENDING)
                                        .order_by(B.c.position, B.c.k).limit(8)))
        if not lost and not pending:
            return None
        for batch_id, attempt in dict.fromkeys([*lost, *((row.id, row.attempt) for row in pending)]):
            held = _take(engine, batch_id, attempt, worker=worker, task_run_id=task_run_id)
            if held is not None:
                return held


def claim_lost(engine: Engine, *, job_id: int, worker: str, task_run_id: str | None) -> Held | None:
    """Take a pending batch of run ``job_id`` whose last attempt was lost (its worker was killed mid-batch), or None
    when there is none (or others took them first): one read on the run's batches when none waits, so a worker
    asks between the pieces of the batch it does."""
    with engine.connect() as conn:
        lost = _lost(conn, job_id)
    for batch_id, attempt in lost:
        held = _take(engine, batch_id, attempt, worker=worker, task_run_id=task_run_id)
        if held is not None:
            return held
    return None


def _lost(conn: Connection, job_id: int) -> list[tuple[int, int]]:
    """(id, attempt) of the pending batches of run ``job_id`` whose last attempt was lost, in order."""
    rows = conn.execute(select(B.c.id, B.c.attempt, B.c.history_json).where(
        B.c.job_id == job_id, B.c.status == PENDING, B.c.history_json.like(_LOST_MARK)).order_by(B.c.position, B.c.k))
    return [(row.id, row.attempt) for row in rows if last_outcome(row.history_json) == LOST]


def _take(engine: Engine, batch_id: int, attempt: int, *, worker: str, task_run_id: str | None) -> Held | None:
    """Claim pending batch ``batch_id`` as it was at ``attempt`` (its lock first, on PostgreSQL); None when another
    took it or is taking it."""
    lock = hold(engine, batch_id, attempt + 1)
    if lock is False:  # another worker is claiming this one right now
        return None
    now = time.time()
    try:
        with engine.begin() as conn:
            done = conn.execute(update(B).where(B.c.id == batch_id, B.c.status == PENDING,
                                                B.c.attempt == attempt).values(
                status=RUNNING, attempt=attempt + 1, worker=worker, task_run_id=task_run_id, started_at=now,
                heartbeat_at=now, finished_at=None)).rowcount
    except BaseException:
        if lock:
            let_go(lock, batch_id, attempt + 1)
        raise
    if done:
        return Held(batch_id, attempt + 1, lock or None)
    if lock:
        let_go(lock, batch_id, attempt + 1)
    return None


def last_outcome(history_json: str | None) -> str | None:
    """How a batch's last attempt that did not finish ended (None: none did)."""
    history = json.loads(history_json or "[]")
    return history[-1].get("outcome") if history else None


def progress(history_json: str | None) -> dict[str, Any] | None:
    """What the attempts of a batch had done when the latest of them that let it go between pieces did so (yielded
    or handed back): ``last``, the path they reached, and their counts; None when none did."""
    for entry in reversed(json.loads(history_json or "[]")):
        if entry.get("did") is not None:
            return dict(entry["did"])
    return None


def hold(engine: Engine, batch_id: int, attempt: int) -> Connection | None | Literal[False]:
    """On PostgreSQL, a connection of its own holding the session advisory lock (batch id, attempt) while a worker
    does the batch (False: another connection holds it): the store itself then knows the holder lives. A killed
    process's connection closes and its lock goes with it, so the batch is handed out again at once (``expire``)
    instead of when its lease runs out; the lease still covers a machine that vanished (a connection nobody
    closed). None on SQLite (one machine: leases only)."""
    if engine.dialect.name != "postgresql":
        return None
    conn = engine.connect()
    try:
        got = conn.execute(text("SELECT pg_try_advisory_lock(CAST(:b AS integer), CAST(:a AS integer))"),
                           {"b": batch_id, "a": attempt}).scalar()
        conn.commit()
    except Exception:
        conn.close()
        raise
    if not got:
        conn.close()
        return False
    return conn


def let_go(conn: Connection, batch_id: int, attempt: int) -> None:
    """End a ``hold``: its lock released, its connection back in the pool (no lock left on it)."""
    try:
        conn.execute(text("SELECT pg_advisory_unlock(CAST(:b AS integer), CAST(:a AS integer))"),
                     {"b": batch_id, "a": attempt})
        conn.commit()
    finally:
        conn.close()


def _holders_gone(engine: Engine, job_id: int) -> list[int]:
    """PostgreSQL: the running batches of run ``job_id`` whose holder's lock is gone (``claim_next`` takes it before
    the claim)."""
    if engine.dialect.name != "postgresql":
        return []
    with engine.connect() as conn:
        return list(conn.execute(text(
            "SELECT b.id FROM outcome_batches b WHERE b.job_id = :j AND b.status = :running "
            "AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 2 "
            "AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND l.classid::bigint = b.id AND l.objid::bigint = b.attempt)"),
            {"j": job_id, "running": RUNNING}).scalars())


def heartbeat(engine: Engine, held: Iterable[tuple[int, int]]) -> list[int]:
    """Renew the leases of the (batch id, attempt) pairs a worker holds; returns the ids it no longer holds."""
    lost = []
    now = time.time()
    with engine.begin() as conn:
        for batch_id, attempt in held:
            done = conn.execute(update(B).where(B.c.id == batch_id, B.c.attempt == attempt, B.c.status == RUNNING)
                                .values(heartbeat_at=now))
            if not done.rowcount:
                lost.append(batch_id)
    return lost


def finish(engine: Engine, batch_id: int, attempt: int, result: dict[str, Any]) -> bool:
    """Record what attempt ``attempt`` did; False (nothing written) when the batch was handed to another since."""
    with engine.begin() as conn:
        done = conn.execute(update(B).where(B.c.id == batch_id, B.c.attempt == attempt, B.c.status == RUNNING)
                            .values(status=DONE, result_json=json.dumps(result), finished_at=time.time()))
    return bool(done.rowcount)


def release(engine: Engine, batch_id: int, attempt: int, *, why: str = HANDED_BACK,
            did: dict[str, Any] | None = None) -> bool:
    """Give a held batch back: pending again, to be handed out anew. ``why``: ``handed back`` (its worker is
    stopping), ``yielded`` (its worker took a lost batch first), ``lost`` (its holder is gone: ``expire``); ``did``:
    what its attempts had done (``progress``), the next one going on after ``did["last"]``."""
    with engine.begin() as conn:
        row = conn.execute(select(B.c.worker, B.c.task_run_id, B.c.history_json).where(
            B.c.id == batch_id, B.c.attempt == attempt, B.c.status == RUNNING)).first()
        if row is None:
            return False
        entry: dict[str, Any] = {"worker": row.worker, "task_run_id": row.task_run_id, "outcome": why,
                                 "at": time.time()}
        if did is not None:
            entry["did"] = did
        history = json.loads(row.history_json or "[]") + [entry]
        done = conn.execute(update(B).where(B.c.id == batch_id, B.c.attempt == attempt, B.c.status == RUNNING)
                            .values(status=PENDING, worker=None, task_run_id=None, heartbeat_at=None,
                                    history_json=json.dumps(history)))
    return bool(done.rowcount)


def expire(engine: Engine, *, job_id: int, lease_seconds: float, now: float | None = None) -> list[dict[str, Any]]:
    """Hand back every running batch of run ``job_id`` whose holder is gone: its lease ran out (its worker died or
    hangs), or, on PostgreSQL, its holder's lock went with its connection (its process died). Returns them as they
    were (with the worker and task run that held them)."""
    now = now or time.time()
    gone = set(_holders_gone(engine, job_id))
    with engine.connect() as conn:
        stale = [dict(r) for r in conn.execute(select(B).where(
            B.c.job_id == job_id, B.c.status == RUNNING, B.c.heartbeat_at < now - lease_seconds)).mappings()]
        if gone - {row["id"] for row in stale}:
            stale += [dict(r) for r in conn.execute(select(B).where(
                B.c.id.in_(gone - {row["id"] for row in stale}), B.c.status == RUNNING)).mappings()]
    return [row for row in stale if release(engine, row["id"], row["attempt"], why=LOST)]


def cancel_pending(engine: Engine, *, job_id: int) -> int:
    """Cancel the batches of run ``job_id`` no worker took yet (an execution cancelled or ended early)."""
    with engine.begin() as conn:
        return conn.execute(update(B).where(B.c.job_id == job_id, B.c.status == PENDING)
                            .values(status=CANCELLED, finished_at=time.time())).rowcount or 0


def reopen(engine: Engine, *, job_id: int) -> int:
    """Make the cancelled batches of run ``job_id`` pending again (the run is retried: a new flow run of the same
    execution takes its batches up where they were)."""
    with engine.begin() as conn:
        return conn.execute(update(B).where(B.c.job_id == job_id, B.c.status == CANCELLED)
                            .values(status=PENDING, finished_at=None)).rowcount or 0


def of_position(engine: Engine, *, job_id: int, position: int) -> list[dict[str, Any]]:
    """The batches of one outcome of run ``job_id``, in order."""
    with engine.connect() as conn:
        rows = conn.execute(select(B).where(B.c.job_id == job_id, B.c.position == position).order_by(B.c.k))
        return [dict(r) for r in rows.mappings()]


def of_execution(engine: Engine, *, execution_id: int) -> list[dict[str, Any]]:
    """Every batch of plan execution ``execution_id`` (all its runs), with where each ran."""
    with engine.connect() as conn:
        rows = conn.execute(select(B).where(B.c.execution_id == execution_id).order_by(B.c.job_id, B.c.position,
                                                                                      B.c.k))
        return [dict(r) for r in rows.mappings()]


def by_worker(engine: Engine, *, execution_id: int | None = None, since: float | None = None) -> dict[str, int]:
    """Batches done per worker (of one execution, or finished since a time)."""
    where = [B.c.status == DONE]
    if execution_id is not None:
        where.append(B.c.execution_id == execution_id)
    if since is not None:
        where.append(B.c.finished_at >= since)
    with engine.connect() as conn:
        rows = conn.execute(select(B.c.worker, func.count()).where(and_(*where)).group_by(B.c.worker))
        return {str(worker): int(n) for worker, n in rows}


def in_flight(engine: Engine, limit: int = 100) -> list[dict[str, Any]]:
    """The batches running now (any execution), oldest first."""
    with engine.connect() as conn:
        rows = conn.execute(select(B).where(B.c.status == RUNNING).order_by(B.c.started_at).limit(limit))
        return [dict(r) for r in rows.mappings()]

"""Outcome batches: a batch is held by one attempt; a lost or handed-back batch is handed out again and only its new
holder may finish it; cancelled batches reopen for a retried run."""

from __future__ import annotations

import pytest

from store import batches
from store import jobs as store_jobs
from store.engine import make_engine
from tests.conftest import fresh_pg_database


def _batches(engine) -> list[int]:
    job_id = store_jobs.create_job(engine, root="plan", kind="plan")
    return batches.create(engine, job_id=job_id, execution_id=1, position=0,
                          ranges=[("", "/a/m", 10), ("/a/m", None, 4)])


def test_a_batch_is_held_by_one_attempt_and_finished_only_by_it(engine) -> None:
    first, _ = _batches(engine)
    attempt = batches.claim(engine, first, worker="w1", task_run_id="t1")
    assert attempt == 1
    assert batches.claim(engine, first, worker="w2", task_run_id="t2") is None  # held already
    assert batches.finish(engine, first, attempt, {"applied": 10})
    assert batches.get(engine, first)["status"] == batches.DONE


def test_a_batch_whose_lease_ran_out_goes_to_the_next_worker_and_the_old_holder_cannot_finish_it(engine) -> None:
    first, _ = _batches(engine)
    old = batches.claim(engine, first, worker="w1", task_run_id="t1")
    lost = batches.expire(engine, job_id=batches.get(engine, first)["job_id"], lease_seconds=0.0,
                          now=batches.get(engine, first)["heartbeat_at"] + 1)
    assert [row["worker"] for row in lost] == ["w1"]
    assert batches.heartbeat(engine, [(first, old)]) == [first]  # the old holder learns it lost the batch
    new = batches.claim(engine, first, worker="w2", task_run_id="t2")
    assert new == 2
    assert not batches.finish(engine, first, old, {"applied": 10})
    assert batches.finish(engine, first, new, {"applied": 10})
    row = batches.get(engine, first)
    assert row["worker"] == "w2" and '"outcome": "lost"' in row["history_json"]


def test_a_handed_back_batch_is_pending_again_and_cancelled_ones_reopen(engine) -> None:
    first, second = _batches(engine)
    job_id = batches.get(engine, first)["job_id"]
    attempt = batches.claim(engine, first, worker="w1", task_run_id="t1")
    assert batches.release(engine, first, attempt)
    assert batches.get(engine, first)["status"] == batches.PENDING
    assert batches.cancel_pending(engine, job_id=job_id) == 2
    assert batches.reopen(engine, job_id=job_id) == 2
    assert {r["status"] for r in batches.of_position(engine, job_id=job_id, position=0)} == {batches.PENDING}


def test_claim_next_takes_the_first_pending_batch_and_each_only_once(engine) -> None:
    first, second = _batches(engine)
    job_id = batches.get(engine, first)["job_id"]
    assert batches.claim_next(engine, job_id=job_id, worker="w1", task_run_id=None) == batches.Held(first, 1)
    assert batches.claim_next(engine, job_id=job_id, worker="w2", task_run_id=None) == batches.Held(second, 1)
    assert batches.claim_next(engine, job_id=job_id, worker="w1", task_run_id=None) is None
    assert batches.release(engine, first, 1)  # handed back: the next to ask takes it, under a new attempt
    assert batches.claim_next(engine, job_id=job_id, worker="w2", task_run_id=None) == batches.Held(first, 2)


@pytest.mark.postgres
def test_a_batch_whose_holder_died_is_handed_back_at_once_on_postgresql(pg_url) -> None:
    """The holder's lock goes with its connection: a killed worker's batch is lost long before its lease runs out;
    a living holder's batch is not."""
    with fresh_pg_database(pg_url, "assay_hold") as url:
        engine = make_engine(url)
        try:
            first, second = _batches(engine)
            job_id = batches.get(engine, first)["job_id"]
            alive = batches.claim_next(engine, job_id=job_id, worker="w1", task_run_id=None)
            dead = batches.claim_next(engine, job_id=job_id, worker="w1", task_run_id=None)
            assert alive is not None and dead is not None and alive.lock is not None and dead.lock is not None
            assert batches.hold(engine, first, 1) is False  # held: nobody else can take the lock of that attempt
            assert batches.expire(engine, job_id=job_id, lease_seconds=3600) == []
            dead.lock.invalidate()  # its connection closed as a killed process's is
            lost = batches.expire(engine, job_id=job_id, lease_seconds=3600)
            assert [row["id"] for row in lost] == [second]
            assert batches.get(engine, first)["status"] == batches.RUNNING
            batches.let_go(alive.lock, first, 1)
            assert [row["id"] for row in batches.expire(engine, job_id=job_id, lease_seconds=3600)] \
                == [first]  # let go without finishing: gone too
        finally:
            engine.dispose()

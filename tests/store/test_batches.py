"""Outcome batches: a batch is held by one attempt; a lost or handed-back batch is handed out again and only its new
holder may finish it; a lost batch is taken before the others of its run; cancelled batches reopen for a retried
run."""

from __future__ import annotations

import threading
import time

import pytest

from store import batches
from store import jobs as store_jobs
from store.engine import make_engine
from tests.conftest import fresh_pg_database


def _batches(engine, count: int = 2) -> list[int]:
    job_id = store_jobs.create_job(engine, root="plan", kind="plan")
    bounds = ["", *(f"/a/{i:02}" for i in range(1, count)), None]
    return batches.create(engine, job_id=job_id, execution_id=1, position=0,
                          ranges=[(bounds[i], bounds[i + 1], 10) for i in range(count)])


def _lose(engine, batch_id: int, attempt: int) -> None:
    """What ``expire`` does to a batch whose holder is gone."""
    assert batches.release(engine, batch_id, attempt, why=batches.LOST)


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


def test_claim_next_takes_a_lost_batch_before_the_others_of_its_run(engine) -> None:
    first, second, third, fourth = _batches(engine, 4)
    job_id = batches.get(engine, first)["job_id"]
    for batch_id in (first, second, third):
        assert batches.claim(engine, batch_id, worker="w1", task_run_id=None) == 1
    _lose(engine, third, 1)
    assert batches.release(engine, first, 1, why=batches.HANDED_BACK)  # pending again, ahead in order
    assert batches.claim_next(engine, job_id=job_id, worker="w2", task_run_id=None) == batches.Held(third, 2)
    assert batches.claim_next(engine, job_id=job_id, worker="w2", task_run_id=None) == batches.Held(first, 2)
    assert batches.claim_next(engine, job_id=job_id, worker="w2", task_run_id=None) == batches.Held(fourth, 1)


def test_a_yielded_batch_is_not_taken_first_even_when_an_earlier_attempt_was_lost(engine) -> None:
    first, second, third = _batches(engine, 3)
    job_id = batches.get(engine, first)["job_id"]
    for batch_id in (first, second, third):
        assert batches.claim(engine, batch_id, worker="w1", task_run_id=None) == 1
    _lose(engine, third, 1)
    assert batches.claim_lost(engine, job_id=job_id, worker="w2", task_run_id=None) == batches.Held(third, 2)
    assert batches.release(engine, third, 2, why=batches.YIELDED, did={"last": "/a/025", "applied": 3})
    assert batches.release(engine, second, 1, why=batches.HANDED_BACK)
    assert batches.claim_lost(engine, job_id=job_id, worker="w3", task_run_id=None) is None  # nothing lost waits
    assert batches.claim_next(engine, job_id=job_id, worker="w3", task_run_id=None) == batches.Held(second, 2)
    assert batches.claim_next(engine, job_id=job_id, worker="w3", task_run_id=None) == batches.Held(third, 3)
    history = batches.get(engine, third)["history_json"]
    assert batches.last_outcome(history) == batches.YIELDED
    assert batches.progress(history) == {"last": "/a/025", "applied": 3}  # where the next attempt goes on


def test_what_a_batch_let_go_had_done_outlives_a_later_lost_attempt(engine) -> None:
    (first,) = _batches(engine, 1)
    assert batches.progress(batches.get(engine, first)["history_json"]) is None
    batches.claim(engine, first, worker="w1", task_run_id=None)
    assert batches.release(engine, first, 1, why=batches.HANDED_BACK, did={"last": "/a/5", "ids": 5})
    batches.claim(engine, first, worker="w2", task_run_id=None)
    _lose(engine, first, 2)  # its work after /a/5 is unknown: the next attempt goes on from /a/5
    history = batches.get(engine, first)["history_json"]
    assert batches.last_outcome(history) == batches.LOST
    assert batches.progress(history) == {"last": "/a/5", "ids": 5}


def test_workers_claiming_at_once_take_each_batch_once_lost_ones_included(engine) -> None:
    ids = _batches(engine, 12)
    job_id = batches.get(engine, ids[0])["job_id"]
    lost = ids[6:9]
    for batch_id in lost:
        batches.claim(engine, batch_id, worker="gone", task_run_id=None)
        _lose(engine, batch_id, 1)
    taken: dict[str, list[int]] = {}
    start = threading.Barrier(4)

    def worker(name: str) -> None:
        mine = taken.setdefault(name, [])
        start.wait()
        while True:  # as a share does: a lost batch between pieces, the next one after a batch
            held = (batches.claim_lost(engine, job_id=job_id, worker=name, task_run_id=None)
                    or batches.claim_next(engine, job_id=job_id, worker=name, task_run_id=None))
            if held is None:
                return
            mine.append(held.batch_id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(b for mine in taken.values() for b in mine) == sorted(ids)  # every batch once
    rows = {row["id"]: row for row in batches.of_position(engine, job_id=job_id, position=0)}
    assert [(rows[b]["status"], rows[b]["attempt"]) for b in ids] == [
        (batches.RUNNING, 2 if b in lost else 1) for b in ids]
    assert all(rows[b]["worker"] == name for name, mine in taken.items() for b in mine)


def _expired_once_gone(engine, job_id: int) -> list[dict]:
    """``expire`` once the server has ended the backend of a connection closed from our side (it does so a moment
    after: until then its locks are still listed), or what it hands back after 30 s."""
    deadline = time.monotonic() + 30
    while not (lost := batches.expire(engine, job_id=job_id, lease_seconds=3600)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return lost


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
            lost = _expired_once_gone(engine, job_id)
            assert [row["id"] for row in lost] == [second]
            again = batches.claim_lost(engine, job_id=job_id, worker="w2", task_run_id=None)
            assert again is not None and (again.batch_id, again.attempt) == (second, 2) and again.lock is not None
            assert batches.hold(engine, second, 2) is False  # the lost batch's new holder holds its lock
            batches.let_go(again.lock, second, 2)
            assert [row["id"] for row in batches.expire(engine, job_id=job_id, lease_seconds=3600)] == [second]
            assert batches.get(engine, first)["status"] == batches.RUNNING
            batches.let_go(alive.lock, first, 1)
            assert [row["id"] for row in batches.expire(engine, job_id=job_id, lease_seconds=3600)] \
                == [first]  # let go without finishing: gone too
        finally:
            engine.dispose()

"""Outcome batches: a batch is held by one attempt; a lost or handed-back batch is handed out again and only its new
holder may finish it; cancelled batches reopen for a retried run."""

from __future__ import annotations

from store import batches
from store import jobs as store_jobs


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

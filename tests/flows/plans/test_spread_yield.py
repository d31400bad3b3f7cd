"""The worker's side of a spread execution without Prefect: shares (``spread.run_share``) in threads on one SQLite
store, an outcome faked at its executor. A batch whose worker was killed jumps the queue: a worker doing another
batch takes it at its next piece boundary and lets its own go (``yielded``), which is then done from where it was
left; every entry is done once, and the batches' counts add up."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from dsl.model import Plan
from flows.core import outcomes as flow_outcomes
from flows.core.roots import Roots
from flows.core.settings import current
from flows.plans import spread, stages
from flows.plans.execution import open_execution
from store import batches as store_batches
from store import plans as store_plans
from store.engine import get_engine

FILES, PER_BATCH, PIECE = 48, 16, 8


class PieceWork(flow_outcomes.OutcomeExecutor):
    """A classifier that records which worker (thread) did each piece; a worker's first piece waits for ``go``."""

    type = "classifier"
    batch_size = 64

    def __init__(self) -> None:
        self.pieces: list[tuple[str, list[str]]] = []
        self.entered: dict[str, threading.Event] = {"A": threading.Event(), "B": threading.Event()}
        self.go = threading.Event()
        self._lock = threading.Lock()

    def run_batch(self, engine, outcome, rows, ctx) -> flow_outcomes.BatchResult:
        worker = threading.current_thread().name
        with self._lock:
            first = all(who != worker for who, _ in self.pieces)
            self.pieces.append((worker, [r["path"] for r in rows]))
        if first and worker in self.entered:
            self.entered[worker].set()
            assert self.go.wait(60)
        return flow_outcomes.BatchResult(applied=len(rows))

    def of(self, worker: str) -> list[list[str]]:
        return [paths for who, paths in self.pieces if who == worker]


@pytest.fixture
def run(tmp_path: Path, data_dir: Path, monkeypatch) -> Iterator[dict[str, Any]]:
    """A run of a plan over FILES files, indexed, its outcome cut into batches of PER_BATCH: (engine, job id, batch
    ids, paths, the fake executor)."""
    monkeypatch.setenv("ASSAY_DATA_DIR", str(data_dir))
    monkeypatch.setattr(spread, "usable_cores", lambda: 2)  # pieces of PIECE entries, whatever this machine has
    monkeypatch.setattr(spread, "PIECE_SECONDS", 0.0)  # no growing with the pace: the boundaries stay where they are
    monkeypatch.setattr(spread, "JUMP_SECONDS", 0.0)  # a lost batch looked for at every boundary
    flow_outcomes.installed_executors()  # the real one registered first, so replacing it is undone afterwards
    work = PieceWork()
    monkeypatch.setitem(flow_outcomes.EXECUTORS, "classifier", work)
    folder = tmp_path / "pictures"
    folder.mkdir()
    for i in range(FILES):
        (folder / f"p{i:03}.jpg").write_bytes(b"x" * (i + 1))
    url = current().db_url
    engine = get_engine(url)
    plan = Plan.from_object({"name": "spread", "sources": [{"name": "pictures", "type": "filesystem.index",
                                                            "config": {"path": str(folder)}}],
                             "rules": [{"name": "thumbs", "outcomes": [{"type": "classifier"}]}]})
    store_plans.save_plan(engine, definition=plan.to_object(), create=None)
    execution_id, job_id = open_execution(engine, plan, trigger="test", roots=Roots.of([str(tmp_path)]))
    ctx = stages.context(url, job_id)
    stages.scan_source(ctx, 0)
    ranges = spread.cut(ctx, 0, PER_BATCH)
    assert [n for _, _, n in ranges] == [PER_BATCH] * (FILES // PER_BATCH)
    ids = store_batches.create(engine, job_id=job_id, execution_id=execution_id, position=0, ranges=ranges)
    yield {"engine": engine, "job_id": job_id, "ids": ids, "paths": sorted(str(p) for p in folder.iterdir()),
           "work": work}
    stages.forget(url, job_id)


def share(job_id: int, name: str, results: dict[str, Any]) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.__setitem__(name, spread.run_share(job_id, worker=name)),
                              name=name)
    thread.start()
    return thread


def batch_paths(run: dict[str, Any], batch_id: int) -> list[str]:
    row = store_batches.get(run["engine"], batch_id)
    return [p for p in run["paths"] if p > row["after"] and (row["until"] is None or p <= row["until"])]


def test_a_lost_batch_is_taken_at_the_next_piece_and_the_batch_let_go_is_done_from_where_it_was(run) -> None:
    engine, job_id, work = run["engine"], run["job_id"], run["work"]
    killed = store_batches.claim_next(engine, job_id=job_id, worker="killed", task_run_id=None)
    assert killed is not None and killed.batch_id == run["ids"][0]
    results: dict[str, Any] = {}
    threads = [share(job_id, "A", results), share(job_id, "B", results)]  # each takes one of the other batches
    try:
        assert work.entered["A"].wait(60) and work.entered["B"].wait(60)  # both mid-way through their first piece
        assert store_batches.release(engine, killed.batch_id, killed.attempt, why=store_batches.LOST)  # as expire
    finally:
        work.go.set()
        for thread in threads:
            thread.join(60)
    rows = {row["id"]: row for row in store_batches.of_position(engine, job_id=job_id, position=0)}
    assert all(row["status"] == store_batches.DONE for row in rows.values()), rows
    done = Counter(path for _, paths in work.pieces for path in paths)
    assert sorted(done) == run["paths"] and set(done.values()) == {1}  # every entry once
    lost = rows[killed.batch_id]
    redid = lost["worker"]
    assert redid in ("A", "B") and store_batches.last_outcome(lost["history_json"]) == store_batches.LOST
    assert work.of(redid)[1] == batch_paths(run, killed.batch_id)[:PIECE]  # right after its first piece
    yielded = [row for row in rows.values() if store_batches.YIELDED in row["history_json"]]
    assert len(yielded) == 1, rows  # the other worker had no reason to let its batch go
    (own,) = yielded
    assert work.of(redid)[0] == batch_paths(run, own["id"])[:PIECE]
    assert [b.get("yielded", False) for b in results[redid]["batches"]][:2] == [True, False]
    results_of = {row["id"]: json.loads(row["result_json"]) for row in rows.values()}
    assert results_of[own["id"]]["applied"] == PER_BATCH  # the two attempts' counts add up
    assert sum(out["applied"] for out in results_of.values()) == FILES


def test_a_stopping_worker_hands_its_batch_back_between_pieces_and_the_next_goes_on_from_there(run) -> None:
    engine, job_id, work = run["engine"], run["job_id"], run["work"]
    work.go.set()
    original = work.run_batch

    def stop_after_one_piece(*args: Any) -> flow_outcomes.BatchResult:
        spread.STOPPING.set()
        return original(*args)

    work.run_batch = stop_after_one_piece  # type: ignore[method-assign]
    try:
        first = spread.run_share(job_id, worker="A")
    finally:
        spread.STOPPING.clear()
        work.run_batch = original  # type: ignore[method-assign]
    assert first["batches"] == [{"k": 1, "handed_back": True}]
    row = store_batches.get(engine, run["ids"][0])
    assert row["status"] == store_batches.PENDING
    assert store_batches.progress(row["history_json"])["last"] == batch_paths(run, row["id"])[PIECE - 1]
    spread.run_share(job_id, worker="B")
    done = Counter(path for _, paths in work.pieces for path in paths)
    assert sorted(done) == run["paths"] and set(done.values()) == {1}
    out = json.loads(store_batches.get(engine, run["ids"][0])["result_json"])
    assert out["applied"] == PER_BATCH and out["worker"] == "B"


def test_a_worker_redoing_a_lost_batch_does_not_let_it_go_for_another_lost_one(run) -> None:
    engine, job_id, work = run["engine"], run["job_id"], run["work"]
    first, second, third = (store_batches.claim_next(engine, job_id=job_id, worker="killed", task_run_id=None)
                            for _ in range(3))
    assert first is not None and second is not None and third is not None
    assert store_batches.release(engine, first.batch_id, first.attempt, why=store_batches.HANDED_BACK)
    assert store_batches.release(engine, second.batch_id, second.attempt, why=store_batches.LOST)
    results: dict[str, Any] = {}
    thread = share(job_id, "A", results)
    try:
        assert work.entered["A"].wait(60)  # in the lost batch, taken before the first
        assert store_batches.release(engine, third.batch_id, third.attempt, why=store_batches.LOST)
    finally:
        work.go.set()
        thread.join(60)
    assert [b["k"] for b in results["A"]["batches"]] == [2, 3, 1]  # the lost one through, the other lost one next
    assert all(not b.get("yielded") for b in results["A"]["batches"])


def test_a_yielded_batch_gets_no_share_of_its_own_a_lost_or_handed_back_one_does() -> None:
    assert not spread.needs_share([{"outcome": store_batches.YIELDED}])
    assert not spread.needs_share([])
    assert spread.needs_share([{"outcome": store_batches.LOST}])
    assert spread.needs_share([{"outcome": store_batches.YIELDED}, {"outcome": store_batches.HANDED_BACK}])


def test_pieces_last_about_their_seconds_within_their_bounds() -> None:
    cut = stages.Pieces(least=8, seconds=0.3, step=2)
    assert cut.next(64) == 8 and cut.next(4) == 4  # never more than the outcome's batch size
    cut.took(8, 0.1)  # three times too quick: twice as many at most
    assert cut.next(64) == 16
    cut.took(16, 0.4)  # 12 in 0.3 s
    assert cut.next(64) == 12
    cut.took(12, 0.5)  # 7.2 in 0.3 s: a multiple of the cores, but never fewer than the least
    assert cut.next(64) == 8
    cut.took(8, 0.22)  # 10.9 in 0.3 s: 10, a multiple of the cores
    assert cut.next(64) == 10


def test_shares_slow_to_hand_out_are_not_taken_for_untaken_ones(run, monkeypatch) -> None:
    """Handing out a share can take seconds on a loaded machine: the wait for a worker to take one counts from when
    the shares are out, so a slow first hand-out does not make the execution hand out more (65 batches got 10 task
    runs instead of 4 in the cluster benchmark)."""
    handed: list[str] = []
    clock = [1000.0]

    class SlowShares:
        def delay(self, job_id: int, plan: str, n: str) -> None:
            clock[0] += 5.0  # each hand-out takes 5 s: the four of them outlast the two leases the check waits
            handed.append(n)

    monkeypatch.setattr(spread, "share_task", SlowShares())
    monkeypatch.setattr(spread.time, "monotonic", lambda: clock[0])
    ctx = stages.context(current().db_url, run["job_id"])
    follow = spread._Following(ctx, 0, run["ids"], workers=2)
    follow.hand_out(follow.first)
    assert len(handed) == follow.first
    rows = store_batches.of_position(run["engine"], job_id=run["job_id"], position=0)  # all pending, none taken yet
    follow.resubmit_untaken(rows)
    assert len(handed) == follow.first  # no worker had the time to take one: nothing more is handed out
    clock[0] += 2 * follow.lease + 0.1  # two leases with none of them taken: the shares went to workers now gone
    follow.resubmit_untaken(rows)
    assert len(handed) > follow.first

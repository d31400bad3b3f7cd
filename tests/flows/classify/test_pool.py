"""The classifier's worker pool: the real worker in spawned processes, recovery from a dead worker, the thread mode,
the bounded window, completion order."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from examples import mediagen as media
from flows.classify.model import FileResult, FileTask, Params
from flows.classify.pool import Pool, default_mode
from flows.env import ConfigError


def task(path: Path, entry_id: int, cache_root: Path, operations=("thumbnail", "metadata")) -> FileTask:
    return FileTask(entry_id=entry_id, path=str(path), media_type=None, mime=None, extension=path.suffix.lower(),
                    size=path.stat().st_size if path.exists() else 0, operations=tuple(operations),
                    params=Params(max_width=96, max_height=96), cache_root=str(cache_root))


def crash_on_bad(t: FileTask) -> FileResult:
    """A task function that kills its worker process on files named crash* (as the OOM killer would)."""
    if Path(t.path).name.startswith("crash"):
        os._exit(9)
    return FileResult(entry_id=t.entry_id, path=t.path, done=t.operations)


@pytest.fixture(scope="module")
def process_pool():
    pool = Pool(mode="process", workers=2)
    yield pool
    pool.shutdown()


def test_process_mode_runs_the_real_worker_on_a_jpeg_and_a_pdf(process_pool, tmp_path):
    media.jpeg(tmp_path / "photo.jpg", (400, 300))
    media.pdf(tmp_path / "guide.pdf", pages=2)
    tasks = [task(tmp_path / "photo.jpg", 1, tmp_path), task(tmp_path / "guide.pdf", 2, tmp_path)]
    results = {r.entry_id: r for r in process_pool.run_tasks(tasks)}
    assert set(results) == {1, 2}
    assert results[1].metadata["width"] == 400 and not results[1].errors
    thumb = [a for a in results[1].artifacts if a.type == "thumbnail"][0]
    assert (tmp_path / thumb.cache_path).is_file()
    assert results[2].metadata["pages"] == 2 and results[2].hash.startswith("xxh128:")


def test_a_dead_worker_fails_only_the_files_in_the_pool_and_the_pool_recovers(process_pool, tmp_path):
    for name in ("ok1.jpg", "crash.jpg", "ok2.jpg"):
        (tmp_path / name).write_bytes(b"x")
    tasks = [task(tmp_path / n, i, tmp_path) for i, n in enumerate(("ok1.jpg", "crash.jpg", "ok2.jpg"))]
    before = process_pool.restarts
    results = {r.entry_id: r for r in process_pool.run_tasks(tasks, crash_on_bad)}
    assert set(results) == {0, 1, 2}  # every file gets a result
    assert "died" in results[1].errors["thumbnail"]
    assert process_pool.restarts == before + 1
    again = list(process_pool.run_tasks([task(tmp_path / "ok1.jpg", 7, tmp_path)], crash_on_bad))
    assert again[0].entry_id == 7 and not again[0].errors and again[0].done == ("thumbnail", "metadata")


def test_thread_mode_keeps_a_bounded_window_and_stops_submitting_on_cancel(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    in_flight, peak, lock = [0], [0], threading.Lock()
    release = threading.Event()

    def slow(t: FileTask) -> FileResult:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        release.wait(5)
        with lock:
            in_flight[0] -= 1
        return FileResult(entry_id=t.entry_id, path=t.path)

    pool = Pool(mode="thread", workers=2)
    submitted = []

    def tasks():
        for i in range(100):
            submitted.append(i)
            yield task(tmp_path / "f.txt", i, tmp_path)

    stop = threading.Event()
    got = []
    try:
        stream = pool.run_tasks(tasks(), slow, window=4, should_cancel=stop.is_set)
        release.set()
        for res in stream:
            got.append(res.entry_id)
            if len(got) == 10:
                stop.set()
    finally:
        pool.shutdown()
    assert peak[0] <= 4
    assert len(submitted) < 20 and len(got) == len(submitted)  # nothing new after cancel; in-flight ones finish
    assert sorted(got) == list(range(len(got)))


def test_a_task_that_raises_becomes_that_files_error(tmp_path):
    def boom(t: FileTask) -> FileResult:
        raise RuntimeError("decoder exploded")

    pool = Pool(mode="thread", workers=1)
    try:
        (res,) = pool.run_tasks([task(tmp_path / "x.jpg", 3, tmp_path, ("metadata",))], boom)
    finally:
        pool.shutdown()
    assert res.errors == {"metadata": "RuntimeError: decoder exploded"}


def test_the_pool_mode_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("ASSAY_CLASSIFY_POOL", "thread")
    assert default_mode() == "thread"
    monkeypatch.setenv("ASSAY_CLASSIFY_POOL", "forks")
    with pytest.raises(ConfigError, match="ASSAY_CLASSIFY_POOL='forks'"):
        default_mode()

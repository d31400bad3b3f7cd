"""The extraction pool: the real extractor in spawned worker processes, keys passed through, a file past its timeout
stopped (its worker killed, the others unharmed), a dying worker replaced, cancellation, the window, the thread
mode, and ``extract_now``."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from flows.documents import worker
from flows.documents.model import FILTER_FAILED, ExtractOptions, Extracted, Page
from flows.documents.worker import Pool, default_mode, default_workers, extract_now, run_extractions
from flows.env import ConfigError

HANG_SECONDS = 30.0


def fake(path: str, options: ExtractOptions) -> Extracted:
    """A stand-in extractor: files named hang* never finish (as a pathological PDF would), crash* kill their worker
    process (as the OOM killer would), raise* raise; the rest give one page holding the file name and the pid."""
    name = Path(path).name
    if name.startswith("hang"):
        time.sleep(HANG_SECONDS)
    if name.startswith("crash"):
        os._exit(9)
    if name.startswith("raise"):
        raise ValueError("bad luck")
    return Extracted(path=path, format="text", pages=[Page(1, f"{name} {os.getpid()}")], total_pages=1)


@pytest.fixture(scope="module")
def pool():
    pool = Pool(mode="process", workers=2)
    yield pool
    pool.shutdown()


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> dict[str, str]:
    from examples.mediagen import documents as dm  # here, not at the top: worker processes import this module for fake

    return dm.library(tmp_path_factory.mktemp("library"))


def test_the_real_extractor_runs_in_worker_processes_and_keys_come_back(pool, library):
    tasks = [((i, rel), path) for i, (rel, path) in enumerate(library.items())]
    results = dict(pool.run(tasks, ExtractOptions(timeout=60)))
    assert set(results) == {key for key, _ in tasks}
    by_rel = {rel: result for (_, rel), result in results.items()}
    assert by_rel["games/coop/rules.pdf"].total_pages == 5
    assert by_rel["games/coop/scan.pdf"].pages[0].ocr
    assert by_rel["games/coop/encrypted.pdf"].error_code == FILTER_FAILED
    assert by_rel["docs/api/plan.docx"].ok
    assert all(result.path == library[rel] for rel, result in by_rel.items())


def test_workers_are_processes_and_are_kept_for_the_next_run(pool, tmp_path):
    tasks = [(n, str(tmp_path / f"f{n}.txt")) for n in range(6)]
    first = {int(r.pages[0].text.split()[1]) for _, r in pool.run(tasks, ExtractOptions(), fn=fake)}
    second = {int(r.pages[0].text.split()[1]) for _, r in pool.run(tasks, ExtractOptions(), fn=fake)}
    assert os.getpid() not in first
    assert first == second and 1 <= len(first) <= 2


def test_a_file_past_its_timeout_is_stopped_and_the_others_finish(pool, tmp_path):
    killed = pool.killed
    names = ["a.txt", "hang.txt", "b.txt", "c.txt", "d.txt"]
    results = dict(pool.run([(name, str(tmp_path / name)) for name in names], ExtractOptions(timeout=1.0),
                            fn=fake))
    assert set(results) == set(names)
    assert results["hang.txt"].error_code == FILTER_FAILED
    assert results["hang.txt"].error == "extraction timed out after 1 s"
    assert all(results[name].ok for name in names if name != "hang.txt")
    assert pool.killed == killed + 1
    # the pool goes on with a fresh worker
    assert all(r.ok for _, r in pool.run([(1, str(tmp_path / "e.txt"))], ExtractOptions(), fn=fake))


def test_two_hanging_files_both_time_out(pool, tmp_path):
    names = ["hang1.txt", "hang2.txt", "ok.txt"]
    results = dict(pool.run([(name, str(tmp_path / name)) for name in names], ExtractOptions(timeout=0.5),
                            fn=fake))
    assert results["hang1.txt"].error == results["hang2.txt"].error == "extraction timed out after 0.5 s"
    assert results["ok.txt"].ok


def test_a_worker_that_dies_is_replaced_and_its_file_reported_after_one_retry(pool, tmp_path):
    died = pool.died
    names = ["a.txt", "crash.txt", "b.txt", "c.txt"]
    results = dict(pool.run([(name, str(tmp_path / name)) for name in names], ExtractOptions(), fn=fake))
    assert results["crash.txt"].error_code == FILTER_FAILED
    assert "worker process died" in results["crash.txt"].error
    assert all(results[name].ok for name in ("a.txt", "b.txt", "c.txt"))
    assert pool.died == died + 2  # tried twice


def test_a_worker_is_replaced_after_max_tasks_files(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "MAX_TASKS", 3)
    pool = Pool(mode="process", workers=1)
    try:
        results = [r for _, r in pool.run([(n, str(tmp_path / f"f{n}.txt")) for n in range(7)], ExtractOptions(),
                                          fn=fake)]
    finally:
        pool.shutdown()
    assert len(results) == 7 and all(r.ok for r in results)
    pids = [int(r.pages[0].text.split()[1]) for r in results]
    assert len(set(pids)) == 3 and all(pids.count(pid) <= 3 for pid in pids)


def test_concurrent_runs_share_the_workers_and_each_gets_at_least_one(pool, tmp_path):
    first = pool.run([(n, str(tmp_path / f"a{n}.txt")) for n in range(8)], ExtractOptions(), fn=fake)
    second = pool.run([(n, str(tmp_path / f"b{n}.txt")) for n in range(8)], ExtractOptions(), fn=fake)
    results = [next(first)[1], next(second)[1]]  # both runs hold workers now
    results += [r for _, r in first] + [r for _, r in second]
    assert len(results) == 16 and all(r.ok for r in results)
    assert len({r.pages[0].text.split()[1] for r in results}) <= pool.workers + 1


def test_an_extractor_that_raises_gives_filter_failed(pool, tmp_path):
    ((_, result),) = pool.run([(1, str(tmp_path / "raise.txt"))], ExtractOptions(), fn=fake)
    assert result.error_code == FILTER_FAILED and result.error == "extraction failed: ValueError: bad luck"


def test_no_new_file_starts_once_cancelled(pool, tmp_path):
    seen: list[int] = []
    taken: list[int] = []

    def tasks():
        for n in range(40):
            taken.append(n)
            yield n, str(tmp_path / f"f{n}.txt")

    for key, _ in pool.run(tasks(), ExtractOptions(), fn=fake, should_cancel=lambda: len(seen) >= 1):
        seen.append(key)
    # only what was in flight when the first result came back finished; nothing was taken from the source after
    window = pool.workers * worker.DEPTH
    assert seen and set(seen) <= set(taken)
    assert len(taken) <= window + 1 and len(seen) <= window


def test_the_task_source_is_read_lazily_within_the_window(pool, tmp_path):
    taken = 0

    def tasks():
        nonlocal taken
        for n in range(30):
            taken += 1
            yield n, str(tmp_path / f"f{n}.txt")

    results = pool.run(tasks(), ExtractOptions(), fn=fake, window=3)
    next(results)
    assert taken <= 4  # the window, plus the one that found no room
    assert len(list(results)) == 29


def test_leaving_a_run_early_returns_its_workers(pool, tmp_path):
    results = pool.run([(n, str(tmp_path / f"f{n}.txt")) for n in range(10)], ExtractOptions(), fn=fake)
    next(results)
    results.close()
    assert all(r.ok for _, r in pool.run([(1, str(tmp_path / "x.txt"))], ExtractOptions(), fn=fake))


def test_thread_mode_runs_in_this_process_and_reports_a_hang_as_timed_out(tmp_path):
    release = threading.Event()

    def hang_in_thread(path: str, options: ExtractOptions) -> Extracted:
        if Path(path).name.startswith("hang"):
            release.wait(HANG_SECONDS)
        return fake(path, options)

    pool = Pool(mode="thread", workers=2)
    try:
        names = ["a.txt", "hang.txt", "b.txt"]
        results = dict(pool.run([(n, str(tmp_path / n)) for n in names], ExtractOptions(timeout=0.5),
                                fn=hang_in_thread))
        assert results["hang.txt"].error.startswith("extraction timed out after 0.5 s")
        assert int(results["a.txt"].pages[0].text.split()[1]) == os.getpid()
    finally:
        release.set()
        pool.shutdown()


def test_thread_mode_keeps_to_the_window(tmp_path):
    lock = threading.Lock()
    running = peak = 0

    def counting(path: str, options: ExtractOptions) -> Extracted:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            return fake(path, options)
        finally:
            with lock:
                running -= 1

    pool = Pool(mode="thread", workers=4)
    try:
        results = list(pool.run([(n, str(tmp_path / f"{n}.txt")) for n in range(20)], ExtractOptions(),
                                fn=counting, window=2))
    finally:
        pool.shutdown()
    assert len(results) == 20 and peak <= 2


def test_extract_now_and_run_extractions_use_the_shared_pool(library, monkeypatch):
    monkeypatch.setenv("ASSAY_DOCUMENT_WORKERS", "1")
    try:
        result = extract_now(library["games/coop/notes.md"], ExtractOptions())
        assert result.ok and result.toc[0].title == "Card Game Notes"
        results = dict(run_extractions([("md", library["games/coop/notes.md"]), ("py",
                                        library["programming/python/fib.py"])], ExtractOptions()))
        assert results["py"].format == "code" and results["md"].format == "markdown"
    finally:
        worker.shutdown()


def test_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("ASSAY_DOCUMENT_POOL", "thread")
    monkeypatch.setenv("ASSAY_DOCUMENT_WORKERS", "3")
    assert default_mode() == "thread" and default_workers() == 3
    monkeypatch.setenv("ASSAY_DOCUMENT_POOL", "fork")
    with pytest.raises(ConfigError, match="ASSAY_DOCUMENT_POOL='fork'"):
        default_mode()
    monkeypatch.setenv("ASSAY_DOCUMENT_WORKERS", "zero")
    with pytest.raises(ConfigError, match="ASSAY_DOCUMENT_WORKERS"):
        default_workers()

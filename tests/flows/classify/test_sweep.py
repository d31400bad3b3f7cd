"""The cache sweep: orphans removed, shared and young files kept, rows whose file is missing reported; deleting an
entry cascades its artifact rows so the next sweep removes its files. Only work that writes cache files holds the
sweep back, and a sweep held back is owed until it is done."""

from __future__ import annotations

import os
import time

from sqlalchemy import delete, insert

import pytest

from dsl.model import Plan
from flows.classify import sweep
from flows.classify.sweep import classification_in_flight, find_orphans, missing_files, sweep_cache
from flows.plans.execution import open_execution
from store import cache
from store import jobs as store_jobs
from store import plans as store_plans
from store.models import Artifact, Entry

A, E = Artifact.__table__, Entry.__table__


def add_entry(engine, path: str) -> int:
    with engine.begin() as conn:
        return conn.execute(insert(E).values(path=path, parent="/x", name=path.rsplit("/", 1)[-1],
                                             kind="file", indexed_at=time.time())).inserted_primary_key[0]


def add_artifact(engine, entry_id: int, rel: str) -> None:
    with engine.begin() as conn:
        conn.execute(insert(A).values(entry_id=entry_id, type="thumbnail", cache_path=rel, value_json="{}"))


def age(data_dir, rel: str, seconds: float = 3600) -> None:
    t = time.time() - seconds
    os.utime(data_dir / rel, (t, t))


def test_sweep_removes_orphans_and_keeps_files_rows_point_at_even_when_shared(engine, data_dir):
    shared = cache.put(data_dir, b"same thumbnail")
    orphan = cache.put(data_dir, b"nobody's thumbnail")
    a, b = add_entry(engine, "/x/a.jpg"), add_entry(engine, "/x/b.jpg")
    add_artifact(engine, a, shared)
    add_artifact(engine, b, shared)  # identical thumbnails: one cache file, two rows
    for rel in (shared, orphan):
        age(data_dir, rel)
    (data_dir / "cache" / "README").write_text("not a cache path: never touched")
    result = sweep_cache(engine, data_dir)
    assert (result.scanned, result.removed, result.kept) == (2, 1, 1)
    assert not (data_dir / orphan).exists() and (data_dir / shared).is_file()
    assert (data_dir / "cache" / "README").exists()
    with engine.begin() as conn:  # deleting one entry keeps the shared file; deleting both frees it
        conn.execute(delete(E).where(E.c.id == a))
    assert sweep_cache(engine, data_dir).removed == 0 and (data_dir / shared).is_file()
    with engine.begin() as conn:
        conn.execute(delete(E).where(E.c.id == b))
    assert sweep_cache(engine, data_dir).removed == 1 and not (data_dir / shared).exists()


def test_citation_excerpts_are_cache_files_the_sweep_keeps_while_referenced_and_removes_after(engine, data_dir):
    kept = cache.put(data_dir, b"%PDF- pages 2-3", ext="pdf")
    orphans = [cache.put(data_dir, b"clip " + ext.encode(), ext=ext) for ext in ("mp4", "mka", "opus", "txt")]
    add_artifact(engine, add_entry(engine, "/x/book.pdf"), kept)
    for rel in (kept, *orphans):
        assert cache.is_cache_path(rel) and cache.mime_type(rel) != "application/octet-stream"
        age(data_dir, rel)
    result = sweep_cache(engine, data_dir)
    assert (result.scanned, result.removed) == (5, 4) and (data_dir / kept).is_file()
    assert cache.mime_type(kept) == "application/pdf" and cache.mime_type(orphans[-1]).startswith("text/plain")


def test_young_orphans_are_kept_while_classification_is_in_flight_and_removed_once_it_is_not(engine, data_dir):
    rel = cache.put(data_dir, b"just written by a worker, row not committed yet")
    job = store_jobs.create_job(engine, root="/x", kind="classify")  # pending: a worker may be about to commit
    assert sweep_cache(engine, data_dir).removed == 0 and (data_dir / rel).is_file()
    age(data_dir, rel, seconds=3600)  # older than the grace: no batch keeps a file that long before its row
    assert sweep_cache(engine, data_dir).removed == 1
    rel = cache.put(data_dir, b"another young orphan")
    store_jobs.finish_job(engine, job_id=job, status="completed")
    assert sweep_cache(engine, data_dir).removed == 1 and not (data_dir / rel).exists()  # nothing in flight


def test_storing_bytes_already_in_the_cache_makes_the_file_young_again(engine, data_dir):
    rel = cache.put(data_dir, b"an old orphan a worker is about to reuse")
    age(data_dir, rel)
    assert cache.put(data_dir, b"an old orphan a worker is about to reuse") == rel
    assert time.time() - (data_dir / rel).stat().st_mtime < 60


def test_dry_run_counts_and_rows_whose_file_is_missing_are_reported(engine, data_dir):
    orphan = cache.put(data_dir, b"orphan")
    kept = cache.put(data_dir, b"kept")
    gone = cache.put(data_dir, b"gone")
    entry = add_entry(engine, "/x/c.jpg")
    add_artifact(engine, entry, kept)
    add_artifact(engine, entry, gone)
    os.unlink(data_dir / gone)
    result = sweep_cache(engine, data_dir, grace=0, dry_run=True)
    assert result.orphans == [orphan] and result.removed == 0 and (data_dir / orphan).exists()
    assert [rel for rel, _ in find_orphans(engine, data_dir)] == [orphan]
    count, sample = missing_files(engine, data_dir)
    assert count == 1 and sample[0]["cachePath"] == gone and sample[0]["entryId"] == entry


def test_a_missing_cache_dir_is_an_empty_sweep(engine, tmp_path):
    assert sweep_cache(engine, tmp_path / "nowhere").scanned == 0


def running_execution(engine, name: str, outcomes: list[dict], *, trigger: str = "manual") -> int:
    """A plan execution left running, as one in another process (a watcher's, a worker's) is."""
    plan = Plan.from_object({"name": name, "sources": [{"name": "home", "type": "filesystem.index",
                                                        "config": {"path": "/x"}}], "outcomes": outcomes})
    store_plans.save_plan(engine, definition=plan.to_object(), create=True)
    return open_execution(engine, plan, trigger=trigger, roots=None)[0]


def test_only_running_executions_whose_plan_makes_images_hold_the_sweep_back(engine):
    documents = running_execution(engine, "documents", [{"type": "selection_set", "selectionSetName": "docs",
                                                         "operation": "add"}], trigger="watch")
    metadata = running_execution(engine, "metadata", [{"type": "classifier",
                                                       "classifierOperation": "extract_metadata"}])
    assert not classification_in_flight(engine)  # neither writes a cache file
    thumbs = running_execution(engine, "thumbs", [{"type": "classifier", "classifierOperation": "generate_thumbnail"}])
    assert classification_in_flight(engine)
    store_plans.finish_execution(engine, execution_id=thumbs, status="success")
    assert not classification_in_flight(engine)
    chained = running_execution(engine, "chained", [{"type": "chained", "outcomes": [
        {"type": "selection_set", "selectionSetName": "media", "operation": "add"}, {"type": "classifier"}]}])
    assert classification_in_flight(engine)
    for execution in (documents, metadata, chained):
        store_plans.finish_execution(engine, execution_id=execution, status="success")
    store_plans.start_execution(engine, plan_name="documents")  # no run row yet: what it runs is unknown
    assert classification_in_flight(engine)


@pytest.fixture
def quick_retry(monkeypatch):
    monkeypatch.setattr(sweep, "RETRY", 0.02)


def wait_gone(path, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not path.exists()


def test_a_sweep_held_back_by_work_in_flight_is_done_once_that_work_ends_without_sweeping(engine, data_dir,
                                                                                          quick_retry):
    rel = cache.put(data_dir, b"a replaced thumbnail")
    other = running_execution(engine, "thumbs", [{"type": "classifier"}])  # another process's run
    assert sweep.sweep_and_settle(engine, data_dir).young == 1 and (data_dir / rel).is_file()
    time.sleep(0.2)  # checks go on while it runs
    assert (data_dir / rel).is_file()
    store_plans.finish_execution(engine, execution_id=other, status="error")  # reaped: no sweep of its own
    assert wait_gone(data_dir / rel)
    assert list(find_orphans(engine, data_dir)) == []


def test_an_owed_sweep_removes_the_kept_files_once_past_the_grace_though_work_is_still_in_flight(
        engine, data_dir, quick_retry, monkeypatch):
    monkeypatch.setattr(sweep, "GRACE", 3.0)
    rel = cache.put(data_dir, b"kept while a job was pending")
    store_jobs.create_job(engine, root="/x", kind="classify")  # pending, and stays so (a stuck row)
    assert sweep.sweep_and_settle(engine, data_dir).young == 1 and (data_dir / rel).is_file()
    assert wait_gone(data_dir / rel)  # the grace passed: no write is that slow to commit its row
    assert classification_in_flight(engine)

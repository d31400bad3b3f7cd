"""The classifier on a full disk (flows/classify: worker, executor, service): the real worker on generated photos,
the artifact cache on a small tmpfs that fills up mid-run. A full disk is no file's error: the worker stops the
file's operations and says so, the run writes what finished and stops with NO_SPACE (a plan run's error, a job's
NO_SPACE row, a sync call's NoSpace), nothing half-written or orphaned stays in the cache, and once space is freed
the same run does the files it had not done and only those. A temporary file a killed write left is swept later."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import func, select

from dsl.model import Plan
from examples import mediagen as media
from flows.classify import executor as cx
from flows.classify import service as classify_service
from flows.classify.model import OPERATIONS, FileResult, FileTask, Params
from flows.classify.sweep import TEMP_GRACE, find_orphans, missing_files, sweep_cache
from flows.classify.worker import classify_file
from flows.core.roots import Roots
from flows.core.runner import JobRunner
from flows.index.service import run_index
from flows.plans.service import PlanService
from store import cache
from store import jobs as store_jobs
from store.diagnostics import diagnose
from store.engine import make_engine
from store.errors import NoSpace
from store.models import OutcomeRecord
from tests.small_disk import SmallDisk, small_disk

PHOTOS = 40
THUMBNAIL_PAGES = 2  # a 320x240 thumbnail of these photos is ~6 KB: two 4 KiB pages of the tmpfs
OUTCOMES = OutcomeRecord.__table__
ROOM_FOR = 24  # thumbnails that fit when a run starts: the first write chunk (16 files) commits, the run stops after


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("photos")
    for i in range(PHOTOS):
        media.jpeg(root / f"p{i:02d}.jpg", (640, 480), seed=i)  # each its own thumbnail: none shared in the cache
    return root


@pytest.fixture(scope="module")
def disk(tmp_path_factory) -> Iterator[SmallDisk]:
    with small_disk(tmp_path_factory.mktemp("cache") / "disk", 1024) as mounted:
        yield mounted


class Counting:
    """The real worker, counting the files it is given (in the pool's threads)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, task: FileTask) -> FileResult:
        with self.lock:
            self.calls.append(Path(task.path).name)
        return classify_file(task)


@pytest.fixture
def cache_on_disk(disk: SmallDisk, monkeypatch) -> Iterator[tuple[Path, Counting]]:
    """The data dir (the cache) on the small disk, the real worker in threads; the disk emptied afterwards."""
    data = disk.path / "data"
    data.mkdir()
    worker = Counting()
    monkeypatch.setattr(cx.DEFAULT_RUN, "classify", worker)
    monkeypatch.setattr(cx.DEFAULT_RUN, "pool_mode", "thread")
    monkeypatch.setattr("flows.core.capability._data_dir", data)
    yield data, worker
    disk.unfill()
    for path in sorted(data.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    data.rmdir()


def leave_room(disk: SmallDisk, thumbnails: int) -> None:
    disk.fill(thumbnails * THUMBNAIL_PAGES * 4096 + 2048)


def recorded(engine) -> dict[str, int]:
    """The work keys written, by status (applied / error)."""
    with engine.connect() as conn:
        return dict(conn.execute(select(OUTCOMES.c.status, func.count()).group_by(OUTCOMES.c.status)).all())


def cache_files(data: Path) -> list[Path]:
    return [p for p in cache.cache_dir(data).rglob("*") if p.is_file()] if cache.cache_dir(data).exists() else []


def test_the_worker_on_a_full_cache_reports_no_space_not_an_error_of_the_file(photos, disk, cache_on_disk):
    data, _ = cache_on_disk
    disk.fill(0)
    task = FileTask(entry_id=1, path=str(photos / "p00.jpg"), media_type="image", mime="image/jpeg",
                    extension=".jpg", size=(photos / "p00.jpg").stat().st_size, operations=OPERATIONS,
                    params=Params(), cache_root=str(data))
    result = classify_file(task)
    assert result.errors == {} and result.done == ()  # nothing failed for the file; nothing is done either
    assert result.no_space is not None and str(cache.cache_dir(data)) in result.no_space
    assert cache_files(data) == []  # no thumbnail, no temporary file beside where it would have gone
    disk.unfill()
    again = classify_file(task)
    assert again.no_space is None and again.done == OPERATIONS and len(cache_files(data)) == 1


def _plan(root: Path) -> Plan:
    return Plan.from_object({"name": "thumbs", "sources": [{"name": "photos", "type": "filesystem.index",
                                                            "config": {"path": str(root)}}],
                             "outcomes": [{"type": "classifier", "classifierOperation": "all"}]})


def test_a_plan_run_stops_on_a_full_cache_and_the_next_one_does_only_the_rest(photos, disk, cache_on_disk,
                                                                              tmp_path):
    data, worker = cache_on_disk
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")  # the store on another disk: only the cache fills
    service = PlanService(engine, Roots.of([str(photos)]), use_prefect=False)
    try:
        plan = _plan(photos)
        service.save(plan, create=None)
        leave_room(disk, ROOM_FOR)
        stopped = service.execute(plan, wait=True)
        assert stopped["status"] == "error" and "is full" in stopped["error_message"], stopped
        # each done file has its three work keys (thumbnail, timeline: not for a photo, metadata); not one error
        assert recorded(engine) == {"applied": len(OPERATIONS) * len(cache_files(data))}
        done = len(cache_files(data))
        assert cx.WRITE_CHUNK <= done < PHOTOS  # the first chunk at least was written before the disk was full
        assert not [p for p in cache.cache_dir(data).rglob(cache.TEMP_PREFIX + "*")]
        assert list(find_orphans(engine, data)) == [] and missing_files(engine, data)[0] == 0
        assert diagnose(engine)["healthy"]

        disk.unfill()
        worker.calls.clear()
        resumed = service.execute(plan, wait=True)
        assert resumed["status"] == "success", resumed
        again = next(iter(resumed["summary"]["rules"].values()))["outcomes"][0]
        assert again["skipped_unchanged_entries"] == done and again["applied"] == PHOTOS - done
        assert len(worker.calls) == PHOTOS - done  # what was committed is not redone
        assert len(cache_files(data)) == PHOTOS
    finally:
        service.shutdown()
        engine.dispose()


def test_a_classify_job_on_a_full_cache_ends_no_space_and_a_sync_call_raises_it(photos, disk, cache_on_disk,
                                                                               tmp_path):
    data, worker = cache_on_disk
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    runner = JobRunner(engine, str(engine.url), use_prefect=False)
    try:
        assert run_index(runner, root=str(photos))["status"] == "completed"
        leave_room(disk, ROOM_FOR)
        with pytest.raises(NoSpace, match="classify job") as raised:
            classify_service.run_classify(runner, path=str(photos), operations=("thumbnail",), force=False)
        assert raised.value.code == "NO_SPACE"
        job = store_jobs.list_jobs(engine, kind="classify", limit=1)[0][0]
        assert job["status"] == "failed" and job["error_message"].startswith("NO_SPACE: ")
        done = len(cache_files(data))

        disk.unfill()
        worker.calls.clear()
        finished = classify_service.run_classify(runner, path=str(photos), operations=("thumbnail",), force=False)
        assert finished["status"] == "completed" and finished["error_message"] is None
        assert len(worker.calls) == PHOTOS - done and len(cache_files(data)) == PHOTOS
    finally:
        runner.shutdown()
        engine.dispose()


def test_a_temporary_file_a_killed_write_left_is_swept_once_old(tmp_path, engine):
    data = tmp_path / "data"
    leftover = cache.cache_dir(data) / "ab" / "cd" / f"{cache.TEMP_PREFIX}killed.jpg"
    young = leftover.with_name(f"{cache.TEMP_PREFIX}writing.jpg")
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"half a thumbn")
    young.write_bytes(b"being writ")
    old = time.time() - TEMP_GRACE - 60
    os.utime(leftover, (old, old))
    assert sweep_cache(engine, data).removed_temporary == 1
    assert not leftover.exists() and young.exists()  # a write still going on keeps its file

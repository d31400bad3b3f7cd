"""Classify jobs (rerun-classifier, assay classify): a jobs row of kind classify with progress, issues, cancel and a
final status; plainly and as the Prefect flow "classify"."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from flows.classify import service
from flows.classify.service import run_classify, start_classify
from flows.core.runner import JobRunner
from flows.index.service import run_index
from store import jobs as store_jobs
from store.errors import InvalidInput, NotFound
from store.models import Artifact
from tests.conftest import wait_for

A = Artifact.__table__


@pytest.fixture
def runner(engine):
    r = JobRunner(engine, str(engine.url), use_prefect=False)
    yield r
    r.shutdown()


@pytest.fixture
def photos(tmp_path, runner):
    root = tmp_path / "photos"
    (root / "sub").mkdir(parents=True)
    for i, name in enumerate(["a.jpg", "b.jpg", "sub/c.jpg", "bad.jpg"]):
        (root / name).write_bytes(f"pixels {i}".encode() * 5)
    (tmp_path / "photos-other").mkdir()  # a sibling whose name starts like the folder: not under it
    (tmp_path / "photos-other" / "z.jpg").write_bytes(b"z")
    run_index(runner, root=str(root))
    run_index(runner, root=str(tmp_path / "photos-other"))
    return root


def test_a_job_classifies_every_indexed_file_under_the_directory_and_records_issues(runner, engine, photos, fake):
    job = run_classify(runner, path=str(photos), operations=("thumbnail", "metadata"))
    assert job["kind"] == "classify" and job["status"] == "completed"
    assert job["progress"] == 100 and job["files"] == 4 and job["error_count"] == 1
    assert sorted(fake.calls) == ["a.jpg", "b.jpg", "bad.jpg", "c.jpg"]  # not photos-other/z.jpg
    issues = store_jobs.job_issues(engine, job_id=job["id"])
    assert issues == [{"path": str(photos / "bad.jpg"),
                       "reason": "thumbnail: cannot identify image file (truncated JPEG?); "
                                 "metadata: cannot identify image file (truncated JPEG?)"}]
    public = service.job_public(job, engine, issues=True)
    assert public["source_path"] == str(photos) and public["operations"] == ["thumbnail", "metadata"]
    assert public["errors"] == 1 and public["issues"][0]["path"].endswith("bad.jpg")


def test_a_job_regenerates_work_already_done_and_one_file_can_be_named(runner, engine, photos, fake):
    run_classify(runner, path=str(photos), operations=("metadata",))
    fake.calls.clear()
    job = run_classify(runner, path=str(photos / "a.jpg"), operations=("metadata",))
    assert job["status"] == "completed" and fake.calls == ["a.jpg"] and job["files"] == 1
    fake.calls.clear()
    run_classify(runner, path=str(photos), operations=("metadata",), force=False)
    assert fake.calls == []  # without force nothing is redone, not even the file that failed on the same bytes


def test_every_file_failing_fails_the_job(runner, engine, photos, fake):
    job = run_classify(runner, path=str(photos / "bad.jpg"), operations=("metadata",))
    assert job["status"] == "failed" and "every file failed" in job["error_message"]


def test_a_path_not_in_the_index_is_refused_with_what_to_do(runner, tmp_path, fake):
    (tmp_path / "new").mkdir()
    with pytest.raises(NotFound, match="not in the index; index it first"):
        start_classify(runner, path=str(tmp_path / "new"), operations=("metadata",))
    with pytest.raises(InvalidInput, match="use any of: all, thumbnail"):
        service.check_operations(["thumbnail", "sharpen"])


def test_cancelling_a_running_job_stops_it_between_files(runner, engine, photos, fake):
    for i in range(30):
        (photos / f"more{i:02}.jpg").write_bytes(b"m" * (i + 1))
    run_index(runner, root=str(photos))
    fake.gate = threading.Event()
    job_id = start_classify(runner, path=str(photos), operations=("thumbnail",))
    wait_for(lambda: fake.calls, what="the job to reach the classifier")
    runner.cancel(job_id)
    fake.gate.set()
    job = runner.wait(job_id, timeout=30)
    assert job["status"] == "cancelled" and job["files"] < 34
    with engine.connect() as conn:
        assert conn.execute(select(A.c.id).where(A.c.type == "thumbnail")).first() is not None  # kept


def test_the_job_runs_as_the_prefect_flow_classify(engine, photos, fake):
    runner = JobRunner(engine, str(engine.url), use_prefect=True)
    try:
        job = run_classify(runner, path=str(photos / "sub"), operations=("metadata",))
    finally:
        runner.shutdown()
    assert job["status"] == "completed" and job["files"] == 1 and job["flow_run_id"]

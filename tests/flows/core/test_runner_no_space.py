"""The job runner and a full disk (flows/core/runner.py): whichever layer noticed it and however it said it (NoSpace,
or SQLite's words passed on as text by the index writer process), the job's row ends failed with the NO_SPACE
message; a job run in the caller's thread raises NoSpace, one run in the background does not (its row says it)."""

from __future__ import annotations

from typing import Any

import pytest

from flows.core.runner import KINDS, JobKind, JobRunner, register_job_kind
from store import jobs as store_jobs
from store.engine import get_engine
from store.errors import NoSpace

STORE_FULL = "the disk holding the store is full: the last write was rolled back"


def _store_full(store: str, job_id: int) -> None:
    """As the index and classify jobs do: the row finished in the job's own words, then the error raised again."""
    engine = get_engine(store)
    store_jobs.mark_running(engine, job_id=job_id)
    exc = NoSpace(STORE_FULL)
    store_jobs.finish_job(engine, job_id=job_id, status="failed", error_message=f"{type(exc).__name__}: {exc}")
    raise exc


def _writer_full(store: str, job_id: int) -> None:
    """As the index walk does when its writer process died on SQLITE_FULL: a RuntimeError, the row left running."""
    store_jobs.mark_running(get_engine(store), job_id=job_id)
    raise RuntimeError("the index writer process failed: OperationalError: database or disk is full")


def _broken(store: str, job_id: int) -> None:
    store_jobs.mark_running(get_engine(store), job_id=job_id)
    raise RuntimeError("the work died of something else")


@pytest.fixture(autouse=True, scope="module")
def kinds() -> None:
    for name, fn in (("test-store-full", _store_full), ("test-writer-full", _writer_full),
                     ("test-broken", _broken)):
        if name not in KINDS:
            register_job_kind(JobKind(name=name, flow=None, parameters=lambda job, store: {}, run_plain=fn))


@pytest.fixture
def runner(engine) -> Any:
    r = JobRunner(engine, str(engine.url), use_prefect=False)
    yield r
    r.shutdown()


@pytest.mark.parametrize("kind", ["test-store-full", "test-writer-full"])
def test_a_job_a_full_disk_stopped_raises_no_space_to_a_sync_caller_and_its_row_says_so(runner, engine, kind):
    job_id = store_jobs.create_job(engine, root="/data", kind=kind)
    with pytest.raises(NoSpace, match=f"{kind} job {job_id} stopped: ") as raised:
        runner.run(kind, job_id)
    assert raised.value.code == "NO_SPACE"
    row = store_jobs.get_job(engine, job_id=job_id)
    assert row["status"] == "failed" and row["error_message"].startswith("NO_SPACE: the disk ")
    assert "is full" in row["error_message"]


def test_a_background_job_a_full_disk_stopped_ends_with_the_no_space_message(runner, engine):
    job_id = runner.submit("test-writer-full", store_jobs.create_job(engine, root="/data", kind="test-writer-full"))
    row = runner.wait(job_id, timeout=30)
    assert row["status"] == "failed" and row["error_message"].startswith("NO_SPACE: ")
    assert "database or disk is full" in row["error_message"]  # what the layer below said stays in it


def test_any_other_failure_is_the_failed_row_as_before(runner, engine):
    job_id = store_jobs.create_job(engine, root="/data", kind="test-broken")
    row = runner.run("test-broken", job_id)
    assert row["status"] == "failed" and row["error_message"] == "the Prefect flow run failed before the job finished"

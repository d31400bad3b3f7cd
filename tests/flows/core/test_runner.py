"""The one job runner: kinds registered once, jobs run in the caller's thread or in the background, waited for,
cancelled through the row and the event, stopped at shutdown; a job whose flow died leaves its row failed."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from flows.core import hooks
from flows.core.runner import KINDS, JobKind, JobRunner, job_kind, register_job_kind
from store import jobs as store_jobs
from store.engine import get_engine


def _loop_until_cancelled(store: str, job_id: int) -> dict[str, Any]:
    engine = get_engine(store)
    store_jobs.mark_running(engine, job_id=job_id)
    should_stop = hooks.cancel_check(engine, job_id=job_id, every_seconds=0.01)
    while not should_stop():
        hooks.report(job_id, "tick")
        time.sleep(0.01)
    store_jobs.finish_job(engine, job_id=job_id, status="cancelled", error_message="stopped")
    return store_jobs.get_job(engine, job_id=job_id)


def _finish_at_once(store: str, job_id: int) -> None:
    engine = get_engine(store)
    store_jobs.mark_running(engine, job_id=job_id)
    hooks.report(job_id, "done")
    store_jobs.finish_job(engine, job_id=job_id, status="completed", progress=100.0)


def _die(store: str, job_id: int) -> None:
    store_jobs.mark_running(get_engine(store), job_id=job_id)
    raise RuntimeError("the work died before it finished its row")


@pytest.fixture(autouse=True, scope="module")
def kinds() -> None:
    for name, fn in (("test-loop", _loop_until_cancelled), ("test-once", _finish_at_once), ("test-die", _die)):
        if name not in KINDS:
            register_job_kind(JobKind(name=name, flow=None, parameters=lambda job, store: {}, run_plain=fn))


def wait_running(engine, job_id: int) -> None:
    deadline = time.monotonic() + 10
    while store_jobs.get_job(engine, job_id=job_id)["status"] != "running":
        assert time.monotonic() < deadline, f"job {job_id} did not start"
        time.sleep(0.01)


@pytest.fixture
def runner(engine) -> JobRunner:
    r = JobRunner(engine, str(engine.url), use_prefect=False)
    yield r
    r.shutdown()


def test_a_kind_is_registered_once_and_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_job_kind(JobKind(name="test-once", flow=None, parameters=lambda j, s: {}, run_plain=_finish_at_once))
    with pytest.raises(LookupError, match="test-once"):
        job_kind("no-such-kind")


def test_a_job_runs_in_the_callers_thread_with_its_progress_hook(runner: JobRunner, engine) -> None:
    seen: list[Any] = []
    job_id = store_jobs.create_job(engine, root="/x", kind="test-once")
    started: list[int] = []
    job = runner.run("test-once", job_id, on_progress=seen.append, on_start=started.append)
    assert job["status"] == "completed" and seen == ["done"] and started == [job_id]
    assert hooks.on_progress(job_id) is None  # dropped once the job ended


def test_a_background_job_is_cancelled_through_its_row_and_waited_for(runner: JobRunner, engine) -> None:
    job_id = store_jobs.create_job(engine, root="/x", kind="test-loop")
    runner.submit("test-loop", job_id)
    wait_running(engine, job_id)
    assert runner.is_running_here(job_id)
    answer = runner.cancel(job_id)
    assert answer["cancelled"] is True
    assert runner.wait(job_id, timeout=10)["status"] == "cancelled"
    assert not runner.is_running_here(job_id)


def test_a_cancel_asked_in_the_store_alone_stops_the_job(runner: JobRunner, engine) -> None:
    """Another process asks through the row's flag: the job sees it without any event of ours."""
    job_id = store_jobs.create_job(engine, root="/x", kind="test-loop")
    runner.submit("test-loop", job_id)
    wait_running(engine, job_id)
    store_jobs.request_cancel(engine, job_id=job_id)
    assert runner.wait(job_id, timeout=10)["status"] == "cancelled"


def test_a_job_whose_work_died_is_left_failed_not_running(runner: JobRunner, engine) -> None:
    job_id = store_jobs.create_job(engine, root="/x", kind="test-die")
    job = runner.run("test-die", job_id)
    assert job["status"] == "failed" and "before the job finished" in job["error_message"]


def test_shutdown_stops_running_jobs_and_refuses_new_ones(engine) -> None:
    runner = JobRunner(engine, str(engine.url), use_prefect=False)
    job_id = store_jobs.create_job(engine, root="/x", kind="test-loop")
    runner.submit("test-loop", job_id)
    wait_running(engine, job_id)
    done = threading.Event()
    threading.Thread(target=lambda: (runner.shutdown(), done.set()), daemon=True).start()
    assert done.wait(10)
    assert store_jobs.get_job(engine, job_id=job_id)["status"] == "cancelled"
    with pytest.raises(RuntimeError, match="shut down"):
        runner.submit("test-once", store_jobs.create_job(engine, root="/x", kind="test-once"))


def test_the_external_cancel_check_is_asked_and_once_true_stays_true(engine) -> None:
    job_id = store_jobs.create_job(engine, root="/x", kind="test-once")
    answers = iter([False, True])
    hooks.register(job_id, external=lambda: next(answers))
    try:
        check = hooks.cancel_check(engine, job_id=job_id, every_seconds=0.0)
        assert check() is False
        assert check() is True
        assert check() is True  # not asked again
    finally:
        hooks.drop(job_id)


def test_a_job_asked_to_run_without_prefect_runs_plainly_on_a_prefect_runner(engine) -> None:
    """One runner serves both: a job started with ``use_prefect=False`` (a watcher's small run) never reaches
    Prefect, in the caller's thread or in the background (the kinds here have no flow at all)."""
    runner = JobRunner(engine, str(engine.url), use_prefect=True)
    try:
        job_id = store_jobs.create_job(engine, root="/x", kind="test-once")
        assert runner.run("test-once", job_id, use_prefect=False)["status"] == "completed"
        job_id = store_jobs.create_job(engine, root="/x", kind="test-once")
        runner.submit("test-once", job_id, use_prefect=False)
        assert runner.wait(job_id, timeout=10)["status"] == "completed"
    finally:
        runner.shutdown()


def _ignore_sigterm_and_sleep(ready: Any) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready.set()
    time.sleep(60)


def test_stop_worker_processes_ends_this_process_workers_even_those_ignoring_sigterm(monkeypatch) -> None:
    import multiprocessing

    from flows.core import prefect
    from flows.core.prefect import stop_worker_processes

    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    workers = [context.Process(target=time.sleep, args=(60,)),
               context.Process(target=_ignore_sigterm_and_sleep, args=(ready,))]
    for worker in workers:
        worker.start()
    assert ready.wait(60)  # the second one ignores SIGTERM now
    # these two only: a worker pool another test of this process left running is not this test's to end
    monkeypatch.setattr(prefect.multiprocessing, "active_children", lambda: list(workers))
    started = time.monotonic()
    stop_worker_processes(grace=1.0)
    assert not any(worker.is_alive() for worker in workers)
    assert time.monotonic() - started < 10
    assert workers[0].exitcode == -15 and workers[1].exitcode == -9  # SIGTERM; SIGKILL after the grace

"""Runs jobs in background threads (``async``) or in the caller's thread (sync), as Prefect flows or plainly."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from sqlalchemy.engine import Engine

from flows.index.flow import ProgressHook, index_flow, register_job_hooks, run_index_job
from flows.prefect_support import flow_settings
from store import jobs as store_jobs

log = logging.getLogger(__name__)


class JobRunner:
    """Owns the worker threads and the in-process cancel events of the jobs this process runs."""

    def __init__(self, engine: Engine, database_url: str, *, use_prefect: bool = True, max_workers: int = 2) -> None:
        self.engine = engine
        self.database_url = database_url
        self.use_prefect = use_prefect
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="assay-job")
        self._events: dict[int, threading.Event] = {}
        self._futures: dict[int, Future] = {}
        self._lock = threading.Lock()

    def _run_job(self, job_id: int, what: str, flow_call: Callable[[threading.Event], Any],
                 plain_call: Callable[[threading.Event], dict]) -> dict:
        """Run job ``job_id`` in this thread, as a Prefect flow (``flow_call``) or plainly (``plain_call``), with its
        cancel event; a flow that dies before our code finished the job row leaves the row failed, not running."""
        event = self._events.setdefault(job_id, threading.Event())
        try:
            if not self.use_prefect:
                return plain_call(event)
            try:
                with flow_settings():
                    flow_call(event)
            except Exception:
                log.exception("%s flow for job %s failed", what, job_id)
            job = store_jobs.get_job(self.engine, job_id=job_id)
            if job["status"] in store_jobs.ACTIVE:  # the flow died before our code could finish the row
                store_jobs.finish_job(self.engine, job_id=job_id, status="failed",
                                      error_message="the Prefect flow run failed before the job finished")
                job = store_jobs.get_job(self.engine, job_id=job_id)
            return job
        finally:
            with self._lock:
                self._events.pop(job_id, None)
                self._futures.pop(job_id, None)

    def _execute(self, job_id: int, root: str, follow_symlinks: bool, on_progress: ProgressHook | None) -> dict:
        def flow_call(event: threading.Event) -> None:
            register_job_hooks(job_id, cancel_event=event, on_progress=on_progress)
            index_flow()(database_url=self.database_url, job_id=job_id, root=root, follow_symlinks=follow_symlinks)

        return self._run_job(job_id, "index", flow_call, lambda event: run_index_job(
            self.engine, job_id=job_id, root=root, follow_symlinks=follow_symlinks, cancel_event=event,
            on_progress=on_progress))

    def submit_index(self, *, root: str, follow_symlinks: bool = False, params: dict | None = None) -> int:
        """Create an index job and start it in the background; returns its id at once."""
        job_id = store_jobs.create_job(self.engine, root=root, params=params)
        with self._lock:
            self._events[job_id] = threading.Event()
            self._futures[job_id] = self._pool.submit(self._execute, job_id, root, follow_symlinks, None)
        return job_id

    def run_index(self, *, root: str, follow_symlinks: bool = False, on_progress: ProgressHook | None = None,
                  params: dict | None = None, on_start: Callable[[int], None] | None = None) -> dict:
        """Create an index job and run it in this thread; returns the finished job row. ``on_start`` gets the job's
        id before the walk starts (so another thread can cancel it)."""
        job_id = store_jobs.create_job(self.engine, root=root, params=params)
        with self._lock:
            self._events.setdefault(job_id, threading.Event())
        if on_start is not None:
            on_start(job_id)
        return self._execute(job_id, root, follow_symlinks, on_progress)

    # -- classify jobs (flows.classify.service) --

    def _execute_classify(self, job_id: int, path: str, on_progress: Callable[[dict], None] | None) -> dict:
        from flows.classify import service as classify

        def flow_call(event: threading.Event) -> None:
            classify.register_job_hooks(job_id, cancel_event=event, on_progress=on_progress)
            classify.classify_flow()(database_url=self.database_url, job_id=job_id, path=path)

        def plain_call(event: threading.Event) -> dict:
            try:
                return classify.run_classify_job(self.engine, job_id=job_id, cancel_event=event,
                                                 on_progress=on_progress)
            except Exception:
                return store_jobs.get_job(self.engine, job_id=job_id)  # recorded as failed on the row

        return self._run_job(job_id, "classify", flow_call, plain_call)

    def submit_classify(self, *, path: str, operations: tuple[str, ...], force: bool = True) -> int:
        """Create a classify job of ``path`` (an indexed file or directory) and start it in the background."""
        from flows.classify.service import create_classify_job

        job_id = create_classify_job(self.engine, path=path, operations=operations, force=force)
        with self._lock:
            self._events[job_id] = threading.Event()
            self._futures[job_id] = self._pool.submit(self._execute_classify, job_id, path, None)
        return job_id

    def run_classify(self, *, path: str, operations: tuple[str, ...], force: bool = True,
                     on_progress: Callable[[dict], None] | None = None,
                     on_start: Callable[[int], None] | None = None) -> dict:
        """Create a classify job and run it in this thread; returns the finished job row."""
        from flows.classify.service import create_classify_job

        job_id = create_classify_job(self.engine, path=path, operations=operations, force=force)
        with self._lock:
            self._events.setdefault(job_id, threading.Event())
        if on_start is not None:
            on_start(job_id)
        return self._execute_classify(job_id, path, on_progress)

    def cancel(self, job_id: int) -> dict:
        result = store_jobs.request_cancel(self.engine, job_id=job_id)
        with self._lock:
            event = self._events.get(job_id)
        if event is not None:
            event.set()
        return result

    def wait(self, job_id: int, timeout: float | None = None) -> dict:
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            future.result(timeout=timeout)
        return store_jobs.get_job(self.engine, job_id=job_id)

    def shutdown(self) -> None:
        with self._lock:
            events = list(self._events.values())
        for event in events:
            event.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

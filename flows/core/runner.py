"""The one job runner: every kind of long work — index jobs, classifier jobs, plan executions (text extraction,
embedding and map building run inside those) — is a row of the runs table (``store.jobs``, with its ``kind``) and a
Prefect flow run of that kind's flow, called with small serialisable parameters (``JobKind.parameters``). The kinds
are declared by the capabilities (``Capability.job_kinds``: index, plans, classify) and found by name in ``KINDS``,
a registry the core fills from the declarations (``flows.core.capability``).

The runner starts a job in a worker thread of its own (``submit``) or in the caller's thread (``run``), hands it the
in-process extras a flow's parameters cannot carry (a cancel event, a progress callback: :mod:`flows.core.hooks`),
waits for it, cancels it, and at ``shutdown`` asks every job it runs to stop and waits for them. A flow that dies
before its code finished the row (a crash inside Prefect, say) leaves the row failed, not running.

A job stopped by a full disk (the store's, the cache's, a tool's output: :class:`~store.errors.NoSpace`, or an
error that says so in the OS's or SQLite's words, :func:`flows.media.common.no_space`) ends failed with the NO_SPACE
message whichever layer noticed it, and a job run in the caller's thread (``run``: a tool's or the command line's
sync call) raises it, so the caller gets NO_SPACE rather than a failed row. What the job committed is kept; its next
run does the rest. When the store itself is too full to take even the row's last write, the row is left running
and the error is logged (a server's start-up reaper ends such rows).

Without Prefect (``use_prefect=False``: tests, a store opened by a script; or one job started so, such as a
watcher's run on a few changed files) the same kind runs through
``JobKind.run_plain``, the plain function its flow wraps, with the same row, events and progress.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from prefect.flow_engine import run_flow
from sqlalchemy.engine import Engine

from flows.core import hooks
from flows.core.capability import Registry
from flows.core.deployments import Deployments
from flows.core.pool import WorkPool
from flows.core.prefect import flow_settings
from flows.media.common import no_space
from store import jobs as store_jobs
from store.engine import share_engine
from store.errors import NoSpace

log = logging.getLogger(__name__)

ProgressHook = Callable[[Any], None]


@dataclass(frozen=True)
class JobKind:
    """How one kind of job runs: ``flow`` is its Prefect flow, called with ``parameters(job_row, store_url)``;
    ``run_plain(store_url, job_id)`` does the same work without Prefect (the hooks are registered either way);
    ``finish_failed(engine, job_id, message)`` records a flow that died before the job's row was finished."""

    name: str
    flow: Any
    parameters: Callable[[dict[str, Any], str], dict[str, Any]]
    run_plain: Callable[[str, int], Any]
    finish_failed: Callable[[Engine, int, str], None] | None = None
    # the deployment a job of this kind started here runs under, so Prefect's UI can retry it from its parameters
    # (a plan's, named after the plan); None: a plain flow run, for short jobs whose retry is a new job (index,
    # classify: creating the deployment's flow run first costs ~0.1 s a job, a third of a hand-off)
    deployment: Callable[[dict[str, Any]], str] | None = None


_KINDS: Registry[JobKind] = Registry("job kind", lambda capability: ((k.name, k) for k in capability.job_kinds))
KINDS = _KINDS.entries  # name -> kind, as registered so far


def register_job_kind(kind: JobKind) -> JobKind:
    """Register one more kind of job (a capability declares its own instead); a second registration of a name is an
    error."""
    return _KINDS.add(kind.name, kind)


def job_kind(name: str) -> JobKind:
    kind = _KINDS.get(name)
    if kind is None:
        raise LookupError(f"no job kind {name!r}; registered: {', '.join(sorted(KINDS)) or 'none'}")
    return kind


class JobRunner:
    """Owns the worker threads and the in-process cancel events of the jobs this process runs."""

    def __init__(self, engine: Engine, database_url: str, *, use_prefect: bool = True, max_workers: int = 2) -> None:
        self.engine = engine
        self.database_url = database_url
        self.use_prefect = use_prefect
        share_engine(database_url, engine)  # the flows this process runs find this engine by the store's URL
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="assay-job")
        self._events: dict[int, threading.Event] = {}
        self._futures: dict[int, Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.deployments: Deployments | None = None  # set by a serving process: runs become its deployments' runs
        self.pool: WorkPool | None = None  # set by a process serving on a work pool: runs of kinds with a deployment go
        # there (plans), handed to the pool's workers

    # -- starting --

    def submit(self, kind: str, job_id: int, *, on_progress: ProgressHook | None = None,
               after: Callable[[dict[str, Any]], None] | None = None, use_prefect: bool | None = None) -> int:
        """Start job ``job_id`` (a row of kind ``kind``) in the background; returns its id at once. ``after`` gets
        the finished row (in the worker thread); ``use_prefect=False`` runs this job without Prefect (None: as the
        runner does; True has no effect on a runner without Prefect)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the job runner is shut down")
            self._events[job_id] = threading.Event()
            self._futures[job_id] = self._pool.submit(self._execute, kind, job_id, on_progress, after, use_prefect)
        return job_id

    def run(self, kind: str, job_id: int, *, on_progress: ProgressHook | None = None,
            on_start: Callable[[int], None] | None = None, use_prefect: bool | None = None) -> dict[str, Any]:
        """Run job ``job_id`` in this thread; returns its finished row. ``on_start`` gets the id before the work
        starts (so another thread can cancel it); ``use_prefect`` as for ``submit``. A job a full disk stopped raises
        NoSpace (its row says so too)."""
        with self._lock:
            self._events.setdefault(job_id, threading.Event())
        if on_start is not None:
            on_start(job_id)
        return self._execute(kind, job_id, on_progress, None, use_prefect, raise_no_space=True)

    def _execute(self, kind_name: str, job_id: int, on_progress: ProgressHook | None,
                 after: Callable[[dict[str, Any]], None] | None, use_prefect: bool | None = None, *,
                 raise_no_space: bool = False) -> dict[str, Any]:
        kind = job_kind(kind_name)
        with self._lock:
            event = self._events.setdefault(job_id, threading.Event())
        hooks.register(job_id, cancel_event=event, on_progress=on_progress)
        failure: Exception | None = None
        try:
            if self.use_prefect and use_prefect is not False:
                job = store_jobs.get_job(self.engine, job_id=job_id)
                try:
                    with flow_settings():
                        self._run_flow(kind, job, event, on_progress)
                except Exception as exc:
                    log.exception("%s flow for job %s failed", kind_name, job_id)
                    failure = exc
            else:
                try:
                    kind.run_plain(self.database_url, job_id)
                except Exception as exc:
                    log.exception("%s job %s failed", kind_name, job_id)
                    failure = exc
            full = no_space(failure)
            job = self._finish_row(kind, job_id, full)
            if after is not None:
                after(job)
            if full is not None and raise_no_space:
                raise NoSpace(f"{kind_name} job {job_id} stopped: {full.message}") from failure
            return job
        finally:
            hooks.drop(job_id)
            with self._lock:
                self._events.pop(job_id, None)
                self._futures.pop(job_id, None)

    def _finish_row(self, kind: JobKind, job_id: int, full: NoSpace | None) -> dict[str, Any]:
        """Job ``job_id``'s row once its work returned: finished failed when the flow died before its code could
        finish it; a job a full disk stopped says NO_SPACE, whichever words its code recorded. The row as it is when
        the store is too full for even this write."""
        job = store_jobs.get_job(self.engine, job_id=job_id)
        said = str(full) if full is not None else None
        # the flow died before its code could finish the row; or a full disk stopped it, and its code may have had
        # no room to finish all it keeps (a plan's execution row): the kind's own finishing closes what is open
        if job["status"] in store_jobs.ACTIVE or (said is not None and job["status"] == "failed"):
            message = said or "the Prefect flow run failed before the job finished"
            try:
                if kind.finish_failed is not None:
                    kind.finish_failed(self.engine, job_id, message)
                else:
                    store_jobs.finish_job(self.engine, job_id=job_id, status="failed", error_message=message)
            except NoSpace:
                log.exception("job %s: the store is too full to record how the job ended", job_id)
                return job
        return store_jobs.get_job(self.engine, job_id=job_id)

    def _run_flow(self, kind: JobKind, job: dict[str, Any], cancel: threading.Event,
                  on_progress: ProgressHook | None) -> None:
        """Run ``job``'s flow here: as a run of its deployment when its kind names one and this process serves it (so
        Prefect's UI can retry it from its parameters), else as a plain flow run. On a work pool, a kind with a
        deployment is handed to the pool's workers instead, and followed through its row."""
        parameters = kind.parameters(job, self.database_url)
        if self.pool is not None and kind.deployment is not None:
            parameters.pop("store", None)  # the workers have their own store URL (this one may hold a password)
            self.pool.run(self.engine, job, kind.flow, kind.deployment(job), parameters, cancel=cancel,
                          on_progress=on_progress, finish_failed=kind.finish_failed or _finish_failed)
            return
        flow_run = None
        if self.deployments is not None and kind.deployment is not None:
            name = kind.deployment(job)
            try:
                flow_run = self.deployments.flow_run(kind.flow, name, parameters)
            except Exception:  # noqa: BLE001 (the API away for a moment: the run goes on, outside the deployment)
                log.warning("creating a flow run of deployment %s failed", name, exc_info=True)
        if flow_run is None:
            kind.flow(**parameters)
        else:
            run_flow(kind.flow, flow_run=flow_run, parameters=parameters)

    # -- following and stopping --

    def cancel(self, job_id: int) -> dict[str, Any]:
        """Ask job ``job_id`` to stop: its row's cancel flag (seen by a run in any process) and, when it runs here,
        its event. Returns the row with ``cancelled`` and ``message``."""
        result = store_jobs.request_cancel(self.engine, job_id=job_id)
        with self._lock:
            event = self._events.get(job_id)
        if event is not None:
            event.set()
        return result

    def is_running_here(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._events

    def wait(self, job_id: int, timeout: float | None = None) -> dict[str, Any]:
        with self._lock:
            future = self._futures.get(job_id)
        if future is not None:
            future.result(timeout=timeout)
        return store_jobs.get_job(self.engine, job_id=job_id)

    def shutdown(self) -> None:
        """Ask every job of this process to stop, then wait for the worker threads (each job keeps what it wrote)."""
        with self._lock:
            self._closed = True
            events = list(self._events.values())
        for event in events:
            event.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


def _finish_failed(engine: Engine, job_id: int, message: str) -> None:
    store_jobs.finish_job(engine, job_id=job_id, status="failed", error_message=message)

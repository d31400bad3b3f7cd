"""What a job's flow cannot take as a parameter: a cancel event and a progress callback of the process that started
it. The runner registers them under the job's id before the flow starts and drops them after; a flow (or one of its
tasks) running in the same process finds them here, one started elsewhere (a deployment run, a worker) finds none
and relies on the store: the job row's cancel flag and progress columns, which every process sees.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from sqlalchemy.engine import Engine

from flows.core.settings import run_settings
from store import jobs as store_jobs
from store.engine import get_engine

_lock = threading.Lock()
_cancel: dict[int, threading.Event] = {}
_progress: dict[int, Callable[[Any], None]] = {}
_external: dict[int, Callable[[], bool]] = {}


def register(job_id: int, *, cancel_event: threading.Event | None = None,
             on_progress: Callable[[Any], None] | None = None, external: Callable[[], bool] | None = None) -> None:
    """``external``: another "was this run cancelled?" to ask now and then (Prefect's own state of the flow run)."""
    with _lock:
        if cancel_event is not None:
            _cancel[job_id] = cancel_event
        if on_progress is not None:
            _progress[job_id] = on_progress
        if external is not None:
            _external[job_id] = external


def drop(job_id: int, *, external_only: bool = False) -> None:
    with _lock:
        _external.pop(job_id, None)
        if not external_only:
            _cancel.pop(job_id, None)
            _progress.pop(job_id, None)


def cancel_event(job_id: int) -> threading.Event | None:
    with _lock:
        return _cancel.get(job_id)


def on_progress(job_id: int) -> Callable[[Any], None] | None:
    with _lock:
        return _progress.get(job_id)


def external_check(job_id: int) -> Callable[[], bool] | None:
    with _lock:
        return _external.get(job_id)


def report(job_id: int, value: Any) -> None:
    """Hand ``value`` to the job's progress callback, if this process has one; a callback's failure never breaks
    the job."""
    hook = on_progress(job_id)
    if hook is not None:
        try:
            hook(value)
        except Exception:  # noqa: BLE001 (a progress consumer must never break a run)
            pass


def cancel_check(engine: Engine, *, job_id: int, every_seconds: float = 0.5) -> Callable[[], bool]:
    """A cheap "should this job stop?" for its loops: the in-process event at every call; the row's cancel flag
    (asked from another process, a lost event) and the registered external check (Prefect's own cancel:
    ``flows.core.prefect``) at most every ``every_seconds``. Once true it stays true."""
    event = cancel_event(job_id)
    with _lock:
        extra = _external.get(job_id)
    last = 0.0
    stopped = False

    def check() -> bool:
        nonlocal last, stopped
        if stopped or (event is not None and event.is_set()):
            stopped = True
            return True
        now = time.monotonic()
        if now - last < every_seconds:
            return False
        last = now
        if store_jobs.cancel_requested(engine, job_id=job_id) or (extra is not None and extra()):
            stopped = True
            if event is not None:
                event.set()
        return stopped

    return check


def finish_stopped_job(flow: Any, flow_run: Any, state: Any) -> None:  # noqa: ARG001 (Prefect's hook signature)
    """Prefect's ``on_cancellation`` / ``on_crashed`` hook of the job flows (index, classify): the runner stopped the
    run's process (a Cancel in the UI, SIGKILL after its grace) or the process crashed, so the job's row may still say
    running. Run by the runner in the serving process once the run's process is gone (Prefect turns these hooks off
    inside a runner's subprocess), so it never races the run's own writes; a row the run finished is left alone."""
    store = (flow_run.parameters or {}).get("store") or run_settings().store_url
    engine = get_engine(store)
    job = store_jobs.find_by_flow_run(engine, flow_run_id=str(flow_run.id))
    if job is None or job["status"] not in store_jobs.ACTIVE:
        return
    if state.is_cancelled() or state.is_cancelling():
        store_jobs.finish_job(engine, job_id=job["id"], status="cancelled",
                              error_message="cancelled from Prefect; what the job wrote was kept")
    else:
        store_jobs.finish_job(engine, job_id=job["id"], status="failed",
                              error_message=f"the flow run crashed: {state.message}")

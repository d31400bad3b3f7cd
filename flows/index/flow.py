"""Indexing as a Prefect flow: one flow run per index job, with `scan <root>` and `sweep` visible as task runs.

``run_index_job`` is the plain function (tests call it directly); ``index_flow`` is the same work as a Prefect flow,
run from its parameters (the folder, the job's id in the runs table, the store's URL): by the job runner, or from
its deployment in Prefect's UI. The job row in the store is the source of truth for status and progress; the flow
run id is recorded on it. A job that failed (a full disk: NO_SPACE) says so in our error's own words, and counts as
its files those it wrote to the store: what the walk had listed but not written is not claimed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any, Callable

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run as current_flow_run
from prefect.states import Cancelled as CancelledState
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from flows.core import hooks
from flows.core.prefect import cancel_requested_in_prefect
from flows.core.runner import JobKind
from flows.core.settings import run_settings
from flows.index.indexer import Cancelled, IndexProgress, IndexResult, index_tree
from store import entries as store_entries
from store import jobs as store_jobs
from store.engine import get_engine
from store.errors import AssayError

log = logging.getLogger(__name__)

ProgressHook = Callable[[IndexProgress], None]


def run_index_job(engine: Engine, *, job_id: int, root: str, follow_symlinks: bool = False,
                  cancel_event: threading.Event | None = None, on_progress: ProgressHook | None = None,
                  batch_size: int = 2000, flow_run_id: str | None = None) -> dict:
    """Run index job ``job_id`` to its end, keeping its row current; returns the final job row."""
    if not store_jobs.mark_running(engine, job_id=job_id, flow_run_id=flow_run_id):
        return store_jobs.get_job(engine, job_id=job_id)  # cancelled before it started
    last_write = 0.0

    def progress(p: IndexProgress) -> None:
        nonlocal last_write
        if on_progress is not None:
            on_progress(p)
        now = time.monotonic()
        if now - last_write >= 0.25 or p.percent >= 100:
            last_write = now
            store_jobs.update_progress(engine, job_id=job_id, progress=p.percent, files=p.files,
                                       directories=p.directories, total_size=p.total_size, current_path=p.current_path)

    asked = store_jobs.cancel_check(engine, job_id=job_id, event=cancel_event, every=5)  # every few batches
    external = hooks.external_check(job_id)  # a cancel in Prefect's UI, for a run in this process

    def should_cancel() -> bool:
        return asked() or (external is not None and external())

    try:
        result: IndexResult = index_tree(engine, root, scan_id=job_id, follow_symlinks=follow_symlinks,
                                         batch_size=batch_size, progress=progress, should_cancel=should_cancel)
    except Cancelled as stop:
        done = stop.result
        if done is not None:  # the counters of what the walk did, so they agree with what it stored
            store_jobs.record_issues(engine, job_id=job_id, issues=done.issues)
            counts = _counts(done)
        else:
            counts = {}
        store_jobs.finish_job(engine, job_id=job_id, status="cancelled",
                              error_message="cancelled on request; what the walk wrote was kept, and the folders "
                                            "it had not finished are marked incomplete", **counts)
        log.info("index job %s cancelled", job_id)
        return store_jobs.get_job(engine, job_id=job_id)
    except FileNotFoundError:
        store_jobs.finish_job(engine, job_id=job_id, status="failed", error_message=f"{root} no longer exists")
        return store_jobs.get_job(engine, job_id=job_id)
    except Exception as exc:  # recorded on the job, then re-raised so Prefect marks the run failed too
        log.exception("index job %s failed", job_id)
        said = str(exc) if isinstance(exc, AssayError) else f"{type(exc).__name__}: {exc}"  # ours: "NO_SPACE: ..."
        store_jobs.finish_job(engine, job_id=job_id, status="failed", error_message=said,
                              files=files_written(engine, root=root, job_id=job_id))
        raise
    store_jobs.record_issues(engine, job_id=job_id, issues=result.issues)
    store_jobs.finish_job(engine, job_id=job_id, status="completed", current_path=None, **_counts(result))
    return store_jobs.get_job(engine, job_id=job_id)


def files_written(engine: Engine, *, root: str, job_id: int) -> int:
    """The files at or under ``root`` that index job ``job_id`` wrote to the store (its rows carry its id as their
    scan id): a failed job's count of files, where the walk's own count would claim those it listed but never wrote.
    A re-index writes only what changed, so the unchanged files it walked are not in it."""
    T = store_entries.T
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T).where(
            store_entries.subtree_clause(root), T.c.scan_id == job_id, T.c.kind == "file")).scalar_one()


def _counts(result: IndexResult) -> dict:
    return {"progress": result.percent, "files": result.files, "directories": result.directories,
            "total_size": result.total_size, "removed": result.removed, "error_count": result.issue_count}


# --- the Prefect flow ---------------------------------------------------------------------------------------------


@task(task_run_name="scan {root}", cache_policy=NO_CACHE, persist_result=False)
def scan(store: str, run_id: int, root: str, follow_symlinks: bool, batch_size: int) -> dict:
    """Walk the tree, write entries in batches, sweep what disappeared."""
    engine = get_engine(store)
    job = run_index_job(engine, job_id=run_id, root=root, follow_symlinks=follow_symlinks,
                        cancel_event=hooks.cancel_event(run_id), on_progress=hooks.on_progress(run_id),
                        batch_size=batch_size, flow_run_id=str(current_flow_run.get_id() or "") or None)
    return {k: job[k] for k in ("id", "status", "files", "directories", "total_size", "removed")}


@flow(name="index", flow_run_name="index {root}", persist_result=False, log_prints=False, validate_parameters=False,
      on_cancellation=[hooks.finish_stopped_job], on_crashed=[hooks.finish_stopped_job])
def index_flow(root: str, run_id: int | None = None, follow_symlinks: bool = False, batch_size: int = 2000,
               store: str | None = None) -> Any:
    """Index a directory tree into the assay store. From the UI give the folder; the rest is found in the store."""
    url = store or run_settings().store_url
    if run_id is None:  # started from Prefect with a folder alone: confined to the roots like any caller's path
        root = run_settings().effective_roots().resolve(root, field="root")
        run_id = store_jobs.create_job(get_engine(url), root=root, params={"trigger": "prefect"})
    hooks.register(run_id, external=cancel_requested_in_prefect(str(current_flow_run.get_id() or "") or None))
    try:
        out = scan(url, run_id, root, follow_symlinks, batch_size)
    finally:
        hooks.drop(run_id, external_only=True)
    if out["status"] == "cancelled":
        return CancelledState(message=f"index {root}: cancelled on request; what the walk wrote was kept")
    return out


def _run_plain(store: str, job_id: int) -> dict:
    engine = get_engine(store)
    job = store_jobs.get_job(engine, job_id=job_id)
    params = json.loads(job["params_json"] or "{}")
    return run_index_job(engine, job_id=job_id, root=job["root"], follow_symlinks=bool(params.get("followSymlinks")),
                         cancel_event=hooks.cancel_event(job_id), on_progress=hooks.on_progress(job_id))


def _parameters(job: dict, store: str) -> dict:
    params = json.loads(job["params_json"] or "{}")
    return {"root": job["root"], "run_id": job["id"], "follow_symlinks": bool(params.get("followSymlinks")),
            "store": store}


INDEX_JOBS = JobKind(name="index", flow=index_flow, parameters=_parameters, run_plain=_run_plain)


def index_deployment() -> tuple[Any, str, dict[str, Any], str, bool]:
    """The deployment "index" of the index flow: Run in Prefect's UI asks for the folder."""
    return index_flow, INDEX_JOBS.name, {}, "Index a folder (inside the server's roots) into the assay store", False

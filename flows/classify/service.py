"""Classify jobs: ``rerun-classifier`` and ``assay classify`` regenerate the artifacts of a file or of every indexed
file under a directory, as a job (``jobs`` row, kind "classify") with progress, issues and cancel, like index jobs.

``run_classify_job`` is the plain function (tests call it); ``classify_flow`` runs the same work as a Prefect flow
"classify" (flow run "classify {path}", one task run "classify [batch k]" per batch of files). The files are read in
keyset batches by path (memory flat), each batch goes through the classifier's machinery
(``flows.classify.executor.classify_rows``) with ``force`` (the tool says "regenerate"; the command line may say
otherwise), and the cache is swept when the job ends.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import TerminationSignal
from prefect.runtime import flow_run as current_flow_run
from prefect.states import Cancelled as CancelledState
from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Engine, RowMapping

from flows.classify.executor import ClassifyRun, classify_rows, params_from
from flows.classify.model import FileResult, check_operations
from flows.classify.sweep import sweep_after
from flows.core import hooks
from flows.core.prefect import cancel_requested_in_prefect, stop_worker_processes
from flows.core.runner import JobKind, JobRunner
from flows.core.settings import run_settings
from store import jobs as store_jobs
from store.engine import get_engine
from store.entries import T, iso
from store.errors import AssayError, Cancelled, InvalidInput, NotFound
from store.preferences import load_preferences

log = logging.getLogger(__name__)

KIND = "classify"
BATCH = 64  # files per batch (one Prefect task run)
ProgressHook = Callable[[dict], None]


def _scope(path: str):
    """Regular files at ``path``: the file itself, or every file under the directory."""
    prefix = path.rstrip("/") + "/"
    under = and_(T.c.path > prefix, T.c.path < prefix[:-1] + "0")  # "/a/" < p < "/a0": everything below /a
    return and_(T.c.kind == "file", or_(T.c.path == path, under))


def check_indexed(engine: Engine, path: str) -> dict[str, Any]:
    """The entry at ``path``; NotFound saying to index it first when it is not in the index."""
    with engine.connect() as conn:
        row = conn.execute(select(T.c.id, T.c.kind).where(T.c.path == path)).first()
    if row is None:
        raise NotFound(f"{path} is not in the index; index it first (tool index, or assay index {path}), then run "
                       "the classifier on it", field="sourcePath")
    if row.kind not in ("file", "directory"):
        raise InvalidInput(f"{path} is a {row.kind}; the classifier works on a regular file or a directory of them",
                           field="sourcePath")
    return {"id": row.id, "kind": row.kind}


def count_files(engine: Engine, path: str) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T).where(_scope(path))).scalar_one()


def iter_batches(engine: Engine, path: str, batch: int = BATCH) -> Iterator[Sequence[RowMapping]]:
    """The indexed regular files at ``path`` in keyset batches by path (one short read per batch)."""
    after = ""
    while True:
        with engine.connect() as conn:
            rows = conn.execute(select(T).where(_scope(path), T.c.path > after).order_by(T.c.path).limit(batch)) \
                .mappings().all()
        if not rows:
            return
        yield rows
        after = rows[-1]["path"]
        if len(rows) < batch:
            return


def create_classify_job(engine: Engine, *, path: str, operations: tuple[str, ...], force: bool = True) -> int:
    check_indexed(engine, path)
    return store_jobs.create_job(engine, root=path, kind=KIND,
                                 params={"operations": list(operations), "force": force})


class JobState:
    """Counters of a running classify job, written to its row at most four times a second."""

    def __init__(self, engine: Engine, job_id: int, total: int, on_progress: ProgressHook | None) -> None:
        self.engine, self.job_id, self.total, self.on_progress = engine, job_id, total, on_progress
        self.done = 0
        self.errors = 0
        self.last_write = 0.0
        self.issues: list[tuple[str, str]] = []

    def percent(self) -> float:
        return round(100.0 * self.done / self.total, 1) if self.total else 100.0

    def result(self, res: FileResult) -> None:
        if res.errors:
            self.errors += 1
            self.issues.append((res.path, "; ".join(f"{op}: {why}" for op, why in res.errors.items())))

    def item(self, path: str, *, force: bool = False) -> None:
        self.done += 1
        self.report(path, force=force)

    def report(self, path: str | None, *, force: bool = False) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress({"percent": self.percent(), "files": self.done, "total": self.total,
                                  "errors": self.errors, "path": path})
            except Exception:
                log.debug("progress hook failed", exc_info=True)
        now = time.monotonic()
        if force or now - self.last_write >= 0.25:
            self.last_write = now
            self.flush_issues()
            store_jobs.update_progress(self.engine, job_id=self.job_id, progress=self.percent(), files=self.done,
                                       error_count=self.errors, current_path=path)

    def flush_issues(self) -> None:
        if self.issues:
            store_jobs.record_issues(self.engine, job_id=self.job_id, issues=self.issues)
            self.issues = []


@dataclass
class ClassifyJob:
    """What the batches of one classify job share in the process that runs them: the job's options, its counters
    (``JobState``) and its cancel check. Built from the job's row (``job_context``), so a batch runs from its
    parameters alone."""

    engine: Engine
    job_id: int
    path: str
    operations: tuple[str, ...]
    force: bool
    params: Any
    state: JobState
    should_cancel: Callable[[], bool]
    run: ClassifyRun | None = None


_jobs: dict[tuple[str, int], ClassifyJob] = {}
_jobs_lock = threading.Lock()


def job_context(store: str, job_id: int, *, run: ClassifyRun | None = None) -> ClassifyJob:
    key = (store, job_id)
    with _jobs_lock:
        found = _jobs.get(key)
    if found is not None:
        return found
    engine = get_engine(store)
    job = store_jobs.get_job(engine, job_id=job_id)
    options = json.loads(job["params_json"] or "{}")
    path = job["root"]
    ctx = ClassifyJob(engine=engine, job_id=job_id, path=path, operations=check_operations(options.get("operations")),
                      force=bool(options.get("force", True)), params=params_from(None, load_preferences(engine)),
                      state=JobState(engine, job_id, count_files(engine, path), hooks.on_progress(job_id)),
                      should_cancel=hooks.cancel_check(engine, job_id=job_id), run=run)
    with _jobs_lock:
        return _jobs.setdefault(key, ctx)


def classify_batch_at(store: str, job_id: int, after: str) -> dict[str, Any]:
    """Classify the next batch of the job's files whose path sorts after ``after``; what it did, and where the next
    batch starts (``last``, ``done``)."""
    ctx = job_context(store, job_id)
    if ctx.should_cancel():
        raise Cancelled
    with ctx.engine.connect() as conn:
        rows = conn.execute(select(T).where(_scope(ctx.path), T.c.path > after).order_by(T.c.path).limit(BATCH)) \
            .mappings().all()
    if not rows:
        return {"last": after, "done": True, "applied": 0, "skipped": 0, "errors": 0}
    res = classify_rows(ctx.engine, rows, operations=ctx.operations, params=ctx.params, rule="rerun-classifier",
                        force=ctx.force, should_cancel=ctx.should_cancel, on_item=ctx.state.item,
                        on_result=ctx.state.result, run=ctx.run)
    ctx.state.done += res.skipped  # files already done count as done (each finished one called item)
    ctx.state.report(None, force=True)
    return {"last": rows[-1]["path"], "done": len(rows) < BATCH, "applied": res.applied, "skipped": res.skipped,
            "errors": len(res.errors)}


BatchCall = Callable[[int, str], dict[str, Any]]


def run_classify_job(store: str, job_id: int, *, flow_run_id: str | None = None,
                     batch_call: BatchCall | None = None, run: ClassifyRun | None = None) -> dict:
    """Run classify job ``job_id`` to its end, keeping its row current; returns the final job row.
    ``batch_call(k, after)`` runs batch k (a Prefect task run); None runs it directly."""
    engine = get_engine(store)
    if not store_jobs.mark_running(engine, job_id=job_id, flow_run_id=flow_run_id):
        return store_jobs.get_job(engine, job_id=job_id)  # cancelled before it started
    call = batch_call or (lambda k, after: classify_batch_at(store, job_id, after))
    ctx: ClassifyJob | None = None
    try:
        ctx = job_context(store, job_id, run=run)
        after, k = "", 1
        while True:
            out = call(k, after)
            if out["done"]:
                break
            after, k = out["last"], k + 1
        if ctx.should_cancel():
            raise Cancelled
    except Cancelled:
        _finish(engine, job_id, ctx.state if ctx else None, "cancelled",
                "cancelled on request; the files done so far were kept")
        return store_jobs.get_job(engine, job_id=job_id)
    except Exception as exc:
        log.exception("classify job %s failed", job_id)
        # one of ours (NO_SPACE: a full disk stopped the job) says its code and what to do; anything else its type
        said = str(exc) if isinstance(exc, AssayError) else f"{type(exc).__name__}: {exc}"
        _finish(engine, job_id, ctx.state if ctx else None, "failed", said)
        raise
    finally:
        with _jobs_lock:
            _jobs.pop((store, job_id), None)
    state = ctx.state
    status, message = "completed", None
    if state.errors and state.errors >= state.total:
        status, message = "failed", f"every file failed ({state.errors}); job issues say why"
    elif state.errors:
        message = f"{state.errors} of {state.total} file(s) had errors; job issues say why"
    _finish(engine, job_id, state, status, message, progress=100.0)
    return store_jobs.get_job(engine, job_id=job_id)


def _finish(engine: Engine, job_id: int, state: JobState | None, status: str, message: str | None,
            **values: Any) -> None:
    if state is not None:
        state.flush_issues()
        values = {"files": state.done, "error_count": state.errors, **values}
    store_jobs.finish_job(engine, job_id=job_id, status=status, error_message=message, current_path=None, **values)
    sweep_after(engine)


# --- the Prefect flow ---------------------------------------------------------------------------------------------


@task(task_run_name="classify [batch {k}]", cache_policy=NO_CACHE, persist_result=False)
def classify_batch(store: str, run_id: int, k: int, after: str) -> dict[str, Any]:
    """Classify one batch of files and write the results."""
    return classify_batch_at(store, run_id, after)


@flow(name="classify", flow_run_name="classify {path}", persist_result=False, log_prints=False,
      validate_parameters=False, on_cancellation=[hooks.finish_stopped_job], on_crashed=[hooks.finish_stopped_job])
def classify_flow(path: str, run_id: int | None = None, operations: list[str] | None = None, force: bool = True,
                  store: str | None = None) -> Any:
    """Regenerate thumbnails, timelines and metadata of the indexed files at a path (a file or a folder)."""
    url = store or run_settings().store_url
    if run_id is None:  # started from Prefect with a path alone: confined to the roots like any caller's path
        path = run_settings().effective_roots().resolve(path, field="path")
        run_id = create_classify_job(get_engine(url), path=path, operations=check_operations(operations),
                                     force=force)
    flow_run_id = str(current_flow_run.get_id() or "") or None
    hooks.register(run_id, external=cancel_requested_in_prefect(flow_run_id))  # the UI's Cancel
    try:
        job = run_classify_job(url, run_id, flow_run_id=flow_run_id,
                               batch_call=lambda k, after: classify_batch(url, run_id, k, after))
    except TerminationSignal:
        # a SIGTERM from Prefect's runner (a Cancel in the UI): the pool's workers end now rather than be waited for
        # at exit (their files in flight can outlast the runner's grace); the runner's hook finishes the row
        stop_worker_processes()
        raise
    finally:
        hooks.drop(run_id, external_only=True)
    if job["status"] == "cancelled":
        return CancelledState(message=f"classify {path}: {job['error_message']}")
    return {k: job[k] for k in ("id", "status", "files", "error_count")}


def _parameters(job: dict[str, Any], store: str) -> dict[str, Any]:
    options = json.loads(job["params_json"] or "{}")
    return {"path": job["root"], "run_id": job["id"], "operations": options.get("operations"),
            "force": bool(options.get("force", True)), "store": store}


def classify_deployment() -> tuple[Any, str, dict[str, Any], str, bool]:
    """The deployment "classify" of the classify flow: Run in Prefect's UI asks for the path."""
    return (classify_flow, KIND, {}, "Regenerate thumbnails, timelines and metadata of indexed files at a path", False)


CLASSIFY_JOBS = JobKind(name=KIND, flow=classify_flow, parameters=_parameters,
                        run_plain=lambda store, job_id: run_classify_job(store, job_id))


# --- what tools and the command line call ------------------------------------------------------------------------


def job_public(job: dict[str, Any], engine: Engine, *, issues: bool = False) -> dict[str, Any]:
    """A classify job as the classifier tools return it: reference 000's snake_case fields plus the index jobs'."""
    params = json.loads(job.get("params_json") or "{}")
    out = {
        "id": job["id"], "jobId": str(job["id"]), "source_path": job["root"], "sourcePath": job["root"],
        "status": job["status"], "progress": round(job["progress"], 1),
        "created_at": iso(job["created_at"]), "completed_at": iso(job["completed_at"]),
        "started_at": iso(job["started_at"]), "operations": params.get("operations") or [],
        "force": bool(params.get("force", True)), "files": job["files"], "errors": job["error_count"],
        "error": job["error_message"], "currentPath": job["current_path"], "durationMs": job["duration_ms"],
        "flowRunId": job["flow_run_id"], "statusUrl": f"synthesis://jobs/{job['id']}",
    }
    if issues:
        out["issues"] = store_jobs.job_issues(engine, job_id=job["id"], limit=20)
    return out


def get_classify_job(engine: Engine, job_id: int) -> dict[str, Any]:
    job = store_jobs.get_job(engine, job_id=job_id)
    if job["kind"] != KIND:
        raise NotFound(f"job {job_id} is an {job['kind']} job, not a classifier job; list-classifier-jobs shows "
                       "the classifier's jobs", field="jobId")
    return job


def classify_path(runner: JobRunner, *, path: str, operations: tuple[str, ...], force: bool = True, async_: bool = True,
                  on_progress: ProgressHook | None = None,
                  on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Start (async) or run (sync) a classify job of ``path`` (already resolved inside the roots); returns the
    classifier tools' job shape."""
    if async_:
        job_id = start_classify(runner, path=path, operations=operations, force=force)
    else:
        job_id = run_classify(runner, path=path, operations=operations, force=force, on_progress=on_progress,
                              on_start=on_start)["id"]
    return job_public(get_classify_job(runner.engine, job_id), runner.engine, issues=not async_)


def start_classify(runner: JobRunner, *, path: str, operations: tuple[str, ...], force: bool = True) -> int:
    """Create a classify job of ``path`` (an indexed file or directory) and start it in the background; its id."""
    job_id = create_classify_job(runner.engine, path=path, operations=operations, force=force)
    return runner.submit(KIND, job_id)


def run_classify(runner: JobRunner, *, path: str, operations: tuple[str, ...], force: bool = True,
                 on_progress: ProgressHook | None = None,
                 on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Create a classify job and run it in this thread; its finished row."""
    job_id = create_classify_job(runner.engine, path=path, operations=operations, force=force)
    return runner.run(KIND, job_id, on_progress=on_progress, on_start=on_start)

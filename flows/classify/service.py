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
from typing import Any, Callable, Iterator

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Engine

from flows.classify import data_dir
from flows.classify.executor import ClassifyRun, classify_rows, params_from
from flows.classify.model import FileResult, parse_operations
from flows.prefect_support import JobHooks, lazy_flow
from store import jobs as store_jobs
from store.engine import get_engine
from store.entries import T
from store.errors import InvalidInput, NotFound
from store.preferences import load_preferences

log = logging.getLogger(__name__)

KIND = "classify"
BATCH = 64  # files per batch (one Prefect task run)
ProgressHook = Callable[[dict], None]


def check_operations(operations: list[str] | str | None) -> tuple[str, ...]:
    """The operations a caller named, or InvalidInput naming the accepted ones."""
    try:
        return parse_operations(operations)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="operations") from None


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


def iter_batches(engine: Engine, path: str, batch: int = BATCH) -> Iterator[list[Any]]:
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


class Cancelled(Exception):
    pass


def run_classify_job(engine: Engine, *, job_id: int, cancel_event: threading.Event | None = None,
                     on_progress: ProgressHook | None = None, flow_run_id: str | None = None,
                     run: ClassifyRun | None = None,
                     batch_call: Callable[[int, Callable[[], Any]], Any] | None = None) -> dict:
    """Run classify job ``job_id`` to its end, keeping its row current; returns the final job row.
    ``batch_call(k, fn)`` wraps each batch (a Prefect task run); None calls it directly."""
    job = store_jobs.get_job(engine, job_id=job_id)
    if not store_jobs.mark_running(engine, job_id=job_id, flow_run_id=flow_run_id):
        return job  # cancelled before it started
    params_json = json.loads(job["params_json"] or "{}")
    path = job["root"]
    should_cancel = store_jobs.cancel_check(engine, job_id=job_id, event=cancel_event, every=16)  # per file

    state: JobState | None = None
    try:
        operations = check_operations(params_json.get("operations"))
        force = bool(params_json.get("force", True))
        params = params_from(None, load_preferences(engine))
        state = JobState(engine, job_id, count_files(engine, path), on_progress)
        call = batch_call or (lambda k, fn: fn())
        for k, rows in enumerate(iter_batches(engine, path), start=1):
            if should_cancel() or (cancel_event is None and store_jobs.cancel_requested(engine, job_id=job_id)):
                raise Cancelled

            def one(rows=rows) -> dict:
                res = classify_rows(engine, rows, operations=operations, params=params, rule="rerun-classifier",
                                    force=force, should_cancel=should_cancel, on_item=state.item,
                                    on_result=state.result, run=run)
                state.done += res.skipped  # files already done count as done (each finished one called item)
                return {"applied": res.applied, "skipped": res.skipped, "errors": len(res.errors)}

            call(k, one)
            state.report(None, force=True)
        if should_cancel():
            raise Cancelled
    except Cancelled:
        _finish(engine, job_id, state, "cancelled", "cancelled on request; the files done so far were kept")
        return store_jobs.get_job(engine, job_id=job_id)
    except Exception as exc:
        log.exception("classify job %s failed", job_id)
        _finish(engine, job_id, state, "failed", f"{type(exc).__name__}: {exc}")
        raise
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


def sweep_after(engine: Engine) -> None:
    """Sweep the cache after a job or a plan execution with a classifier (errors are logged, never raised)."""
    from flows.classify.sweep import sweep_cache

    try:
        sweep_cache(engine, data_dir())
    except Exception:
        log.warning("cache sweep after classification failed", exc_info=True)


# --- the Prefect flow ---------------------------------------------------------------------------------------------

_hooks = JobHooks()
register_job_hooks = _hooks.register


_batch_fns: dict[tuple[int, int], Callable[[], Any]] = {}


def _build_flow():
    from prefect import flow, task
    from prefect.cache_policies import NO_CACHE
    from prefect.runtime import flow_run

    @task(name="classify-batch", cache_policy=NO_CACHE, persist_result=False)
    def batch(job_id: int, k: int) -> Any:
        """Classify one batch of files and write the results."""
        return _batch_fns.pop((job_id, k))()

    def call(job_id: int, k: int, fn: Callable[[], Any]) -> Any:
        _batch_fns[(job_id, k)] = fn  # flow parameters must serialise; the work stays in this process
        try:
            return batch.with_options(task_run_name=f"classify [batch {k}]")(job_id, k)
        finally:
            _batch_fns.pop((job_id, k), None)

    @flow(name="classify", flow_run_name="classify {path}", persist_result=False, log_prints=False,
          validate_parameters=False)
    def classify_flow(database_url: str, job_id: int, path: str) -> dict:
        """Regenerate thumbnails, timelines and metadata of the indexed files at a path."""
        try:
            engine = get_engine(database_url)
            job = run_classify_job(engine, job_id=job_id, cancel_event=_hooks.cancel_event(job_id),
                                   on_progress=_hooks.on_progress(job_id),
                                   flow_run_id=str(flow_run.get_id() or "") or None,
                                   batch_call=lambda k, fn: call(job_id, k, fn))
            return {k: job[k] for k in ("id", "status", "files", "error_count")}
        finally:
            _hooks.drop(job_id)

    return classify_flow


classify_flow = lazy_flow(_build_flow)  # classify_flow() is the Prefect flow object


# --- what tools and the command line call ------------------------------------------------------------------------


def job_public(job: dict[str, Any], engine: Engine, *, issues: bool = False) -> dict[str, Any]:
    """A classify job as the classifier tools return it: reference 000's snake_case fields plus the index jobs'."""
    from store.entries import iso

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


def classify_path(runner, *, path: str, operations: tuple[str, ...], force: bool = True, async_: bool = True,
                  on_progress: ProgressHook | None = None,
                  on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Start (async) or run (sync) a classify job of ``path`` (already resolved inside the roots); returns the
    classifier tools' job shape."""
    if async_:
        job_id = runner.submit_classify(path=path, operations=operations, force=force)
    else:
        job_id = runner.run_classify(path=path, operations=operations, force=force, on_progress=on_progress,
                                     on_start=on_start)["id"]
    return job_public(get_classify_job(runner.engine, job_id), runner.engine, issues=not async_)

"""The `index` operation as agents call it: skip a recent scan, or start one (async) or run one (sync)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from flows.core.runner import JobRunner
from flows.index.flow import INDEX_JOBS, ProgressHook
from store import jobs as store_jobs
from store.errors import InvalidInput, NotFound


def index_path(runner: JobRunner, *, root: str, async_: bool = True, force: bool = False, max_age: float = 3600,
               follow_symlinks: bool = False, on_progress: ProgressHook | None = None,
               on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Index ``root`` (already resolved inside the allowed roots). Returns reference 000's response shapes.
    ``on_start`` (sync only) gets the job id before the walk starts."""
    started = time.perf_counter()
    if max_age < 0:
        raise InvalidInput(f"maxAge must be 0 or more seconds, got {max_age}", field="maxAge")
    if not os.path.lexists(root):
        raise NotFound(f"root {root} does not exist", field="root")
    if not force and max_age > 0:
        last = store_jobs.fresh_scan_of(runner.engine, path=root, max_age=max_age)
        if last is not None:
            age = time.time() - last["completed_at"]
            return {
                "root": root, "status": "completed", "files": 0, "directories": 0, "totalSize": 0,
                "durationMs": int((time.perf_counter() - started) * 1000), "skipped": True,
                "skipReason": f"Path was scanned {int(age)} seconds ago (max age: {int(max_age)} seconds). "
                              "Use force=true to re-index.",
                "lastJobId": str(last["id"]),
            }
    params = {"force": force, "maxAge": max_age, "followSymlinks": follow_symlinks}
    if async_:
        job_id = start_index_job(runner, root=root, params=params)
        return {"jobId": job_id, "root": root, "status": "pending", "statusUrl": f"synthesis://jobs/{job_id}"}
    job = run_index(runner, root=root, params=params, on_progress=on_progress, on_start=on_start)
    return {
        "jobId": job["id"], "root": root, "status": job["status"], "files": job["files"],
        "directories": job["directories"], "totalSize": job["total_size"], "removed": job["removed"],
        "durationMs": int((time.perf_counter() - started) * 1000), "skipped": False,
        "errors": job["error_count"], "issues": store_jobs.job_issues(runner.engine, job_id=job["id"]),
        "error": job["error_message"],
        "statusUrl": f"synthesis://jobs/{job['id']}",
    }


def start_index_job(runner: JobRunner, *, root: str, params: dict[str, Any] | None = None) -> int:
    """Create an index job of ``root`` and start it in the background; its id."""
    job_id = store_jobs.create_job(runner.engine, root=root, kind=INDEX_JOBS.name, params=params)
    return runner.submit(INDEX_JOBS.name, job_id)


def run_index(runner: JobRunner, *, root: str, params: dict[str, Any] | None = None,
              on_progress: ProgressHook | None = None, on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Create an index job of ``root`` and run it in this thread; its finished row."""
    job_id = store_jobs.create_job(runner.engine, root=root, kind=INDEX_JOBS.name, params=params)
    return runner.run(INDEX_JOBS.name, job_id, on_progress=on_progress, on_start=on_start)

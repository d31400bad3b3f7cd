"""Sources (reference 000, "Source Management"): a ``live`` source is a TreeWatcher keeping its folder's index
current; a ``manual`` source indexes its folder once each time it is started, as an index job (a Prefect flow with a
job row, through the JobRunner).

Live sources start when created enabled, on ``source-start``, and when the server starts (``start_enabled``); they
stop on ``source-stop``, ``source-delete`` and ``shutdown``. Each catch-up of a live source and each finished manual
index counts as one scan in the source's stats. Deleting a source keeps the entries it indexed.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any

from sqlalchemy.engine import Engine

from flows.core.roots import Roots
from flows.core.runner import JobRunner
from flows.index.service import start_index_job
from flows.index.watch import ChangeSet, TreeWatcher, count_under
from store import jobs as store_jobs
from store import sources as store_sources
from store.errors import AssayError, InvalidInput, NotFound

log = logging.getLogger(__name__)

MAX_DEBOUNCE_MS = 600_000


class SourceManager:
    """The running side of sources: watchers of live sources, index jobs of manual ones."""

    def __init__(self, engine: Engine, runner: JobRunner, roots: Roots) -> None:
        self.engine = engine
        self.runner = runner
        self.roots = roots
        self._watchers: dict[str, TreeWatcher] = {}
        self._jobs: dict[str, int] = {}  # manual source -> its index job while one runs
        self._threads: dict[str, threading.Thread] = {}  # manual source -> the thread recording its job
        self._lock = threading.Lock()

    # --- definitions ------------------------------------------------------------------------------------------------

    def create(self, *, name: str, type: str, path: str, enabled: bool = True, watch_recursive: bool = True,
               debounce_ms: int = 500) -> dict[str, Any]:
        """Define a source; an enabled live source starts watching at once."""
        store_sources.check_name(name)
        store_sources.check_type(type)
        if not 0 <= debounce_ms <= MAX_DEBOUNCE_MS:
            raise InvalidInput(f"debounce_ms must be between 0 and {MAX_DEBOUNCE_MS}, got {debounce_ms}",
                               field="debounce_ms")
        resolved = self._existing(path)
        store_sources.create_source(self.engine, name=name, type=type, path=resolved, enabled=enabled,
                                    config={"watch_recursive": watch_recursive, "debounce_ms": debounce_ms})
        if type == "live" and enabled:
            self.start(name)
        return self.get(name)

    def _existing(self, path: str) -> str:
        resolved = self.roots.resolve(path, field="path")
        if not os.path.exists(resolved):
            raise NotFound(f"path {resolved} does not exist; a source needs an existing folder", field="path")
        return resolved

    def get(self, name: str) -> dict[str, Any]:
        row = store_sources.require_source(self.engine, name=name)
        out = store_sources.source_public(row)
        out["status"], out["last_error"] = self._status(row)
        out["entries_indexed"] = count_under(self.engine, [row["path"]])  # now, as source-stats says
        watcher = self._watchers.get(name)
        out["watcher"] = _counters(watcher) if watcher is not None else None
        out["job_id"] = self._jobs.get(name)
        return out

    def list(self) -> list[dict[str, Any]]:
        return [self.get(row["name"]) for row in store_sources.list_sources(self.engine)]

    def delete(self, name: str) -> dict[str, Any]:
        """Stop the source and delete its definition; the entries it indexed stay in the store."""
        store_sources.require_source(self.engine, name=name)
        self.stop(name)
        row = store_sources.delete_source(self.engine, name=name)
        return {"name": name, "type": row["type"], "path": row["path"], "deleted": True}

    # --- running ----------------------------------------------------------------------------------------------------

    def _status(self, row: dict[str, Any]) -> tuple[str, str | None]:
        """(status, last error) now: a watcher that died on an error is ``error``, a finished job ``stopped``."""
        name = row["name"]
        watcher = self._watchers.get(name)
        if watcher is not None:
            if watcher.running:
                return "running", watcher.unreadable
            if watcher.last_error:
                return "error", watcher.last_error
            return "stopped", row["last_error"]
        if name in self._jobs:
            return "running", None
        return row["status"], row["last_error"]

    def start(self, name: str) -> dict[str, Any]:
        """Start watching (live) or start a one-time index job (manual); starting a running source is harmless."""
        row = store_sources.require_source(self.engine, name=name)
        path = self._existing(row["path"])  # the roots may have changed since the source was created
        if row["type"] == "live":
            return self._start_live(row, path)
        return self._start_manual(row, path)

    def _start_live(self, row: dict[str, Any], path: str) -> dict[str, Any]:
        name = row["name"]
        with self._lock:
            watcher = self._watchers.get(name)
            if watcher is not None and watcher.running:
                return {"name": name, "type": "live", "status": "running", "started": False, "job_id": None,
                        "message": f"source {name} is already watching {path}"}
            config = row["config"]
            watcher = TreeWatcher(self.engine, [path], recursive=bool(config.get("watch_recursive", True)),
                                  debounce_ms=int(config.get("debounce_ms", 500)), name=f"source {name}",
                                  on_change=functools.partial(self._on_change, name))
            self._watchers[name] = watcher
            watcher.start()
        store_sources.set_status(self.engine, name=name, status="running")
        log.info("source %s watching %s", name, path)
        return {"name": name, "type": "live", "status": "running", "started": True, "job_id": None,
                "message": f"watching {path}: catching up on changes since the last scan, then live"}

    def _on_change(self, name: str, changes: ChangeSet) -> None:
        watcher = self._watchers.get(name)
        if watcher is None or not changes.full_rescan or watcher.last_catch_up is None:
            return
        scan = watcher.last_catch_up
        store_sources.record_scan(self.engine, name=name, duration_ms=scan.duration_ms,
                                  entries_indexed=count_under(self.engine, watcher.paths), at=scan.finished_at)

    def _start_manual(self, row: dict[str, Any], path: str) -> dict[str, Any]:
        name = row["name"]
        with self._lock:
            job_id = self._jobs.get(name)
            if job_id is not None:
                return {"name": name, "type": "manual", "status": "running", "started": False, "job_id": job_id,
                        "message": f"source {name} is already indexing {path} (job {job_id})"}
            job_id = start_index_job(self.runner, root=path, params={"source": name})
            self._jobs[name] = job_id
        store_sources.set_status(self.engine, name=name, status="running")
        thread = threading.Thread(target=self._finish_manual, args=(name, job_id), name=f"assay-source {name}",
                                  daemon=True)
        self._threads[name] = thread
        thread.start()
        return {"name": name, "type": "manual", "status": "running", "started": True, "job_id": job_id,
                "message": f"indexing {path} once (job {job_id}; synthesis://jobs/{job_id} shows its progress)"}

    def _finish_manual(self, name: str, job_id: int) -> None:
        """Wait for a manual source's index job, then record it as a scan."""
        try:
            job = self.runner.wait(job_id)
            error = None if job["status"] in ("completed", "cancelled") else job["error_message"] or job["status"]
            if job["status"] == "completed":
                unreadable = dict(store_jobs.unreadable_paths(self.engine, job_id=job_id))
                if job["root"] in unreadable:
                    error = f"cannot read {job['root']}: {unreadable[job['root']].removeprefix('unreadable: ')}"
            if job["status"] != "cancelled":
                root = job["root"]
                store_sources.record_scan(self.engine, name=name, duration_ms=job["duration_ms"] or 0,
                                          entries_indexed=count_under(self.engine, [root]), error=error,
                                          at=job["completed_at"])
            store_sources.set_status(self.engine, name=name, status="error" if error else "stopped", error=error)
        except NotFound:
            pass  # the source was deleted meanwhile
        except Exception:
            log.exception("source %s: recording index job %s failed", name, job_id)
        finally:
            with self._lock:
                if self._jobs.get(name) == job_id:
                    del self._jobs[name]

    def wait(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        """Wait until a manual source's running index job has finished and been recorded (for the CLI and tests)."""
        thread = self._threads.get(name)
        if thread is not None:
            thread.join(timeout)
        return self.get(name)

    def stop(self, name: str) -> dict[str, Any]:
        """Stop a live source's watcher, or cancel a manual source's running index job."""
        row = store_sources.require_source(self.engine, name=name)
        with self._lock:
            watcher = self._watchers.pop(name, None)
            job_id = self._jobs.get(name)
        if watcher is not None:
            was_running = watcher.running
            watcher.stop()
            store_sources.set_status(self.engine, name=name, status="stopped")
            return {"name": name, "type": row["type"], "status": "stopped", "stopped": was_running,
                    "message": "stopped watching; the next source-start catches up on what changed meanwhile"
                    if was_running else f"source {name} was not running"}
        if job_id is not None:
            self.runner.cancel(job_id)
            store_sources.set_status(self.engine, name=name, status="stopped")
            return {"name": name, "type": row["type"], "status": "stopped", "stopped": True,
                    "message": f"cancelled index job {job_id}; entries written so far are kept"}
        if row["status"] == "running":
            store_sources.set_status(self.engine, name=name, status="stopped")
        return {"name": name, "type": row["type"], "status": "stopped", "stopped": False,
                "message": f"source {name} was not running"}

    def stats(self, name: str) -> dict[str, Any]:
        """Reference 000's source-stats: the same figures as ``get`` (entries under the path counted now, status,
        last error, watcher counters), so the two never disagree."""
        info = self.get(name)
        keys = ("name", "type", "status", "entries_indexed", "last_scan_at", "total_scans",
                "average_scan_duration_ms", "path", "last_error", "watcher")
        return {k: info[k] for k in keys}

    def start_enabled(self) -> int:
        """Start every enabled live source (at server start); one that cannot start is marked ``error``."""
        started = 0
        for row in store_sources.list_sources(self.engine, type="live", enabled=True):
            try:
                self.start(row["name"])
                started += 1
            except AssayError as exc:
                log.warning("source %s not started: %s", row["name"], exc)
                store_sources.set_status(self.engine, name=row["name"], status="error", error=exc.message)
        return started

    def shutdown(self) -> None:
        """Stop every watcher and cancel running manual jobs (their sources are stopped, still enabled)."""
        with self._lock:
            names = list(self._watchers) + list(self._jobs)
        for name in names:
            try:
                self.stop(name)
            except Exception:
                log.exception("source %s did not stop cleanly", name)


def _counters(watcher: TreeWatcher) -> dict[str, Any]:
    c = watcher.counters
    return {"running": watcher.running, "events_seen": c.events_seen, "entries_upserted": c.entries_upserted,
            "entries_removed": c.entries_removed, "entries_moved": c.entries_moved, "change_sets": c.change_sets,
            "catch_ups": c.catch_ups, "last_error": watcher.last_error}


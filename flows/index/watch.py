"""A watcher that keeps the index of some folders current: ``TreeWatcher`` runs ``watchfiles.watch`` on a thread.

What it does with filesystem events:

- Events are debounced, and a file is acted on only once it has settled: no event for ``debounce_ms`` and the same
  size and mtime at two looks one settle interval apart. Partial-download and editor temp names (PARTIAL_NAMES) and
  the ``exclude`` globs are never indexed (a glob matches any path component, or the path below the watched folder).
- Events inside a trash are not new files; events inside assay's own folders (its data dir, its cache: the store's
  own writes, when a watched folder holds them) are dropped before anything sees them (flows/core/own_dirs).
- Created and modified files, directories and links are upserted (ids, hence set memberships, survive), and the sizes
  of their ancestor directories refreshed. A directory that is new to the store is walked with the indexer (its
  contents may have been moved in whole).
- A deletion removes the entry and its subtree; set memberships go with it (ON DELETE CASCADE).
- A delete and an add of the same inode (one rename, or two events within ``debounce_ms``) is a move: the entry keeps
  its id and memberships (``store.entries.move_subtree``). Renaming ``x.part`` to ``x`` is therefore a move when the
  partial file was indexed (by a catch-up), and a plain add otherwise.
- ``start()`` installs the OS watches first, then catches up on what changed while nobody watched (an incremental
  index of each path under a fresh job id, whose sweep removes what vanished), reports that as a ChangeSet with
  ``full_rescan=True``, and then applies the events, including those that arrived during the catch-up.
- ``stop()`` sets the stop event; the thread ends within one tick. Unsettled events are dropped: the next start's
  catch-up sees their result. Errors in ``on_change`` are logged and never stop the watcher.

Memory: the pending events and one batch of rows; trees are walked by the streaming indexer, never held.
The catch-up walks the whole tree under each path (like ``index``), whatever ``recursive`` / ``include_hidden`` say;
those options filter the live events only.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import posixpath
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import watchfiles
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from flows.core.own_dirs import below, in_own_dir
from flows.core.trash_dirs import under_trash
from flows.index import watch_apply
from flows.index.flow import run_index_job
from store import jobs as store_jobs
from store.entries import T, subtree_clause

log = logging.getLogger(__name__)

PARTIAL_NAMES = ("*.part", "*.crdownload", "*.tmp", "*.download", "*.partial", ".~lock.*", "~$*", "*.swp")


@dataclass(frozen=True)
class ChangeSet:
    """What one pass changed. ``full_rescan``: everything under the watched paths may have changed (a catch-up, or
    more changes than MAX_CHANGE_IDS); ``entry_ids`` and ``removed_paths`` are then empty or partial."""

    entry_ids: list[int]
    removed_paths: list[str]
    full_rescan: bool = False


@dataclass
class WatchCounters:
    events_seen: int = 0
    entries_upserted: int = 0
    entries_removed: int = 0
    entries_moved: int = 0
    change_sets: int = 0
    catch_ups: int = 0


@dataclass
class _Pending:
    since: float  # monotonic time of the last event, or of the last look
    stat: tuple | None = None  # (kind, size, mtime_ns, inode) at the last look


@dataclass
class CatchUp:
    job_ids: list[int] = field(default_factory=list)
    status: str = "completed"
    duration_ms: int = 0
    finished_at: float = 0.0
    error: str | None = None


class TreeWatcher:
    """Keeps the entries under ``paths`` (canonical absolute paths) current while started."""

    def __init__(self, engine: Engine, paths: list[str], *, recursive: bool = True, include_hidden: bool = True,
                 exclude: list[str] | tuple[str, ...] = (), debounce_ms: int = 500, follow_symlinks: bool = False,
                 on_change: Callable[[ChangeSet], None] | None = None, name: str = "") -> None:
        if not paths:
            raise ValueError("TreeWatcher needs at least one path")
        self.engine = engine
        self.paths = [posixpath.normpath(p) for p in paths]
        self.recursive = recursive
        self.include_hidden = include_hidden
        self.patterns = PARTIAL_NAMES + tuple(exclude)
        self.debounce_ms = max(int(debounce_ms), 0)
        self.follow_symlinks = follow_symlinks
        self.on_change = on_change
        self.name = name or ", ".join(self.paths)
        self.counters = WatchCounters()
        self.last_error: str | None = None
        self.unreadable: str | None = None  # folders below the watched paths the catch-up could not read, and why
        self.last_catch_up: CatchUp | None = None
        self.scan_id: int | None = None  # the catch-up job id the watcher's own rows carry
        self._debounce = self.debounce_ms / 1000
        self._settle = max(0.05, min(self._debounce / 2, 1.0))
        self._tick_ms = int(max(50, min(self.debounce_ms / 2, 500)))
        self._stop = threading.Event()
        self._caught_up = threading.Event()  # set once the start's catch-up is written and reported
        self._thread: threading.Thread | None = None
        self._pending: dict[str, _Pending] = {}
        self._deleted: dict[str, float] = {}
        self._own = tuple(prefix for p in self.paths for prefix in below(p))  # assay's folders below the paths

    # --- lifecycle ------------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Catch up, then watch, on a background thread; a watcher already running is left as it is."""
        if self.running:
            return
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self.last_error = None
        self.unreadable = None
        self._pending.clear()
        self._deleted.clear()
        self._own = tuple(prefix for p in self.paths for prefix in below(p))  # the data dir as configured now
        self._thread = threading.Thread(target=self._run, name=f"assay-watch {self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop watching; True when the thread has ended within ``timeout`` seconds."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        return not self.running

    def wait_caught_up(self, timeout: float) -> bool:
        """Wait until the start's catch-up is written and reported (on_change has returned); False on timeout or
        when the watcher stopped first."""
        deadline = time.monotonic() + timeout
        while not self._caught_up.wait(0.02):
            if not self.running or time.monotonic() >= deadline:
                return self._caught_up.is_set()
        return True

    def _run(self) -> None:
        self.last_catch_up = None
        changes_iter = None
        try:
            changes_iter = watchfiles.watch(
                *self.paths, watch_filter=self._not_own, debounce=max(self.debounce_ms, 50),
                step=min(50, self._tick_ms), stop_event=self._stop, rust_timeout=self._tick_ms, yield_on_timeout=True,
                recursive=self.recursive, ignore_permission_denied=True, raise_interrupt=False,
            )
            first = next(changes_iter, None)  # the OS watches exist from here on; later events are buffered
            if first is None:
                return
            self._record(first)
            self._catch_up()
            for changes in changes_iter:
                self._record(changes)
                self._process()
        except Unreadable as exc:
            self.last_error = str(exc)
            log.warning("watcher %s stopped: %s", self.name, exc)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("watcher %s stopped on an error", self.name)
        finally:
            if changes_iter is not None:
                changes_iter.close()

    def _catch_up(self) -> None:
        started = time.perf_counter()
        result = CatchUp()
        for root in self.paths:
            if self._stop.is_set():
                return
            job_id = store_jobs.create_job(self.engine, root=root, params={"watch": self.name, "catchUp": True})
            job = run_index_job(self.engine, job_id=job_id, root=root, follow_symlinks=self.follow_symlinks,
                                cancel_event=self._stop)
            result.job_ids.append(job_id)
            self.scan_id = self.scan_id or job_id
            if job["status"] == "cancelled":
                return
            if job["status"] != "completed":
                result.status, result.error = job["status"], job["error_message"]
                raise RuntimeError(f"catching up on {root} failed: {job['error_message']}")
            unreadable = store_jobs.unreadable_paths(self.engine, job_id=job_id)
            for path, reason in unreadable:
                if path == root:
                    raise Unreadable(f"cannot read {root}: {reason.removeprefix('unreadable: ')}; nothing under it "
                                     "is indexed or watched")
            if unreadable:
                shown = ", ".join(f"{p} ({r.removeprefix('unreadable: ')})" for p, r in unreadable[:5])
                more = f" and {len(unreadable) - 5} more" if len(unreadable) > 5 else ""
                self.unreadable = f"could not read {len(unreadable)} folder(s): {shown}{more}"
        result.duration_ms = int((time.perf_counter() - started) * 1000)
        result.finished_at = time.time()
        self.counters.catch_ups += 1
        self.last_catch_up = result
        self._notify(ChangeSet(entry_ids=[], removed_paths=[], full_rescan=True))
        self._caught_up.set()

    def _notify(self, changes: ChangeSet) -> None:
        self.counters.change_sets += 1
        if self.on_change is None:
            return
        try:
            self.on_change(changes)
        except Exception:
            log.exception("watcher %s: on_change failed; watching goes on", self.name)

    # --- events ---------------------------------------------------------------------------------------------------

    def wanted(self, path: str) -> bool:
        """Whether events on ``path`` are indexed: below a watched path, not hidden (unless included), not partial
        or excluded, and directly inside a watched path when not recursive."""
        for root in self.paths:
            if path == root:
                return True
            if path.startswith(root.rstrip("/") + "/"):
                parts = path[len(root.rstrip("/")) + 1:].split("/")
                break
        else:
            return False
        if not self.recursive and len(parts) > 1:
            return False
        if under_trash(root, parts):  # a file trashed from a watched volume lands in its .Trash-$uid: not new
            return False
        if in_own_dir(path, self._own):  # the store's own writes
            return False
        if not self.include_hidden and any(p.startswith(".") for p in parts):
            return False
        relative = "/".join(parts)
        return not any(fnmatch.fnmatchcase(p, g) for g in self.patterns for p in (*parts, relative))

    def _not_own(self, change: watchfiles.Change, path: str) -> bool:
        """watchfiles' filter: events inside assay's own folders are dropped, neither logged nor recorded."""
        return not in_own_dir(path, self._own)

    def _record(self, changes) -> None:
        now = time.monotonic()
        for change, path in changes:
            self.counters.events_seen += 1
            if change == watchfiles.Change.deleted:
                self._deleted[path] = now
            elif self.wanted(path):
                self._pending[path] = _Pending(since=now)

    def _look(self, path: str) -> tuple | None:
        try:
            st = os.stat(path) if self.follow_symlinks else os.lstat(path)
        except OSError:
            return None
        return watch_apply.kind_of(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino

    def _process(self) -> None:
        """Apply what is ready: deletes quiet for debounce_ms (moves first), then settled upserts."""
        now = time.monotonic()
        deletes: list[str] = []
        for path, since in list(self._deleted.items()):
            if now - since < self._debounce:
                continue
            del self._deleted[path]
            if os.path.lexists(path):  # replaced (an editor's save): an update, not a removal
                if self.wanted(path):
                    self._pending.setdefault(path, _Pending(since=now - self._debounce))
            else:
                deletes.append(path)
        ready: list[tuple[str, tuple]] = []
        for path, pending in list(self._pending.items()):
            if now - pending.since < self._debounce:
                continue
            look = self._look(path)
            if look is None:  # gone before it settled
                del self._pending[path]
                deletes.append(path)
            elif look == pending.stat:
                del self._pending[path]
                ready.append((path, look))
            else:  # still changing, or first look: look again after the settle interval
                pending.stat = look
                pending.since = now - self._debounce + self._settle
        if not deletes and not ready:
            return
        candidates = {}
        if deletes:  # where a deleted inode may have gone: every pending or ready add
            for path, pending in self._pending.items():
                look = pending.stat or self._look(path)
                if look is not None:
                    candidates[path] = look
            candidates.update(dict(ready))
        outcome = watch_apply.apply(self.engine, deletes=sorted(deletes), candidates=candidates, ready=sorted(ready),
                                    scan_id=self.scan_id, follow_symlinks=self.follow_symlinks,
                                    should_stop=self._stop.is_set)
        self.counters.entries_upserted += outcome.upserted
        self.counters.entries_removed += outcome.removed
        self.counters.entries_moved += outcome.moved
        if outcome.entry_ids or outcome.removed_paths or outcome.overflow:
            self._notify(ChangeSet(entry_ids=outcome.entry_ids, removed_paths=outcome.removed_paths,
                                   full_rescan=outcome.overflow))


class Unreadable(Exception):
    """A watched path cannot be read: the watcher stops and says so."""


def count_under(engine: Engine, paths: list[str]) -> int:
    """Entries at or under any of ``paths`` now."""
    with engine.connect() as conn:
        return sum(conn.execute(select(func.count()).select_from(T).where(subtree_clause(p))).scalar_one()
                   for p in paths)

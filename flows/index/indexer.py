"""The indexer: a streaming, stack-based scandir walk that writes entries in batches.

Memory is bounded by the walk's frontier (the directories discovered but not yet finished) and one batch of rows,
never by the size of the tree. Directories are emitted after their contents (post-order), so each directory's size
is the sum of its subtree without a second pass. Entries the walk did not see are swept at the end; the sweep is
skipped when the walk is cancelled or fails, so a stopped walk never deletes what it did not get to.
"""

from __future__ import annotations

import logging
import os
import queue
import stat as statmod
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy.engine import Engine

from store import entries as store_entries

log = logging.getLogger(__name__)

ProgressFn = Callable[["IndexProgress"], None]
ANALYZE_AFTER = 10_000  # entries walked; ANALYZE costs about 0.6 ms per 1,000 entries on SQLite
CancelFn = Callable[[], bool]


class Cancelled(Exception):
    """The walk stopped because cancellation was requested."""


@dataclass
class IndexProgress:
    files: int = 0
    directories: int = 0
    total_size: int = 0
    written: int = 0
    current_path: str | None = None
    percent: float = 0.0


@dataclass
class IndexResult:
    root: str
    files: int = 0
    directories: int = 0
    total_size: int = 0
    removed: int = 0
    issues: list[tuple[str, str]] = field(default_factory=list)
    duration_ms: int = 0


def kind_of(mode: int) -> str:
    if statmod.S_ISDIR(mode):
        return "directory"
    if statmod.S_ISREG(mode):
        return "file"
    if statmod.S_ISLNK(mode):
        return "symlink"
    return "other"


class _ThreadWriter:
    """Writes batches on a background thread (for PostgreSQL, whose driver waits on the network without the GIL).
    The queue holds at most two batches: memory stays bounded."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.written = 0
        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._thread = threading.Thread(target=self._loop, name="assay-index-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            if self.error is not None:
                continue  # drain without writing, so the walker never blocks on a dead writer
            try:
                with self.engine.begin() as conn:
                    store_entries.upsert_entries(conn, batch)
                self.written += len(batch)
            except BaseException as exc:  # handed to the walker thread, which raises it
                self.error = exc

    def put(self, batch: list) -> None:
        if self.error is not None:
            raise self.error
        self._queue.put(batch)

    def close(self) -> None:
        """Wait until every queued batch is written; raise the writer's error if there was one."""
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error


class _ProcessWriter:
    """Writes batches into a SQLite file from a child process (store/sqlite_writer.py says why).

    The pipe is the queue: when the child falls behind, the walker blocks on the write, so memory stays bounded.
    """

    def __init__(self, database: str) -> None:
        import subprocess
        import tempfile

        import store
        from store import sqlite_writer

        self.written = 0  # rows handed over; the child commits each batch as it arrives
        self._frame = sqlite_writer.write_frame
        self._stderr = tempfile.TemporaryFile()
        project = os.path.dirname(os.path.dirname(os.path.abspath(store.__file__)))
        env = {**os.environ, "PYTHONPATH": project + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._proc = subprocess.Popen([sys.executable, "-m", "store.sqlite_writer", database],
                                      stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self._stderr, env=env)
        self._send({"sql": store_entries.SQLITE_UPSERT,
                    "pragmas": ["synchronous=NORMAL", "busy_timeout=30000", "cache_size=-65536"]})

    def _send(self, obj) -> None:
        try:
            self._frame(self._proc.stdin, obj)
        except (BrokenPipeError, OSError):
            self._proc.wait()
            raise RuntimeError(f"the index writer process failed: {self._error_text()}") from None

    def _error_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip() or f"exit status {self._proc.returncode}"

    def put(self, batch: list) -> None:
        self._send(batch)
        self.written += len(batch)

    def close(self) -> None:
        """Send the end frame and wait until the child has committed everything it received."""
        try:
            self._proc.stdin.write(b"\0\0\0\0")
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        code = self._proc.wait()
        text = self._error_text() if code else ""
        self._stderr.close()
        if code:
            raise RuntimeError(f"the index writer process failed: {text}")


class _Writer:
    """Picks how to write: a tree that fits in one batch is written in the caller's thread (no start-up cost);
    bigger trees go to a writer process for a SQLite file, or a writer thread otherwise."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.impl: _ThreadWriter | _ProcessWriter | None = None
        self._written = 0

    @property
    def written(self) -> int:
        return self.impl.written if self.impl is not None else self._written

    def put(self, batch: list, *, final: bool = False) -> None:
        if self.impl is None:
            if final:
                with self.engine.begin() as conn:
                    store_entries.upsert_entries(conn, batch)
                self._written += len(batch)
                return
            database = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
            if database and database != ":memory:" and os.environ.get("ASSAY_INDEX_WRITER") != "thread":
                self.impl = _ProcessWriter(database)
            else:
                self.impl = _ThreadWriter(self.engine)
        self.impl.put(batch)

    def close(self) -> None:
        if self.impl is not None:
            self.impl.close()


class _Walk:
    def __init__(self, engine: Engine, root: str, *, scan_id: int, follow_symlinks: bool, batch_size: int,
                 progress: ProgressFn | None, should_cancel: CancelFn | None, expected: int, max_issues: int) -> None:
        self.engine = engine
        self.root = root
        self.scan_id = scan_id
        self.follow = follow_symlinks
        self.batch_size = batch_size
        self.progress_fn = progress
        self.should_cancel = should_cancel
        self.expected = expected
        self.max_issues = max_issues
        self.now = time.time()
        self.batch: list[tuple] = []
        self.writer = _Writer(engine)
        self.state = IndexProgress()
        self.issues: list[tuple[str, str]] = []
        self.issue_count = 0
        self.unreadable: list[str] = []
        self.dirs_seen = 1

    def issue(self, path: str, reason: str) -> None:
        self.issue_count += 1
        if len(self.issues) < self.max_issues:
            self.issues.append((path, reason))
        log.info("index: skipped %s: %s", path, reason)

    def emit(self, path: str, parent: str | None, name: str, kind: str, size: int, st: os.stat_result) -> None:
        self.batch.append(store_entries.row_tuple(path, parent, name, kind, size, st.st_mtime, st.st_ctime,
                                                  st.st_ino, self.scan_id, self.now))
        if len(self.batch) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        if self.batch:
            self.writer.put(self.batch)
            self.batch = []
        self.state.written = self.writer.written
        self.report()
        if self.should_cancel is not None and self.should_cancel():
            raise Cancelled()

    def finish(self) -> None:
        """Hand over the last batch and wait for the writer; called on every exit path."""
        if self.batch:
            self.writer.put(self.batch, final=True)
            self.batch = []
        self.writer.close()
        self.state.written = self.writer.written

    def report(self) -> None:
        s = self.state
        done = s.files + s.directories
        if self.expected > 0:
            s.percent = min(99.0, 100.0 * done / self.expected)
        else:  # first scan: directories finished over directories discovered so far
            s.percent = min(99.0, 100.0 * s.directories / max(self.dirs_seen, 1))
        if self.progress_fn is not None:
            self.progress_fn(s)

    def run(self, root_stat: os.stat_result) -> None:
        root = self.root
        sizes: dict[str, int] = {root: 0}
        stats: dict[str, os.stat_result] = {root: root_stat}
        names: dict[str, str] = {root: os.path.basename(root) or root}
        visited: set[tuple[int, int]] = {(root_stat.st_dev, root_stat.st_ino)} if self.follow else set()
        stack: list[tuple[bool, str]] = [(True, root)]  # (entering?, directory)
        while stack:
            entering, directory = stack.pop()
            if not entering:
                size = sizes.pop(directory)
                self.state.directories += 1
                parent = os.path.dirname(directory) if directory != "/" else None
                self.emit(directory, parent, names.pop(directory), "directory", size, stats.pop(directory))
                if directory != root:
                    sizes[parent] += size
                continue
            stack.append((False, directory))
            self.state.current_path = directory
            try:
                with os.scandir(directory) as it:
                    for item in it:
                        self._visit(item, directory, sizes, stats, names, visited, stack)
            except FileNotFoundError:
                self.issue(directory, "vanished during the walk")
            except OSError as exc:
                self.unreadable.append(directory)
                self.issue(directory, f"unreadable: {exc.strerror or exc}")

    def _visit(self, item: os.DirEntry, directory: str, sizes: dict, stats: dict, names: dict, visited: set,
               stack: list) -> None:
        path = item.path
        name = item.name
        if not name.isascii():
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:  # os.fsdecode kept undecodable bytes as surrogates; the store holds text
                self.issue(os.fsencode(path).decode("utf-8", "backslashreplace"),
                           "name is not valid UTF-8; skipped (rename it to index it)")
                return
        try:
            st = item.stat(follow_symlinks=self.follow)
        except FileNotFoundError:
            self.issue(path, "vanished during the walk" if not item.is_symlink() else "broken symlink")
            if item.is_symlink():  # a dangling link is still an entry when links are not followed
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    return
            else:
                return
        except OSError as exc:
            self.issue(path, f"cannot stat: {exc.strerror or exc}")
            return
        kind = kind_of(st.st_mode)
        if kind == "directory":
            if self.follow:
                key = (st.st_dev, st.st_ino)
                if key in visited:
                    self.issue(path, "symlink loop: directory already visited")
                    return
                visited.add(key)
            sizes[path] = 0
            stats[path] = st
            names[path] = item.name
            self.dirs_seen += 1
            stack.append((True, path))
            return
        size = st.st_size if kind == "file" else 0
        if kind == "file":
            self.state.files += 1
            self.state.total_size += size
            sizes[directory] += size
        self.emit(path, directory, item.name, kind, size, st)


def index_tree(engine: Engine, root: str, *, scan_id: int, follow_symlinks: bool = False, batch_size: int = 2000,
               progress: ProgressFn | None = None, should_cancel: CancelFn | None = None,
               max_issues: int = 1000) -> IndexResult:
    """Index ``root`` (a canonical absolute path) into the store under scan id ``scan_id``.

    Raises :class:`Cancelled` if ``should_cancel`` returns true between batches (rows already written stay; nothing
    is swept). Unreadable directories and files that vanish mid-walk are recorded in the result and skipped.
    """
    started = time.perf_counter()
    root_stat = os.stat(root) if follow_symlinks else os.lstat(root)
    expected = store_entries.count_subtree(engine, root=root)
    walk = _Walk(engine, root, scan_id=scan_id, follow_symlinks=follow_symlinks, batch_size=batch_size,
                 progress=progress, should_cancel=should_cancel, expected=expected, max_issues=max_issues)
    try:
        if statmod.S_ISDIR(root_stat.st_mode):
            walk.run(root_stat)
        else:
            kind = kind_of(root_stat.st_mode)
            walk.state.files += kind == "file"
            walk.state.total_size += root_stat.st_size if kind == "file" else 0
            walk.emit(root, os.path.dirname(root), os.path.basename(root), kind,
                      root_stat.st_size if kind == "file" else 0, root_stat)
    finally:
        walk.finish()  # rows already walked are written even when cancelled (they are true); nothing is swept
    walk.report()
    with engine.begin() as conn:
        removed = 0
        if statmod.S_ISDIR(root_stat.st_mode):
            removed = _sweep(conn, root, scan_id, walk.unreadable)
        store_entries.refresh_ancestor_sizes(conn, path=root)
        if walk.state.files + walk.state.directories >= ANALYZE_AFTER:
            # fresh statistics for the query planner after a big write (SQLite has none until asked): plan
            # conditions and set queries then scan instead of walking an index where that is faster
            conn.exec_driver_sql("ANALYZE entries")
    walk.state.percent = 100.0
    if progress is not None:
        progress(walk.state)
    s = walk.state
    result = IndexResult(root=root, files=s.files, directories=s.directories, total_size=s.total_size,
                         removed=removed, issues=walk.issues, duration_ms=int((time.perf_counter() - started) * 1000))
    if walk.issue_count > len(walk.issues):
        result.issues.append((root, f"... and {walk.issue_count - len(walk.issues)} more issues not recorded"))
    return result


def _sweep(conn, root: str, scan_id: int, unreadable: list[str]) -> int:
    """Delete what the walk did not see, except under directories it could not read (their contents are unknown)."""
    from sqlalchemy import and_, delete, not_, or_

    t = store_entries.T
    keep = [store_entries.subtree_clause(d, include_root=False) for d in unreadable[:200]]
    clause = and_(store_entries.subtree_clause(root), or_(t.c.scan_id.is_(None), t.c.scan_id != scan_id))
    if keep:
        clause = and_(clause, not_(or_(*keep)))
    if len(unreadable) > 200:  # too many holes to express in one statement: keep everything rather than lose data
        return 0
    return conn.execute(delete(t).where(clause)).rowcount or 0

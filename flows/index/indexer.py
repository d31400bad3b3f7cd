"""The indexer: a streaming, stack-based scandir walk that writes what changed, in batches.

Memory is bounded by the walk's frontier (the directories discovered but not yet finished) and one batch of rows,
never by the size of the tree. Directories are emitted after their contents (post-order), so each directory's size
is the sum of its subtree without a second pass.

On a store that already holds the tree, each directory's listing is compared with its stored children (one indexed
query per directory): an entry whose kind, size, mtime, ctime, inode and completeness are unchanged is not written
at all; a stored child missing from a complete listing is deleted with its subtree, there and then. So a re-index
of an unchanged tree writes nothing, and the store is consistent at every batch.

A directory whose listing is not complete says why in its ``scan_error``: ``unreadable: ...`` (its known contents
are kept), ``incomplete: ...`` (the walk was cancelled inside it; its size is then the sum of what is stored under
it) or ``not scanned: ...`` (discovered, never entered). A cancelled walk writes those frontier folders before it
stops, so everything it wrote is navigable and every directory's size is the sum of its stored children.

Every batch leaves the store consistent, so a walk killed anywhere leaves nothing half-done: a folder the store
does not hold is written first (``incomplete``, size 0), before anything under it, and each batch rewrites the sizes
of the stored folders above what it changed (the walk tracks the size the store holds for each open folder), so at
every commit each folder's size is the sum of its children's. The next walk finishes what a killed one left.

How the batches are written is flows/index/writers.py; how far the walk is (a percent that never claims work it
has not seen), flows/index/progress.py.
"""

from __future__ import annotations

import logging
import os
import stat as statmod
import time
from typing import Callable

from sqlalchemy.engine import Connection, Engine

from flows.core.own_dirs import own_dir_ids
from flows.core.trash_dirs import is_trash_dir
from flows.index.progress import IndexProgress, ProgressEstimate, unfinished
from flows.index.results import Cancelled, IndexResult, kind_of
from flows.index.writers import Writer
from store import entries as store_entries

log = logging.getLogger(__name__)

ProgressFn = Callable[["IndexProgress"], None]
ANALYZE_AFTER = 10_000  # entries written; ANALYZE costs about 0.6 ms per 1,000 entries on SQLite
CancelFn = Callable[[], bool]
_VANISHED = object()  # a directory's error marker: it disappeared between its listing and its walk
# a folder the store did not hold, written before anything under it; the walk rewrites it when it finishes the folder
WALKING = "incomplete: index job {} has not finished this folder (it is running, or it stopped)"
_S_ISDIR, _S_ISREG, _S_ISLNK = statmod.S_ISDIR, statmod.S_ISREG, statmod.S_ISLNK

__all__ = ["Cancelled", "IndexProgress", "IndexResult", "index_tree", "kind_of"]  # IndexProgress: flows.index.progress


class _Walk:
    def __init__(self, engine: Engine, root: str, *, scan_id: int, follow_symlinks: bool, batch_size: int,
                 progress: ProgressFn | None, should_cancel: CancelFn | None, expected: int, root_state: tuple | None,
                 max_issues: int, above: list[tuple[str, list]] | None = None) -> None:
        self.engine = engine
        self.root = root
        self.scan_id = scan_id
        self.follow = follow_symlinks
        self.batch_size = batch_size
        self.progress_fn = progress
        self.should_cancel = should_cancel
        self.estimate = ProgressEstimate(expected=expected, root_state=root_state)
        self.compare = expected > 0  # a store without the tree has nothing to compare with (a first index)
        self.max_issues = max_issues
        self.now = time.time()
        self.rows: list[tuple] = []
        self.gone: list[tuple[str, bool]] = []
        self.writer = Writer(engine, scan_id=scan_id, now=self.now)
        self.state = IndexProgress()
        self.issues: list[tuple[str, str]] = []
        self.issue_count = 0
        self.listed = 1  # entries known: the root and every name listed so far
        self.done = 0  # entries finished: files and others when listed, directories when their subtree is done
        self.next_tick = batch_size
        self.stack: list[tuple[bool, str]] = []  # (entering?, directory)
        # directory -> [size so far, stat, name, stored state, error, share, size change not written, stored row]:
        # the stored row is [size, mtime, ctime, inode, scan_error] as the store holds it now (None: no folder row)
        self.frames: dict[str, list] = {}
        # the stored folders above the root, deepest first, with their stored rows, and the size change they owe
        self.above: list[tuple[str, list]] = above or []
        self.above_pending = 0
        self.reader: Connection | None = None  # for reading stored children, open while the walk runs
        self.own = own_dir_ids()  # assay's own folders (data dir, cache): never indexed (flows/core/own_dirs)

    def issue(self, path: str, reason: str) -> None:
        self.issue_count += 1
        if len(self.issues) < self.max_issues:
            self.issues.append((path, reason))
        log.info("index: skipped %s: %s", path, reason)

    def emit(self, path: str, parent: str | None, name: str, kind: str, size: int, st: os.stat_result,
             error: str | None = None) -> None:
        self.rows.append((path, parent, name, kind, size, st.st_mtime, st.st_ctime, st.st_ino, error))
        if len(self.rows) + len(self.gone) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        self.settle()
        if self.rows or self.gone:
            self.writer.put((self.rows, self.gone))
            self.rows, self.gone = [], []
        self.state.written = self.writer.written

    def tell_parent(self, directory: str, delta: int) -> None:
        """The stored size of ``directory`` changes by ``delta`` in this batch: its parent owes that change."""
        if not delta:
            return
        if directory == self.root:
            self.above_pending += delta
        else:
            self.frames[os.path.dirname(directory)][6] += delta

    def settle(self) -> None:
        """Append to the batch the new sizes of the stored folders the walk is inside (deepest first, each passing
        its change up to its parent) and of the stored folders above the root, so the batch leaves every folder's
        size the sum of its children's."""
        frames = self.frames
        for entering, directory in reversed(self.stack):
            if entering:
                continue
            frame = frames[directory]
            delta, db = frame[6], frame[7]
            if not delta or db is None:
                continue
            frame[6] = 0
            db[0] += delta
            parent = os.path.dirname(directory) if directory != "/" else None
            self.rows.append((directory, parent, frame[2], "directory", *db))
            self.tell_parent(directory, delta)
        if self.above_pending:
            delta, self.above_pending = self.above_pending, 0
            for path, db in self.above:
                db[0] += delta
                parent = os.path.dirname(path) if path != "/" else None
                self.rows.append((path, parent, os.path.basename(path) or path, "directory", *db))

    def placeholder(self, directory: str, frame: list) -> None:
        """Write a folder the store does not hold before anything under it: size 0, marked incomplete until the
        walk finishes it (what a killed walk leaves, as a cancelled one does)."""
        st, prev = frame[1], frame[3]
        db = frame[7] = [0, st.st_mtime, st.st_ctime, st.st_ino, WALKING.format(self.scan_id)]
        parent = os.path.dirname(directory) if directory != "/" else None
        self.rows.append((directory, parent, frame[2], "directory", *db))
        self.tell_parent(directory, -(prev[1] if prev is not None else 0))  # a file it replaced leaves its size
        if len(self.rows) + len(self.gone) >= self.batch_size:
            self.flush()

    def tick(self) -> None:
        """Every batch_size entries listed: report progress and honour a cancellation request."""
        self.next_tick = self.listed + self.batch_size
        self.report()
        if self.should_cancel is not None and self.should_cancel():
            raise Cancelled()

    def finish(self) -> None:
        """Hand over the last batch and wait for the writer; called on every exit path."""
        self.settle()
        if self.rows or self.gone:
            self.writer.put((self.rows, self.gone), final=True)
            self.rows, self.gone = [], []
        self.writer.close()
        self.state.written = self.writer.written
        self.state.removed = self.writer.removed

    def report(self) -> None:
        s = self.state
        s.percent = max(s.percent, self.estimate.percent(done=self.done, listed=self.listed))
        if self.progress_fn is not None:
            self.progress_fn(s)

    def stored_children(self, directory: str) -> dict[str, tuple]:
        if not self.compare:
            return {}
        if self.reader is None:
            self.reader = self.engine.connect()
        return store_entries.child_states(self.reader, parent=directory)

    def close_reader(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    # --- the walk ---------------------------------------------------------------------------------------------------

    def run(self, root_stat: os.stat_result, root_state: tuple | None) -> None:
        root = self.root
        frames, stack = self.frames, self.stack
        frames[root] = [0, root_stat, os.path.basename(root) or root, root_state, None, 1.0, 0, _stored_row(root_state)]
        stack.append((True, root))
        visited: set[tuple[int, int]] = {(root_stat.st_dev, root_stat.st_ino)} if self.follow else set()
        while stack:
            entering, directory = stack.pop()
            frame = frames[directory]
            if entering:
                stack.append((False, directory))
                self.state.current_path = directory
                self._list(directory, frame, visited)
                continue
            del frames[directory]
            size, st, name, prev, error, _, _, db = frame
            if error is _VANISHED:
                continue
            self.state.directories += 1
            self.done += 1
            parent = os.path.dirname(directory) if directory != "/" else None
            if db != [size, st.st_mtime, st.st_ctime, st.st_ino, error]:
                self.tell_parent(directory, size - _counted(db, prev))
                self.emit(directory, parent, name, "directory", size, st, error)
            if parent is not None and directory != root:
                frames[parent][0] += size

    def _list(self, directory: str, frame: list, visited: set) -> None:
        """List one directory: compare and emit its files, push its subdirectories, delete what is gone."""
        stored = self.stored_children(directory)
        try:
            it = os.scandir(directory)
        except FileNotFoundError:
            frame[4] = _VANISHED
            self.issue(directory, "vanished during the walk")
            if frame[3] is not None:
                self.gone.append((directory, True))
                self.tell_parent(directory, -_counted(frame[7], frame[3]))
            self.estimate.finished(frame[5])
            return
        except OSError as exc:
            frame[4] = f"unreadable: {exc.strerror or exc}"
            frame[0] += sum(s[1] for s in stored.values())  # its known contents stay, and so does their size
            self.issue(directory, frame[4])
            self.estimate.finished(frame[5])
            return
        if frame[7] is None:
            self.placeholder(directory, frame)
        # the hot loop: counters in locals, written back before anything that reads them (tick, exit)
        follow, rows, gone, batch_size, state = self.follow, self.rows, self.gone, self.batch_size, self.state
        frames, stack = self.frames, self.stack
        listed, done, next_tick = self.listed, self.done, self.next_tick
        estimate, compare, own = self.estimate, self.compare, self.own
        files = total = added = 0  # added: entries the store did not hold (on a re-index)
        subfolders: list[list] = []  # the frames of the subfolders pushed, which share this folder's share
        try:
            with it:
                for item in it:
                    listed += 1
                    name = item.name
                    if not name.isascii() and not _utf8(name):  # os.fsdecode kept undecodable bytes as surrogates
                        self.issue(os.fsencode(item.path).decode("utf-8", "backslashreplace"),
                                   "name is not valid UTF-8; skipped (rename it to index it)")
                        continue
                    prev = stored.pop(name, None) if stored else None
                    path = item.path
                    st: os.stat_result | None
                    try:
                        st = item.stat(follow_symlinks=follow)
                    except FileNotFoundError:
                        st = self._dangling(item, path, prev)
                        if st is None:
                            if prev is not None:
                                frame[6] -= prev[1]
                            continue
                    except OSError as exc:
                        self.issue(path, f"cannot stat: {exc.strerror or exc}")
                        if prev is not None:
                            frame[0] += prev[1]  # kept as it was stored
                        continue
                    mode = st.st_mode
                    if _S_ISDIR(mode):
                        # what is in a trash, or in assay's own folders, is never indexed (flows/core/trash_dirs,
                        # own_dirs)
                        if is_trash_dir(path, name) or (st.st_dev, st.st_ino) in own:
                            if prev is not None:
                                frame[6] -= prev[1]
                                gone.append((path, True))
                            continue
                        if follow:
                            key = (st.st_dev, st.st_ino)
                            if key in visited:
                                self.issue(path, "symlink loop: directory already visited")
                                continue
                            visited.add(key)
                        if (prev is None and compare) or (prev is not None and unfinished(prev[5])):
                            estimate.distrust()  # a subtree the store did not hold, or held partly: size unknown
                        sub = frames[path] = [0, st, name, prev, None, 0.0, 0, _stored_row(prev)]
                        subfolders.append(sub)
                        stack.append((True, path))
                        continue
                    if _S_ISREG(mode):
                        kind, size = "file", st.st_size
                        files += 1
                        total += size
                    else:
                        kind, size = ("symlink" if _S_ISLNK(mode) else "other"), 0
                    done += 1
                    if prev is None or prev != (kind, size, st.st_mtime, st.st_ctime, st.st_ino, None):
                        if prev is None:
                            added += 1
                            frame[6] += size
                        else:
                            frame[6] += size - prev[1]
                            if prev[0] == "directory":
                                gone.append((path, False))  # a directory replaced: what was under it is gone
                        rows.append((path, directory, name, kind, size, st.st_mtime, st.st_ctime, st.st_ino, None))
                        if len(rows) + len(gone) >= batch_size:
                            self.flush()
                            rows, gone = self.rows, self.gone
                    if listed >= next_tick:
                        self.listed, self.done = listed, done
                        state.files += files
                        state.total_size += total
                        frame[0] += total
                        estimate.added += added
                        files = total = added = 0
                        self.tick()
                        next_tick = self.next_tick
        except OSError as exc:  # the listing broke off: what was not listed is unknown, so it is kept
            frame[4] = f"unreadable: {exc.strerror or exc}"
            frame[0] += sum(s[1] for s in stored.values())
            self.issue(directory, frame[4])
            stored = {}
        finally:
            self.listed, self.done = listed, done
            state.files += files
            state.total_size += total
            frame[0] += total
            estimate.added += added
            share = estimate.split(frame[5], len(subfolders))
            for sub in subfolders:
                sub[5] = share
        if stored:  # a complete listing: stored children it did not show are gone from disk
            self.gone.extend((directory + "/" + name if directory != "/" else "/" + name, True) for name in stored)
            frame[6] -= sum(s[1] for s in stored.values())
            if len(self.rows) + len(self.gone) >= self.batch_size:
                self.flush()
        if self.listed >= self.next_tick:
            self.tick()

    def _dangling(self, item: os.DirEntry, path: str, prev: tuple | None) -> os.stat_result | None:
        """A name whose stat failed with ENOENT: a link to nothing (still an entry) or a file that just vanished."""
        if item.is_symlink():
            self.issue(path, "broken symlink")
            try:
                return item.stat(follow_symlinks=False)
            except OSError:
                pass
        else:
            self.issue(path, "vanished during the walk")
        if prev is not None:
            self.gone.append((path, True))
        return None

    # --- a cancelled walk -----------------------------------------------------------------------------------------

    def close_frontier(self) -> list[str]:
        """Write the folders the cancelled walk was inside (``incomplete``) and those it had found but not entered
        and the store did not know (``not scanned``), so that everything written is navigable. Returns the
        folders entered: each keeps the size of what is stored under it."""
        self.settle()
        entered = []
        for entering, directory in self.stack:
            size, st, name, prev, error, _, _, db = self.frames[directory]
            if error is _VANISHED:
                continue
            parent = os.path.dirname(directory) if directory != "/" else None
            if not entering:
                entered.append(directory)
                reason = error or f"incomplete: index job {self.scan_id} was cancelled before it finished this folder"
                kept = db[0] if db is not None else size
                self.tell_parent(directory, kept - _counted(db, prev))
                self.emit(directory, parent, name, "directory", kept, st, reason)
                self.state.directories += 1
            elif prev is None:
                self.emit(directory, parent, name, "directory", 0, st,
                          f"not scanned: index job {self.scan_id} was cancelled before it reached this folder")
                self.state.directories += 1
        return entered


def _stored_above(conn: Connection, root: str) -> list[tuple[str, list]]:
    """The stored folders above ``root`` up to the first the store does not hold, deepest first, with their rows:
    the walk rewrites their sizes in the batches that change what is under them."""
    out: list[tuple[str, list]] = []
    path = os.path.dirname(root) if root != "/" else None
    while path:
        row = _stored_row(store_entries.entry_state(conn, path=path))
        if row is None:
            break
        out.append((path, row))
        path = os.path.dirname(path) if path != "/" else None
    return out


def _stored_row(state: tuple | None) -> list | None:
    """A folder's stored row as the walk tracks it, [size, mtime, ctime, inode, scan_error], from its stored state
    (kind, size, mtime, ctime, inode, scan_error); None when the store holds no folder there."""
    return list(state[1:]) if state is not None and state[0] == "directory" else None


def _counted(db: list | None, prev: tuple | None) -> int:
    """The size the store counts for an entry in its parent's: its folder row's, else what was stored there."""
    if db is not None:
        return int(db[0])
    return int(prev[1]) if prev is not None else 0


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def index_tree(engine: Engine, root: str, *, scan_id: int, follow_symlinks: bool = False, batch_size: int = 2000,
               progress: ProgressFn | None = None, should_cancel: CancelFn | None = None,
               max_issues: int = 1000) -> IndexResult:
    """Index ``root`` (a canonical absolute path) into the store; rows written carry ``scan_id``.

    Raises :class:`Cancelled` if ``should_cancel`` returns true (it is asked every ``batch_size`` entries listed);
    what was written stays, the folders the walk was in are marked incomplete, and sizes add up. Unreadable
    directories and files that vanish mid-walk are recorded in the result and skipped.
    """
    started = time.perf_counter()
    root_stat = os.stat(root) if follow_symlinks else os.lstat(root)
    expected = store_entries.count_subtree(engine, root=root)
    with engine.connect() as conn:
        root_state = store_entries.entry_state(conn, path=root)
        above = _stored_above(conn, root)
    walk = _Walk(engine, root, scan_id=scan_id, follow_symlinks=follow_symlinks, batch_size=batch_size,
                 progress=progress, should_cancel=should_cancel, expected=expected, root_state=root_state,
                 max_issues=max_issues, above=above)
    entered: list[str] | None = None
    try:
        if statmod.S_ISDIR(root_stat.st_mode):
            walk.run(root_stat, root_state)
        else:
            kind = kind_of(root_stat.st_mode)
            size = root_stat.st_size if kind == "file" else 0
            walk.state.files += kind == "file"
            walk.state.total_size += size
            walk.done += 1
            if root_state != (kind, size, root_stat.st_mtime, root_stat.st_ctime, root_stat.st_ino, None):
                if root_state is not None and root_state[0] == "directory":
                    walk.gone.append((root, False))
                walk.tell_parent(root, size - (root_state[1] if root_state is not None else 0))
                walk.emit(root, os.path.dirname(root), os.path.basename(root), kind, size, root_stat)
    except Cancelled:
        entered = walk.close_frontier()
    finally:
        walk.close_reader()
        walk.finish()  # rows already walked are written even when cancelled (they are true)
    with engine.begin() as conn:
        for directory in sorted(entered or (), key=lambda d: d.count("/"), reverse=True):
            store_entries.recompute_directory_size(conn, path=directory)
        if walk.writer.written or walk.writer.removed or entered:
            store_entries.refresh_ancestor_sizes(conn, path=root)
        if entered is None and walk.writer.written >= ANALYZE_AFTER:
            # fresh statistics for the query planner after a big write (SQLite has none until asked): plan
            # conditions and set queries then scan instead of walking an index where that is faster
            conn.exec_driver_sql("ANALYZE entries")
    s = walk.state
    if entered is None:
        s.percent = 100.0
    if progress is not None:
        progress(s)
    result = IndexResult(root=root, files=s.files, directories=s.directories, total_size=s.total_size,
                         removed=walk.writer.removed, written=walk.writer.written, issues=walk.issues,
                         issue_count=walk.issue_count, duration_ms=int((time.perf_counter() - started) * 1000),
                         percent=s.percent)
    if walk.issue_count > len(walk.issues):
        result.issues.append((root, f"... and {walk.issue_count - len(walk.issues)} more issues not recorded"))
    if entered is not None:
        raise Cancelled(result)
    return result

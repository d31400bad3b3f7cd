"""Journalling the file operations of one call: what a file was before it is changed, and each item written down
(store.file_journal) before the disk changes and crossed out in the transaction that brings the store in step, so
one a crash cut between the two is finished or rolled back at the next start (flows/fileops/recovery.py) and any
can be undone.

:func:`before` (or :func:`before_many` for a batch: one query) reads what an undo will check later: the file's kind,
size, mtime, its entry and its content hash. The hash is ``entries.hash`` when the entry's size and mtime still
match the file's (the classifier hashed these bytes already), else the file's bytes are hashed now
(flows.media.hashing); folders, symlinks and special files have none.

:class:`CallJournal` is one call's journal (one :class:`~store.file_journal.Origin`). Items run one after the other:
an item whose disk change happened but whose store update failed is left in flight for the next start, and stops
the call's later items (``stuck``), as the store no longer agrees with the disk there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from flows.media.hashing import hash_file
from store import file_journal
from store.entries import T
from store.errors import FileOperationError
from store.file_journal import Origin

_CHUNK = 500  # paths per IN (...) list
_MTIME_SLACK = 1e-6  # a float mtime read back from the store


@dataclass(frozen=True)
class Before:
    """A file as it was before an operation: what the journal row records."""

    kind: str  # file | directory (a symlink or special file is journalled as a file, without a hash)
    entry_id: int | None
    size: int | None
    mtime: float | None
    content_hash: str | None

    def columns(self) -> dict[str, Any]:
        """The journal columns (keyword arguments of store.file_journal.begin)."""
        return {"kind": self.kind, "entry_id": self.entry_id, "size": self.size, "mtime": self.mtime,
                "content_hash": self.content_hash}


def _entries(conn: Connection, paths: Sequence[str]) -> dict[str, Any]:
    """The stored entries at ``paths`` (not narrowed to a caller's roots: a writer decides by paths)."""
    found: dict[str, Any] = {}
    for i in range(0, len(paths), _CHUNK):
        rows = conn.execute(select(T.c.path, T.c.id, T.c.kind, T.c.size, T.c.mtime, T.c.hash)
                            .where(T.c.path.in_(paths[i:i + _CHUNK])))
        found.update({row.path: row for row in rows})
    return found


def _describe(path: str, entry: Any) -> Before:
    st = os.lstat(path)
    entry_id = int(entry.id) if entry is not None else None
    if stat.S_ISDIR(st.st_mode):
        return Before("directory", entry_id, int(entry.size) if entry is not None else None, st.st_mtime, None)
    content_hash = None
    if stat.S_ISREG(st.st_mode):
        fresh = (entry is not None and entry.hash and entry.kind == "file" and entry.size == st.st_size
                 and abs(float(entry.mtime) - st.st_mtime) <= _MTIME_SLACK)
        content_hash = str(entry.hash) if fresh else hash_file(path)
    return Before("file", entry_id, st.st_size, st.st_mtime, content_hash)


def before(engine: Engine, path: str) -> Before:
    """What the file or folder at ``path`` is now (OSError when it is not there or cannot be read)."""
    return before_many(engine, [path])[path]


def before_many(engine: Engine, paths: Iterable[str]) -> dict[str, Before]:
    """:func:`before` of each of ``paths``, their entries read in one query per 500; a path that cannot be read
    (gone, unreadable) is left out."""
    wanted = list(dict.fromkeys(paths))
    with engine.connect() as conn:
        stored = _entries(conn, wanted)
    out = {}
    for path in wanted:
        try:
            out[path] = _describe(path, stored.get(path))
        except OSError:
            continue
    return out


class CallJournal:
    """The journal of one call: each item written down before its disk change, settled after it."""

    def __init__(self, engine: Engine, origin: Origin) -> None:
        self.engine = engine
        self.origin = origin
        self.stuck: str | None = None  # the path of an item the store could not follow

    def begin(self, *, op: str, src: str, dst: str | None, before: Before | None, made: Sequence[str] = ()) -> int:
        """Write the item down (committed) before the first change to the disk; its operation id."""
        if self.stuck is not None:
            raise FileOperationError(f"not done: the store could not follow an earlier item of this call "
                                     f"({self.stuck}); the next server start finishes that one", field="from")
        columns = before.columns() if before is not None else {}
        return file_journal.begin(self.engine, self.origin, op=op, src=src, dst=dst, made=made, **columns)

    def copying(self, op_id: int) -> None:
        """The item crosses filesystems: its source is copied, then removed (committed before the copy starts)."""
        file_journal.copying(self.engine, op_id)

    def settle(self, op_id: int, *, warning: str | None = None) -> Callable[[Connection], None]:
        """What crosses the item out as done inside the store's transaction (``warning``: done, with a note)."""

        def settle(conn: Connection) -> None:
            file_journal.finish(conn, op_id, state="done", error=warning)

        return settle

    def failed(self, op_id: int, error: str) -> None:
        """The item failed and the disk is as it was: crossed out as failed, with why."""
        file_journal.failed(self.engine, op_id, error)

    def cannot_follow(self, path: str) -> None:
        """The disk changed for ``path`` but the store did not follow: its item stays in flight for the next start,
        and the call's later items are refused."""
        self.stuck = path

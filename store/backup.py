"""Backups of the store and restoring one: SQLite through its online backup API, PostgreSQL through pg_dump /
pg_restore.

A SQLite copy is taken in steps of a few pages (:func:`online_copy`), so a server writing in WAL mode waits at
most one step; the copy is written under a temporary name beside its destination and renamed into place only
once complete and ``PRAGMA integrity_check`` says ok: nothing half-written is ever found at the destination.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from store.errors import Conflict

DEFAULT_PAGES_PER_STEP = 1024  # 4 MiB of 4 KiB pages: a step takes milliseconds, a writer waits no longer

Progress = Callable[[int, int], None]  # (pages copied, pages in all)


def online_copy(src: Path, dest: Path, *, pages_per_step: int = DEFAULT_PAGES_PER_STEP,
                progress: Progress | None = None) -> None:
    """Copy the SQLite database ``src`` to ``dest`` with SQLite's online backup API, ``pages_per_step`` pages at a
    time (a writer on ``src`` is blocked only for one step; a write between steps restarts the copy of the changed
    pages, as SQLite does). ``progress(copied, total)`` is called after every step. The copy goes to a temporary
    file beside ``dest`` and replaces ``dest`` only when complete and its integrity check is ok; otherwise the
    temporary file is removed and the error raised (:class:`~store.errors.Conflict` for a failed check)."""
    src, dest = Path(src), Path(dest)
    if not src.is_file():
        raise FileNotFoundError(f"no SQLite store at {src}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        source = sqlite3.connect(src, timeout=30)
        try:
            target = sqlite3.connect(tmp)
            try:
                source.backup(target, pages=max(1, pages_per_step),
                              progress=None if progress is None else
                              lambda _status, remaining, total: progress(total - remaining, total))
                target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
                problems = [row[0] for row in target.execute("PRAGMA integrity_check")]
            finally:
                target.close()
        finally:
            source.close()
        if problems != ["ok"]:
            raise Conflict(f"the copy of {src} failed its integrity check ({'; '.join(problems[:5])}); "
                           f"nothing was written at {dest}")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (the directory entry reaches the disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

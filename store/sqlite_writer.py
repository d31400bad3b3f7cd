"""A writer process for the indexer's SQLite upserts: ``python -m store.sqlite_writer DATABASE_FILE``.

Why a process: binding a row's parameters needs the GIL, so a writer *thread* and the walking thread take turns on
one core however many cores there are. A child process writes while the walker walks, each on its own core.

Protocol on stdin, each frame a 4-byte big-endian length and a pickle: first ``{"sql": ..., "delete": ...,
"delete_below": ..., "pragmas": [...]}``, then batches ``(rows, gone)``: ``gone`` lists ``(path, with_path)`` to
delete (the subtree under ``path``, and ``path`` itself when ``with_path``), ``rows`` are full rows to upsert (the
parent expands its compact rows with :func:`expand_rows` before sending: inserting is the slower side, so the derived
columns are computed on the walker's core); each batch is applied in that order and committed in one transaction. A
zero length ends the stream; the child then prints ``written removed`` (row counts) on stdout. On a database error
the child writes the error to stderr and exits 1; the parent sees the broken pipe and raises it. A full disk
(SQLITE_FULL, ENOSPC) is told apart, as the parent must report NO_SPACE rather than a failed write: the child writes
``NO_SPACE: <message>`` and exits with :data:`NO_SPACE_STATUS` (28, ENOSPC's number); the batch it was writing is
rolled back, the ones before it stay committed.
This module imports nothing but the standard library, so the child starts in a few tens of milliseconds.
"""

from __future__ import annotations

import errno
import mimetypes
import pickle
import sqlite3
import struct
import sys
from collections.abc import Iterable
from typing import IO, Any

from store.fold import fold

HEADER = struct.Struct(">I")
NO_SPACE_STATUS = 28  # the child's exit status when the disk is full (errno.ENOSPC on Linux)
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def write_frame(stream: IO[bytes], obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)))
    stream.write(payload)


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise EOFError("the indexer closed the stream mid-frame")
    return data


def expand_rows(rows: Iterable[tuple[Any, ...]], *, scan_id: int | None, indexed_at: float, media: dict[str, str],
                mimes: dict[str, str | None]) -> list[tuple[Any, ...]]:
    """Compact rows ``(path, parent, name, kind, size, mtime, ctime, inode, scan_error)`` as full rows in
    store.entries.ENTRY_COLUMNS order (``mimes`` caches extension -> MIME type across calls)."""
    out: list[tuple[Any, ...]] = []
    append = out.append
    for path, parent, name, kind, size, mtime, ctime, inode, error in rows:
        if kind == "file":
            dot = name.rfind(".")
            ext = name[dot:].lower() if dot > 0 else ""
            mime = mimes.get(ext, False)
            if mime is False:
                mime = mimes[ext] = mimetypes.guess_type("x" + ext, strict=False)[0] if ext else None
            append((path, parent, name, ext, kind, size, mtime, ctime, 0 if path == "/" else path.count("/"), inode,
                    media.get(ext), mime, scan_id, indexed_at, error))
        else:
            append((path, parent, name, "", kind, size, mtime, ctime, 0 if path == "/" else path.count("/"), inode,
                    None, None, scan_id, indexed_at, error))
    return out


def bounds(path: str) -> tuple[str, str]:
    base = path.rstrip("/")
    return base + "/", base + "0"


def serve(database: str, stream: IO[bytes]) -> tuple[int, int]:
    """Apply every batch read from ``stream`` to ``database``; returns (rows written, entries removed)."""
    (length,) = HEADER.unpack(_read_exact(stream, HEADER.size))
    setup = pickle.loads(_read_exact(stream, length))
    conn = sqlite3.connect(database, isolation_level=None, timeout=30)
    # removing entries fires the documents' FTS triggers, which call assay_fold
    conn.create_function("assay_fold", 1, fold, deterministic=True)
    for pragma in setup.get("pragmas", []):
        conn.execute(f"PRAGMA {pragma}")
    sql, delete, delete_below = setup["sql"], setup.get("delete"), setup.get("delete_below")
    written = removed = 0
    while True:
        header = stream.read(HEADER.size)
        if not header:
            break  # the parent went away without an end frame: what arrived is written, nothing more
        (length,) = HEADER.unpack(header)
        if length == 0:
            break
        rows, gone = pickle.loads(_read_exact(stream, length))
        conn.execute("BEGIN")
        try:
            for path, with_path in gone:
                low, high = bounds(path)
                cur = conn.execute(delete, (path, low, high)) if with_path else conn.execute(delete_below, (low, high))
                removed += max(cur.rowcount, 0)
            conn.executemany(sql, rows)  # in walk order: sorting a batch by path measured slower at 1M rows
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled it back itself (SQLITE_FULL can)
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        written += len(rows)
    conn.close()
    return written, removed


def is_full(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or while handling, says the disk is full: SQLite's
    SQLITE_FULL ("database or disk is full") or an OSError ENOSPC / EDQUOT."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL
                                               or "database or disk is full" in str(exc)):
            return True
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def main() -> int:
    """Serve ``sys.argv[1]`` from stdin; the exit status says how it ended (0, 1, or NO_SPACE_STATUS)."""
    try:
        written, removed = serve(sys.argv[1], sys.stdin.buffer)
    except Exception as exc:  # reported to the parent through stderr
        if is_full(exc):
            sys.stderr.write(f"NO_SPACE: the disk holding the store ({sys.argv[1]}) is full ({exc}): the index "
                             "writer's last batch was rolled back, the ones before it are kept; free space and index "
                             "again\n")
            return NO_SPACE_STATUS
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1
    sys.stdout.write(f"{written} {removed}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How the index walk's batches reach the store: in the walker's thread for a tree that fits in one batch, else a
writer process for a SQLite file (store/sqlite_writer.py says why) or a writer thread otherwise (PostgreSQL, whose
driver waits on the network without the GIL). A batch is ``(rows, gone)``: the walker's compact rows to upsert and
the paths to delete. Each writer holds at most a couple of batches (the pipe or a two-slot queue): memory stays
bounded, and a walker that outpaces its writer waits.

A full disk under the store is :class:`~store.errors.NoSpace` (NO_SPACE) from every writer: the in-process ones get
it from the engine, the writer process says so by its exit status (``sqlite_writer.NO_SPACE_STATUS``).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import tempfile
import threading
from typing import IO, cast

from sqlalchemy.engine import Engine

import store
from flows.core import settings
from store import entries as store_entries
from store.errors import NoSpace
from store.sqlite_writer import NO_SPACE_STATUS, expand_rows, write_frame

_MIMES: dict[str, str | None] = {}  # extension -> MIME type, shared by the in-process writers


def _apply(conn, frame: tuple[list, list], *, scan_id: int, now: float) -> int:
    """Apply one batch in this process: deletes, then the upserts of its compact rows."""
    rows, gone = frame
    removed = store_entries.delete_gone(conn, gone) if gone else 0
    store_entries.upsert_entries(conn, expand_rows(rows, scan_id=scan_id, indexed_at=now,
                                                   media=store_entries.MEDIA_TYPES, mimes=_MIMES))
    return removed


class ThreadWriter:
    """Writes batches on a background thread (for PostgreSQL, whose driver waits on the network without the GIL).
    The queue holds at most two batches: memory stays bounded."""

    def __init__(self, engine: Engine, *, scan_id: int, now: float) -> None:
        self.engine = engine
        self.scan_id, self.now = scan_id, now
        self.written = 0
        self.removed = 0
        self.error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._thread = threading.Thread(target=self._loop, name="assay-index-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            frame = self._queue.get()
            if frame is None:
                return
            if self.error is not None:
                continue  # drain without writing, so the walker never blocks on a dead writer
            try:
                with self.engine.begin() as conn:
                    self.removed += _apply(conn, frame, scan_id=self.scan_id, now=self.now)
                self.written += len(frame[0])
            except BaseException as exc:  # handed to the walker thread, which raises it
                self.error = exc

    def put(self, frame: tuple[list, list]) -> None:
        if self.error is not None:
            raise self.error
        self._queue.put(frame)

    def close(self) -> None:
        """Wait until every queued batch is written; raise the writer's error if there was one."""
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise self.error


class ProcessWriter:
    """Writes batches into a SQLite file from a child process (store/sqlite_writer.py says why).

    The pipe is the queue: when the child falls behind, the walker blocks on the write, so memory stays bounded.
    """

    def __init__(self, database: str, *, scan_id: int, now: float) -> None:
        self.scan_id, self.now = scan_id, now
        self.written = 0  # rows handed over; the child commits each batch as it arrives
        self.removed = 0  # known when the child has finished
        self._stderr = tempfile.TemporaryFile()
        project = os.path.dirname(os.path.dirname(os.path.abspath(store.__file__)))
        env = {**os.environ, "PYTHONPATH": project + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self._proc = subprocess.Popen([sys.executable, "-m", "store.sqlite_writer", database],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self._stdin, self._stdout = cast(IO[bytes], self._proc.stdin), cast(IO[bytes], self._proc.stdout)  # PIPEs
        self._send({"sql": store_entries.SQLITE_UPSERT, "delete": store_entries.SQLITE_DELETE_SUBTREE,
                    "delete_below": store_entries.SQLITE_DELETE_BELOW,
                    "pragmas": ["synchronous=NORMAL", "busy_timeout=30000", "cache_size=-65536",
                                "foreign_keys=ON"]})  # deletes cascade to set memberships and artifacts

    def _send(self, obj) -> None:
        try:
            write_frame(self._stdin, obj)
        except (BrokenPipeError, OSError):
            self._proc.wait()
            raise self._failure() from None

    def _error_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace").strip() or f"exit status {self._proc.returncode}"

    def _failure(self) -> Exception:
        """What the child's exit says: NoSpace when the disk was full (its message as the child wrote it), else a
        RuntimeError carrying the child's error."""
        text = self._error_text()
        if self._proc.returncode == NO_SPACE_STATUS:
            return NoSpace(text.removeprefix(f"{NoSpace.code}: "))
        return RuntimeError(f"the index writer process failed: {text}")

    def put(self, frame: tuple[list, list]) -> None:
        rows, gone = frame
        self._send((expand_rows(rows, scan_id=self.scan_id, indexed_at=self.now, media=store_entries.MEDIA_TYPES,
                                mimes=_MIMES), gone))
        self.written += len(rows)

    def close(self) -> None:
        """Send the end frame and wait until the child has committed everything it received."""
        try:
            self._stdin.write(b"\0\0\0\0")
            self._stdin.close()
        except (BrokenPipeError, OSError):
            pass
        out = self._stdout.read()
        self._stdout.close()
        code = self._proc.wait()
        failure = self._failure() if code else None
        self._stderr.close()
        if failure is not None:
            raise failure
        parts = out.split()
        if len(parts) == 2:
            self.removed = int(parts[1])


class Writer:
    """Picks how to write: a tree that fits in one batch is written in the caller's thread (no start-up cost);
    bigger trees go to a writer process for a SQLite file, or a writer thread otherwise."""

    def __init__(self, engine: Engine, *, scan_id: int, now: float) -> None:
        self.engine = engine
        self.scan_id, self.now = scan_id, now
        self.impl: ThreadWriter | ProcessWriter | None = None
        self._written = 0
        self._removed = 0

    @property
    def written(self) -> int:
        return self.impl.written if self.impl is not None else self._written

    @property
    def removed(self) -> int:
        return self.impl.removed if self.impl is not None else self._removed

    def put(self, frame: tuple[list, list], *, final: bool = False) -> None:
        if self.impl is None:
            if final:
                with self.engine.begin() as conn:
                    self._removed += _apply(conn, frame, scan_id=self.scan_id, now=self.now)
                self._written += len(frame[0])
                return
            database = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
            if database and database != ":memory:" and settings.current().index.writer != "thread":
                self.impl = ProcessWriter(database, scan_id=self.scan_id, now=self.now)
            else:
                self.impl = ThreadWriter(self.engine, scan_id=self.scan_id, now=self.now)
        self.impl.put(frame)

    def close(self) -> None:
        if self.impl is not None:
            self.impl.close()

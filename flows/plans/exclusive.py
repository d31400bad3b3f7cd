"""One execution of a plan at a time, whichever process runs it: the server (an agent's plan-execute, a watcher),
the subprocess in which the server's Prefect runner runs a Run pressed in the UI, a command-line ``assay plan run``.
A second execution of a plan waits until the first ends (as it always did within one process), then runs.

The lock is one the operating system or the database drops when its holder dies, never a row that says "running":
the Prefect runner kills a run's process on a Cancel in the UI (SIGTERM, then SIGKILL), the OOM killer kills, a
command line is interrupted, and a claim written in the store would outlive each of them until the next server start
reaps it, with every later execution of the plan waiting on it meanwhile. So, by the store's kind:

- an SQLite file: ``flock`` on a lock file beside the database (``<db>.plan-locks/``; every process sharing an
  SQLite store is on its machine), released by the kernel when the holder's file is closed, however it exits;
- PostgreSQL: a session advisory lock (``pg_try_advisory_lock``) on a connection held for the execution, released
  by the server when that session ends, a dead client's included;
- otherwise (an in-memory SQLite store: one process) the in-process lock alone.

Within a process a thread lock comes first, so two threads never contend for the file or the session lock (a
``flock`` taken twice in one process through two opens would also exclude, but waiting on the thread lock is
cheaper than polling). Waiting polls, so an execution cancelled meanwhile gives up at once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Callable, Iterator, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from store.engine import database_file

try:  # POSIX file locks between processes; elsewhere (Windows) the in-process lock alone
    import fcntl
except ImportError:  # pragma: no cover - not on Linux/macOS
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # how often a waiting execution tries again (and asks whether it was cancelled meanwhile)

_threads: dict[tuple[str, str], threading.Lock] = {}
_threads_lock = threading.Lock()


class _ProcessLock(Protocol):
    def try_acquire(self) -> bool: ...

    def release(self) -> None: ...


class _NoProcessLock:
    def try_acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


class _FileLock:
    """``flock`` on ``path``: exclusive between open files, so between processes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def try_acquire(self) -> bool:
        assert fcntl is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+b")  # noqa: SIM115 (held open until release: the open file is the lock)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        except BaseException:
            handle.close()
            raise
        self._file = handle
        return True

    def release(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            handle.close()  # closing the only descriptor of the open file drops its flock


class _AdvisoryLock:
    """A PostgreSQL session advisory lock, on a connection of its own kept for as long as it is held."""

    def __init__(self, engine: Engine, key: int) -> None:
        self.engine, self.key = engine, key
        self._conn: Connection | None = None

    def try_acquire(self) -> bool:
        conn = self.engine.connect()
        try:
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}).scalar())
            conn.commit()  # a session lock outlives the transaction; the session is not left idle in one
        except BaseException:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
            conn.commit()
        except Exception:  # noqa: BLE001 (the session goes: the server drops its locks with it)
            log.warning("releasing the advisory lock of a plan failed; dropping its connection", exc_info=True)
            conn.invalidate()  # never back to the pool still holding the lock
        finally:
            conn.close()


def _key(name: str) -> bytes:
    return hashlib.sha256(f"assay plan {name}".encode()).digest()


def _process_lock(engine: Engine, name: str) -> _ProcessLock:
    if engine.dialect.name == "postgresql":
        return _AdvisoryLock(engine, int.from_bytes(_key(name)[:8], "big", signed=True))
    database = database_file(engine)
    if database is not None and fcntl is not None:
        # named by a hash: any plan name makes a file name, and a lock file is never removed (one removed while
        # held would let the next comer lock a new file of the same name)
        return _FileLock(database.with_name(database.name + ".plan-locks") / f"{_key(name).hex()[:32]}.lock")
    return _NoProcessLock()


def _thread_lock(store: str, name: str) -> threading.Lock:
    with _threads_lock:
        return _threads.setdefault((store, name), threading.Lock())


@contextmanager
def plan_exclusive(engine: Engine, store: str, name: str, *,
                   give_up: Callable[[], bool] = lambda: False) -> Iterator[bool]:
    """Hold plan ``name``'s lock on the store for the block (yields True), waiting while another execution of it runs
    here or in another process; yields False, without the lock, as soon as ``give_up()`` is true while waiting (the
    waiting execution was cancelled)."""
    thread_lock = _thread_lock(store, name)
    while not thread_lock.acquire(timeout=POLL_SECONDS):
        if give_up():
            yield False
            return
    try:
        lock = _process_lock(engine, name)
        logged = False
        while not lock.try_acquire():
            if not logged:
                log.info("plan %s runs in another process; this execution waits for it to end", name)
                logged = True
            if give_up():
                yield False
                return
            time.sleep(POLL_SECONDS)
        try:
            yield True
        finally:
            lock.release()
    finally:
        thread_lock.release()

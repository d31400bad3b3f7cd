"""What the worker pools of the capabilities share (the classifier's and the extractors'): the process-wide pools,
one per mode, the writer thread that stores results while the
caller goes on working (``WriterThread``), and ``spawn_only`` for a serving process.

Every worker process is spawned (a fresh interpreter, exec'd), never forked: a server has threads, and a bare fork
copies the whole process with locks other threads held (the copy can hang on them for good), every file descriptor
(the MCP pipes, the store, the stdin pipe of Prefect's API child) and the Python signal handlers (a SIGTERM the copy
cannot act on while stuck). Our pools ask for ``spawn`` themselves; ``spawn_only`` makes it the default for the
libraries that start processes of the default kind, and logs any bare fork that still happens.

A worker needs its one function, not the registries: its modules reach no capability declaration
(tests/test_import_graph.py), so it never loads SQLAlchemy, pydantic and the DSL for them.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from typing import Any, Callable, Generic, Protocol, TypeVar

log = logging.getLogger(__name__)



def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: ``taskset``, a container's cpuset), at least 1; the
    default size of the worker pools, so a worker pinned to one core runs one process, not one per core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1

_fork_guard = threading.Lock()
_fork_guarded = False


def _forking() -> None:
    """Before a bare fork of this process: say who forks (once per place), as nothing of ours does."""
    stack = traceback.extract_stack()[:-1]
    where = next((f"{frame.filename}:{frame.lineno}" for frame in reversed(stack)
                  if "multiprocessing" not in frame.filename and frame.filename != __file__), "?")
    if where not in _forks_seen:
        _forks_seen.add(where)
        log.warning("a bare fork of this process (threads: %d) from %s; a spawned process would be safer:\n%s",
                    threading.active_count(), where, "".join(traceback.format_list(stack[-12:])))


_forks_seen: set[str] = set()


def _forked_child() -> None:
    """In the copy a bare fork made: the default actions of SIGTERM and SIGINT, not our Python handlers (which a copy
    stuck on an inherited lock could never run), so whoever started it can stop it."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def spawn_only() -> None:
    """For a serving process, once, early: multiprocessing's default start method becomes ``spawn`` (a library's
    ``multiprocessing.Process()`` gets a fresh interpreter, not a copy of this one: OpenVINO's telemetry forked the
    server that way, issue 21), and a bare fork that still happens (``os.fork``, a ``fork`` context) is logged with
    its stack and leaves a copy that SIGTERM stops. Idempotent."""
    global _fork_guarded
    with _fork_guard:
        if _fork_guarded:
            return
        _fork_guarded = True
    if multiprocessing.get_start_method(allow_none=True) != "spawn":
        multiprocessing.set_start_method("spawn", force=True)
    os.register_at_fork(before=_forking, after_in_child=_forked_child)


def exit_with_parent(parent: int, every_seconds: float = 1.0) -> None:
    """In a pool worker, once as it starts (``ProcessPoolExecutor(initializer=...)``): end this process when the
    process that started it is gone. A worker of ``ProcessPoolExecutor`` waits on a queue whose write end it holds
    itself, so a parent killed by SIGKILL (the OOM killer, Prefect's Runner after its grace) never sends it EOF and it
    would sleep for good, orphaned. A daemon thread compares ``os.getppid()`` with the parent it started under; once
    the parent has died there is nothing to report to, so the worker sends itself SIGTERM, ending as a ``kill`` from
    its parent would have (a spawned worker keeps SIGTERM's default action; its main thread is blocked on the queue,
    so no ordinary return can reach it).
    ``parent`` is the pid of the process that made the pool (``initargs=(os.getpid(),)``), not read here: a worker
    still starting when its parent died would read the pid of whoever adopted it, and wait for that one instead."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_seconds)
        signal.raise_signal(signal.SIGTERM)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class _Pool(Protocol):
    def shutdown(self) -> None: ...


P = TypeVar("P", bound=_Pool)


class PoolsByMode(Generic[P]):
    """The process-wide pools of one kind, one per mode (process | thread), made on first use by ``make(mode)`` and
    shut down together (at exit, or when a test asks)."""

    def __init__(self, what: str, make: Callable[[str], P], default_mode: Callable[[], str]) -> None:
        self._what, self._make, self._default_mode = what, make, default_mode
        self._pools: dict[str, P] = {}
        self._lock = threading.Lock()
        atexit.register(self.shutdown)

    def get(self, mode: str | None = None) -> P:
        """The pool of ``mode`` (default: the kind's default mode, from its environment variable)."""
        mode = mode or self._default_mode()
        with self._lock:
            pool = self._pools.get(mode)
            if pool is None:
                pool = self._pools[mode] = self._make(mode)
            return pool

    def shutdown(self) -> None:
        with self._lock:
            pools = list(self._pools.items())
            self._pools.clear()
        for mode, pool in pools:
            started = time.monotonic()
            pool.shutdown()
            log.debug("%s %s pool shut down in %.2f s", self._what, mode, time.monotonic() - started)


class WriterThread:
    """Runs ``write(item)`` for each item ``put`` on a thread of its own, in order, while the caller keeps working
    (extracting, encoding): SQLite's inserts and index updates run with the GIL released, so the work and the writes
    overlap instead of taking turns. At most ``backlog`` items wait (memory stays bounded; a caller that outpaces
    the writes waits). The first write that fails stops the writing; ``put`` and ``close`` raise it in the
    caller's thread."""

    _DONE = object()

    def __init__(self, write: Callable[[Any], None], *, name: str, backlog: int = 2) -> None:
        self._write = write
        self._queue: queue.Queue = queue.Queue(maxsize=backlog)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def failed(self) -> bool:
        return self._error is not None

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is self._DONE:
                return
            if self._error is not None:
                continue  # drain: the caller learns of the failure at put or close
            try:
                self._write(item)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread by put / close
                self._error = exc

    def put(self, item: Any) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(item)

    def close(self) -> None:
        """Wait for the queued writes; raise what a write raised."""
        self._queue.put(self._DONE)
        self._thread.join()
        if self._error is not None:
            raise self._error

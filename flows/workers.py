"""What the worker pools of the capabilities share (the classifier's and the extractors'): whether this process is
one of their workers, the process-wide pools, one per mode, and the writer thread that stores results while the
caller goes on working (``WriterThread``).

A worker needs its one function, not the registries: importing a capability's package registers executors and
fields, which loads SQLAlchemy, pydantic and the DSL (about a second and tens of MB per worker). A spawned child
imports the package while it unpickles its target, before ``multiprocessing.parent_process()`` is set, so the
``_inheriting`` flag of the spawn bootstrap is checked too.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import queue
import threading
import time
from typing import Any, Callable, Generic, Protocol, TypeVar

log = logging.getLogger(__name__)


def in_worker_process() -> bool:
    return multiprocessing.parent_process() is not None or \
        bool(getattr(multiprocessing.current_process(), "_inheriting", False))


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

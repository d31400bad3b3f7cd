"""The audit log's writer: a queue that one background thread writes in batches, off the request path.

:meth:`BatchWriter.put` appends and returns: it never blocks and never raises (when the queue is full the oldest
queued item is dropped and counted). One daemon thread takes up to ``batch_size`` items at a time (waiting up to
``interval`` seconds for a batch to fill) and hands them to ``write``. When ``write`` raises, the thread keeps the
batch, reports the failure (the server log once per failure streak, :meth:`BatchWriter.errors`, the counters) and
tries again after a pause doubling from 0.5 to 10 seconds; so nothing is lost while the queue has room, and a
database that comes back gets the backlog. :meth:`BatchWriter.close` writes everything queued before it returns.
Nothing here knows what the items are or where they go: :mod:`store.audit` supplies ``write`` (and ``housekeeping``,
its prune by retention).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy.exc import DBAPIError

log = logging.getLogger(__name__)

Item = TypeVar("Item")

BACKOFF_FIRST, BACKOFF_MAX = 0.5, 10.0  # seconds between two attempts at a batch that failed, doubling
ERRORS_KEPT = 100
HOUSEKEEPING_RETRY = 300.0  # seconds before housekeeping that raised runs again


def describe(exc: BaseException) -> str:
    """The error in one line: the driver's message for a database error (not SQLAlchemy's SQL and help link)."""
    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    lines = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {lines[0]}" if lines else type(inner).__name__


class BatchWriter(Generic[Item]):
    """Items queued by any thread, written in batches by one daemon thread. ``write(batch)`` writes a batch in
    one go or raises; ``housekeeping()``, run by the thread at start and then when due, returns the seconds until
    its next run; ``name`` says where the items go, in messages; ``grace`` is how long a write under way may take
    to fail (a lock timeout), which close() allows beyond its own timeout."""

    def __init__(self, write: Callable[[list[Item]], None], *, name: str, batch_size: int = 500,
                 interval: float = 0.2, max_queue: int = 200_000, housekeeping: Callable[[], float] | None = None,
                 grace: float = 5.0) -> None:
        if batch_size < 1 or max_queue < 1 or interval < 0:
            raise ValueError("batch_size and max_queue must be positive and interval not negative")
        self._write, self._housekeeping, self.name, self._grace = write, housekeeping, name, grace
        self._batch_size, self._interval, self._max_queue = batch_size, interval, max_queue
        self._cond = threading.Condition()  # guards the state below; never held while writing
        self._pending: deque[Item] = deque()
        self._accepted = self._settled = 0  # items queued by put(); of those, written or dropped
        self._written = self._dropped = self._failed_batches = 0
        self._flushers = 0  # flush() calls waiting: the thread then does not wait for a batch to fill
        self._errors: deque[dict[str, Any]] = deque(maxlen=ERRORS_KEPT)
        self._failing = False  # in a streak of failed batches (logged once, at its start)
        self._closing = False
        self._close_deadline = 0.0
        self._wake = threading.Event()  # set by close(): a thread pausing after a failure tries again at once
        self._thread: threading.Thread | None = None

    def put(self, item: Item) -> None:
        """Queue ``item``; when the queue is full, drop the oldest queued one; after close(), drop ``item``."""
        with self._cond:
            if self._closing:
                self._dropped += 1
                return
            if len(self._pending) >= self._max_queue:
                self._pending.popleft()
                self._dropped += 1
                self._settled += 1
            self._pending.append(item)
            self._accepted += 1
            if len(self._pending) in (1, self._batch_size):  # the thread waits for a first item or a full batch
                self._cond.notify_all()

    def drop(self, message: str) -> None:
        """Count an item that could not even be queued, and remember why."""
        with self._cond:
            self._dropped += 1
        self.remember(message)

    def start(self) -> None:
        """Start the thread (a second call does nothing; after close(), RuntimeError)."""
        with self._cond:
            if self._closing:
                raise RuntimeError(f"the writer for {self.name} is closed")
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="assay-audit-writer", daemon=True)
        self._thread.start()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every item queued before the call is written (or dropped); False if ``timeout`` seconds
        passed first (writes failing, or no thread running)."""
        with self._cond:
            target = self._accepted
            if self._settled >= target:
                return True
            if self._thread is None or not self._thread.is_alive():
                return False
            self._flushers += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: self._settled >= target, timeout)
            finally:
                self._flushers -= 1

    def close(self, timeout: float = 10.0) -> None:
        """Write everything queued, trying failed batches again until ``timeout`` seconds have passed (what is
        unwritten then is dropped and logged), and stop the thread. Idempotent. Never started: written here."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._close_deadline = time.monotonic() + timeout
            self._cond.notify_all()
            thread = self._thread
        self._wake.set()
        if thread is None:
            self._run()
            return
        thread.join(timeout + self._grace)
        if thread.is_alive():
            log.error("audit log: the writer for %s did not stop within %g s", self.name, timeout + self._grace)

    def errors(self, limit: int = 50) -> list[dict[str, Any]]:
        """Recent failures, newest first: ``{"time", "message"}``; a failure repeated attempt after attempt
        appears once, with the time of its latest occurrence."""
        with self._cond:
            return [dict(e) for e in reversed(self._errors)][:max(limit, 0)]

    def counters(self) -> dict[str, Any]:
        """written, queued (not yet written: waiting or being written), dropped, failed_batches, last_error."""
        with self._cond:
            return {"written": self._written, "queued": self._accepted - self._settled, "dropped": self._dropped,
                    "failed_batches": self._failed_batches,
                    "last_error": self._errors[-1]["message"] if self._errors else None}

    def report(self, what: str, exc: BaseException) -> None:
        """Remember and log a failure outside the batches (creating tables, housekeeping)."""
        message = f"{what}: {describe(exc)}"
        self.remember(message)
        log.error("audit log: %s", message)

    def remember(self, message: str) -> None:
        with self._cond:
            if self._errors and self._errors[-1]["message"] == message:
                self._errors[-1]["time"] = time.time()
            else:
                self._errors.append({"time": time.time(), "message": message})

    # -- the thread ------------------------------------------------------------------------------------------------

    def _run(self) -> None:
        """Take a batch and write it; on failure keep it and try again after a pause; housekeeping when due.
        Returns once closing and the queue is empty, or closing past the deadline (what is left is dropped)."""
        batch: list[Item] = []
        backoff = 0.0
        next_housekeeping = time.monotonic()
        while True:
            if self._housekeeping is not None and not self._closing and time.monotonic() >= next_housekeeping:
                try:
                    delay = self._housekeeping()
                except Exception as exc:  # the thread must go on writing
                    self.report(f"housekeeping of {self.name}", exc)
                    delay = HOUSEKEEPING_RETRY
                next_housekeeping = time.monotonic() + delay
            if not batch:
                batch = self._take(until=next_housekeeping if self._housekeeping is not None else None)
                if not batch:
                    if self._closing:
                        return
                    continue  # housekeeping is due
            try:
                self._write(batch)
            except Exception as exc:  # any failure: reported, the batch kept and tried again
                self._batch_failed(exc, len(batch))
                if self._closing and time.monotonic() >= self._close_deadline:
                    self._give_up(batch, exc)
                    return
                backoff = min(max(backoff * 2, BACKOFF_FIRST), BACKOFF_MAX)
                if self._pause(backoff):
                    backoff = 0.0
                continue
            self._batch_written(len(batch))
            backoff = 0.0
            batch = []

    def _take(self, *, until: float | None) -> list[Item]:
        """The next batch: wait for a first item (until ``until`` at most), then up to ``interval`` seconds for the
        batch to fill, unless a flush or close is waiting. Empty when none came."""
        with self._cond:
            while not self._pending and not self._closing:
                remaining = None if until is None else until - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return []
                self._cond.wait(remaining)
            fill_by = time.monotonic() + self._interval
            while 0 < len(self._pending) < self._batch_size and not self._closing and not self._flushers:
                remaining = fill_by - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            pending = self._pending
            return [pending.popleft() for _ in range(min(self._batch_size, len(pending)))]

    def _pause(self, seconds: float) -> bool:
        """Wait before trying a failed batch again; True when close() cut the wait short (try again at once)."""
        if not self._closing:
            return self._wake.wait(seconds)
        time.sleep(max(0.0, min(seconds, self._close_deadline - time.monotonic())))
        return False

    def _batch_written(self, size: int) -> None:
        with self._cond:
            self._written += size
            self._settled += size
            recovered, self._failing = self._failing, False
            self._cond.notify_all()
        if recovered:
            log.warning("audit log: %s is writable again; the queued records are being written", self.name)

    def _batch_failed(self, exc: BaseException, size: int) -> None:
        message = f"writing {size} audit records to {self.name}: {describe(exc)}"
        with self._cond:
            self._failed_batches += 1
            first, self._failing = not self._failing, True
        self.remember(message)
        if first:
            log.error("audit log: %s; the records are kept and retried", message)

    def _give_up(self, batch: list[Item], exc: BaseException) -> None:
        with self._cond:
            lost = len(batch) + len(self._pending)
            self._pending.clear()
            self._dropped += lost
            self._settled += lost
            self._cond.notify_all()
        message = f"closing without writing {lost} audit records to {self.name}: {describe(exc)}"
        self.remember(message)
        log.error("audit log: %s", message)

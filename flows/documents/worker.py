"""Where text extraction runs: a pool of worker processes, each file with a time limit.

Extraction is CPU work (PyMuPDF, Tesseract, charset detection) and some documents make a library hang or eat
memory, so files are extracted in spawned worker processes (``spawn``: the server has threads, and forking it could
copy a held lock into the child). Unlike ``flows.classify.pool`` this pool does not use ``ProcessPoolExecutor``: to
stop one file that runs past ``options.timeout`` it must know which process runs which file since when, and kill
that process alone. So each worker has its own pipe; it is sent at most ``DEPTH`` files at a time (one running, one
waiting, so it never idles while the caller stores results) and reports when it starts each one. A file running
longer than the timeout gets its worker killed and replaced, and comes back FILTER_FAILED "extraction timed out
after N s"; the file that was waiting behind it goes to another worker. A worker that dies otherwise (the OOM
killer) costs nothing but the file it was running, which is tried once more on a fresh worker before it is
reported FILTER_FAILED.

Workers are started on first use, kept for later calls (spawning one and importing PyMuPDF costs a few tenths of a
second), recycled after ``MAX_TASKS`` files (MuPDF keeps caches), and stopped at exit. Several callers (the plan
engine's batches, ``read_document`` through ``extract_now``) can use the pool at once: each run checks workers out
and returns them.

``ASSAY_DOCUMENT_POOL=thread`` runs extraction in threads instead (for measurement and debugging). A thread cannot
be killed: a file past its timeout is reported timed out and abandoned, but its thread runs on until the library
returns. ``ASSAY_DOCUMENT_WORKERS`` sets the number of worker processes (default: one per core).
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from typing import Any, Callable, Generic, Iterable, Iterator, TypeVar

from flows.core import settings
from flows.documents.extract import extract_file
from flows.documents.extract_process import ExtractFn, failed, timed_call, worker_main
from flows.documents.model import ExtractOptions, Extracted
from flows.workers import PoolsByMode, usable_cores

log = logging.getLogger(__name__)

K = TypeVar("K")
MODES = ("process", "thread")
DEPTH = 2  # files sent to one worker at a time: one running, one waiting
# a worker is replaced after this many files (MuPDF keeps caches). A worker's RSS stayed at 160 MB over 1,200 PDFs of
# the benchmark's corpus; replacing it every 500 cost a respawn (0.7 s of imports) 20 times for 10,000 files
MAX_TASKS = 5000
RETRIES = 1  # a file whose worker died (not by its timeout) is tried this many more times
STARTUP_GRACE = 60.0  # seconds a worker may take to start a file it was sent (spawning, imports) beyond the timeout


def default_mode() -> str:
    """The extraction pool's mode: the setting documents.pool (ASSAY_DOCUMENT_POOL)."""
    return settings.current().documents.pool


def default_workers() -> int:
    """The extraction pool's size: the setting documents.workers (ASSAY_DOCUMENT_WORKERS), else one per core."""
    return settings.current().documents.workers or usable_cores()


def _deadline(task: _Task, options: ExtractOptions) -> float:
    """When the first file of a worker's queue is overdue: its timeout after it started, or (no start reported
    yet) after it should have started plus time for the worker to come up."""
    if task.started is not None:
        return task.started + options.timeout
    return (task.first or time.monotonic()) + options.timeout + STARTUP_GRACE


@dataclass
class _Task(Generic[K]):
    key: K
    path: str
    tries: int = 0
    started: float | None = None  # monotonic time the worker started it
    first: float | None = None  # monotonic time it became the first of its worker's queue (it should start now)


@dataclass
class _Worker:
    process: Any
    conn: Connection
    done: int = 0
    queue: list[int] = field(default_factory=list)  # task ids sent, in order (the first runs)

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(5)
        except Exception:
            log.debug("killing extraction worker %s failed", self.process.pid, exc_info=True)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(2)
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


class Pool:
    """Extraction workers (processes or threads), with a per-file time limit in process mode."""

    def __init__(self, *, mode: str | None = None, workers: int | None = None) -> None:
        self.mode = mode or default_mode()
        if self.mode not in MODES:
            raise ValueError(f"pool mode {self.mode!r} is unknown; use one of: {', '.join(MODES)}")
        self.workers = workers or default_workers()
        self._idle: list[_Worker] = []
        self._busy = 0  # workers checked out by runs
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None
        self.killed = 0  # workers killed for a timeout
        self.died = 0  # workers that died on their own
        self._context = multiprocessing.get_context("spawn")

    # -- workers --------------------------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=worker_main, args=(child,), daemon=True, name="assay-extract")
        process.start()
        child.close()
        return _Worker(process=process, conn=parent)

    def _checkout(self, count: int) -> list[_Worker]:
        """Up to ``count`` workers for one run (idle ones first, new ones while fewer than ``workers`` are busy;
        always at least one, so a call never waits for another's batch)."""
        taken: list[_Worker] = []
        with self._lock:
            keep: list[_Worker] = []
            for worker in self._idle:
                if len(taken) < count and worker.alive():
                    taken.append(worker)
                else:
                    keep.append(worker)
            self._idle = keep
            new = max(1 - len(taken), min(count, self.workers - self._busy) - len(taken), 0)
            self._busy += len(taken) + new
        taken.extend(self._spawn() for _ in range(new))
        return taken

    def _checkin(self, workers: Iterable[_Worker]) -> None:
        extra: list[_Worker] = []
        with self._lock:
            workers = list(workers)
            self._busy -= len(workers)
            for worker in workers:
                if worker.queue or not worker.alive() or worker.done >= MAX_TASKS:
                    extra.append(worker)
                elif len(self._idle) < self.workers:
                    self._idle.append(worker)
                else:
                    extra.append(worker)
        for worker in extra:
            if worker.queue or not worker.alive():
                worker.kill()
            else:
                worker.stop()

    # -- runs -----------------------------------------------------------------------------------------------

    def run(self, tasks: Iterable[tuple[K, str]], options: ExtractOptions, *, fn: ExtractFn | None = None,
            should_cancel: Callable[[], bool] = lambda: False,
            window: int | None = None) -> Iterator[tuple[K, Extracted]]:
        """Extract each ``(key, path)``; yield ``(key, Extracted)`` in completion order. At most ``window`` files
        are in flight (default ``DEPTH`` per worker); none is started once ``should_cancel()`` is true (those in
        flight finish). ``fn(path, options)`` replaces ``extract_file`` (tests; it must be picklable)."""
        if self.mode == "thread":
            yield from self._run_threads(tasks, options, fn or extract_file, should_cancel, window)
            return
        window = window or self.workers * DEPTH
        workers = self._checkout(min(self.workers, max(1, (window + DEPTH - 1) // DEPTH)))
        source = iter(tasks)
        exhausted = False
        waiting: list[_Task] = []  # to send (retries first)
        active: dict[int, _Task] = {}  # sent, not done
        next_id = 0
        try:
            while True:
                for worker in list(workers):  # a worker past MAX_TASKS is replaced once its queue is empty
                    if not worker.queue and worker.done >= MAX_TASKS:
                        yield from self._replace(workers, worker, active, waiting, "recycled")
                # send work: to the least loaded worker with room
                while len(active) < window and not should_cancel():
                    if waiting:
                        task = waiting.pop(0)
                    elif not exhausted:
                        item = next(source, None)
                        if item is None:
                            exhausted = True
                            continue
                        task = _Task(key=item[0], path=item[1])
                    else:
                        break
                    worker = min(workers, key=lambda w: (w.done + len(w.queue) >= MAX_TASKS, len(w.queue)))
                    if len(worker.queue) >= DEPTH or worker.done + len(worker.queue) >= MAX_TASKS:
                        waiting.insert(0, task)
                        break
                    next_id += 1
                    try:
                        worker.conn.send((next_id, task.path, options, fn))
                    except (OSError, ValueError):
                        waiting.insert(0, task)
                        yield from self._replace(workers, worker, active, waiting, "died")
                        continue
                    if not worker.queue:
                        task.first = time.monotonic()
                    worker.queue.append(next_id)
                    active[next_id] = task
                if not active:
                    if waiting and should_cancel():
                        return
                    if not waiting and (exhausted or should_cancel()):
                        return
                    continue
                yield from self._collect(workers, active, waiting, options)
        finally:
            self._checkin(workers)

    def _collect(self, workers: list[_Worker], active: dict[int, _Task], waiting: list[_Task],
                 options: ExtractOptions) -> Iterator[tuple[Any, Extracted]]:
        """Wait for messages (or the nearest deadline); yield finished files; kill workers past their deadline."""
        now = time.monotonic()
        deadlines = [_deadline(active[w.queue[0]], options) for w in workers if w.queue]
        timeout = max(0.0, min(deadlines) - now) if deadlines else None
        by_conn = {w.conn: w for w in workers if w.queue}
        ready = wait_connections(list(by_conn), timeout=timeout)
        for ready_conn in ready:
            worker = by_conn[ready_conn]  # type: ignore[index]  # wait() returns the connections it was given
            conn = worker.conn
            try:
                while conn.poll():
                    kind, task_id, value = conn.recv()
                    if kind == "start":
                        active[task_id].started = value
                    else:
                        task = active.pop(task_id)
                        worker.queue.remove(task_id)
                        worker.done += 1
                        if worker.queue:
                            active[worker.queue[0]].first = time.monotonic()
                        yield task.key, value
            except (EOFError, OSError):
                yield from self._replace(workers, worker, active, waiting, "died")
        now = time.monotonic()
        for worker in list(workers):
            if not worker.queue:
                continue
            task = active[worker.queue[0]]
            if now <= _deadline(task, options):
                continue
            if task.started is None:  # the worker never started it (stuck starting up): as if it had died
                log.warning("an extraction worker did not start %s in time: it is replaced", task.path)
                yield from self._replace(workers, worker, active, waiting, "died")
            else:
                log.warning("extracting %s took longer than %g s: its worker is stopped", task.path,
                            options.timeout)
                yield from self._replace(workers, worker, active, waiting, "timeout", options.timeout)

    def _replace(self, workers: list[_Worker], worker: _Worker, active: dict[int, _Task], waiting: list[_Task],
                 why: str, timeout: float = 0.0) -> Iterator[tuple[Any, Extracted]]:
        """Kill ``worker`` and put a fresh one in its place. Its running file fails (timeout) or is retried once
        (died); files waiting behind it go back to the queue."""
        queue, worker.queue = worker.queue, []
        if why == "recycled":
            worker.stop()
        else:
            worker.kill()
        workers[workers.index(worker)] = self._spawn()
        for position, task_id in enumerate(queue):
            task = active.pop(task_id)
            # the first file was running (or about to: a worker that dies before it reports the start, e.g. at
            # import, must not be replaced forever)
            running = position == 0 and (task.started is not None or why == "died")
            if running and why == "timeout":
                self.killed += 1
                yield task.key, failed(task.path, f"extraction timed out after {timeout:g} s")
            elif running and why == "died":
                self.died += 1
                if task.tries < RETRIES:
                    task.tries += 1
                    task.started = task.first = None
                    waiting.insert(0, task)
                else:
                    yield task.key, failed(task.path, "the extraction worker process died (out of memory or "
                                                      "killed) while reading this file, twice")
            else:
                task.started = task.first = None
                waiting.insert(0, task)

    def _run_threads(self, tasks: Iterable[tuple[K, str]], options: ExtractOptions, fn: ExtractFn,
                     should_cancel: Callable[[], bool], window: int | None) -> Iterator[tuple[K, Extracted]]:
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="extract")
            executor = self._threads
        window = window or self.workers * DEPTH
        source = iter(tasks)
        pending: dict[Future, tuple[Any, str, list[float | None]]] = {}
        exhausted = False
        while True:
            while not exhausted and len(pending) < window and not should_cancel():
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                started: list[float | None] = [None]
                pending[executor.submit(timed_call, started, fn, item[1], options)] = (item[0], item[1], started)
            if not pending:
                return
            # a thread cannot be killed: a file past its deadline is reported timed out and abandoned (its thread
            # runs on until the library returns)
            starts = [box[0] for _, _, box in pending.values() if box[0] is not None]
            timeout = max(0.0, min(starts) + options.timeout - time.monotonic()) if starts else None
            if len(starts) < len(pending):  # one may start while we wait: look again soon
                timeout = min(timeout, 0.5) if timeout is not None else 0.5
            done, _ = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                key, _, _ = pending.pop(future)
                yield key, future.result()
            now = time.monotonic()
            for future, (key, path, box) in list(pending.items()):
                if box[0] is not None and now - box[0] > options.timeout:
                    del pending[future]
                    yield key, failed(path, f"extraction timed out after {options.timeout:g} s (its thread could "
                                            f"not be stopped)")

    def shutdown(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            threads, self._threads = self._threads, None
        for worker in idle:
            worker.stop()
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)


_POOLS: PoolsByMode[Pool] = PoolsByMode("extraction", lambda mode: Pool(mode=mode), default_mode)
get_pool = _POOLS.get  # the process-wide pool of a mode (default: ASSAY_DOCUMENT_POOL, else process)
shutdown = _POOLS.shutdown  # stop every worker (at exit; tests)


def run_extractions(tasks: Iterable[tuple[K, str]], options: ExtractOptions, *,
                    should_cancel: Callable[[], bool] = lambda: False, window: int | None = None,
                    fn: ExtractFn | None = None) -> Iterator[tuple[K, Extracted]]:
    """Extract each ``(key, absolute path)`` in the process-wide pool; yield ``(key, Extracted)`` in completion
    order. ``key`` is passed through untouched (any picklable value). A file past ``options.timeout`` comes back
    FILTER_FAILED "extraction timed out after N s"; nothing raises for a bad file."""
    return get_pool().run(tasks, options, fn=fn, should_cancel=should_cancel, window=window)


def extract_now(path: str, options: ExtractOptions, *, fn: ExtractFn | None = None) -> Extracted:
    """Extract one file now, in the same pool with the same timeout (``read_document`` on a file not extracted
    yet)."""
    for _, result in get_pool().run([(None, path)], options, fn=fn, window=1):
        return result
    return failed(path, "the extraction was not run")  # unreachable: one task gives one result

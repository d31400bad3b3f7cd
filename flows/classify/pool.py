"""Where classification runs: a persistent pool of worker processes, one per core, fed a bounded window of tasks.

Decoding images, running ffmpeg and opening PDFs is CPU work that the GIL would serialise in threads (Pillow and
PyMuPDF release it only in parts), so the default is a ``ProcessPoolExecutor`` started with the ``spawn`` context (a
server has threads: forking it could copy a held lock into the child). It is created on first use, kept for later
batches (spawning costs ~0.3 s a worker), shut down at exit, and replaced when broken: a worker killed by the OOM
killer turns the files it had into errors, and the next batch gets a fresh pool.

``ASSAY_CLASSIFY_POOL=thread`` (or ``mode="thread"``) runs the same function in threads instead, for measurement
(bench compares the two). ``run_tasks`` yields results in completion order and never has more than ``window`` tasks
in flight, so memory stays flat however many files a batch has.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Iterable, Iterator

from flows.classify.model import FileResult, FileTask
from flows.classify.worker import classify_file
from flows.core import settings
from flows.workers import PoolsByMode, exit_with_parent, usable_cores

log = logging.getLogger(__name__)

MODES = ("process", "thread")
ClassifyFn = Callable[[FileTask], FileResult]


def default_mode() -> str:
    """The classify pool's mode: the setting classify.pool (ASSAY_CLASSIFY_POOL)."""
    return settings.current().classify.pool


def default_workers() -> int:
    """The classify pool's size: the setting classify.workers (ASSAY_CLASSIFY_WORKERS), else one per core."""
    return settings.current().classify.workers or usable_cores()


def _failed(task: FileTask, reason: str) -> FileResult:
    return FileResult(entry_id=task.entry_id, path=task.path, errors={op: reason for op in task.operations})


class Pool:
    """A lazily created executor (processes or threads) that survives broken workers."""

    def __init__(self, *, mode: str | None = None, workers: int | None = None) -> None:
        self.mode = mode or default_mode()
        if self.mode not in MODES:
            raise ValueError(f"pool mode {self.mode!r} is unknown; use one of: {', '.join(MODES)}")
        self.workers = workers or default_workers()
        self._executor: Executor | None = None
        self._lock = threading.Lock()
        self.restarts = 0

    def _get(self) -> Executor:
        with self._lock:
            if self._executor is None:
                if self.mode == "process":
                    self._executor = ProcessPoolExecutor(max_workers=self.workers,
                                                         mp_context=multiprocessing.get_context("spawn"),
                                                         initializer=exit_with_parent,
                                                         initargs=(os.getpid(),))
                else:
                    self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="classify")
            return self._executor

    def _discard(self, executor: Executor) -> None:
        """Drop a broken executor so the next call makes a new one."""
        with self._lock:
            if self._executor is executor:
                self._executor = None
                self.restarts += 1
        try:
            executor.shutdown(wait=False, cancel_futures=True)
        except Exception:
            log.debug("shutting down a broken pool failed", exc_info=True)

    def run_tasks(self, tasks: Iterable[FileTask], fn: ClassifyFn | None = None, *, window: int | None = None,
                  should_cancel: Callable[[], bool] = lambda: False) -> Iterator[FileResult]:
        """Run ``fn`` (default: the worker's ``classify_file``) on each task; yield results as they complete. At most
        ``window`` tasks (default 4 per worker: workers keep going while the caller writes results) are in flight; no
        new task is submitted once ``should_cancel()`` is true (those in flight finish). A task whose worker died
        yields a result with an error for each of its operations, and the pool is replaced."""
        # classify_file itself, not a wrapper of this module: a spawned worker unpickles the function by its module
        # path, so it imports only the light flows.classify.worker (no settings, no pydantic); PyMuPDF stays lazy there
        fn = fn or classify_file
        window = window or max(4, self.workers * 4)
        it = iter(tasks)
        pending: dict[Future, FileTask] = {}
        executor = self._get()
        exhausted = False
        while True:
            while not exhausted and len(pending) < window and not should_cancel():
                task = next(it, None)
                if task is None:
                    exhausted = True
                    break
                try:
                    pending[executor.submit(fn, task)] = task
                except (BrokenProcessPool, RuntimeError) as exc:  # broken before we could submit
                    yield _failed(task, f"the classifier worker pool broke ({exc}); try again")
                    self._discard(executor)
                    executor = self._get()
            if not pending:
                return
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                task = pending.pop(future)
                yield self._result(future, task)
                broken = broken or isinstance(future.exception(), BrokenProcessPool)
            if broken:  # every other task of the dead pool fails too: report them, start a new pool
                for future, task in list(pending.items()):
                    try:
                        yield self._result(future, task, timeout=5)
                    except Exception:
                        yield _failed(task, "a classifier worker process died (out of memory?) while this file "
                                            "was in its pool; run it again")
                pending.clear()
                self._discard(executor)
                executor = self._get()

    @staticmethod
    def _result(future: Future, task: FileTask, timeout: float | None = None) -> FileResult:
        try:
            result = future.result(timeout=timeout)
        except BrokenProcessPool:
            return _failed(task, "a classifier worker process died (out of memory or killed) while working on this "
                                 "file; run it again")
        except Exception as exc:  # the worker never raises; a pickling problem or a bug lands here
            log.warning("classifying %s raised", task.path, exc_info=True)
            return _failed(task, f"{type(exc).__name__}: {exc}")
        if not isinstance(result, FileResult):
            return _failed(task, f"the classifier returned {type(result).__name__}, not a FileResult")
        return result

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


_POOLS: PoolsByMode[Pool] = PoolsByMode("classifier", lambda mode: Pool(mode=mode), default_mode)
get_pool = _POOLS.get  # the process-wide pool of a mode (default: ASSAY_CLASSIFY_POOL, else process)
shutdown_pools = _POOLS.shutdown

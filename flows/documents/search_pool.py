"""Several searches at once on every core: ``search_multiple`` hands its queries to worker processes that read the
same index files (mapped, so the page cache is shared) and answer from the same snapshot the caller took.

A worker gets the snapshot as names (its segments, their tombstones, what is queued), the query as text, and the
search options; it opens the segments it has not opened yet (and drops those no longer named), runs the text
engine's search (store.textindex.search) and returns the engine's Result. The pool is spawned on first use and kept
(a search must not pay for an interpreter); its workers end with the process that started them
(flows.workers.exit_with_parent). Threads would not help: the engine's work holds the GIL.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from flows.documents.query import compile_query, parse_query, to_node
from flows.workers import exit_with_parent
from store.textindex import Result, Scope, Snapshot
from store.textindex import search as engine_search
from store.textindex.segment import Segment

WORKERS = max(1, min(4, os.cpu_count() or 1))

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


@dataclass(frozen=True)
class Job:
    """One query of a search_multiple call, as a worker takes it."""

    directory: str
    segments: tuple[tuple[str, frozenset[int]], ...]  # (file name, tombstoned documents)
    queued: frozenset[int]
    query: str
    fuzzy: bool
    scope: Scope
    limit: int
    context: int
    sort: str
    deadline: float | None  # time.monotonic() of this machine: the same clock in every process


def job_of(snapshot: Snapshot, directory: Path, query: str, **options: object) -> Job:
    return Job(str(directory), tuple((s.name, snapshot.deleted.get(s.name, frozenset())) for s in snapshot.segments),
               snapshot.queued, query, **options)  # type: ignore[arg-type]


# --- in the worker ------------------------------------------------------------------------------------------------

_open: dict[str, Segment] = {}


def _segments(directory: str, names: list[str]) -> list[Segment]:
    """The named segments, opened once per worker (the caller checked their checksums when it opened them)."""
    paths = [os.path.join(directory, name) for name in names]
    for stale in set(_open) - set(paths):
        _open.pop(stale).close()
    for path in paths:
        if path not in _open:
            _open[path] = Segment(Path(path), verify=False)
    return [_open[p] for p in paths]


def run(job: Job) -> Result:
    """Answer one job (in a worker process)."""
    segments = _segments(job.directory, [name for name, _ in job.segments])
    snapshot = Snapshot(tuple(segments), {name: gone for name, gone in job.segments}, job.queued)
    tree = parse_query(job.query, fuzzy=job.fuzzy)
    return engine_search(snapshot, to_node(tree), compile_query(tree), scope=job.scope, limit=job.limit,
                         context=job.context, sort=job.sort, deadline=job.deadline)


# --- in the caller ------------------------------------------------------------------------------------------------

def pool() -> ProcessPoolExecutor:
    """The process's search workers (spawned on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(max_workers=WORKERS, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=exit_with_parent, initargs=(os.getpid(),))
        return _pool


def submit(job: Job) -> Future[Result]:
    """Hand ``job`` to a worker; a pool broken by a worker that died is replaced first."""
    global _pool
    try:
        return pool().submit(run, job)
    except BrokenProcessPool:
        with _lock:
            _pool = None
        return pool().submit(run, job)


def _opened(directory: str, names: list[str]) -> int:
    return len(_segments(directory, names))


def warm(directory: Path | None = None, snapshot: Snapshot | None = None) -> None:
    """Start the workers now, and let each open the snapshot's segments (a serving process does, so a first
    search_multiple waits for neither). A worker that gets two of the calls and another none opens them at its
    first job instead."""
    executor = pool()
    names = [s.name for s in snapshot.segments] if snapshot is not None else []
    futures = [executor.submit(_opened, str(directory), names) if directory is not None else executor.submit(os.getpid)
               for _ in range(WORKERS)]
    for future in futures:
        future.result()


@atexit.register
def shutdown() -> None:
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None

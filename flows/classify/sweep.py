"""The cache sweep: files under ``<data dir>/cache`` that no ``artifacts`` row points at are removed.

Deleting an entry cascades its artifacts rows (foreign key ON DELETE CASCADE), and regenerating replaces them, so
their cache files become orphans; the sweep runs after each classify job, after each plan execution with a
classifier, and in the background at server start. A file shared by two entries (identical thumbnails: the cache is
content-addressed) stays while one row still points at it. The cache directory is streamed (os.scandir) and checked
against the table in chunks of ~500, so memory stays flat however large the cache is.

A worker writes a file into the cache before the row that points at it is committed. So while classification is in
flight anywhere on the store (a classify job pending or running, a running plan execution whose plan has a classifier
outcome that makes images: rows every process writes; an execution of a plan that never classifies, such as a watched
plan extracting documents, writes no cache file and holds nothing back), the sweep keeps unreferenced files younger
than ``GRACE``; when nothing is in flight, every unreferenced file goes, so deleting an entry leaves no orphan after
the next sweep. A sweep after classification that kept files for that reason is owed again: a daemon thread checks
every ``RETRY`` seconds and sweeps once nothing is in flight (or once the files it kept are past the grace), so the
last run ending while another runs (in another process, or one whose end does not sweep) leaves no orphan on an idle
server. A temporary file (``.tmp-*``) a process killed mid-write left beside its target is removed once older than
``TEMP_GRACE`` (a live write, even a long clip's re-encode, is younger).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from dsl.model import Plan
from dsl.outcomes import ClassifierOutcome, iter_outcomes
from flows.classify.model import parse_operations
from flows.core.capability import data_dir
from store import artifacts as store_artifacts
from store import cache
from store.models import Job, PlanExecution

log = logging.getLogger(__name__)

CHUNK = 500
GRACE = 600.0  # seconds: a file this young may belong to a batch whose write is still to come
TEMP_GRACE = 86_400.0  # seconds: a temporary file this old belongs to no write still going on
RETRY = 15.0  # seconds between the checks of a sweep owed (one that kept files while classification was in flight)


@dataclass
class SweepResult:
    scanned: int = 0
    removed: int = 0
    removed_bytes: int = 0
    kept: int = 0
    young: int = 0  # of ``kept``: unreferenced files kept only because they were younger than the grace
    young_until: float = 0.0  # when the youngest of those is past the grace (epoch seconds)
    removed_temporary: int = 0  # temporary files of writes that never finished (a killed process)
    orphans: list[str] = field(default_factory=list)  # cache paths found unreferenced (first 100)


def iter_cache_files(data_dir: str | Path, *,
                     on_temporary: Callable[[os.DirEntry], None] | None = None) -> Iterator[tuple[str, os.DirEntry]]:
    """(cache path relative to the data dir, dir entry) of every well-formed file in the cache, streamed;
    ``on_temporary`` gets the temporary files (``.tmp-*``) met on the way."""
    root = cache.cache_dir(data_dir)
    if not root.is_dir():
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        if on_temporary is not None and entry.name.startswith(cache.TEMP_PREFIX):
                            on_temporary(entry)
                            continue
                        rel = f"{cache.CACHE_DIR}/{Path(entry.path).relative_to(root).as_posix()}"
                        if cache.is_cache_path(rel):
                            yield rel, entry
        except OSError as exc:
            log.warning("cache sweep could not read %s: %s", folder, exc)


def _chunks(data_dir: str | Path, *, on_temporary: Callable[[os.DirEntry], None] | None = None
            ) -> Iterator[list[tuple[str, os.DirEntry]]]:
    chunk: list[tuple[str, os.DirEntry]] = []
    for item in iter_cache_files(data_dir, on_temporary=on_temporary):
        chunk.append(item)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def find_orphans(engine: Engine, data_dir: str | Path) -> Iterator[tuple[str, os.DirEntry]]:
    """Cache files no artifacts row points at."""
    for chunk in _chunks(data_dir):
        with engine.connect() as conn:
            used = store_artifacts.referenced_cache_paths(conn, [rel for rel, _ in chunk])
        for rel, entry in chunk:
            if rel not in used:
                yield rel, entry


def classification_in_flight(engine: Engine) -> bool:
    """Whether any process may be between writing a cache file and committing its row: a classify job pending or
    running, or a running plan execution whose plan makes images (jobs and executions left running by a dead process
    are reaped at the next server start)."""
    J, X = Job.__table__, PlanExecution.__table__
    with engine.connect() as conn:
        job = conn.execute(select(J.c.id).where(J.c.kind == "classify", or_(J.c.status == "pending",
                                                                             J.c.status == "running")).limit(1)).first()
        if job is not None:
            return True
        running = conn.execute(select(J.c.params_json).select_from(X.outerjoin(J, J.c.id == X.c.run_id))
                               .where(X.c.status == "running")).all()
    return any(_writes_cache(params) for (params,) in running)


def _writes_cache(params_json: str | None) -> bool:
    """Whether the plan a running execution runs (its run's ``plan`` parameter: the plan as it was when it started)
    has a classifier outcome making thumbnails or timelines; an execution whose plan cannot be read counts as one."""
    try:
        plan = Plan.model_validate(json.loads(params_json or "{}")["plan"])
        return any(isinstance(o, ClassifierOutcome) and set(parse_operations(o.classifierOperation)) - {"metadata"}
                   for rule in plan.rules for o in iter_outcomes(rule.outcomes))
    except (KeyError, TypeError, ValueError):  # (pydantic's ValidationError and the plan's errors are ValueErrors)
        return True


def sweep_cache(engine: Engine, data_dir: str | Path, *, grace: float | None = None,
                dry_run: bool = False) -> SweepResult:
    """Remove cache files no row points at; ``dry_run`` only counts them. ``grace``: keep unreferenced files younger
    than this many seconds; by default GRACE while classification is in flight anywhere, else 0."""
    if grace is None:
        grace = GRACE if classification_in_flight(engine) else 0.0
    result = SweepResult()
    now = time.time()

    def temporary(entry: os.DirEntry) -> None:
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime >= TEMP_GRACE and not dry_run:
                os.unlink(entry.path)
                result.removed_temporary += 1
        except OSError:
            pass  # renamed into place or removed by its writer meanwhile

    for chunk in _chunks(data_dir, on_temporary=temporary):
        result.scanned += len(chunk)
        with engine.connect() as conn:
            used = store_artifacts.referenced_cache_paths(conn, [rel for rel, _ in chunk])
        for rel, entry in chunk:
            if rel in used:
                result.kept += 1
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if now - st.st_mtime < grace:
                result.kept += 1
                result.young += 1
                result.young_until = max(result.young_until, st.st_mtime + grace)
                continue
            if len(result.orphans) < 100:
                result.orphans.append(rel)
            if dry_run:
                continue
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cache sweep could not remove %s: %s", entry.path, exc)
                continue
            result.removed += 1
            result.removed_bytes += st.st_size
    if result.removed or result.removed_temporary:
        log.info("cache sweep removed %d orphan file(s), %d bytes, and %d unfinished temporary file(s)",
                 result.removed, result.removed_bytes, result.removed_temporary)
    return result


def missing_files(engine: Engine, data_dir: str | Path, *, limit: int = 100) -> tuple[int, list[dict[str, Any]]]:
    """Artifact rows whose cache file is gone: (count, first ``limit`` as {artifactId, entryId, cachePath})."""
    count, sample = 0, list[dict[str, Any]]()
    for artifact_id, entry_id, rel in store_artifacts.iter_artifact_cache_paths(engine):
        if not cache.file_of(data_dir, rel).is_file():
            count += 1
            if len(sample) < limit:
                sample.append({"artifactId": artifact_id, "entryId": entry_id, "cachePath": rel})
    return count, sample


_sweeping = threading.Lock()


def sweep_in_background(engine: Engine, data_dir: str | Path) -> threading.Thread | None:
    """Sweep in a daemon thread (server start-up); None when a sweep is already running."""
    if not _sweeping.acquire(blocking=False):
        return None

    def work() -> None:
        try:
            sweep_and_settle(engine, data_dir)
        except Exception:
            log.warning("background cache sweep failed", exc_info=True)
        finally:
            _sweeping.release()

    thread = threading.Thread(target=work, name="assay-cache-sweep", daemon=True)
    thread.start()
    return thread


def sweep_and_settle(engine: Engine, data_dir: str | Path) -> SweepResult:
    """Sweep; when classification in flight made the sweep keep young unreferenced files, another is owed
    (:func:`owe_sweep`)."""
    result = sweep_cache(engine, data_dir)
    if result.young:
        owe_sweep(engine, data_dir, result.young_until)
    return result


_owed_lock = threading.Lock()
_owed: dict[tuple[str, str], float] = {}  # (store, data dir) -> when the files a sweep kept are past its grace


def owe_sweep(engine: Engine, data_dir: str | Path, until: float) -> threading.Thread | None:
    """Sweep again once nothing is in flight, or at ``until`` (the kept files past the grace), whichever comes
    first: a daemon thread checks every ``RETRY`` seconds. None when one is already owed for this store and data
    dir (it then waits for ``until`` too)."""
    key = (engine.url.render_as_string(hide_password=True), str(data_dir))
    with _owed_lock:
        if key in _owed:
            _owed[key] = max(_owed[key], until)
            return None
        _owed[key] = until
    thread = threading.Thread(target=_settle, args=(engine, data_dir, key), name="assay-cache-sweep-owed",
                              daemon=True)
    thread.start()
    return thread


def _settle(engine: Engine, data_dir: str | Path, key: tuple[str, str]) -> None:
    while True:
        time.sleep(RETRY)  # a daemon thread's wait between two cheap checks; never on an event loop
        with _owed_lock:
            until = _owed[key]
        try:
            if time.time() < until and classification_in_flight(engine):
                continue
            result = sweep_cache(engine, data_dir)
        except Exception:
            log.warning("owed cache sweep failed; the next sweep after classification or at start does it",
                        exc_info=True)
            with _owed_lock:
                del _owed[key]
            return
        with _owed_lock:
            if result.young:  # still in flight, with files younger than the grace: owed again
                _owed[key] = max(_owed[key], result.young_until)
                continue
            if _owed[key] > until:  # another sweep kept files meanwhile
                continue
            del _owed[key]
            return


def sweep_after(engine: Engine) -> None:
    """Sweep the cache after a job or a plan execution with a classifier (errors are logged, never raised)."""
    try:
        sweep_and_settle(engine, data_dir())
    except Exception:
        log.warning("cache sweep after classification failed", exc_info=True)


def sweep_at_start(engine: Engine) -> None:
    """At server start (the capability's ``start_background``): sweep the artifact cache in a background thread
    (orphans of entries deleted while no server ran)."""
    sweep_in_background(engine, data_dir())

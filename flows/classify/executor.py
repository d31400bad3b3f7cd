"""The ``classifier`` outcome: thumbnails, timelines and metadata for a batch of entries, through the worker pool.

The flow of one batch (``classify_rows``, shared by plan runs and classify jobs):

1. Work keys. Each (entry, operation) has a key: entry id + path + size + mtime + operation + that operation's
   parameters. Keys already applied (``outcome_records``) are skipped unless ``force``: re-running a plan on unchanged
   files does nothing, whether the earlier work came from a plan rule, a chained step or ``rerun-classifier``. A
   touched file (size or mtime) has new keys, so it is redone and its artifacts replaced.
2. The tasks go to the pool (``flows.classify.pool``) with no transaction open; results come back as files finish.
3. Results are written in short transactions of ``WRITE_CHUNK`` files (old artifacts of the operation replaced,
   metadata_values replaced, ``entries.hash`` set, work keys recorded), so an index job or a watcher waits at most
   one small write. Per-file errors become ``BatchResult.errors`` ("thumbnail: reason"); the batch goes on.
4. A full disk (a worker's ``FileResult.no_space``: the cache's disk, or ffmpeg's temporary folder) is no file's
   error and would fail every file after it: no more tasks are sent, the files in flight are written (what each
   finished, with its work keys), and :class:`~store.errors.NoSpace` (NO_SPACE) stops the batch and so the run. The
   operations a full disk stopped have no work key, so the next run, once space is freed, does them and nothing
   else. A full disk under the store itself raises NoSpace from the write (store.engine): the chunk is rolled back,
   its keys unwritten, so it is redone too; the cache files its results made, which no row points at now, are
   removed at once (not left for the sweep): nothing is orphaned, and the space they took lets the store record how
   the run ended when the store and the cache share the full disk.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Iterator, Sequence

from sqlalchemy import select
from sqlalchemy.engine import Engine

from dsl.outcomes import OutcomeBase
from flows.classify.model import OPERATIONS, FileResult, FileTask, Params, parse_operations
from flows.classify.pool import ClassifyFn, get_pool
from flows.classify.sweep import sweep_after
from flows.core.capability import data_dir
from flows.core.outcomes import BatchResult, OutsideTransactionExecutor, RunContext
from store import artifacts as store_artifacts
from store import cache
from store import plans as store_plans
from store.entries import T as E
from store.errors import NoSpace
from store.preferences import load_preferences

log = logging.getLogger(__name__)

WRITE_CHUNK = 16  # files per write transaction
OUTCOME_TYPE = "classifier"
# the artifact types each operation owns (replaced together when the operation runs again)
ARTIFACT_TYPES: dict[str, tuple[str, ...]] = {
    "thumbnail": ("thumbnail",),
    "timeline": ("video-timeline", "timeline-sheet"),
    "metadata": ("metadata",),
}


def params_from(outcome: OutcomeBase | None, preferences: dict[str, Any]) -> Params:
    """Params of a run: the outcome's maxWidth / maxHeight / quality, else the preferences (thumbnail.max_width,
    thumbnail.max_height, timeline.frame_count), else the defaults."""
    def first(*values: Any, default: int) -> int:
        return next((int(v) for v in values if v is not None), default)

    def given(name: str) -> Any:
        return getattr(outcome, name, None) if outcome is not None else None

    base = Params()
    return replace(base,
                   max_width=first(given("maxWidth"), preferences.get("thumbnail.max_width"), default=base.max_width),
                   max_height=first(given("maxHeight"), preferences.get("thumbnail.max_height"),
                                    default=base.max_height),
                   quality=first(given("quality"), default=base.quality),
                   frame_count=first(preferences.get("timeline.frame_count"), default=base.frame_count))


def operation_params(operation: str, params: Params) -> str:
    """The parameters that change what ``operation`` makes (part of its work key)."""
    if operation == "thumbnail":
        return f"{params.max_width}x{params.max_height}q{params.quality}"
    if operation == "timeline":
        return f"{params.frame_count}f{params.max_width}x{params.max_height}q{params.quality}"
    return ""


def work_key(row: Any, operation: str, params: Params) -> str:
    """The key of ``operation`` on entry ``row`` in its current state (id, path, size, mtime) with ``params``."""
    raw = "|".join(("classify", str(row["id"]), row["path"], str(row["size"]), repr(float(row["mtime"])),
                    operation, operation_params(operation, params)))
    return "classify:" + hashlib.sha256(raw.encode()).hexdigest()[:40]


@dataclass
class Pending:
    """A task sent to the pool and the work keys of its operations."""

    task: FileTask
    keys: dict[str, str]  # operation -> work key


@dataclass
class ClassifyRun:
    """What classifies a batch: the function the pool runs (the worker, or a fake in tests), the pool mode, where
    the cache is, and the writer of result chunks."""

    classify: ClassifyFn | None = None  # None: flows.classify.worker.classify_file in the pool's workers
    pool_mode: str | None = None  # None: ASSAY_CLASSIFY_POOL or "process"
    write_chunk: int = WRITE_CHUNK
    on_write: Callable[[int], None] | None = None  # called with the number of files of each write (tests)


# what plan runs and classify jobs use unless told otherwise (tests swap its classify function or pool mode)
DEFAULT_RUN = ClassifyRun()


def _tasks(rows: Sequence[Any], operations: tuple[str, ...], params: Params, cache_root: str, *, force: bool,
           engine: Engine, result: BatchResult) -> list[Pending]:
    """Tasks for the rows that have work left (regular files only), counting the others in ``result``."""
    files = [r for r in rows if r["kind"] == "file"]
    result.unchanged += len(rows) - len(files)
    keyed = [(r, {op: work_key(r, op, params) for op in operations}) for r in files]
    done: set[str] = set()
    if not force and keyed:
        with engine.connect() as conn:
            # a failed operation counts as done too: the same bytes fail the same way (a corrupt video would cost its
            # ffmpeg timeout on every run); a changed file has a new key, and rerun-classifier forces a retry
            done = store_plans.known_work_keys(conn, [k for _, keys in keyed for k in keys.values()],
                                               statuses=("applied", "error"))
    out: list[Pending] = []
    for row, keys in keyed:
        todo = {op: k for op, k in keys.items() if k not in done}
        if not todo:
            result.skipped += 1
            continue
        out.append(Pending(FileTask(entry_id=row["id"], path=row["path"], media_type=row["media_type"],
                                    mime=row["mime"], extension=row["extension"] or "", size=row["size"],
                                    operations=tuple(op for op in OPERATIONS if op in todo), params=params,
                                    cache_root=cache_root), todo))
    return out


def write_results(engine: Engine, chunk: list[tuple[Pending, FileResult]], *, rule: str,
                  execution_id: int | None) -> None:
    """One short transaction for a chunk of finished files, a few set-based statements whatever its size: the old
    artifacts of each finished operation deleted and the new ones inserted, metadata_values replaced, hashes set,
    work keys recorded (applied, or error: an unchanged file that failed is not tried again unless forced). An
    operation a full disk stopped (``no_space``, not in ``done``) is not recorded: the next run does it."""
    records: list[dict[str, Any]] = []
    replaced: dict[str, list[int]] = {op: [] for op in OPERATIONS}  # operation -> entries whose artifacts it replaces
    artifacts: list[dict[str, Any]] = []
    metadata: dict[int, dict[str, Any]] = {}
    hashes: dict[int, str | None] = {}
    with engine.begin() as conn:
        ids = [p.task.entry_id for p, _ in chunk]
        alive = set(conn.execute(select(E.c.id).where(E.c.id.in_(ids))).scalars())
        for pending, res in chunk:
            entry_id = pending.task.entry_id
            if entry_id not in alive:  # deleted while the pool worked on it (an index sweep, delete-files)
                continue
            for op in pending.task.operations:
                if res.no_space is not None and op not in res.done and op not in res.errors:
                    continue  # stopped by a full disk: left for the next run
                key = pending.keys[op]
                records.append({"execution_id": execution_id, "entry_id": entry_id, "rule": rule,
                                "outcome_type": OUTCOME_TYPE, "work_key": key,
                                "status": "error" if op in res.errors else "applied",
                                "detail": res.errors.get(op) or res.not_applicable.get(op)})
                if op in res.errors:
                    continue
                replaced[op].append(entry_id)
                if op == "metadata":
                    artifacts.append({"entry_id": entry_id, "type": "metadata", "mime_type": "application/json",
                                      "cache_path": None, "source_hash": key,
                                      "value": {"metadata": res.metadata, "details": res.details, "hash": res.hash}})
                    metadata[entry_id] = res.metadata
                    hashes[entry_id] = res.hash
                else:
                    artifacts.extend({"entry_id": entry_id, "type": a.type, "mime_type": a.mime_type,
                                      "cache_path": a.cache_path, "source_hash": key, "value": a.value}
                                     for a in res.artifacts if a.type in ARTIFACT_TYPES[op])
        for op, entry_ids in replaced.items():
            store_artifacts.delete_artifacts(conn, entry_ids=entry_ids, types=ARTIFACT_TYPES[op])
        store_artifacts.insert_artifacts(conn, artifacts)
        store_artifacts.replace_metadata_many(conn, metadata)
        store_artifacts.set_entry_hashes(conn, hashes)
        store_plans.record_outcomes(conn, records)


def classify_rows(engine: Engine, rows: Sequence[Any], *, operations: tuple[str, ...], params: Params,
                  rule: str = "rerun-classifier", execution_id: int | None = None, force: bool = False,
                  should_cancel: Callable[[], bool] = lambda: False,
                  on_item: Callable[[str], None] | None = None,
                  on_result: Callable[[FileResult], None] | None = None,
                  run: ClassifyRun | None = None) -> BatchResult:
    """Classify ``rows`` (entry rows): skip work already done (unless ``force``), run the rest through the pool,
    write results in short transactions. ``on_result`` sees each file's result (jobs record issues from it). A full
    disk raises NoSpace once the files in flight are written (see the module's docstring)."""
    run = run or DEFAULT_RUN
    result = BatchResult()
    pending = _tasks(rows, operations, params, str(data_dir()), force=force, engine=engine, result=result)
    if not pending:
        return result
    by_id = {p.task.entry_id: p for p in pending}
    chunk: list[tuple[Pending, FileResult]] = []
    full: list[str] = []  # what the first worker that found the disk full said

    def flush() -> None:
        if chunk:
            try:
                write_results(engine, chunk, rule=rule, execution_id=execution_id)
            except NoSpace:
                unwritten = list(chunk)
                chunk.clear()  # not tried again by the final flush
                drop_unwritten(engine, unwritten)
                raise
            if run.on_write is not None:
                run.on_write(len(chunk))
            chunk.clear()

    pool = get_pool(run.pool_mode)
    stream: Iterator[FileResult] = pool.run_tasks((p.task for p in pending), run.classify,
                                                  should_cancel=lambda: bool(full) or should_cancel())
    try:
        for res in stream:
            item = by_id.get(res.entry_id)
            if item is None:
                log.warning("classifier returned a result for entry %s, which was not asked for", res.entry_id)
                continue
            if res.no_space is not None and not full:
                log.warning("classifying %s: %s; the run stops once the files in flight are written", res.path,
                            res.no_space)
                full.append(res.no_space)
            _account(result, item, res)
            chunk.append((item, res))
            if on_result is not None:
                on_result(res)
            if on_item is not None:
                on_item(res.path)
            if len(chunk) >= run.write_chunk:
                flush()
    finally:
        flush()  # what finished is kept even when the batch stops early
    if full:
        raise NoSpace(full[0])
    return result


def drop_unwritten(engine: Engine, chunk: list[tuple[Pending, FileResult]]) -> None:
    """Remove the cache files of a chunk whose write was rolled back, those no artifacts row points at (a file
    shared with a row written before stays): their rows will not come, and on a full disk their space is what lets
    the store record the run's end."""
    made = {a.cache_path for _, res in chunk for a in res.artifacts}
    if not made:
        return
    with engine.connect() as conn:  # a read: it needs no space
        kept = store_artifacts.referenced_cache_paths(conn, sorted(made))
    root = data_dir()
    for rel in made - kept:
        try:
            cache.file_of(root, rel).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not remove %s after its write was rolled back: %s", rel, exc)


def _account(result: BatchResult, item: Pending, res: FileResult) -> None:
    errors = [f"{op}: {res.errors[op]}" for op in item.task.operations if op in res.errors]
    if errors:
        result.errors.append((item.task.entry_id, "; ".join(errors)))
        result.failed_ids.add(item.task.entry_id)
    finished = [op for op in item.task.operations if res.no_space is None or op in res.done or op in res.errors]
    made = any(op not in res.errors and op not in res.not_applicable for op in finished)
    if made:
        result.applied += 1
    elif not errors and finished:  # (a file a full disk stopped before it did anything counts nowhere)
        result.unchanged += 1


class ClassifierExecutor(OutsideTransactionExecutor):
    """Outcome ``classifier``: ``classifierOperation`` generate_thumbnail | generate_timeline | extract_metadata |
    all, with ``maxWidth``, ``maxHeight``, ``quality``. Keeps its own work keys (records_work False)."""

    type: ClassVar[str] = "classifier"
    records_work: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = 64

    def __init__(self, run: ClassifyRun | None = None) -> None:
        self.run = run or DEFAULT_RUN

    def after_run(self, engine: Engine) -> None:
        """After a plan execution with a classifier: sweep the artifact cache (replaced artifacts leave orphans)."""
        sweep_after(engine)

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: RunContext) -> BatchResult:
        operations = parse_operations(getattr(outcome, "classifierOperation", "all"))
        params = params_from(outcome, load_preferences(engine))
        return classify_rows(engine, rows, operations=operations, params=params, rule=ctx.rule or OUTCOME_TYPE,
                             execution_id=ctx.execution_id, should_cancel=ctx.should_cancel, on_item=ctx.on_item,
                             run=self.run)

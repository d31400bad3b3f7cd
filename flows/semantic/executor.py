"""The ``embed`` outcome: the text of matched documents chunked, embedded and written to a collection.

The flow of one batch (``embed_rows``, shared by plan runs and ``flows.semantic.service``):

1. Parameters. The outcome's collection, chunking, model and backend (None: the server's settings,
   ``flows.semantic.settings``); the encoder is loaded once per process (``flows.semantic.encoder.get_encoder``) and
   the collection made or checked (``store.semantic.ensure_collection``). A collection holding vectors of another
   model or backend is refused: every entry of the batch fails with MODEL_MISMATCH and nothing is written, so a
   collection never mixes vectors.
2. Applicability. Regular files of a document format (as ``extract_text`` reads them); the rest count as
   ``unchanged``.
3. Work keys. An entry's key (``flows.semantic.model.entry_work_key``: size, mtime, model, backend, chunking) is kept
   on its ``collection_entries`` row; an entry whose key is unchanged is ``skipped`` and never embedded again,
   whatever became of it the first time (the same bytes fail the same way).
4. Text. Entries whose extracted text is missing or stale are extracted first (``flows.documents.executor
   .extract_rows``, so the full-text index gets them too). An entry whose extraction failed is recorded in the
   collection with status ``error`` and reported as an outcome error ("FILTER_FAILED: encrypted PDF"), so the
   execution ends ``partial``; one without text is recorded ``empty``.
5. Embedding, with no transaction open, as a pipeline with bounded queues (memory stays flat whatever the batch): a
   reader thread reads each document's pages (``store.documents.read_pages``) and chunks them
   (``flows.semantic.chunking.chunk_pages``); the calling thread encodes batches of chunk texts (a batch may span
   documents: the model works best on full batches); a writer thread writes finished entries in short transactions
   (``store.semantic.replace_entries``: a few entries or a few hundred chunks each) and applies each write to the
   collection's live vector index (``flows.semantic.vectors``), so searches find new chunks as they land. A cancel
   request is honoured between encode batches; what was written stays.
6. Each written entry gets an outcome record (applied, or error with its reason) under the execution.
   ``after_run`` saves the vector indexes the execution changed (atomically).
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
from sqlalchemy.engine import Engine

from dsl.outcomes import OutcomeBase
from flows.core.outcomes import BatchResult, OutsideTransactionExecutor, RunContext
from flows.documents import executor as doc_exec
from flows.documents.formats import format_of
from flows.documents.model import PAGED_FORMATS
from flows.semantic import encoder as enc
from flows.semantic import settings as sem_settings
from flows.semantic import vectors
from flows.semantic.chunking import chunk_pages
from flows.semantic.model import DEFAULT_COLLECTION, ChunkSpan, EmbedParams, entry_work_key
from flows.workers import WriterThread
from store import plans as store_plans
from store import semantic as store_sem
from store.documents import read_pages
from store.entries import existing_ids
from store.errors import AssayError

log = logging.getLogger(__name__)

OUTCOME_TYPE = "embed"
WRITE_ENTRIES = 16  # entries per write at most
WRITE_CHUNKS = 512  # ... and about this many chunks (one long document makes a write on its own)
READ_AHEAD = 256  # chunks the reader may have ready ahead of the encoder


def model_and_backend(engine: Engine | None, collection: str, model: str | None,
                      backend: str | None) -> tuple[str, str]:
    """The model and backend to embed into ``collection`` with. The model: the one asked for, else the server's
    (ASSAY_EMBED_MODEL; a collection holding another is refused with MODEL_MISMATCH, so changing the setting never
    mixes models). The backend: the one asked for; else the collection's, when it exists (the backends' vectors
    agree, so a new default never refuses a collection built with the old one); else the measured default
    (``encoder.check_backend``: torch where the default cannot run)."""
    model = model or sem_settings.current().model
    existing = store_sem.get_collection(engine, collection) if engine is not None and not backend else None
    return model, existing["backend"] if existing is not None else enc.check_backend(backend)


def params_for(outcome: OutcomeBase | None, engine: Engine | None = None) -> EmbedParams:
    """The embed parameters of ``outcome`` (an EmbedOutcome, or None for the defaults); the model and backend as
    :func:`model_and_backend` chooses them."""
    collection = getattr(outcome, "collection", None) or DEFAULT_COLLECTION
    model, backend = model_and_backend(engine, collection, getattr(outcome, "model", None),
                                       getattr(outcome, "backend", None))
    return EmbedParams(collection=collection, chunk_size=int(getattr(outcome, "chunk_size", 1000)),
                       overlap=int(getattr(outcome, "overlap", 200)), model=model, backend=backend)


def _record_key(entry_id: int, collection: str, key: str) -> str:
    """The outcome record's work key for one entry's embedding into one collection (unique per entry and state)."""
    return "embed:" + hashlib.sha256(f"{entry_id}|{collection}|{key}".encode()).hexdigest()[:40]


@dataclass
class _Task:
    entry_id: int
    path: str
    name: str
    size: int
    mtime: float
    key: str  # the embed work key
    paged: bool = False
    status: str = "ok"  # ok | empty | error
    error: str | None = None
    chunks: list[ChunkSpan] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)  # encoded batches of this entry's chunks, in order
    read_done: bool = False  # the reader produced all of its chunks
    encoded: int = 0  # chunks encoded so far


@dataclass
class EmbedRun:
    """Knobs of one batch (tests make writes small to see them land one by one)."""

    write_entries: int = WRITE_ENTRIES
    write_chunks: int = WRITE_CHUNKS
    read_ahead: int = READ_AHEAD
    on_write: Callable[[int], None] | None = None  # called with the number of entries of each write (tests)


DEFAULT_RUN = EmbedRun()


# --- the batch ------------------------------------------------------------------------------------------------------


def embed_rows(engine: Engine, rows: Sequence[Any], *, params: EmbedParams, rule: str = OUTCOME_TYPE,
               execution_id: int | None = None, should_cancel: Callable[[], bool] = lambda: False,
               on_item: Callable[[str], None] | None = None, run: EmbedRun | None = None,
               touched: Callable[[dict], None] | None = None) -> BatchResult:
    """Embed the documents among ``rows`` (entry rows) whose embedding in ``params.collection`` is not current: see
    the module docstring. Never raises for a bad document; what finished is written even when the batch stops
    early. ``touched(collection)`` is called once the collection was written to (the executor saves its index
    after the run)."""
    run = run or DEFAULT_RUN
    result = BatchResult()
    options = doc_exec.options_for(None)
    wanted: list[_Task] = []
    for row in rows:
        if not doc_exec.applicable(row, options):
            result.unchanged += 1
            continue
        size, mtime = int(row["size"]), float(row["mtime"])
        wanted.append(_Task(row["id"], row["path"], row["name"], size, mtime, entry_work_key(size, mtime, params),
                            paged=format_of(row["name"]) in PAGED_FORMATS))
    if not wanted:
        return result

    try:
        encoder = enc.get_encoder(params.model, params.backend)
        collection = store_sem.ensure_collection(engine, params.collection, model=params.model,
                                                 backend=params.backend, dim=encoder.dim,
                                                 chunk_size=params.chunk_size, overlap=params.overlap)
    except AssayError as exc:  # MODEL_MISMATCH, an unknown model, GPU_NOT_AVAILABLE: nothing can be embedded
        reason = str(exc)
        log.warning("embed into %r: %s", params.collection, reason)
        for task in wanted:
            result.errors.append((task.entry_id, reason))
            result.failed_ids.add(task.entry_id)
        return result

    done = store_sem.entry_keys(engine, collection["id"], [t.entry_id for t in wanted])
    todo = [t for t in wanted if done.get(t.entry_id) != t.key]
    result.skipped += len(wanted) - len(todo)
    if not todo:
        return result

    todo_ids = {t.entry_id for t in todo}
    # a plan that embeds without extracting first works alone: text missing or stale is extracted now
    current, failed = doc_exec.ensure_extracted(engine, [r for r in rows if r["id"] in todo_ids], options=options,
                                                rule=rule, execution_id=execution_id, should_cancel=should_cancel)
    todo = [t for t in todo if t.entry_id in current]  # text not current (extraction stopped early): next time
    for task in todo:
        if task.entry_id in failed:
            task.status, task.error = "error", failed[task.entry_id]
    if should_cancel():
        todo = [t for t in todo if t.status == "error"]  # extraction stopped early: only its verdicts are kept

    writer = _Writer(engine, collection, rule=rule, execution_id=execution_id, run=run, on_item=on_item,
                     touched=touched)
    try:
        _pipeline(engine, encoder, todo, params=params, writer=writer, should_cancel=should_cancel,
                  read_ahead=run.read_ahead)
    finally:
        writer.close()  # waits for the writes; raises what a write raised
    for task in writer.written:
        if task.status == "error":
            result.errors.append((task.entry_id, task.error or "error"))
            result.failed_ids.add(task.entry_id)
        else:
            result.applied += 1
    return result


_END = object()


def _pipeline(engine: Engine, encoder, tasks: list[_Task], *, params: EmbedParams, writer: "_Writer",
              should_cancel: Callable[[], bool], read_ahead: int) -> None:
    """Reader thread -> encoder (this thread) -> writer thread; see the module docstring (step 5)."""
    batch_size = max(1, sem_settings.current().batch_size)
    chunks: queue.Queue = queue.Queue(maxsize=max(1, read_ahead))
    stop = threading.Event()
    reader_error: list[BaseException] = []

    def put(item) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for task in tasks:
                if task.status == "error":
                    if not put((task, None, True)):
                        return
                    continue
                pages = ((page if task.paged else None, text)
                         for page, text, _ocr in read_pages(engine, task.entry_id))
                previous = None  # one chunk of look-ahead: the last one goes out marked as last
                for span in chunk_pages(pages, chunk_size=params.chunk_size, overlap=params.overlap):
                    if previous is not None and not put((task, previous, False)):
                        return
                    previous = span
                if not put((task, previous, True)):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the encoding thread
            reader_error.append(exc)
        finally:
            put(_END)

    reader = threading.Thread(target=read, name="assay-embed-reader", daemon=True)
    reader.start()
    pending: deque[_Task] = deque()  # entries in reading order whose chunks are not all encoded yet
    texts: list[str] = []
    owners: list[_Task] = []

    def encode() -> None:
        if not texts:
            return
        vectors = np.asarray(encoder.encode(texts, batch_size=batch_size), dtype=np.float32)
        at = 0
        while at < len(owners):  # consecutive chunks of one entry take one slice
            task, end = owners[at], at
            while end < len(owners) and owners[end] is task:
                end += 1
            task.vectors.append(vectors[at:end])
            task.encoded += end - at
            at = end
        texts.clear()
        owners.clear()
        flush()

    def flush() -> None:
        while pending and pending[0].read_done and pending[0].encoded == len(pending[0].chunks):
            writer.put(pending.popleft())

    try:
        while True:
            item = chunks.get()
            if item is _END:
                break
            task, span, last = item
            if not pending or pending[-1] is not task:
                pending.append(task)
            task.read_done = last
            if span is None:  # no chunks at all
                if task.status == "ok":
                    task.status = "empty"
                flush()
                continue
            task.chunks.append(span)
            texts.append(span.text)
            owners.append(task)
            if len(texts) >= batch_size:
                if should_cancel():
                    texts.clear()
                    owners.clear()
                    break
                encode()
                if should_cancel():
                    break
        if not should_cancel():
            encode()
            flush()
        if reader_error:
            raise reader_error[0]
    finally:
        stop.set()
        reader.join()


# --- writes ---------------------------------------------------------------------------------------------------------


class _Writer:
    """Gathers finished entries into writes (a few entries or a few hundred chunks) done on a thread of their own
    (``flows.workers.WriterThread``) while the caller keeps encoding: ``store.semantic.replace_entries`` (one short
    transaction), then the write's application to the live vector index, then the entries' outcome records. At most
    two writes wait. The first write that fails stops the writer; ``put`` or ``close`` raises it."""

    def __init__(self, engine: Engine, collection: dict, *, rule: str, execution_id: int | None, run: EmbedRun,
                 on_item: Callable[[str], None] | None, touched: Callable[[dict], None] | None) -> None:
        self._engine, self._collection = engine, collection
        self._rule, self._execution_id, self._run = rule, execution_id, run
        self._on_item, self._touched = on_item, touched
        self._group: list[_Task] = []
        self._group_chunks = 0
        self.written: list[_Task] = []
        self._thread = WriterThread(self._write, name="assay-embed-writer")

    def put(self, task: _Task) -> None:
        """Queue one finished entry; a write goes out once enough are gathered."""
        self._group.append(task)
        self._group_chunks += len(task.chunks)
        if len(self._group) >= self._run.write_entries or self._group_chunks >= self._run.write_chunks:
            self._send()

    def _send(self) -> None:
        if self._group:
            group, self._group, self._group_chunks = self._group, [], 0
            self._thread.put(group)

    def close(self) -> None:
        try:
            if not self._thread.failed:
                self._send()
        finally:
            self._thread.close()

    def _write(self, group: list[_Task]) -> None:
        engine, collection = self._engine, self._collection
        with engine.connect() as conn:
            alive = existing_ids(conn, [t.entry_id for t in group])
        group = [t for t in group if t.entry_id in alive]  # deleted while being embedded: nothing to write
        if not group:
            return
        items = [store_sem.EntryChunks(entry_id=t.entry_id, work_key=t.key, status=t.status, error=t.error,
                                       chunks=list(t.chunks) if t.status == "ok" else [],
                                       vectors=np.concatenate(t.vectors) if t.status == "ok" and t.vectors
                                       else None)
                 for t in group]
        replaced = store_sem.replace_entries(engine, collection["id"], items)
        vectors.index_for(engine, collection).apply(replaced)
        if self._touched is not None:
            self._touched(collection)
        records: list[dict[str, Any]] = [
                   {"execution_id": self._execution_id, "entry_id": t.entry_id, "rule": self._rule,
                    "outcome_type": OUTCOME_TYPE, "work_key": _record_key(t.entry_id, collection["name"], t.key),
                    "status": "error" if t.status == "error" else "applied",
                    "detail": t.error if t.status == "error" else ("no text" if t.status == "empty" else None)}
                   for t in group]
        with engine.begin() as conn:
            # an entry deleted since takes its chunks with it; its record would break the FK
            alive = existing_ids(conn, [r["entry_id"] for r in records])
            store_plans.record_outcomes(conn, [r for r in records if r["entry_id"] in alive])
        for task in group:
            task.chunks, task.vectors = [], []  # written: the memory goes
            self.written.append(task)
            if self._on_item is not None:
                self._on_item(task.path)
        if self._run.on_write is not None:
            self._run.on_write(len(group))


# --- the executor ---------------------------------------------------------------------------------------------------


class EmbedExecutor(OutsideTransactionExecutor):
    """Outcome ``embed`` (collection, chunk_size, overlap, model, backend). Keeps its own work keys on the
    collection's entries (records_work False), so an entry embedded by any plan or by index_files is not redone by
    another with the same parameters."""

    type: ClassVar[str] = OUTCOME_TYPE
    records_work: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = 64  # a task run per 64 entries: progress and cancel points stay close

    def __init__(self, run: EmbedRun | None = None) -> None:
        self.run = run or DEFAULT_RUN
        self._lock = threading.Lock()
        self._touched: dict[int, tuple[Engine, dict[int, dict]]] = {}  # id(engine) -> (engine, {collection id: row})

    def _touch(self, engine: Engine, collection: dict) -> None:
        with self._lock:
            self._touched.setdefault(id(engine), (engine, {}))[1][collection["id"]] = collection

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: RunContext) -> BatchResult:
        return embed_rows(engine, rows, params=params_for(outcome, engine), rule=ctx.rule or OUTCOME_TYPE,
                          execution_id=ctx.execution_id, should_cancel=ctx.should_cancel, on_item=ctx.on_item,
                          run=self.run, touched=lambda c: self._touch(engine, c))

    def after_run(self, engine: Engine) -> None:
        """Save (atomically) the vector indexes this engine's executions wrote to."""
        save_touched(engine, self._take(engine))

    def _take(self, engine: Engine) -> list[dict]:
        with self._lock:
            _, touched = self._touched.pop(id(engine), (engine, {}))
        return list(touched.values())


def save_touched(engine: Engine, collections: Sequence[dict]) -> None:
    """Save the vector index of each collection (one that was dropped meanwhile is skipped)."""
    for collection in collections:
        current = store_sem.get_collection(engine, collection["name"])
        if current is None or current["id"] != collection["id"]:
            continue
        vectors.index_for(engine, current).save()


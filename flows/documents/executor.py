"""The ``extract_text`` outcome: the text of matched documents extracted and written to the full-text index.

The flow of one batch (``extract_rows``, shared by plan runs and anything else that extracts a list of entries):

1. Applicability. Only regular files whose name has a document format (``flows.documents.formats.format_of``) are
   extracted; an image of text only when OCR is on. The rest count as ``unchanged`` (nothing to do), never as errors:
   an ``extract_text`` rule that also matches photos is not a failing rule.
2. Work keys. A document's key is ``size:mtime:options.key()`` (``work_key``), stored on its ``documents`` row. An
   entry whose stored key equals its current key is ``skipped`` with no work, whether the earlier extraction
   succeeded or failed (the same bytes fail the same way; a changed file has a new key and is tried again).
3. The rest go to the extraction pool (``flows.documents.worker.run_extractions``) with no transaction open; results
   come back as files finish and are written in chunks (``store.documents.write_extracted_many``), bounded by a
   number of documents and of characters, so neither the batch nor many large documents are held at once. The
   writes run on a thread of their own (``flows.workers.WriterThread``), so the pool keeps extracting while SQLite
   indexes.
4. A document that could not be read (encrypted, truncated, binary with a text extension, too large, timed out) is
   written too (``documents.status = error`` with its reason, searches count it as failed) and reported as an
   outcome error of its entry ("FILTER_FAILED: encrypted PDF"), so the execution ends ``partial`` and plan-get
   names it; the batch goes on. Each written document also gets an outcome record (applied / error with the
   reason) under the execution, as the classifier's work does.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from typing import Any, Callable, ClassVar, Iterable, Iterator, Sequence

from sqlalchemy import select
from sqlalchemy.engine import Engine

from dsl.outcomes import OutcomeBase
from flows.core.outcomes import BatchResult, OutsideTransactionExecutor, RunContext
from flows.documents import settings as doc_settings
from flows.documents.formats import format_of
from flows.documents.model import METADATA_EXTRACTION_FAILED, Extracted, ExtractOptions
from flows.documents.worker import run_extractions
from flows.workers import WriterThread
from store import plans as store_plans
from store.documents import D, DocumentWrite, current_work_keys, write_extracted_many
from store.entries import existing_ids

log = logging.getLogger(__name__)

OUTCOME_TYPE = "extract_text"
WRITE_DOCUMENTS = 16  # documents per write at most
WRITE_CHARS = 4_000_000  # ... and about this many characters of text (a few large PDFs make a write on their own)

# (tasks of (entry id, absolute path), options, should_cancel) -> (entry id, Extracted) as files finish
ExtractFn = Callable[..., Iterator[tuple[int, Extracted]]]


def work_key(size: int, mtime: float, options: ExtractOptions) -> str:
    """The key of extracting a file in this state (size, mtime) with ``options``: equal keys mean nothing to redo.
    The one definition: the executor stores it with each document and compares it before extracting."""
    return f"{size}:{mtime}:{options.key()}"


def options_for(outcome: OutcomeBase | None) -> ExtractOptions:
    """The server's extraction settings (``flows.documents.settings``), with the outcome's ``ocr`` when it gives
    one."""
    options = doc_settings.current().extract_options()
    ocr = getattr(outcome, "ocr", None) if outcome is not None else None
    return options if ocr is None else replace(options, ocr=bool(ocr))


def applicable(row: Any, options: ExtractOptions) -> bool:
    """Whether ``row`` (an entry row) is something extract_text reads: a regular file of a document format (an image
    of text only with OCR on)."""
    if row["kind"] != "file":
        return False
    fmt = format_of(row["name"])
    if fmt is None:
        return False
    return fmt != "image" or options.ocr


def _default_extract(tasks: Iterable[tuple[int, str]], options: ExtractOptions, *,
                     should_cancel: Callable[[], bool]) -> Iterator[tuple[int, Extracted]]:
    return run_extractions(tasks, options, should_cancel=should_cancel)


@dataclass
class ExtractRun:
    """What extracts a batch: the function that runs the pool (the real one, or a fake in tests) and the size of
    each write."""

    extract: ExtractFn | None = None  # None: flows.documents.worker.run_extractions
    write_documents: int = WRITE_DOCUMENTS
    write_chars: int = WRITE_CHARS
    on_write: Callable[[int], None] | None = None  # called with the number of documents of each write (tests)


DEFAULT_RUN = ExtractRun()


@dataclass
class _Task:
    entry_id: int
    path: str
    size: int
    mtime: float
    key: str


def _record_key(entry_id: int, key: str) -> str:
    """The outcome record's work key for one document's extraction (unique per entry and state)."""
    return "extract_text:" + hashlib.sha256(f"{entry_id}|{key}".encode()).hexdigest()[:40]


def _chars(extracted: Extracted) -> int:
    return sum(len(p.text) for p in extracted.pages)


def _reason(extracted: Extracted) -> str:
    return f"{extracted.error_code}: {extracted.error or 'no reason given'}"


def write_chunk(engine: Engine, chunk: list[tuple[_Task, Extracted]], *, rule: str,
                execution_id: int | None) -> int:
    """Write one chunk of finished documents (``store.documents.write_extracted_many``: short transactions, the
    document row last), then their outcome records. Entries deleted while they were being extracted are dropped.
    Returns the number written."""
    with engine.connect() as conn:
        ids = [t.entry_id for t, _ in chunk]
        alive = existing_ids(conn, ids)
    kept = [(t, x) for t, x in chunk if t.entry_id in alive]
    if not kept:
        return 0
    write_extracted_many(engine, (DocumentWrite(entry_id=t.entry_id, source_size=t.size, source_mtime=t.mtime,
                                                work_key=t.key, extracted=x) for t, x in kept))
    records: list[dict[str, Any]] = [
        {"execution_id": execution_id, "entry_id": t.entry_id, "rule": rule, "outcome_type": OUTCOME_TYPE,
         "work_key": _record_key(t.entry_id, t.key), "status": "applied" if x.ok else "error",
         "detail": None if x.ok else _reason(x)} for t, x in kept]
    with engine.begin() as conn:
        # an entry deleted between the write and now takes its document with it; its record would break the FK
        alive = existing_ids(conn, [r["entry_id"] for r in records])
        store_plans.record_outcomes(conn, [r for r in records if r["entry_id"] in alive])
    return len(kept)


def extract_rows(engine: Engine, rows: Sequence[Any], *, options: ExtractOptions, rule: str = OUTCOME_TYPE,
                 execution_id: int | None = None, should_cancel: Callable[[], bool] = lambda: False,
                 on_item: Callable[[str], None] | None = None, run: ExtractRun | None = None) -> BatchResult:
    """Extract the documents among ``rows`` (entry rows) whose text is not current, and write them: see the module
    docstring. Never raises for a bad document; what finished is written even when the batch stops early."""
    run = run or DEFAULT_RUN
    result = BatchResult()
    wanted: list[_Task] = []
    for row in rows:
        if not applicable(row, options):
            result.unchanged += 1
            continue
        wanted.append(_Task(row["id"], row["path"], int(row["size"]), float(row["mtime"]),
                            work_key(int(row["size"]), float(row["mtime"]), options)))
    if not wanted:
        return result
    current = current_work_keys(engine, [t.entry_id for t in wanted])
    todo = {t.entry_id: t for t in wanted if current.get(t.entry_id) != t.key}
    result.skipped += len(wanted) - len(todo)
    if not todo:
        return result

    def write(chunk: list[tuple[_Task, Extracted]]) -> None:
        written = write_chunk(engine, chunk, rule=rule, execution_id=execution_id)
        if run.on_write is not None:
            run.on_write(written)

    # the writes run on a thread of their own, so the pool keeps extracting while SQLite indexes
    writer = WriterThread(write, name="assay-extract-writer")
    chunk: list[tuple[_Task, Extracted]] = []
    chunk_chars = 0
    extract = run.extract or _default_extract
    stream = extract(((t.entry_id, t.path) for t in todo.values()), options, should_cancel=should_cancel)
    try:
        for entry_id, extracted in stream:
            task = todo.get(entry_id)
            if task is None:
                log.warning("extraction returned a result for entry %s, which was not asked for", entry_id)
                continue
            _account(result, task, extracted)
            chunk.append((task, extracted))
            chunk_chars += _chars(extracted)
            if on_item is not None:
                on_item(task.path)
            if len(chunk) >= run.write_documents or chunk_chars >= run.write_chars:
                writer.put(chunk)
                chunk, chunk_chars = [], 0
    finally:
        try:
            if chunk:
                writer.put(chunk)  # what finished is kept even when the batch stops early
        finally:
            writer.close()  # waits for the writes; raises what a write raised
    return result


def ensure_extracted(engine: Engine, rows: Sequence[Any], *, options: ExtractOptions, rule: str = OUTCOME_TYPE,
                     execution_id: int | None = None, should_cancel: Callable[[], bool] = lambda: False
                     ) -> tuple[set[int], dict[int, str]]:
    """For outcomes that read entries' text (embed, label): extract those of ``rows`` whose text is missing or stale
    (``extract_rows`` skips the current ones), then return the ids whose stored extraction is of their present
    state (size, mtime, options) and, among those, id -> "CODE: reason" for the ones whose text could not be read
    (now or before, for the same bytes). An id missing from both was not extracted (the batch stopped early)."""
    current: set[int] = set()
    failed: dict[int, str] = {}
    if not rows:
        return current, failed
    extract_rows(engine, rows, options=options, rule=rule, execution_id=execution_id, should_cancel=should_cancel)
    expected = {r["id"]: work_key(int(r["size"]), float(r["mtime"]), options) for r in rows}
    ids = list(expected)
    with engine.connect() as conn:
        for i in range(0, len(ids), 500):
            for entry_id, key, status, code, error in conn.execute(
                    select(D.c.entry_id, D.c.work_key, D.c.status, D.c.error_code, D.c.error)
                    .where(D.c.entry_id.in_(ids[i:i + 500]))):
                if key != expected[entry_id]:
                    continue
                current.add(entry_id)
                if status == "error":
                    failed[entry_id] = f"{code or 'FILTER_FAILED'}: {error or 'no reason given'}"
    return current, failed


def _account(result: BatchResult, task: _Task, extracted: Extracted) -> None:
    if extracted.ok:
        result.applied += 1
        if extracted.meta_error:
            log.info("%s: text extracted, metadata not (%s: %s)", task.path, METADATA_EXTRACTION_FAILED,
                     extracted.meta_error)
        no_text = sum(1 for p in extracted.pages if p.no_text)
        if no_text:
            log.info("%s: %d page(s) without a text layer could not be read with OCR", task.path, no_text)
        return
    reason = _reason(extracted)
    log.info("%s: not extracted (%s)", task.path, reason)
    result.errors.append((task.entry_id, reason))
    result.failed_ids.add(task.entry_id)


class TextExtractor(OutsideTransactionExecutor):
    """Outcome ``extract_text`` (``ocr``: true | false, default the server's ASSAY_OCR). Keeps its own work keys on
    the documents rows (records_work False), so a document extracted by any plan is not redone by another."""

    type: ClassVar[str] = OUTCOME_TYPE
    records_work: ClassVar[bool] = False
    batch_size: ClassVar[int | None] = 256  # a task run per 256 entries: fewer pool drains between batches

    def __init__(self, run: ExtractRun | None = None) -> None:
        self.run = run or DEFAULT_RUN

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: RunContext) -> BatchResult:
        return extract_rows(engine, rows, options=options_for(outcome), rule=ctx.rule or OUTCOME_TYPE,
                            execution_id=ctx.execution_id, should_cancel=ctx.should_cancel, on_item=ctx.on_item,
                            run=self.run)

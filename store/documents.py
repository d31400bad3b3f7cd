"""The store of extracted text: one ``documents`` row per extracted entry and its text in ``document_segments``
(runs of whole lines of one page, at most about SEGMENT_CHARS characters each). The text engine (store.textindex)
indexes it, following the ``document_changes`` log the documents table's triggers append to.

Writes are short transactions with the documents row written last, so a search (which joins ``documents``) never
sees a half-written document. Reads stream segments in order and never hold a whole document.

The store does not import ``flows``: callers pass what the documents capability decides (which extensions are
documents, the extraction result objects, which are read by attribute: :class:`ExtractedText`, :class:`PageText`).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any, Generator, Iterable, Iterator, Protocol, Sequence

from sqlalchemy import ColumnElement, and_, delete, false, func, insert, or_, select
from sqlalchemy.engine import Connection, Engine

from store.entries import existing_ids, subtree_clause
from store.models import Document, DocumentSegment, Entry

log = logging.getLogger(__name__)

D = Document.__table__
S = DocumentSegment.__table__
E = Entry.__table__

SEGMENT_CHARS = 32_000  # the same as flows.documents.model.SEGMENT_CHARS (a test keeps them equal)
TX_SEGMENTS = 200  # segments written per transaction at most (a transaction holds the writer lock briefly)
TX_CHARS = 4_000_000  # and characters of text per transaction at most
_CHUNK = 500  # ids per IN (...) list
_READ_BATCH = 128  # segments fetched per read of a stream


class PageText(Protocol):
    """One page of an extraction result, as the store reads it (``flows.documents.model.Page`` is one): its
    ``number`` (1-based), ``text`` (its lines joined by "\\n"), whether the text came from OCR, whether it had none."""

    @property
    def number(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def ocr(self) -> bool: ...
    @property
    def no_text(self) -> bool: ...


class ExtractedText(Protocol):
    """An extraction result, as the store reads it (``flows.documents.model.Extracted`` is one); ``toc`` holds
    dataclasses or dicts, one table-of-contents entry each."""

    @property
    def format(self) -> str: ...
    @property
    def pages(self) -> Sequence[PageText]: ...
    @property
    def total_pages(self) -> int: ...
    @property
    def toc(self) -> Sequence[Any]: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def encoding(self) -> str | None: ...
    @property
    def error_code(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def meta_error(self) -> str | None: ...
    @property
    def elapsed(self) -> float: ...


@dataclass
class DocumentWrite:
    """One extraction result to store for an entry, with the file's identity when it was extracted (a later
    size or mtime that differs makes it stale) and the work key it was made for."""

    entry_id: int
    source_size: int
    source_mtime: float
    work_key: str
    extracted: ExtractedText


@dataclass
class SegmentRow:
    entry_id: int
    seq: int
    page: int
    line_start: int
    line_count: int
    ocr: bool
    text: str


# --- segmenting ---------------------------------------------------------------------------------------------------


def segment_pages(entry_id: int, pages: Iterable[Any], *, segment_chars: int = SEGMENT_CHARS
                  ) -> Iterator[SegmentRow]:
    """The segments of a document's pages: each page's lines (``page.text.split("\\n")``) grouped into runs of whole
    lines of at most ``segment_chars`` characters (newlines included; a longer single line is a segment of its
    own). Line numbers run across pages from 1; every page gives at least one segment (an empty page is one empty
    line), so reading a page back never finds it missing. The runs are cut at the last line break that keeps them
    within the limit (``str.rfind``), so no line becomes a string of its own."""
    seq, line_no = 0, 1
    for page in pages:
        text = page.text
        pos, end = 0, len(text)
        while True:
            if end - pos <= segment_chars:
                cut = end
            else:
                cut = text.rfind("\n", pos, pos + segment_chars + 1)
                if cut == -1:  # the first line is longer than a segment: it is one on its own
                    cut = text.find("\n", pos)
                    cut = end if cut == -1 else cut
            piece = text[pos:cut]
            count = piece.count("\n") + 1
            yield SegmentRow(entry_id, seq, page.number, line_no, count, bool(page.ocr), piece)
            seq, line_no = seq + 1, line_no + count
            if cut >= end:
                break
            pos = cut + 1


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _document_row(item: DocumentWrite, *, lines: int, chars: int) -> dict[str, Any]:
    ex = item.extracted
    pages = list(ex.pages)
    error_code, error, status = ex.error_code, ex.error, "ok"
    if error_code:
        status = "error"
    elif ex.meta_error:  # the text is there; only the metadata failed: searchable, with the reason kept
        error_code, error = "METADATA_EXTRACTION_FAILED", ex.meta_error
    toc = [asdict(t) if is_dataclass(t) and not isinstance(t, type) else dict(t) for t in ex.toc]
    return {
        "entry_id": item.entry_id, "format": ex.format or "unknown", "status": status, "error_code": error_code,
        "error": error, "pages": (ex.total_pages or len(pages)) if status == "ok" else 0, "lines": lines,
        "chars": chars, "ocr_pages": sum(1 for p in pages if p.ocr),
        "no_text_pages": sum(1 for p in pages if p.no_text), "encoding": ex.encoding, "toc_json": _json(toc),
        "meta_json": _json(ex.meta or {}), "source_size": int(item.source_size),
        "source_mtime": float(item.source_mtime), "work_key": item.work_key, "elapsed": float(ex.elapsed or 0.0),
        "extracted_at": time.time(),
    }


# --- writes -------------------------------------------------------------------------------------------------------


def _delete_rows(conn: Connection, entry_ids: Sequence[int]) -> None:
    """Delete the documents rows first (the document leaves searches at once), then the segments (one DELETE per
    chunk)."""
    ids = list(entry_ids)
    for i in range(0, len(ids), _CHUNK):
        conn.execute(delete(D).where(D.c.entry_id.in_(ids[i:i + _CHUNK])))
        conn.execute(delete(S).where(S.c.entry_id.in_(ids[i:i + _CHUNK])))


def write_extracted_many(engine: Engine, items: Iterable[DocumentWrite], *,
                         segment_chars: int = SEGMENT_CHARS) -> int:
    """Store each extraction result, replacing what the entry had: its old row and segments are deleted, the new
    segments inserted in set-based batches, and the documents row inserted last (in the transaction of the
    document's last segments), so a search never sees a half-written document. Small documents share a
    transaction; a large one spans several, each of at most TX_SEGMENTS segments / TX_CHARS characters. An entry
    removed meanwhile is skipped. Returns how many documents were written."""
    written = 0
    # (item, its segments in this transaction, its documents row when this is its last part, first part?)
    batch: list[tuple[DocumentWrite, list[SegmentRow], dict[str, Any] | None, bool]] = []
    queued: set[int] = set()  # entries with a part in ``batch``
    seg_count = chars_count = 0

    def flush() -> None:
        nonlocal batch, seg_count, chars_count, written
        if not batch:
            return
        with engine.begin() as conn:
            live = existing_ids(conn, list({item.entry_id for item, _, _, _ in batch}))
            _delete_rows(conn, [item.entry_id for item, _, _, first in batch if first and item.entry_id in live])
            rows = [{"entry_id": s.entry_id, "seq": s.seq, "page": s.page, "line_start": s.line_start,
                     "line_count": s.line_count, "ocr": s.ocr, "text": s.text}
                    for item, segs, _, _ in batch if item.entry_id in live for s in segs]
            if rows:
                conn.execute(insert(S), rows)
            docs = [doc for item, _, doc, _ in batch if doc is not None and item.entry_id in live]
            if docs:
                conn.execute(insert(D), docs)
            written += len(docs)
        gone = {item.entry_id for item, _, _, _ in batch} - live
        if gone:
            log.info("documents of %d entries not stored: the entries were removed meanwhile", len(gone))
        batch, seg_count, chars_count = [], 0, 0
        queued.clear()

    for item in items:
        if item.entry_id in queued:
            flush()  # the same entry twice: the later result replaces the earlier one, in a transaction of its own
        ex = item.extracted
        if ex.error_code:
            batch.append((item, [], _document_row(item, lines=0, chars=0), True))
            seg_count += 1
        else:
            lines = chars = 0
            pending: list[SegmentRow] = []
            first = True
            for seg in segment_pages(item.entry_id, ex.pages, segment_chars=segment_chars):
                pending.append(seg)
                lines += seg.line_count
                chars += len(seg.text) - (seg.line_count - 1)  # characters of the lines, newlines not counted
                seg_count += 1
                chars_count += len(seg.text)
                if seg_count >= TX_SEGMENTS or chars_count >= TX_CHARS:
                    batch.append((item, pending, None, first))
                    pending, first = [], False
                    flush()
            batch.append((item, pending, _document_row(item, lines=lines, chars=chars), first))
        queued.add(item.entry_id)
        if seg_count >= TX_SEGMENTS or chars_count >= TX_CHARS:
            flush()
    flush()
    return written


def delete_documents(engine: Engine, entry_ids: Iterable[int]) -> int:
    """Forget the extracted text of these entries (row and segments), in short transactions; returns how many
    documents rows there were."""
    ids = list(entry_ids)
    removed = 0
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i:i + _CHUNK]
        with engine.begin() as conn:
            removed += conn.execute(delete(D).where(D.c.entry_id.in_(chunk))).rowcount or 0
            conn.execute(delete(S).where(S.c.entry_id.in_(chunk)))
    return removed


# --- reads --------------------------------------------------------------------------------------------------------


def document_row(engine: Engine, entry_id: int) -> dict[str, Any] | None:
    """The documents row of an entry with ``toc`` and ``meta`` parsed and the entry's ``path``, ``size``,
    ``mtime``; ``stale`` is True when the file changed since it was extracted. None when there is no row."""
    with engine.connect() as conn:
        row = conn.execute(select(D, E.c.path, E.c.size, E.c.mtime).join(E, E.c.id == D.c.entry_id)
                           .where(D.c.entry_id == entry_id)).mappings().first()
    if row is None:
        return None
    out = {k: v for k, v in row.items() if k not in ("toc_json", "meta_json")}
    out["toc"] = json.loads(row["toc_json"] or "[]")
    out["meta"] = json.loads(row["meta_json"] or "{}")
    out["stale"] = row["size"] != row["source_size"] or row["mtime"] != row["source_mtime"]
    return out


def current_work_keys(engine: Engine, entry_ids: Iterable[int]) -> dict[int, str]:
    """entry id -> the work key its stored text was made for (entries without a documents row are left out)."""
    ids = list(entry_ids)
    out: dict[int, str] = {}
    with engine.connect() as conn:
        for i in range(0, len(ids), _CHUNK):
            out.update((eid, key) for eid, key in conn.execute(
                select(D.c.entry_id, D.c.work_key).where(D.c.entry_id.in_(ids[i:i + _CHUNK]))))
    return out


def _segments(engine: Engine, entry_id: int, *, pages: list[int] | None = None, line_from: int | None = None,
              line_to: int | None = None) -> Iterator[Any]:
    """The segments of one entry in order, fetched in small keyset batches (one short read each)."""
    after = -1
    while True:
        q = (select(S.c.seq, S.c.page, S.c.line_start, S.c.line_count, S.c.ocr, S.c.text)
             .where(S.c.entry_id == entry_id, S.c.seq > after).order_by(S.c.seq).limit(_READ_BATCH))
        if pages is not None:
            q = q.where(S.c.page.in_(pages))
        if line_from is not None:
            q = q.where(S.c.line_start + S.c.line_count > line_from)
        if line_to is not None:
            q = q.where(S.c.line_start <= line_to)
        with engine.connect() as conn:
            rows = conn.execute(q).all()
        yield from rows
        if len(rows) < _READ_BATCH:
            return
        after = rows[-1].seq


def read_pages(engine: Engine, entry_id: int,
               pages: list[int] | None = None) -> Generator[tuple[int, str, bool], None, None]:
    """(page, text, ocr) of the document's pages in document order, each page's segments joined back (one page
    at a time in memory); ``pages`` picks some (None: all). A page number the document does not have yields
    nothing: the caller checks ranges against ``documents.pages``."""
    if pages is not None and not pages:
        return
    current: int | None = None
    parts: list[str] = []
    ocr = False
    for seg in _segments(engine, entry_id, pages=sorted(set(pages)) if pages is not None else None):
        if seg.page != current:
            if current is not None:
                yield current, "\n".join(parts), ocr
            current, parts, ocr = seg.page, [], bool(seg.ocr)
        parts.append(seg.text)
    if current is not None:
        yield current, "\n".join(parts), ocr


def entry_lines(engine: Engine, entry_id: int, *, line_from: int = 1,
                line_to: int | None = None) -> Generator[tuple[int, str, int, bool], None, None]:
    """(line number, text, page, ocr) of the document's lines in order (from ``line_from`` to ``line_to``
    inclusive, None: to the end), streamed segment by segment."""
    for seg in _segments(engine, entry_id, line_from=line_from, line_to=line_to):
        for i, text in enumerate(seg.text.split("\n")):
            number = seg.line_start + i
            if number < line_from or (line_to is not None and number > line_to):
                continue
            yield number, text, seg.page, bool(seg.ocr)


def scope_clause(under: Sequence[str] | None, entry_id: int | None) -> ColumnElement[bool] | None:
    """Entries in scope: one entry, or those under any of the absolute directory paths ``under`` (None: all)."""
    clauses: list[ColumnElement[bool]] = []
    if entry_id is not None:
        clauses.append(E.c.id == entry_id)
    if under is not None:
        clauses.append(or_(*[subtree_clause(d.rstrip("/") or "/") for d in under]) if under else false())
    return and_(*clauses) if clauses else None


def _not_hidden(under: Sequence[str] | None) -> ColumnElement[bool] | None:
    """Entries with no hidden component (a name starting with ".") below the folder of ``under`` holding them:
    the built-in plan does not extract those, so they are never waited for."""
    if not under:
        return None
    return or_(*[and_(subtree_clause(d.rstrip("/") or "/"),
                      ~func.substr(E.c.path, len(d.rstrip("/")) + 1).contains("/.", autoescape=True))
                 for d in under])


def pending_count(engine: Engine, *, under: Sequence[str] | None = None, entry_id: int | None = None,
                  extensions: Iterable[str]) -> tuple[int, int]:
    """(pending, failed) in scope. Pending: files whose stored text is missing or stale — a file with one of
    ``extensions`` (the caller passes flows.documents.formats.EXTENSIONS), not under a hidden folder below its
    scope folder, and no documents row, or any entry whose documents row was made for another size / mtime.
    Failed: documents rows with status error that are current (their reason is in the row)."""
    exts = sorted({e.lower() for e in extensions})
    stale = or_(D.c.source_size != E.c.size, D.c.source_mtime != E.c.mtime)
    scope = scope_clause(under, entry_id)
    missing = (select(func.count()).select_from(E.outerjoin(D, D.c.entry_id == E.c.id))
               .where(E.c.kind == "file", E.c.extension.in_(exts), D.c.entry_id.is_(None)))
    changed = select(func.count()).select_from(E.join(D, D.c.entry_id == E.c.id)).where(stale)
    failed = (select(func.count()).select_from(E.join(D, D.c.entry_id == E.c.id))
              .where(D.c.status == "error", ~stale))
    if scope is not None:
        missing, changed, failed = missing.where(scope), changed.where(scope), failed.where(scope)
    visible = _not_hidden(under) if entry_id is None else None
    if visible is not None:
        missing = missing.where(visible)
    with engine.connect() as conn:
        pending = (conn.execute(missing).scalar_one() if exts else 0) + conn.execute(changed).scalar_one()
        return pending, conn.execute(failed).scalar_one()


def searchable_count(engine: Engine, entry_ids: Iterable[int], *, under: Sequence[str] | None = None,
                     entry_id: int | None = None) -> int:
    """How many of ``entry_ids`` in scope have searchable text (documents status ok): the text index counts those
    it has not indexed yet as pending."""
    ids = sorted(set(entry_ids))
    if entry_id is not None:
        ids = [entry_id] if entry_id in ids else []
    scope = scope_clause(under, entry_id)
    found = 0
    with engine.connect() as conn:
        for i in range(0, len(ids), _CHUNK):
            q = (select(func.count()).select_from(E.join(D, D.c.entry_id == E.c.id))
                 .where(D.c.status == "ok", E.c.id.in_(ids[i:i + _CHUNK])))
            if scope is not None:
                q = q.where(scope)
            found += conn.execute(q).scalar_one()
    return found


__all__ = ["DocumentWrite", "ExtractedText", "PageText", "SEGMENT_CHARS", "SegmentRow", "current_work_keys",
           "delete_documents", "document_row", "entry_lines", "pending_count", "read_pages", "scope_clause",
           "searchable_count", "segment_pages", "write_extracted_many"]

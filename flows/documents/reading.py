"""Reading a document (reference 001's ``read_document``): the document a caller names, located inside the roots, and
its text: the extracted text in the store when it is current, and otherwise the file extracted now (in the
extraction pool, with its timeout), stored when the file index knows the file, so the next call and the searches
have it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from sqlalchemy import select
from sqlalchemy.engine import Engine

from flows.documents.executor import work_key
from flows.documents.formats import format_of
from flows.documents.model import FILTER_FAILED, PAGED_FORMATS, UNSUPPORTED_FORMAT, ExtractOptions, Extracted
from flows.documents.paths import TOP, DocumentPaths
from flows.documents.worker import extract_now
from store.documents import DocumentWrite, document_row, entry_lines, read_pages, write_extracted_many
from store.errors import DocumentError
from store.models import Entry

E = Entry.__table__

SUPPORTED = "PDF, EPUB, XPS, FB2, MOBI, CBZ, Markdown, plain text, source code, HTML, DOCX, images of text (OCR)"


@dataclass
class Located:
    """A document a caller named: its absolute path, shown path, file state, format and entry id (None when the
    file index does not know it)."""

    given: str
    path: str
    shown: str
    size: int
    mtime: float
    format: str
    entry_id: int | None
    entry_size: int | None = None
    entry_mtime: float | None = None


def locate(engine: Engine, paths: DocumentPaths, path: str) -> Located:
    """The document ``path`` names, or DocumentError: PATH_TRAVERSAL_DETECTED / SYMLINK_NOT_ALLOWED (from
    ``paths``), DOCUMENT_NOT_FOUND (missing, or a folder), UNSUPPORTED_FORMAT (not a document format)."""
    details = {"path": path}
    target = paths.resolve(path, field="path", not_found="DOCUMENT_NOT_FOUND")
    if target == TOP:
        raise DocumentError("DOCUMENT_NOT_FOUND", "an empty path names the top of the roots, not a document; "
                            "find_document finds documents by name", field="path", details=details)
    try:
        st = os.stat(target)
    except OSError:
        raise DocumentError("DOCUMENT_NOT_FOUND", f"Document not found: {path}; find_document finds documents by "
                            "name, list_collections browses the folders", field="path", details=details) from None
    if stat.S_ISDIR(st.st_mode):
        raise DocumentError("DOCUMENT_NOT_FOUND", f"{path} is a collection (folder), not a document; "
                            "list_collections lists what is in it", field="path", details=details)
    name = os.path.basename(target)
    fmt = format_of(name)
    if fmt is None or not stat.S_ISREG(st.st_mode):
        what = "not a regular file" if fmt is not None else "not a document format"
        raise DocumentError(UNSUPPORTED_FORMAT, f"{path}: {what}; documents are {SUPPORTED}", field="path",
                            details=details)
    with engine.connect() as conn:
        row = conn.execute(select(E.c.id, E.c.size, E.c.mtime)
                           .where(E.c.path == target, E.c.kind == "file")).first()
    return Located(given=path, path=target, shown=paths.display(target), size=st.st_size, mtime=st.st_mtime,
                   format=fmt, entry_id=row.id if row else None, entry_size=row.size if row else None,
                   entry_mtime=row.mtime if row else None)


@dataclass
class Text:
    """A located document's text: the stored row (``row``) when current, else a fresh extraction (``extracted``);
    ``status``: indexed | failed (current in the store) | pending (read now, the store will catch up) |
    not_indexed (the file index does not know the file)."""

    located: Located
    status: str
    row: dict[str, Any] | None = None
    extracted: Extracted | None = None

    @property
    def fresh(self) -> Extracted:
        """The text as read now, when the store had none current (one of ``row`` and ``extracted`` is set)."""
        if self.extracted is None:
            raise ValueError("this document's text came from the store (row)")
        return self.extracted

    @property
    def ok(self) -> bool:
        return (self.row["status"] == "ok") if self.row is not None else self.fresh.ok

    @property
    def error_code(self) -> str | None:
        if self.row is not None:
            return None if self.row["status"] == "ok" else self.row["error_code"]
        return self.fresh.error_code

    @property
    def error(self) -> str | None:
        return self.row["error"] if self.row is not None else self.fresh.error

    @property
    def total_pages(self) -> int:
        if self.row is not None:
            return int(self.row["pages"])
        return self.fresh.total_pages or len(self.fresh.pages)


def document_text(engine: Engine, located: Located, options: ExtractOptions) -> Text:
    """The stored text of ``located`` if it was made for the file as it is now with these options; otherwise the
    file extracted now (``flows.documents.worker.extract_now``: the pool, its timeout and size limit), stored
    when the file index's record of the file matches the file (else the plan's next pass stores it)."""
    key = work_key(located.size, located.mtime, options)
    if located.entry_id is not None:
        row = document_row(engine, located.entry_id)
        if row is not None and row["work_key"] == key:
            return Text(located, "indexed" if row["status"] == "ok" else "failed", row=row)
    extracted = extract_now(located.path, options)
    if located.entry_id is None:
        return Text(located, "not_indexed", extracted=extracted)
    if located.entry_size == located.size and located.entry_mtime == located.mtime:
        write_extracted_many(engine, [DocumentWrite(entry_id=located.entry_id, source_size=located.size,
                                                    source_mtime=located.mtime, work_key=key,
                                                    extracted=extracted)])
        return Text(located, "indexed" if extracted.ok else "failed", extracted=extracted)
    return Text(located, "pending", extracted=extracted)


def refuse_failed(text: Text) -> None:
    """DocumentError UNSUPPORTED_FORMAT or FILTER_FAILED when the document could not be read; nothing otherwise."""
    code = text.error_code
    if code is None:
        return
    code = code if code in (UNSUPPORTED_FORMAT, FILTER_FAILED) else FILTER_FAILED
    what = "is not in a format that can be read" if code == UNSUPPORTED_FORMAT else "could not be read"
    raise DocumentError(code, f"{text.located.given} {what}: {text.error or 'no reason given'}", field="path",
                        details={"path": text.located.given})


def _lines_of(engine: Engine, text: Text, wanted: list[int] | None) -> Iterator[tuple[int, str, bool, bool]]:
    """(page, line, ocr, page_has_no_text) of the wanted pages (None: all) in order. From the store the whole
    document streams line by line (a long one-page text file is never held whole); chosen pages come a page at a
    time."""
    entry_id = text.located.entry_id
    if text.row is not None and entry_id is not None:  # a stored text belongs to an indexed entry
        maybe_empty = int(text.row.get("no_text_pages") or 0) > 0
        if wanted is None:
            for _, line, page, ocr in entry_lines(engine, entry_id):
                yield page, line, ocr, maybe_empty and not ocr
            return
        for number, body, ocr in read_pages(engine, entry_id, wanted):
            for line in body.split("\n"):
                yield number, line, ocr, maybe_empty and not ocr
        return
    keep = set(wanted) if wanted is not None else None
    for part in text.fresh.pages:
        if keep is None or part.number in keep:
            for line in part.text.split("\n"):
                yield part.number, line, part.ocr, part.no_text


class _Content:
    """The text read_document returns, built line by line up to ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size, self.truncated = limit, 0, False
        self.parts: list[str] = []

    def add(self, piece: str) -> bool:
        """Append ``piece``, or as much of it as fits (then ``truncated``); False once full."""
        room = self.limit - self.size
        if len(piece) > room:
            self.parts.append(piece[:room])
            self.size, self.truncated = self.limit, True
            return False
        self.parts.append(piece)
        self.size += len(piece)
        return True

    @property
    def full(self) -> bool:
        return self.size >= self.limit

    def text(self) -> str:
        return "".join(self.parts)


def _assemble(lines: Iterable[tuple[int, str, bool, bool]], limit: int, paged: bool
              ) -> tuple[str, bool, list[int], list[int], list[int]]:
    """(content, truncated, pages read, pages read with OCR, pages without text) from ``_lines_of``: the lines
    joined with "\\n", pages apart by a blank line and (paged formats) a ``--- Page N ---`` line, cut at ``limit``
    characters. A page counts as without text when all its lines are blank and the extraction said so."""
    content = _Content(limit)
    pages_read: list[int] = []
    ocr_pages: list[int] = []
    no_text: list[int] = []
    current: int | None = None
    blank = flagged = False
    for number, line, ocr, maybe_no_text in lines:
        if number != current:
            if current is not None and blank and flagged:
                no_text.append(current)
            current = None
            if content.full:  # more text follows a full content
                content.truncated = True
                break
            current, blank, flagged = number, True, maybe_no_text
            pages_read.append(number)
            if ocr:
                ocr_pages.append(number)
            piece = ("\n\n" if content.size else "") + (f"--- Page {number} ---\n\n" if paged else "") + line
        else:
            piece = "\n" + line
        blank = blank and not line.strip()
        if not content.add(piece):
            current = None  # a page cut short is not judged
            break
    if current is not None and blank and flagged:
        no_text.append(current)
    return content.text(), content.truncated, pages_read, ocr_pages, no_text


def read_document(engine: Engine, paths: DocumentPaths, path: str, pages: list[int] | None = None, *,
                  max_chars: int, options: ExtractOptions) -> dict[str, Any]:
    """The text of a document, or of some of its pages (1-based; ignored for formats without pages), with
    ``--- Page N ---`` separators for paged formats, at most ``max_chars`` characters (``truncated``), and which
    pages were read with OCR or had no text at all."""
    located = locate(engine, paths, path)
    text = document_text(engine, located, options)
    refuse_failed(text)
    total = max(text.total_pages, 1)
    paged = located.format in PAGED_FORMATS
    wanted: list[int] | None = None
    if paged and pages:
        wanted = sorted(set(pages))
        bad = [p for p in wanted if p < 1 or p > total]
        if bad:
            raise DocumentError("PAGE_OUT_OF_RANGE",
                                f"page {bad[0]} is out of range: {path} has {total} page{'s' * (total != 1)} "
                                f"(1-{total})", field="pages",
                                details={"path": path, "page": bad[0], "total_pages": total})
    content, truncated, pages_read, ocr_pages, no_text = _assemble(_lines_of(engine, text, wanted), max_chars,
                                                                   paged)
    out: dict[str, Any] = {"path": located.shown, "content": content, "pages_read": pages_read,
                           "total_pages": total, "format": located.format, "truncated": truncated,
                           "char_count": len(content)}
    if ocr_pages:
        out["ocr_pages"] = ocr_pages
    if no_text:
        out["no_text_pages"] = no_text
    encoding = text.row.get("encoding") if text.row is not None else text.fresh.encoding
    if encoding:
        out["encoding"] = encoding
    notes = []
    if truncated:
        notes.append(f"content stops at max_document_read_chars ({max_chars} characters)"
                     + ("; read further with pages=[...]" if paged else ""))
    if no_text:
        notes.append(f"page(s) {', '.join(map(str, no_text))} have no text layer and OCR could not read them "
                     "(is tesseract-ocr installed? ASSAY_OCR=on?)")
    if notes:
        out["note"] = "; ".join(notes)
    return out

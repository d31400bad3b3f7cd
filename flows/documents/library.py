"""The document library of reference 001 as plain functions (the MCP tools in mcp_server/tools/documents.py are thin
wrappers): browse folders (``list_collections``), find documents by name (``find_document``), read their text
(``read_document``) and describe them (``get_document_info``).

Paths in and out are the tools' form (``flows.documents.paths.DocumentPaths``: relative to the root holding them).
Browsing reads the filesystem, so it is current before any indexing; finding by name reads the file index
(``entries``); reading and describing use the extracted text in the store when it is current, and otherwise extract
the file now (in the extraction pool, with its timeout) and store the result when the file index knows the file, so
the next call and the searches have it.
"""

from __future__ import annotations

import heapq
import logging
import os
import re
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Engine

from flows.documents.formats import EXTENSIONS, IMAGES, format_of
from flows.documents.model import (FILTER_FAILED, METADATA_EXTRACTION_FAILED, PAGED_FORMATS, UNSUPPORTED_FORMAT,
                                   ExtractOptions, Extracted)
from flows.documents.paths import TOP, DocumentPaths
from store.entries import subtree_clause
from store.errors import DocumentError, InvalidInput
from store.fold import fold
from store.models import Entry

log = logging.getLogger(__name__)

E = Entry.__table__

SUPPORTED = "PDF, EPUB, XPS, FB2, MOBI, CBZ, Markdown, plain text, source code, HTML, DOCX, images of text (OCR)"


def iso(ts: float) -> str:
    """A modification time as reference 001 shows it: ISO 8601 to the second, in UTC (``Z``)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def size_human(size: int) -> str:
    """``2457600`` -> ``"2.3 MB"`` (powers of 1024, one decimal from KB up)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _hidden(name: str) -> bool:
    return name.startswith(".")


# --- list_collections ---------------------------------------------------------------------------------------------


def _count_children(path: str, paths: DocumentPaths) -> tuple[int, int]:
    """(documents, subfolders) directly in the folder ``path``, hidden entries skipped; (0, 0) if unreadable."""
    documents = folders = 0
    try:
        with os.scandir(path) as it:
            for item in it:
                if _hidden(item.name):
                    continue
                kind = _kind(item, paths)
                if kind == "dir":
                    folders += 1
                elif kind == "file" and format_of(item.name) is not None:
                    documents += 1
    except OSError:
        pass
    return documents, folders


def _kind(item: os.DirEntry, paths: DocumentPaths) -> str | None:
    """"dir", "file" or None (something else, or a symlink the server does not follow / that leads out)."""
    try:
        if item.is_symlink():
            if not paths.allow_symlinks:
                return None
            target = os.path.realpath(item.path)
            if paths.root_of(target) is None:
                return None
        if item.is_dir():
            return "dir"
        if item.is_file():
            return "file"
    except OSError:
        return None
    return None


def list_collections(paths: DocumentPaths, path: str = "") -> dict[str, Any]:
    """The folder ``path`` (``""``: the root, or the roots when there are several): its subfolders (collections)
    with how many documents and subfolders each holds directly, and its documents (files whose name has a
    document format) with size and modification time; hidden entries are skipped. Read from the filesystem, so
    it is current even before anything is indexed."""
    target = paths.resolve(path, field="path", not_found="COLLECTION_NOT_FOUND")
    shown = path.strip()
    if target == TOP:
        collections = []
        for name, root in paths.names.items():
            docs, subs = _count_children(root, paths)
            collections.append({"name": name, "path": name, "document_count": docs, "subcollection_count": subs})
        return {"current_path": "", "collections": collections, "documents": []}
    try:
        st = os.stat(target)
    except OSError:
        raise DocumentError("COLLECTION_NOT_FOUND", f"Collection not found: {shown!r}; list_collections with an "
                            "empty path lists the top-level collections", field="path",
                            details={"path": path}) from None
    if not stat.S_ISDIR(st.st_mode):
        raise DocumentError("NOT_A_DIRECTORY", f"{shown!r} is a file, not a collection; read_document or "
                            "get_document_info read a document", field="path", details={"path": path})
    collections, documents = [], []
    try:
        with os.scandir(target) as it:
            items = sorted((i for i in it if not _hidden(i.name)), key=lambda i: (i.name.lower(), i.name))
    except OSError as exc:
        raise DocumentError("COLLECTION_NOT_FOUND", f"Collection {shown!r} cannot be read: {exc.strerror}",
                            field="path", details={"path": path}) from None
    for item in items:
        kind = _kind(item, paths)
        full = os.path.realpath(item.path) if item.is_symlink() else item.path
        if kind == "dir":
            docs, subs = _count_children(full, paths)
            collections.append({"name": item.name, "path": paths.display(item.path), "document_count": docs,
                                "subcollection_count": subs})
        elif kind == "file" and format_of(item.name) is not None:
            try:
                info = os.stat(full)
            except OSError:
                continue
            documents.append({"name": item.name, "path": paths.display(item.path), "size_bytes": info.st_size,
                              "modified": iso(info.st_mtime)})
    return {"current_path": paths.display(target), "collections": collections, "documents": documents}


# --- find_document ------------------------------------------------------------------------------------------------


def name_score(query: str, name: str) -> float | None:
    """How well ``name`` matches ``query`` (both folded): 1.0 exact; 0.9 the name without its extension; prefix
    0.5-0.9 and contains 0.1-0.5, each higher the more of the name the query covers; None: no match."""
    if name == query:
        return 1.0
    dot = name.rfind(".")
    if dot > 0 and name[:dot] == query:
        return 0.9
    position = name.find(query)
    if position < 0:
        return None
    coverage = len(query) / len(name)
    if position == 0:
        return round(0.5 + 0.39 * coverage, 3)
    return round(0.1 + 0.39 * coverage, 3)


def _name_clause(engine: Engine, folded: str):
    """The name contains ``folded``, folded as the store folds (SQLite: ``assay_fold``; PostgreSQL: ``lower``);
    a narrowing only: each candidate is checked again in Python."""
    lowered = func.assay_fold(E.c.name) if engine.dialect.name == "sqlite" else func.lower(E.c.name)
    return lowered.contains(folded, autoescape=True)


def find_document(engine: Engine, paths: DocumentPaths, query: str, limit: int = 10) -> dict[str, Any]:
    """Documents under the roots whose file name contains ``query`` (case-insensitive), best first: exact name,
    then prefix, then contains (see ``name_score``); ``total_found`` counts them all. Reads the file index, so
    it finds what has been indexed (the built-in documents plan indexes the roots)."""
    folded = fold(query.strip()) if isinstance(query, str) else ""
    if not folded:
        raise InvalidInput("query must name a document (a file name or part of one), e.g. \"tutorial.pdf\"",
                           field="query")
    extensions = sorted(set(EXTENSIONS) | set(IMAGES) | {""})
    q = (select(E.c.path, E.c.name, E.c.size, E.c.mtime)
         .where(E.c.kind == "file", E.c.extension.in_(extensions), _name_clause(engine, folded),
                or_(*[subtree_clause(root) for root in paths.roots.paths])))
    total = 0

    def candidates() -> Iterator[tuple[float, str, str, int, float]]:
        nonlocal total
        with engine.connect() as conn:
            for path, name, size, mtime in conn.execution_options(yield_per=500).execute(q):
                if format_of(name) is None:
                    continue
                root = paths.root_of(path)
                if root is None or any(_hidden(part) for part in path[len(root):].split("/")):
                    continue
                score = name_score(folded, fold(name))
                if score is None:
                    continue
                total += 1
                yield score, name, path, size, mtime

    best = heapq.nsmallest(limit, candidates(), key=lambda c: (-c[0], len(c[1]), c[1].lower(), c[2]))
    matches = [{"name": name, "path": paths.display(path), "collection": paths.collection_of(path),
                "size_bytes": size, "modified": iso(mtime), "score": score}
               for score, name, path, size, mtime in best]
    return {"matches": matches, "total_found": total}


# --- reading a document: the stored text when current, else extracted now ----------------------------------------


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
    def ok(self) -> bool:
        return (self.row["status"] == "ok") if self.row is not None else self.extracted.ok

    @property
    def error_code(self) -> str | None:
        if self.row is not None:
            return None if self.row["status"] == "ok" else self.row["error_code"]
        return self.extracted.error_code

    @property
    def error(self) -> str | None:
        return self.row["error"] if self.row is not None else self.extracted.error

    @property
    def total_pages(self) -> int:
        if self.row is not None:
            return int(self.row["pages"])
        return self.extracted.total_pages or len(self.extracted.pages)


def document_text(engine: Engine, located: Located, options: ExtractOptions) -> Text:
    """The stored text of ``located`` if it was made for the file as it is now with these options; otherwise the
    file extracted now (``flows.documents.worker.extract_now``: the pool, its timeout and size limit), stored
    when the file index's record of the file matches the file (else the plan's next pass stores it)."""
    from flows.documents.executor import work_key
    from store.documents import DocumentWrite, document_row, write_extracted_many

    key = work_key(located.size, located.mtime, options)
    if located.entry_id is not None:
        row = document_row(engine, located.entry_id)
        if row is not None and row["work_key"] == key:
            return Text(located, "indexed" if row["status"] == "ok" else "failed", row=row)
    from flows.documents.worker import extract_now

    extracted = extract_now(located.path, options)
    if located.entry_id is None:
        return Text(located, "not_indexed", extracted=extracted)
    if located.entry_size == located.size and located.entry_mtime == located.mtime:
        write_extracted_many(engine, [DocumentWrite(entry_id=located.entry_id, source_size=located.size,
                                                    source_mtime=located.mtime, work_key=key,
                                                    extracted=extracted)])
        return Text(located, "indexed" if extracted.ok else "failed", extracted=extracted)
    return Text(located, "pending", extracted=extracted)


def _refuse_failed(text: Text) -> None:
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
    if text.row is not None:
        from store.documents import entry_lines, read_pages

        maybe_empty = int(text.row.get("no_text_pages") or 0) > 0
        if wanted is None:
            for _, line, page, ocr in entry_lines(engine, text.located.entry_id):
                yield page, line, ocr, maybe_empty and not ocr
            return
        for number, body, ocr in read_pages(engine, text.located.entry_id, wanted):
            for line in body.split("\n"):
                yield number, line, ocr, maybe_empty and not ocr
        return
    keep = set(wanted) if wanted is not None else None
    for page in text.extracted.pages:
        if keep is None or page.number in keep:
            for line in page.text.split("\n"):
                yield page.number, line, page.ocr, page.no_text


class _Content:
    """The text read_document returns, built line by line up to ``limit`` characters."""

    def __init__(self, limit: int) -> None:
        self.limit, self.parts, self.size, self.truncated = limit, [], 0, False

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
    _refuse_failed(text)
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
    encoding = text.row.get("encoding") if text.row is not None else text.extracted.encoding
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


# --- get_document_info --------------------------------------------------------------------------------------------


def nest_toc(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flat table-of-contents items ({title, level, page | line}) as a tree: each item under the nearest item
    before it with a lower level (``children``); a jump of several levels nests under the last one above."""
    top: list[dict[str, Any]] = []
    stack: list[tuple[int, dict[str, Any]]] = []
    for item in items:
        level = int(item.get("level") or 1)
        node: dict[str, Any] = {"title": item.get("title", "")}
        if item.get("page") is not None:
            node["page"] = item["page"]
        if item.get("line") is not None:
            node["line"] = item["line"]
        node["level"] = level
        while stack and stack[-1][0] >= level:
            stack.pop()
        if stack:
            stack[-1][1].setdefault("children", []).append(node)
        else:
            top.append(node)
        stack.append((level, node))
    return top


_SPLIT = re.compile(r"[,;]")


def _keywords(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, (list, tuple)) else _SPLIT.split(str(value))
    return [str(k).strip() for k in items if str(k).strip()]


def public_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Reference 001's metadata (title, author, created, keywords: always there, null / [] when unknown) plus
    subject, creator, producer and modified when the document gives them."""
    out: dict[str, Any] = {"title": meta.get("title") or None, "author": meta.get("author") or None,
                           "created": meta.get("created") or None, "keywords": _keywords(meta.get("keywords"))}
    for key in ("subject", "creator", "producer", "modified", "language"):
        if meta.get(key):
            out[key] = meta[key]
    return out


def get_document_info(engine: Engine, paths: DocumentPaths, path: str, *,
                      options: ExtractOptions) -> dict[str, Any]:
    """A document's format, size, pages, modification time, nested table of contents (PDF outline or Markdown
    headings; Markdown items give ``line``), metadata, and its state in the full-text index (``indexed``:
    indexed | pending | failed | not_indexed, with ``error`` when it could not be read)."""
    located = locate(engine, paths, path)
    text = document_text(engine, located, options)
    if text.error_code == UNSUPPORTED_FORMAT:
        _refuse_failed(text)
    if text.row is not None:
        row = text.row
        toc, meta = row["toc"], row["meta"] or {}
        meta_error = row["error"] if row["error_code"] == METADATA_EXTRACTION_FAILED else None
        lines, chars, ocr_pages = row["lines"], row["chars"], row["ocr_pages"]
        no_text_pages, encoding = row["no_text_pages"], row["encoding"]
    else:
        ex = text.extracted
        toc = [{"title": t.title, "level": t.level, "page": t.page, "line": t.line} for t in ex.toc]
        meta, meta_error, encoding = ex.meta or {}, ex.meta_error, ex.encoding
        lines = sum(len(p.text.split("\n")) for p in ex.pages)
        chars = sum(len(p.text) for p in ex.pages)
        ocr_pages = sum(1 for p in ex.pages if p.ocr)
        no_text_pages = sum(1 for p in ex.pages if p.no_text)
    if meta_error and not meta and not toc:
        raise DocumentError(METADATA_EXTRACTION_FAILED, f"{path}: the metadata could not be extracted: "
                            f"{meta_error}", field="path", details={"path": path})
    nested = nest_toc(toc)
    out: dict[str, Any] = {
        "name": os.path.basename(located.path), "path": located.shown,
        "collection": paths.collection_of(located.path), "format": located.format, "size_bytes": located.size,
        "size_human": size_human(located.size), "pages": text.total_pages if text.ok else None,
        "modified": iso(located.mtime), "has_toc": bool(nested), "toc": nested,
        "metadata": public_metadata(meta), "indexed": text.status, "ocr_pages": ocr_pages,
        "no_text_pages": no_text_pages,
    }
    if text.ok:
        out["lines"], out["chars"] = lines, chars
    if encoding:
        out["encoding"] = encoding
    if not text.ok:
        out["error"] = {"code": text.error_code, "message": text.error or "no reason given"}
    if meta_error:
        out["metadata_error"] = meta_error
    return out


# --- search_documents / search_multiple: the scope, the boolean search, the answer -----------------------------------


@dataclass
class SearchScope:
    """Where a search looks, resolved: ``under`` (absolute folders) or ``entry_id`` (one document);
    ``unindexed`` names a document that exists but is not in the file index (nothing to search yet)."""

    under: list[str] | None = None
    entry_id: int | None = None
    unindexed: str | None = None


def resolve_scope(engine: Engine, paths: DocumentPaths, scope_type: str, path: str | None) -> SearchScope:
    """Reference 001's scope ({type: global | collection | document, path}) as the search takes it. A path that does
    not exist, a collection that is a file or a document that is a folder is SCOPE_NOT_FOUND; a path leaving the
    roots PATH_TRAVERSAL_DETECTED (SYMLINK_NOT_ALLOWED for a symlink)."""
    given = path or ""
    details = {"path": given}
    if scope_type == "global":
        if given.strip():
            raise InvalidInput("scope.path is for collection and document scopes; a global scope searches every "
                               "document (leave path out, or use type collection)", field="scope.path")
        return SearchScope(under=list(paths.roots.paths))
    if scope_type not in ("collection", "document"):
        raise InvalidInput(f"scope.type {scope_type!r} is not one of: global, collection, document",
                           field="scope.type")
    if scope_type == "document" and not given.strip():
        raise InvalidInput("scope.path is required for a document scope: the document's path, as find_document "
                           "shows it", field="scope.path")
    target = paths.resolve(given, field="scope.path", not_found="SCOPE_NOT_FOUND")
    if target == TOP:
        return SearchScope(under=list(paths.roots.paths))
    try:
        st = os.stat(target)
    except OSError:
        raise DocumentError("SCOPE_NOT_FOUND", f"scope path not found: {given}; list_collections browses the "
                            "collections, find_document finds documents by name", field="scope.path",
                            details=details) from None
    if scope_type == "collection":
        if not stat.S_ISDIR(st.st_mode):
            raise DocumentError("SCOPE_NOT_FOUND", f"{given} is a document, not a collection: use scope "
                                f"{{\"type\": \"document\", \"path\": \"{given}\"}}", field="scope.path",
                                details=details)
        return SearchScope(under=[target])
    if stat.S_ISDIR(st.st_mode):
        raise DocumentError("SCOPE_NOT_FOUND", f"{given} is a collection, not a document: use scope "
                            f"{{\"type\": \"collection\", \"path\": \"{given}\"}}", field="scope.path",
                            details=details)
    if format_of(os.path.basename(target)) is None:
        raise DocumentError("SCOPE_NOT_FOUND", f"{given} is not a document (documents are {SUPPORTED})",
                            field="scope.path", details=details)
    with engine.connect() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == target, E.c.kind == "file")).scalar()
    if entry_id is None:
        return SearchScope(unindexed=paths.display(target))
    return SearchScope(entry_id=entry_id)


def _note(pending: int, failed: int, unindexed: str | None) -> str | None:
    notes = []
    if unindexed:
        notes.append(f"{unindexed} is not in the file index yet, so there is nothing to search in it: index its "
                     "folder (the documents plan does so for the roots), then search again")
    elif pending:
        notes.append(f"{pending} document(s) in scope are not indexed yet (extraction is running or they changed): "
                     "the results may grow; search again later")
    if failed:
        notes.append(f"{failed} document(s) in scope could not be read and are not searched (get_document_info "
                     "says why)")
    return "; ".join(notes) or None


def cited_matches(engine: Engine, outcomes: Iterable[Any]) -> list[list[dict[str, Any]]]:
    """The matches of each SearchOutcome as the tools show them, each with the ``citation`` ``resolve`` accepts
    (``doc://<resource id>#pages=P`` on paged formats, ``text://<resource id>#lines=L-L`` else): the files'
    resource ids come from one lookup for all the matches (flows.citations.ids.hit_ids)."""
    from flows.citations.ids import document_modality, hit_address, hit_ids
    from flows.documents.search import SourcedMatch

    outcomes = list(outcomes)
    sourced = [m for o in outcomes for m in o.matches if isinstance(m, SourcedMatch) and m.entry_id is not None]
    ids = hit_ids(engine, ((m.entry_id, m.path) for m in sourced)) if sourced else {}
    out = []
    for outcome in outcomes:
        shown = []
        for m in outcome.matches:
            item = m.as_dict()
            resource_id = ids.get(getattr(m, "entry_id", None))
            if resource_id is not None:
                item["citation"] = hit_address(resource_id, document_modality(m.path), page=m.page,
                                               line_start=m.line, line_end=m.line)
            shown.append(item)
        out.append(shown)
    return out


def _answer(engine: Engine, outcome: Any, unindexed: str | None = None) -> dict[str, Any]:
    """A SearchOutcome as search_documents answers it."""
    (matches,) = cited_matches(engine, [outcome])
    return {"query": outcome.query, "search_type": "boolean", "matches": matches,
            "total_matches": outcome.total_matches, "truncated": outcome.truncated,
            "pending_documents": outcome.pending_documents, "failed_documents": outcome.failed_documents,
            "note": _note(outcome.pending_documents, outcome.failed_documents, unindexed),
            "elapsed_ms": outcome.elapsed_ms}


def _unindexed_outcome(query: str, fuzzy: bool) -> Any:
    from flows.documents.model import SearchOutcome
    from flows.documents.query import parse_query

    parse_query(query, fuzzy=fuzzy)  # a malformed query is still INVALID_QUERY
    return SearchOutcome(query=query, matches=[], total_matches=0, truncated=False, pending_documents=1)


def search_documents(engine: Engine, paths: DocumentPaths, query: str, scope: SearchScope, *,
                     context_lines: int = 5, max_results: int = 20, fuzzy: bool = False,
                     timeout: float | None = None) -> dict[str, Any]:
    """The boolean search (``flows.documents.search.search``) in ``scope``, answered as reference 001 shows it,
    plus ``pending_documents`` / ``failed_documents`` and a ``note`` when the results may be incomplete."""
    from flows.documents.search import search

    if scope.unindexed is not None:
        return _answer(engine, _unindexed_outcome(query, fuzzy), scope.unindexed)
    outcome = search(engine, query, under=scope.under, entry_id=scope.entry_id, context_lines=context_lines,
                     max_results=max_results, fuzzy=fuzzy, timeout=timeout, display=paths.display)
    return _answer(engine, outcome)


def search_multiple(engine: Engine, paths: DocumentPaths, queries: list[str], scope: SearchScope, *,
                    context_lines: int = 5, max_results_per_query: int = 20,
                    timeout: float | None = None) -> dict[str, Any]:
    """Each query searched at once (``flows.documents.search.search_many``), keyed by the query as given; a query
    that fails carries its ``error`` ({code, message}) and the others go on."""
    import time

    from flows.documents.search import search_many

    started = time.monotonic()
    unique = list(dict.fromkeys(queries))
    if scope.unindexed is not None:
        outcomes: dict[str, Any] = {}
        for q in unique:
            try:
                outcomes[q] = _unindexed_outcome(q, False)
            except DocumentError as exc:
                outcomes[q] = exc
    else:
        outcomes = search_many(engine, unique, under=scope.under, entry_id=scope.entry_id,
                               context_lines=context_lines, max_results=max_results_per_query, timeout=timeout,
                               display=paths.display)
    results: dict[str, Any] = {}
    failed = pending = 0
    found = [q for q in unique if not isinstance(outcomes[q], Exception)]
    shown = dict(zip(found, cited_matches(engine, (outcomes[q] for q in found))))
    for q in unique:
        outcome = outcomes[q]
        if isinstance(outcome, Exception):
            failed += 1
            code = getattr(outcome, "code", "SEARCH_FAILED")
            message = getattr(outcome, "message", None) or str(outcome)
            results[q] = {"query": q, "matches": [], "total_matches": 0, "truncated": False,
                          "error": {"code": code, "message": message}}
            continue
        pending = max(pending, outcome.pending_documents)
        results[q] = {"query": q, "matches": shown[q],
                      "total_matches": outcome.total_matches, "truncated": outcome.truncated,
                      "pending_documents": outcome.pending_documents, "failed_documents": outcome.failed_documents}
    out: dict[str, Any] = {"results": results, "search_duration_ms": round((time.monotonic() - started) * 1000),
                           "queries_completed": len(unique) - failed, "queries_failed": failed,
                           "pending_documents": pending}
    note = _note(pending, 0, scope.unindexed)
    if note:
        out["note"] = note
    return out

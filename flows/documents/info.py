"""Describing a document (reference 001's ``get_document_info``): format, size, pages, its table of contents nested,
its metadata, and its state in the full-text index.
"""

from __future__ import annotations

import os
import re
from typing import Any

from sqlalchemy.engine import Engine

from flows.documents.listing import iso, size_human
from flows.documents.model import METADATA_EXTRACTION_FAILED, UNSUPPORTED_FORMAT, ExtractOptions
from flows.documents.paths import DocumentPaths
from flows.documents.reading import document_text, locate, refuse_failed
from store.errors import DocumentError


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
        refuse_failed(text)
    if text.row is not None:
        row = text.row
        toc, meta = row["toc"], row["meta"] or {}
        meta_error = row["error"] if row["error_code"] == METADATA_EXTRACTION_FAILED else None
        lines, chars, ocr_pages = row["lines"], row["chars"], row["ocr_pages"]
        no_text_pages, encoding = row["no_text_pages"], row["encoding"]
    else:
        ex = text.fresh
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

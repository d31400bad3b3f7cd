"""Word documents (DOCX) through python-docx: paragraphs and tables in body order, headings as the table of
contents, the core properties as metadata.

A table row is one line, its cells separated by tabs (a merged cell appears once). Empty paragraphs are left out.
Paragraphs styled "Heading N" are the table of contents, each with its line number.
"""

from __future__ import annotations

import logging
import re
import zipfile
from typing import Any, Iterator

from flows.documents.extract.errors import ExtractionFailed
from flows.documents.extract.text import split_keywords_text
from flows.documents.model import Extracted, ExtractOptions, Page, TocItem

log = logging.getLogger(__name__)

_HEADING = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def extract_docx(path: str, options: ExtractOptions) -> Extracted:
    import docx  # python-docx (and lxml): loaded by the first Word document
    from docx.opc.exceptions import PackageNotFoundError  # python-docx, as above

    try:
        document = docx.Document(path)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ExtractionFailed(f"not a valid DOCX file: {str(exc) or type(exc).__name__}") from None
    lines: list[str] = []
    toc: list[TocItem] = []
    for text, level in _blocks(document):
        if level is not None and text.strip():
            toc.append(TocItem(title=text.strip(), level=level, line=len(lines) + 1))
        lines.extend(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    result = Extracted(path=path, format="docx", pages=[Page(number=1, text="\n".join(lines))], total_pages=1,
                       toc=toc)
    try:
        result.meta = core_meta(document.core_properties)
    except Exception as exc:  # the text is there; only the properties failed
        result.meta_error = f"the document properties could not be read: {type(exc).__name__}: {exc}"
    return result


def _blocks(document) -> Iterator[tuple[str, int | None]]:
    """(text, heading level or None) of each non-empty paragraph and table row, in body order."""
    from docx.table import Table  # python-docx: loaded by the first Word document
    from docx.text.paragraph import Paragraph  # python-docx, as above

    body = document.element.body
    for child in body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(child, document)
            if paragraph.text.strip():
                yield paragraph.text, _heading_level(paragraph)
        elif tag == "tbl":
            yield from _table_rows(Table(child, document))


def _table_rows(table) -> Iterator[tuple[str, None]]:
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell is repeated for each grid column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            yield "\t".join(cells), None


def _heading_level(paragraph) -> int | None:
    try:
        name = paragraph.style.name if paragraph.style is not None else ""
    except Exception:
        return None
    found = _HEADING.match(name or "")
    return int(found.group(1)) if found else None


def core_meta(props) -> dict[str, Any]:
    """title, author, subject, created / modified (ISO 8601), keywords (a list) of the core properties; empty values
    left out."""
    meta: dict[str, Any] = {}
    for key, attr in (("title", "title"), ("author", "author"), ("subject", "subject")):
        value = (getattr(props, attr) or "").strip()
        if value:
            meta[key] = value
    for key in ("created", "modified"):
        value = getattr(props, key)
        if value is not None:
            meta[key] = value.isoformat()
    keywords = split_keywords_text(props.keywords or "")
    if keywords:
        meta["keywords"] = keywords
    return meta

"""What crosses the boundaries of the documents capability: extraction results (worker process -> executor), the
query tree (parser -> index and line check), and search results (search -> tools and CLI).

Plain dataclasses, picklable, with no store or MCP types in them.

The extracted text of a document is a list of pages (one page for formats without pages); a page's lines are its
text split at "\\n". The document's lines are its pages' lines in page order, numbered from 1: that numbering is
the one search results give (``line``), the one ``read_document`` shows, and the one the property test's plain
line-by-line scan uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Union

# Bumped when extraction changes what it produces, so stored text made by an older extractor is redone.
EXTRACTOR_VERSION = 1

# Formats: PyMuPDF's (paged) and ours (one page).
PAGED_FORMATS = ("pdf", "epub", "xps", "fb2", "mobi", "cbz")
TEXT_FORMATS = ("markdown", "text", "code", "html", "docx")
FORMATS = PAGED_FORMATS + TEXT_FORMATS + ("image",)  # image: an image of text, read with OCR

# Error codes an extraction can end with (reference 001's names).
UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
FILTER_FAILED = "FILTER_FAILED"
METADATA_EXTRACTION_FAILED = "METADATA_EXTRACTION_FAILED"

SEGMENT_CHARS = 32_000  # a stored segment holds whole lines of one page, at most about this many characters


@dataclass(frozen=True)
class ExtractOptions:
    """How to extract: limits and OCR. Part of the work key (``key()``), so changing them redoes the work."""

    max_bytes: int = 50 * 1024 * 1024  # files larger than this are refused (FILTER_FAILED: too large)
    timeout: float = 120.0  # seconds one file may take; past it the worker is stopped (FILTER_FAILED: timed out)
    ocr: bool = True  # read pages without a text layer (and images of text) with Tesseract when it is installed
    ocr_language: str = "eng"
    ocr_dpi: int = 200

    def key(self) -> str:
        return f"v{EXTRACTOR_VERSION}:ocr={int(self.ocr)}:{self.ocr_language}:{self.ocr_dpi}:max={self.max_bytes}"


@dataclass
class Page:
    number: int  # 1-based
    text: str  # the page's lines joined by "\n" (no trailing newline)
    ocr: bool = False  # the text came from OCR
    no_text: bool = False  # no text layer, and OCR could not read it (not installed / failed): reported, not silent


@dataclass
class TocItem:
    """One entry of a table of contents, flat; ``level`` 1 is the top. PDFs give ``page``, Markdown ``line``."""

    title: str
    level: int
    page: int | None = None
    line: int | None = None


@dataclass
class Extracted:
    """The result of extracting one file (``flows.documents.extract.extract_file``); never raises instead.

    ``error_code`` set (UNSUPPORTED_FORMAT, FILTER_FAILED) means no text: ``pages`` is empty and ``error`` says why.
    METADATA_EXTRACTION_FAILED is not fatal: the text is there, ``meta_error`` says what failed.
    """

    path: str
    format: str
    pages: list[Page] = field(default_factory=list)
    total_pages: int = 0
    toc: list[TocItem] = field(default_factory=list)
    # title, author, subject, creator, producer, created, modified (ISO 8601), keywords (list of str)
    meta: dict[str, Any] = field(default_factory=dict)
    encoding: str | None = None
    error_code: str | None = None
    error: str | None = None
    meta_error: str | None = None
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_code is None


# --- boolean queries (reference 001's syntax) -------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    """A word or a quoted phrase: a line matches when its folded text contains ``text`` (folded) as a substring;
    with ``fuzzy``, when some run of the line's words is within a small edit distance of it."""

    text: str  # as written (unfolded)
    phrase: bool = False
    fuzzy: bool = False


@dataclass(frozen=True)
class And:
    children: tuple["Query", ...]


@dataclass(frozen=True)
class Or:
    children: tuple["Query", ...]


@dataclass(frozen=True)
class NotQ:
    child: "Query"


Query = Union[Term, And, Or, NotQ]


# --- search results --------------------------------------------------------------------------------------------


@dataclass
class LineMatch:
    """One matching line, as reference 001 shows it, plus where it is for citing (``page``)."""

    document: str  # the path as the tools show it (relative to its root)
    line: int  # 1-based, in the document's line numbering
    text: str
    context_before: list[str] = field(default_factory=list)
    context_after: list[str] = field(default_factory=list)
    page: int | None = None  # paged formats: the page the line is on
    ocr: bool = False  # the line was read with OCR

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"document": self.document, "line": self.line, "text": self.text,
                               "context_before": self.context_before, "context_after": self.context_after}
        if self.page is not None:
            out["page"] = self.page
        if self.ocr:
            out["ocr"] = True
        return out


ScopeType = Literal["global", "collection", "document"]


@dataclass
class SearchOutcome:
    """What one boolean search found: the first ``max_results`` matches in (path, line) order, how many there are
    in all, and how many documents in scope are not searchable yet (still being extracted) or could not be read."""

    query: str
    matches: list[LineMatch]
    total_matches: int
    truncated: bool
    pending_documents: int = 0  # in scope, not extracted yet: the results may grow
    failed_documents: int = 0  # in scope, extraction failed (see get_document_info for why)
    elapsed_ms: float = 0.0

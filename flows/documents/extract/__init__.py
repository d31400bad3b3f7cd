"""Text extraction: one file in, its pages of text, table of contents and metadata out (``extract_file``).

Runs in the extraction pool's worker processes (``flows.documents.worker``), so it imports nothing of the store or
the registries. The format comes from the file name (``flows.documents.formats.format_of``) and is confirmed by the
content where a wrong guess would index garbage: a ``.pdf`` must start with ``%PDF``, a text file must not be binary
(NUL bytes, or no encoding fits). One module per family of formats:

- ``pymupdf``: PDF, EPUB, XPS, FB2, MOBI, CBZ and images of text (OCR with Tesseract through PyMuPDF);
- ``text``: Markdown, plain text and source code (encoding detected; Markdown headings are the table of contents);
- ``html``: HTML, text only (no script / style);
- ``docx``: Word documents through python-docx.

Each module imports its heavy library (PyMuPDF, python-docx) when it first reads such a file; ``errors`` holds
``ExtractionFailed``, which they raise.

``extract_file`` never raises: every failure is an ``Extracted`` with ``error_code`` (UNSUPPORTED_FORMAT,
FILTER_FAILED) and a reason a person can act on, so one bad document never stops a library.
"""

from __future__ import annotations

import logging
import os
import stat
import time

from flows.documents.extract import docx as docx_format
from flows.documents.extract import html as html_format
from flows.documents.extract import pymupdf as paged_format
from flows.documents.extract import text as text_format
from flows.documents.extract.errors import ExtractionFailed
from flows.documents.formats import format_of
from flows.documents.model import FILTER_FAILED, UNSUPPORTED_FORMAT, Extracted, ExtractOptions

log = logging.getLogger(__name__)

SUPPORTED = ("PDF, EPUB, XPS, FB2, MOBI, CBZ, Markdown, plain text, source code, HTML, DOCX and images of text "
             "(OCR)")


def _extension(path: str) -> str:
    name = os.path.basename(path).lower()
    dot = name.rfind(".")
    return name[dot:] if dot > 0 else ""


def unsupported(path: str) -> Extracted:
    ext = _extension(path)
    what = f"'{ext}' files" if ext else f"files without an extension like {os.path.basename(path)!r}"
    return Extracted(path=path, format=ext.lstrip(".") or "unknown", error_code=UNSUPPORTED_FORMAT,
                     error=f"{what} are not supported; supported: {SUPPORTED}")


def extract_file(path: str, options: ExtractOptions) -> Extracted:
    """Extract the text of the file at ``path`` (absolute) as ``options`` say. Never raises."""
    started = time.monotonic()
    fmt = format_of(os.path.basename(path))
    if fmt is None:
        result = unsupported(path)
    else:
        try:
            result = _extract(path, fmt, options)
        except ExtractionFailed as exc:
            result = Extracted(path=path, format=fmt, error_code=FILTER_FAILED, error=str(exc))
        except MemoryError:
            result = Extracted(path=path, format=fmt, error_code=FILTER_FAILED,
                               error="out of memory while extracting the text")
        except Exception as exc:  # a bug or a library's surprise: recorded with its reason, the library goes on
            log.warning("extracting %s failed", path, exc_info=True)
            result = Extracted(path=path, format=fmt, error_code=FILTER_FAILED,
                               error=f"extraction failed: {type(exc).__name__}: {exc}")
    if result.error_code:
        result.pages = []
        result.total_pages = 0
    result.elapsed = time.monotonic() - started
    return result


def _extract(path: str, fmt: str, options: ExtractOptions) -> Extracted:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ExtractionFailed("the file does not exist (deleted or moved?)") from None
    except OSError as exc:
        raise ExtractionFailed(f"cannot read the file: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ExtractionFailed("not a regular file (a directory, FIFO or device is never read)")
    if st.st_size > options.max_bytes:
        raise ExtractionFailed(f"too large: {st.st_size} bytes, the limit is {options.max_bytes} "
                               f"(ASSAY_DOCUMENT_MAX_BYTES)")
    if fmt in ("markdown", "text", "code"):
        return text_format.extract_text_file(path, fmt, options)
    if fmt == "html":
        return html_format.extract_html(path, options)
    if fmt == "docx":
        return docx_format.extract_docx(path, options)
    if fmt == "pdf":
        _confirm_pdf(path, st.st_size)
    return paged_format.extract_paged(path, fmt, options)


def _confirm_pdf(path: str, size: int) -> None:
    """A ``.pdf`` must be a PDF: ``%PDF`` in its first KiB (where the specification lets readers look for it)."""
    if size == 0:
        raise ExtractionFailed("not a PDF: the file is empty")
    with open(path, "rb") as f:
        head = f.read(1024)
    if b"%PDF" not in head:
        raise ExtractionFailed("not a PDF: the file does not start with %PDF")

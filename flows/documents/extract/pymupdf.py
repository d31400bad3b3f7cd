"""PDF, EPUB, XPS, FB2, MOBI, CBZ and images of text through PyMuPDF, page by page, with OCR for pages that have
no text layer.

A page whose text layer is empty (or only whitespace) but that shows images is a scan: it is read with Tesseract
through PyMuPDF (``Page.get_textpage_ocr``) and marked ``ocr``. MuPDF links Tesseract's library itself and needs only
its language data (the Debian package ``tesseract-ocr`` installs it); ``tessdata_dir`` finds it. Without it, or with
OCR switched off, such pages come back ``no_text`` (reported by the tools), never silently empty.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
from typing import Any

from flows.documents.extract.errors import ExtractionFailed
from flows.documents.extract.text import split_keywords_text
from flows.documents.model import Extracted, ExtractOptions, Page, TocItem

log = logging.getLogger(__name__)

# Where Debian, Ubuntu, Fedora and Homebrew put Tesseract's language data
TESSDATA_DIRS = ("/usr/share/tesseract-ocr/5/tessdata", "/usr/share/tesseract-ocr/4.00/tessdata",
                 "/usr/share/tessdata", "/usr/local/share/tessdata", "/opt/homebrew/share/tessdata")
_LIST_LANGS = re.compile(r'languages in "([^"]+)"')


@functools.lru_cache(maxsize=1)
def tessdata_dir() -> str | None:
    """Tesseract's language data directory: TESSDATA_PREFIX, else the one ``tesseract --list-langs`` names, else the
    usual install paths; None when there is none (OCR unavailable)."""
    env = os.environ.get("TESSDATA_PREFIX", "").strip()
    if env and os.path.isdir(env):
        return env
    exe = shutil.which("tesseract")
    if exe:
        try:
            out = subprocess.run([exe, "--list-langs"], capture_output=True, text=True, timeout=10)
            found = _LIST_LANGS.search(out.stdout + out.stderr)
            if found and os.path.isdir(found.group(1)):
                return found.group(1).rstrip("/")
        except (OSError, subprocess.SubprocessError):
            log.debug("tesseract --list-langs failed", exc_info=True)
    for candidate in TESSDATA_DIRS:
        if os.path.isfile(os.path.join(candidate, "eng.traineddata")):
            return candidate
    return None


def ocr_unavailable(options: ExtractOptions) -> str | None:
    """Why OCR cannot run with ``options`` (None: it can)."""
    if not options.ocr:
        return "OCR is off (ASSAY_OCR)"
    directory = tessdata_dir()
    if directory is None:
        return "Tesseract's language data was not found (install tesseract-ocr or set TESSDATA_PREFIX)"
    missing = [lang for lang in options.ocr_language.split("+")
               if not os.path.isfile(os.path.join(directory, f"{lang}.traineddata"))]
    if missing:
        return f"no Tesseract language data for {', '.join(missing)} in {directory}"
    return None


def extract_paged(path: str, fmt: str, options: ExtractOptions) -> Extracted:
    """Extract a document PyMuPDF opens (``fmt`` a PAGED_FORMATS name, or "image"), one page at a time."""
    import pymupdf  # heavy: loaded by the first document that needs it

    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    try:
        doc = pymupdf.open(path)
    except Exception as exc:
        raise ExtractionFailed(f"cannot open the {_label(fmt)}: {_reason(exc)}") from None
    try:
        if doc.needs_pass:
            raise ExtractionFailed(f"encrypted: the {_label(fmt)} needs a password to be opened")
        if fmt == "image":
            doc = _image_as_pdf(doc)
        if doc.page_count == 0:
            raise ExtractionFailed(f"the {_label(fmt)} has no pages")
        result = Extracted(path=path, format=fmt, total_pages=doc.page_count)
        _read_pages(doc, fmt, options, result)
        if fmt != "image":
            _read_toc(doc, result)
            try:
                result.meta = document_meta(doc.metadata or {})
            except Exception as exc:
                result.meta_error = f"metadata could not be read: {_reason(exc)}"
        return result
    finally:
        doc.close()


def _image_as_pdf(doc):
    """An image opened by PyMuPDF, as a one-page PDF showing it (so OCR sees a page with an image)."""
    import pymupdf  # heavy: loaded by the first document that needs it

    try:
        data = doc.convert_to_pdf()
    except Exception as exc:
        raise ExtractionFailed(f"cannot decode the image: {_reason(exc)}") from None
    finally:
        doc.close()
    return pymupdf.open("pdf", data)


def _read_pages(doc, fmt: str, options: ExtractOptions, result: Extracted) -> None:
    why_no_ocr = ocr_unavailable(options)
    failures: list[str] = []
    for index in range(doc.page_count):
        number = index + 1
        try:
            page = doc.load_page(index)
            text = normalise(page.get_text("text"))
        except Exception as exc:
            log.info("%s: page %d could not be read: %s", result.path, number, exc)
            failures.append(f"page {number}: {_reason(exc)}")
            result.pages.append(Page(number=number, text="", no_text=True))
            continue
        if text.strip() or not (fmt == "image" or _has_images(page)):
            result.pages.append(Page(number=number, text=text))
            continue
        if why_no_ocr is not None:
            result.pages.append(Page(number=number, text="", no_text=True))
            continue
        try:
            textpage = page.get_textpage_ocr(language=options.ocr_language, dpi=options.ocr_dpi, full=True,
                                             tessdata=tessdata_dir())
            text = normalise(page.get_text("text", textpage=textpage))
        except Exception as exc:
            log.info("%s: OCR of page %d failed: %s", result.path, number, exc)
            result.pages.append(Page(number=number, text="", ocr=True, no_text=True))
            continue
        result.pages.append(Page(number=number, text=text, ocr=True, no_text=not text.strip()))
    if failures and len(failures) == doc.page_count:
        raise ExtractionFailed(f"no page could be read ({failures[0]})")


def _has_images(page) -> bool:
    if page.parent.is_pdf:
        return bool(page.get_images())
    import pymupdf  # heavy: loaded by the first document that needs it

    return any(block[6] == 1 for block in page.get_text("blocks", flags=pymupdf.TEXT_PRESERVE_IMAGES))


def normalise(text: str) -> str:
    """A page's text with "\\n" line ends and no trailing newline."""
    return text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")


def _read_toc(doc, result: Extracted) -> None:
    try:
        toc = doc.get_toc(simple=True)
    except Exception as exc:
        result.meta_error = f"the table of contents could not be read: {_reason(exc)}"
        return
    for level, title, page in toc:
        result.toc.append(TocItem(title=str(title).strip(), level=int(level),
                                  page=int(page) if page and page > 0 else None))


def document_meta(raw: dict[str, Any]) -> dict[str, Any]:
    """PyMuPDF's metadata as ours: title, author, subject, creator, producer, created / modified (ISO 8601),
    keywords (a list); empty values left out."""
    meta: dict[str, Any] = {}
    for key in ("title", "author", "subject", "creator", "producer"):
        value = (raw.get(key) or "").strip()
        if value:
            meta[key] = value
    for key, ours in (("creationDate", "created"), ("modDate", "modified")):
        value = (raw.get(key) or "").strip()
        if value:
            meta[ours] = pdf_date(value)
    keywords = split_keywords_text(raw.get("keywords") or "")
    if keywords:
        meta["keywords"] = keywords
    return meta


_PDF_DATE = re.compile(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*(Z|[+-]\d{2}'?\d{0,2}'?)?")


def pdf_date(value: str) -> str:
    """A PDF date (``D:20230510093000+02'00'``, parts after the year optional) in ISO 8601
    (``2023-05-10T09:30:00+02:00``); a value that is not a PDF date is kept as it is."""
    found = _PDF_DATE.match(value.strip())
    if not found:
        return value
    year, month, day, hour, minute, second, zone = found.groups()
    out = f"{year}-{month or '01'}-{day or '01'}"
    if hour is None:
        return out
    out += f"T{hour}:{minute or '00'}:{second or '00'}"
    if zone == "Z":
        out += "Z"
    elif zone:
        digits = zone[1:].replace("'", "")
        out += f"{zone[0]}{digits[:2]}:{digits[2:4] or '00'}"
    return out


def _label(fmt: str) -> str:
    return "image" if fmt == "image" else fmt.upper()


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__

"""PDFs through PyMuPDF: the first page as a thumbnail rendered straight at the scale that fits the box (never at
full resolution), and the document's metadata (pages, title, author, subject, keywords, creator, producer, dates,
outline). PyMuPDF opens lazily: a page is parsed only when asked for, so a large PDF is not held in memory.

An encrypted PDF is an error ("encrypted PDF: needs a password"; no password is ever tried or asked for); a broken one
is an error carrying what MuPDF said about it.
"""

from __future__ import annotations

import re
from typing import Any

from PIL import Image

from flows.media.common import MediaError, encode_jpeg

_DATE = re.compile(r"D:(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*([Zz]|[+-]\d{2}'?\d{2}'?|[+-]\d{2})?")
_FIELDS = ("title", "author", "subject", "keywords", "creator", "producer")


def load_pymupdf():
    """The ``pymupdf`` module, with MuPDF's own printing of errors and warnings turned off (read them with
    :func:`mupdf_said`). Imported on first use: MuPDF is heavy and only PDF work needs it."""
    import pymupdf  # heavy: loaded when a PDF is first opened

    pymupdf.TOOLS.mupdf_display_errors(False)  # MuPDF's messages come back in the error, not on stderr
    pymupdf.TOOLS.mupdf_display_warnings(False)
    return pymupdf


def mupdf_said(pymupdf) -> str:
    """What MuPDF warned about since it was last asked (each message once, ``; ``-joined, at most 200 characters),
    and forget it."""
    said = [ln.strip() for ln in pymupdf.TOOLS.mupdf_warnings(reset=True).splitlines() if ln.strip()]
    return "; ".join(dict.fromkeys(said))[:200]


def open_pdf(path: str):
    """The PyMuPDF document of ``path`` (lazy), or MediaError: encrypted, broken, or empty."""
    pymupdf = load_pymupdf()
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # noqa: BLE001 - FileDataError, EmptyFileError, RuntimeError: all "cannot open"
        said = mupdf_said(pymupdf) or str(exc)
        raise MediaError(f"broken PDF: {said[:200]}") from None
    if doc.needs_pass:
        doc.close()
        raise MediaError("encrypted PDF: needs a password")
    if doc.page_count < 1:
        said = mupdf_said(pymupdf)
        doc.close()
        raise MediaError("broken PDF: no readable pages" + (f" (MuPDF: {said})" if said else ""))
    return doc


def pdf_date(value: str | None) -> str | None:
    """A PDF date string (``D:20240101120000+01'00'``) in ISO 8601 (``2024-01-01T12:00:00+01:00``), or None."""
    if not value:
        return None
    m = _DATE.match(value.strip())
    if not m:
        return None
    year, month, day, hour, minute, second, tz = m.groups()
    out = f"{year}-{month or '01'}-{day or '01'}T{hour or '00'}:{minute or '00'}:{second or '00'}"
    if tz:
        if tz in ("Z", "z"):
            out += "Z"
        else:
            digits = tz.replace("'", "")
            out += f"{digits[:3]}:{digits[3:5] or '00'}"
    return out


def thumbnail(path: str, max_width: int, max_height: int, quality: int) -> tuple[bytes, int, int]:
    """The first page as a JPEG within the box, rendered at the zoom that fits (no full-resolution pixmap)."""
    pymupdf = load_pymupdf()
    doc = open_pdf(path)
    try:
        try:
            page = doc.load_page(0)
            rect = page.rect
            zoom = min(max_width / max(rect.width, 1), max_height / max(rect.height, 1))
            pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        except Exception as exc:  # noqa: BLE001
            said = mupdf_said(pymupdf) or str(exc)
            raise MediaError(f"cannot render the first page: {said[:200]}") from None
        img = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
        if img.width > max_width or img.height > max_height:  # rounding of the zoom: one pixel too many
            img.thumbnail((max_width, max_height))
        return encode_jpeg(img, quality), img.width, img.height
    finally:
        doc.close()


def metadata(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(flat, details) of a PDF: pages, the info fields, created / modified in ISO 8601, has_outline (1/0) and
    outline_entries; details also hold the outline itself (level, title, page) and the first page's size."""
    doc = open_pdf(path)
    try:
        info = doc.metadata or {}
        flat: dict[str, Any] = {"pages": doc.page_count, "format": info.get("format") or "PDF"}
        for name in _FIELDS:
            value = (info.get(name) or "").replace("\x00", "").strip()
            if value:
                flat[name] = value[:500]
        for key, name in (("creationDate", "created"), ("modDate", "modified")):
            iso = pdf_date(info.get(key))
            if iso:
                flat[name] = iso
        try:
            toc = doc.get_toc(simple=True)
        except Exception:  # noqa: BLE001 - a broken outline is no outline
            toc = []
        flat["has_outline"] = 1 if toc else 0
        flat["outline_entries"] = len(toc)
        rect = doc.load_page(0).rect
        details = {"kind": "pdf", **flat, "page_width": round(rect.width, 2), "page_height": round(rect.height, 2),
                   "encrypted": bool(doc.is_encrypted),
                   "outline": [{"level": lvl, "title": str(title)[:200], "page": page}
                               for lvl, title, page in toc[:500]]}
        return flat, details
    finally:
        doc.close()

"""PDFs (PyMuPDF): ``write_pdf`` lays out A4 pages of placed items (``Line``, ``Box``, ``Picture``) with an outline,
metadata and, optionally, a password; the makers here and in ``documents``, ``citations``, the example corpus and the
benchmarks describe their pages with it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .files import prepare
from .images import text_png

A4 = (595, 842)  # points


@dataclass(frozen=True)
class Line:
    """One line of text whose baseline starts at ``at`` (points from the top left)."""

    text: str
    at: tuple[float, float] = (56, 110)
    size: float = 11
    color: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class Box:
    """Text wrapped into ``rect`` (x0, y0, x1, y1); what does not fit is left out."""

    text: str
    rect: tuple[float, float, float, float] = (56, 130, 539, 780)
    size: float = 11
    lineheight: float | None = None


@dataclass(frozen=True)
class Picture:
    """An image (PNG or JPEG bytes) fitted into ``rect``: no text layer."""

    data: bytes
    rect: tuple[float, float, float, float] = (40, 100, 555, 210)


Item = Line | Box | Picture


def write_pdf(path: str | Path, pages: Iterable[Sequence[Item]], *, toc: Sequence[Sequence] | None = None,
              metadata: dict[str, str] | None = None, compact: bool = False, password: str | None = None) -> Path:
    """A PDF of A4 ``pages``, each the items placed on it; ``toc`` as PyMuPDF's ``set_toc`` takes it ([level, title,
    page] rows; none when empty), ``metadata`` as ``set_metadata``; ``compact``: garbage-collected and deflated, with
    no random file id (the same bytes every time); ``password``: AES-256 encrypted, needed to open it."""
    import pymupdf

    path = prepare(path)
    doc = pymupdf.open()
    try:
        for items in pages:
            page = doc.new_page(width=A4[0], height=A4[1])
            for item in items:
                if isinstance(item, Line):
                    extra = {"color": item.color} if item.color is not None else {}
                    page.insert_text(item.at, item.text, fontsize=item.size, **extra)
                elif isinstance(item, Box):
                    extra = {"lineheight": item.lineheight} if item.lineheight is not None else {}
                    page.insert_textbox(pymupdf.Rect(*item.rect), item.text, fontsize=item.size, **extra)
                else:
                    page.insert_image(pymupdf.Rect(*item.rect), stream=item.data)
        if toc:
            doc.set_toc([list(row) for row in toc])
        if metadata:
            doc.set_metadata(metadata)
        options: dict = {"garbage": 3, "deflate": True, "no_new_id": True} if compact else {}
        if password is not None:
            options.update(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw=password + "-owner")
        doc.save(str(path), **options)
    finally:
        doc.close()
    return path


def pdf(path: str | Path, *, pages: int = 3, title: str = "A Field Guide", author: str = "M. Keller",
        subject: str = "birds", keywords: str = "alpine, birds", outline: bool = True) -> Path:
    """A PDF with "Chapter N" and a block of text on every page, metadata (title, author, subject, keywords, creator,
    producer, dates) and, with ``outline``, one outline entry per page."""
    body = [[Line(f"Chapter {n}", (56, 110), 18), Box(f"Page {n} of {title}. " * 40)] for n in range(1, pages + 1)]
    meta = {"title": title, "author": author, "subject": subject, "keywords": keywords, "creator": "assay tests",
            "producer": "PyMuPDF", "creationDate": "D:20240101120000Z", "modDate": "D:20240301120000Z"}
    toc = [[1, f"Chapter {n}", n] for n in range(1, pages + 1)] if outline else None
    return write_pdf(path, body, toc=toc, metadata=meta)


def scanned_pdf(path: str | Path, text: str) -> Path:
    """A one-page PDF that is only an image of ``text`` (no text layer): its words come back only through OCR."""
    return write_pdf(path, [[Picture(text_png(text))]])


def encrypted_pdf(path: str | Path, password: str = "secret") -> Path:
    """A PDF that cannot be opened without its user password."""
    return write_pdf(path, [[Line("locked", (72, 72))]], password=password)

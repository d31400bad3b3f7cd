"""The documents capability's known documents, good and bad: a PDF with an outline, a scanned page, Markdown with
nested headings, non-UTF-8 text, HTML, DOCX, EPUB, FB2, CBZ and broken ones. The content is deterministic, so tests
can search for the words written here.

Each maker takes the file's path (str or Path), creates its parent directories, writes the file and returns the path
(a Path). ``library(root)`` builds a small library tree of all of them for end-to-end tests.

Words tests can rely on (all from ``pdf_with_outline``'s and ``markdown``'s texts below):

- ``pdf_with_outline``: page 1 "Welcome to the Quest Rules handbook", page 2 "Movement allows a figure to move up to
  four squares", page 3 "Diagonal steps cost two squares", page 4 "Attack dice are rolled against defence dice",
  page 5 "Treasure cards are shuffled at the start"; pages past 5 say "Page N notes: extra word pageN".
- ``markdown``: "Shuffle the deck before dealing" under "## Setup", and a code fence holding "# not a heading".
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from . import images, pdfs
from .broken import big_file, binary_txt, empty, truncated  # noqa: F401 (big_file, binary_txt: the documents' too)
from .files import prepare
from .pdfs import Line, encrypted_pdf

# Outline of pdf_with_outline: (level, title, page)
PDF_TOC = [(1, "Introduction", 1), (1, "Gameplay", 2), (2, "Movement", 3), (1, "Combat", 4)]
PDF_PAGES = [
    ["Introduction", "Welcome to the Quest Rules handbook.", "Players cooperate against the dungeon."],
    ["Gameplay", "Movement allows a figure to move up to four squares.", "Each turn has three phases."],
    ["Movement", "Diagonal steps cost two squares.", "Walls block line of sight."],
    ["Combat", "Attack dice are rolled against defence dice.", "A skull counts as one hit."],
    ["Appendix", "Treasure cards are shuffled at the start.", "The heroes win when the quest is done."],
]
PDF_META = {"title": "Quest Rules", "author": "A. Designer", "subject": "board games",
            "keywords": "dungeon, cooperative; rules", "creator": "assay tests", "producer": "PyMuPDF",
            "creationDate": "D:20230510093000+02'00'", "modDate": "D:20240102030405Z"}
SCANNED_TEXT = "SCANNED INVOICE 4711"

LATIN1_TEXT = ("Le café de la gare est fermé le dimanche.\n"
               "La crème brûlée était délicieuse, déjà servie à côté du théâtre.\n"
               "Un élève naïf a écrit une lettre très détaillée à son frère.\n"
               "Où êtes-vous allés pendant l'été? À Genève, près du lac.\n") * 3

MARKDOWN_TEXT = """# Card Game Notes

Some introduction about the card game.

## Setup

Shuffle the deck before dealing.

### Dealing

Each player receives seven cards.

```python
# not a heading
print("hello")
```

## Scoring

Points are counted at the end of each round.

~~~
## also not a heading
~~~

# Appendix

Variant rules live here.
"""

FRONT_MATTER = """---
title: Front Matter Title
author: Jane Writer
date: 2024-02-03
keywords: [cards, rules]
---
"""

HTML_TEXT = """<!DOCTYPE html>
<html><head>
<meta charset="utf-8">
<title>API Guide</title>
<meta name="author" content="Docs Team">
<meta name="keywords" content="api, guide, rest">
<style>body { color: red; } .hiddenstyle { display: none }</style>
<script>var secretScriptValue = "do not index me";</script>
</head><body>
<h1>API Guide</h1>
<p>Requests use JSON &amp; return status codes.</p>
<h2>Authentication</h2>
<p>Send the token in the header. Caf&eacute; tokens expire.</p>
<noscript>noscript fallback text</noscript>
<ul><li>First item</li><li>Second item</li></ul>
<h3>Refresh</h3>
<p>Refresh<br>tokens daily.</p>
</body></html>
"""

SOURCE_TEXT = '''"""A tiny example module."""


def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    print(fibonacci(10))
'''


def pdf_lines(page: int) -> list[str]:
    """The lines ``pdf_with_outline`` writes on ``page`` (1-based)."""
    if page <= len(PDF_PAGES):
        return PDF_PAGES[page - 1]
    return [f"Page {page} notes: extra word page{page}"]


def pdf_with_outline(path: str | Path, pages: int = 5) -> Path:
    """A PDF with a few text lines per page (``pdf_lines``), a nested outline (Introduction p1, Gameplay p2 >
    Movement p3, Combat p4; entries past ``pages`` are left out) and full metadata (``PDF_META``)."""
    body = [[Line(line, (56, 100 + 24 * k), 12) for k, line in enumerate(pdf_lines(n))] for n in range(1, pages + 1)]
    return pdfs.write_pdf(path, body, toc=[[level, title, page] for level, title, page in PDF_TOC if page <= pages],
                          metadata=PDF_META)


def scanned_pdf(path: str | Path, text: str = SCANNED_TEXT) -> Path:
    """A one-page PDF that is only an image of ``text`` (no text layer): its words come back only through OCR."""
    return pdfs.scanned_pdf(path, text)


def image_of_text(path: str | Path, text: str = SCANNED_TEXT) -> Path:
    """A PNG image of ``text`` (an "image of text" document, read with OCR)."""
    path = prepare(path)
    images.text_image(text).save(path, format="PNG")
    return path


def markdown(path: str | Path, *, front_matter: bool = False) -> Path:
    """Markdown with nested headings (# / ## / ###), a ``` fence holding "# not a heading" and a ~~~ fence holding
    "## also not a heading"; with ``front_matter``, a YAML front matter block (title, author, date, keywords) first."""
    path = prepare(path)
    path.write_text((FRONT_MATTER if front_matter else "") + MARKDOWN_TEXT, encoding="utf-8")
    return path


def text_latin1(path: str | Path) -> Path:
    """French text encoded as cp1252 (not valid UTF-8): café, fermé, crème brûlée, élève naïf, Genève."""
    path = prepare(path)
    path.write_bytes(LATIN1_TEXT.encode("cp1252"))
    return path


def utf16_text(path: str | Path) -> Path:
    """UTF-16 text with a BOM (as Windows tools write it), with non-ASCII words."""
    path = prepare(path)
    path.write_bytes("Grüße aus Köln\nSecond line with ünïcödé\nthird line\n".encode("utf-16"))
    return path


def html(path: str | Path) -> Path:
    """An HTML page with a title, author/keywords meta tags, h1..h3 headings, entities, a list, and script / style /
    noscript content that must NOT appear in the extracted text ("secretScriptValue", "hiddenstyle", "noscript")."""
    path = prepare(path)
    path.write_text(HTML_TEXT, encoding="utf-8")
    return path


def docx(path: str | Path) -> Path:
    """A DOCX (python-docx): heading "Project Plan" (Heading 1), paragraphs, a "Milestones" Heading 2, a 2 x 3 table
    (Phase / Owner / Due ...), a last paragraph; core properties title, author, keywords, subject, created."""
    import datetime

    import docx as python_docx

    path = prepare(path)
    document = python_docx.Document()
    document.add_heading("Project Plan", level=1)
    document.add_paragraph("The plan covers the migration of the billing service.")
    document.add_heading("Milestones", level=2)
    table = document.add_table(rows=2, cols=3)
    for r, row in enumerate([("Phase", "Owner", "Due"), ("Design", "Alice", "March")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("Budget review happens after the design phase.")
    props = document.core_properties
    props.title = "Billing Migration"
    props.author = "Alice Example"
    props.keywords = "billing, migration"
    props.subject = "planning"
    props.created = datetime.datetime(2023, 4, 5, 6, 7, 8)
    props.modified = datetime.datetime(2023, 5, 6, 7, 8, 9)
    document.save(str(path))
    return path


_CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
"""

_OPF = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="bookid">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>The Tiny Book</dc:title>
    <dc:creator>E. Author</dc:creator>
    <dc:language>en</dc:language>
    <dc:identifier id="bookid">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier>
  </metadata>
  <manifest>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="ch1" href="ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="ch2" href="ch2.xhtml" media-type="application/xhtml+xml"/>
  </manifest>
  <spine toc="ncx"><itemref idref="ch1"/><itemref idref="ch2"/></spine>
</package>
"""

_NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:uuid:12345678-1234-1234-1234-123456789abc"/></head>
  <docTitle><text>The Tiny Book</text></docTitle>
  <navMap>
    <navPoint id="n1" playOrder="1"><navLabel><text>Chapter One</text></navLabel><content src="ch1.xhtml"/></navPoint>
    <navPoint id="n2" playOrder="2"><navLabel><text>Chapter Two</text></navLabel><content src="ch2.xhtml"/></navPoint>
  </navMap>
</ncx>
"""

_CHAPTER = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title></head>
<body><h1>{title}</h1><p>{body}</p></body></html>
"""


def epub(path: str | Path) -> Path:
    """A tiny EPUB 2 built by hand: mimetype (stored, first), container.xml, an OPF (title "The Tiny Book", creator
    "E. Author"), an NCX table of contents and two XHTML chapters ("The dragon sleeps under the mountain." and
    "The lighthouse keeper counts ships.")."""
    path = prepare(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr("META-INF/container.xml", _CONTAINER, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/content.opf", _OPF, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/toc.ncx", _NCX, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/ch1.xhtml", _CHAPTER.format(title="Chapter One",
                                                       body="The dragon sleeps under the mountain."),
                    compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("OEBPS/ch2.xhtml", _CHAPTER.format(title="Chapter Two",
                                                       body="The lighthouse keeper counts ships."),
                    compress_type=zipfile.ZIP_DEFLATED)
    return path


def fb2(path: str | Path) -> Path:
    """A FictionBook 2 file with a title, an author and two sections ("The owl hunts at night.")."""
    path = prepare(path)
    path.write_text("""<?xml version="1.0" encoding="utf-8"?>
<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0">
<description><title-info><author><first-name>Ola</first-name><last-name>Writer</last-name></author>
<book-title>Night Birds</book-title><lang>en</lang></title-info></description>
<body><section><title><p>Owls</p></title><p>The owl hunts at night.</p></section>
<section><title><p>Nightjars</p></title><p>The nightjar sings at dusk.</p></section></body>
</FictionBook>
""", encoding="utf-8")
    return path


def cbz(path: str | Path, text: str = SCANNED_TEXT) -> Path:
    """A comic book archive of two pages that are images only, the first an image of ``text`` (OCR reads it)."""
    path = prepare(path)
    with zipfile.ZipFile(path, "w") as zf:
        for n, words in enumerate((text, "PAGE TWO"), start=1):
            zf.writestr(f"{n:03d}.png", images.text_png(words))
    return path


def truncated_pdf(path: str | Path) -> Path:
    """The first fifth of a real PDF (``pdf_with_outline``): header and part of the objects, no xref, no trailer."""
    return truncated(path, pdf_with_outline, 5)


def source_code(path: str | Path) -> Path:
    """A small Python module (def fibonacci ...)."""
    path = prepare(path)
    path.write_text(SOURCE_TEXT, encoding="utf-8")
    return path


def library(root: str | Path) -> dict[str, str]:
    """A small library under ``root`` with three collections and one of each document above; returns the relative
    path (``games/coop/rules.pdf``) -> its absolute path. Bad documents are there too: the library must survive
    them."""
    root = Path(root)
    makers = {
        "games/coop/rules.pdf": pdf_with_outline,
        "games/coop/scan.pdf": scanned_pdf,
        "games/coop/notes.md": markdown,
        "games/coop/legacy.txt": text_latin1,
        "games/coop/encrypted.pdf": encrypted_pdf,
        "games/coop/truncated.pdf": truncated_pdf,
        "docs/api/guide.html": html,
        "docs/api/plan.docx": docx,
        "docs/api/book.epub": epub,
        "docs/api/windows.txt": utf16_text,
        "docs/api/blob.txt": binary_txt,
        "docs/api/empty.txt": empty,
        "programming/python/fib.py": source_code,
        "programming/python/README.md": lambda p: markdown(p, front_matter=True),
    }
    out: dict[str, str] = {}
    for rel, make in makers.items():
        out[rel] = str(make(root / rel).resolve())
    return out

"""HTML, text only, with the standard library's parser: what a reader sees, not the markup.

Script, style, noscript and template content is skipped; block elements (paragraphs, headings, list items, table
rows, ``<br>`` ...) end a line; table cells are separated by tabs; entities are decoded; ``<pre>`` keeps its lines.
The title comes from ``<title>``, author / keywords / description / date from ``<meta name=...>``; the table of
contents from h1..h6 (with the line each heading is on). The encoding: a byte-order mark, else the charset the page
declares, else UTF-8, else detection.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from flows.documents.extract.text import decode, read_bounded, split_keywords_text
from flows.documents.model import ExtractOptions, Extracted, Page, TocItem

SKIP = {"script", "style", "noscript", "template"}
BLOCK = {"address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details", "dialog", "div",
         "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
         "header", "hr", "html", "legend", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
         "tbody", "td", "tfoot", "th", "thead", "tr", "ul", "option", "textarea"}
HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\n\r\f\v]+")
CELL = "\x1f"  # between table cells until the line is built (then a tab: collapsing whitespace must not eat it)
_CELL = re.compile(" ?\x1f ?")


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.toc: list[TocItem] = []
        self.meta: dict[str, Any] = {}
        self._parts: list[str] = []
        self._skip: list[str] = []  # open elements whose content is not text
        self._pre = 0
        self._title: list[str] | None = None
        self._heading: tuple[int, int] | None = None  # (level, index of the first line of the heading)
        self._cell = False

    # -- lines
    def _flush(self) -> None:
        line = "".join(self._parts)
        self._parts = []
        if self._pre:
            line = line.rstrip().replace(CELL, "\t")
        else:
            line = _CELL.sub("\t", _SPACES.sub(" ", line).strip()).strip("\t ")
        if line:
            self.lines.append(line)
        self._cell = False

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "meta":
            self._meta(dict(attrs))
            return
        if tag == "title" and not self._title:
            self._title = []
        if tag in SKIP:
            self._skip.append(tag)
            return
        if self._skip:
            return
        if tag in ("td", "th"):
            if self._cell:
                self._parts.append(CELL)
            self._cell = True
            return
        if tag in BLOCK:
            self._flush()
        if tag == "pre":
            self._pre += 1
        if tag in HEADINGS:
            self._heading = (HEADINGS[tag], len(self.lines))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._title is not None and "title" not in self.meta:
            title = _SPACES.sub(" ", "".join(self._title)).strip()
            if title:
                self.meta["title"] = title
            self._title = None
            return
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if tag in ("td", "th"):
            return
        if tag in BLOCK:
            self._flush()
        if tag == "pre" and self._pre:
            self._pre -= 1
        if tag in HEADINGS and self._heading is not None:
            level, first = self._heading
            self._heading = None
            if len(self.lines) > first:
                self.toc.append(TocItem(title=" ".join(self.lines[first:]), level=level, line=first + 1))

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
            return
        if self._skip:
            return
        if self._pre:
            pieces = data.split("\n")
            for piece in pieces[:-1]:
                self._parts.append(piece)
                self._flush()
            self._parts.append(pieces[-1])
        else:
            self._parts.append(data)

    def _meta(self, attrs: dict[str, str | None]) -> None:
        name = (attrs.get("name") or attrs.get("property") or "").strip().lower()
        content = (attrs.get("content") or "").strip()
        if not name or not content:
            return
        if name in ("author", "dc.creator", "article:author") and "author" not in self.meta:
            self.meta["author"] = content
        elif name in ("keywords", "dc.subject"):
            words = split_keywords_text(content)
            if words:
                self.meta["keywords"] = words
        elif name in ("description", "og:description", "dc.description") and "subject" not in self.meta:
            self.meta["subject"] = content
        elif name in ("date", "dc.date", "article:published_time", "dcterms.created") and "created" not in self.meta:
            self.meta["created"] = content
        elif name in ("og:title", "dc.title") and "title" not in self.meta:
            self.meta["title"] = content

    def close(self) -> None:
        super().close()
        self._flush()


def declared_charset(data: bytes) -> str | None:
    """The charset a page declares in a <meta> tag within its first 4 KiB."""
    found = _CHARSET.search(data[:4096])
    return found.group(1).decode("ascii", "replace") if found else None


def html_text(text: str) -> tuple[str, list[TocItem], dict[str, Any]]:
    """The visible text (lines joined by "\\n"), headings and metadata of an HTML document."""
    parser = _TextParser()
    parser.feed(text)
    parser.close()
    return "\n".join(parser.lines), parser.toc, parser.meta


def extract_html(path: str, options: ExtractOptions) -> Extracted:
    data = read_bounded(path, options.max_bytes)
    text, encoding = decode(data, declared_charset(data))
    body, toc, meta = html_text(text)
    return Extracted(path=path, format="html", pages=[Page(number=1, text=body)], total_pages=1, toc=toc,
                     meta=meta, encoding=encoding)

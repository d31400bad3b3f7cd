"""Split a document's text into overlapping chunks at sentence or word boundaries (reference 002: 1,000 characters,
200 overlap), keeping each chunk's character offsets, line range and pages.

The text is the document's pages joined by ``"\\n"``; lines are numbered from 1 across the whole document.

How a chunk is cut, starting at ``start`` (always a non-whitespace character):

1. If the rest of the text fits in ``chunk_size`` characters, it is the last chunk.
2. Else the window is ``text[start:start + chunk_size]``. The chunk ends after the last sentence end (``.``, ``?``
   or ``!`` followed by whitespace) or at the last paragraph break (a blank line) lying in the window's last 30%.
3. Else it ends at the window's last whitespace (a word boundary; the character just after the window counts, so a
   window ending exactly before a space is a whole-word chunk).
4. Else (one "word" longer than the window, e.g. 5,000 characters without a space) it is cut hard at ``chunk_size``.

Edges are stripped: a chunk never starts or ends with whitespace, so ``text[chunk.start:chunk.end] == chunk.text``
exactly and ``chunk.text == chunk.text.strip()``; the whitespace dropped between chunks is the only text no chunk
covers, and whitespace-only text gives no chunk at all.

The next chunk starts about ``overlap`` characters before the previous one's end, moved forward to the next word start
(so it does not begin mid-word) but always after the previous chunk's start, so the loop always advances even when
``overlap`` is close to ``chunk_size``, and each chunk reaches at least one non-space character the previous one did
not have (no chunk is contained in the one before). Where no word boundary lies between that point and the previous
end (the tail of a hard-cut long word), the next chunk starts there, mid-word, keeping the overlap.

Streaming: pages are read one at a time as the window needs them; the buffer holds the unconsumed text (at most the
current page plus a window), line numbers are counted incrementally, so the work is linear in the text's length.
"""

from __future__ import annotations

import bisect
import re
from typing import Generator, Iterable

from flows.semantic.model import ChunkSpan
from store.errors import InvalidInput

SENTENCE_ZONE = 0.3  # a sentence break is preferred when it lies in the window's last 30%
_SENTENCE = re.compile(r"[.?!](?=\s)|\n[^\S\n]*\n")  # a sentence end (break after it) or a blank line (break before)
_SPACE = re.compile(r"\s")
_NON_SPACE = re.compile(r"\S")


def check_params(chunk_size: int, overlap: int) -> None:
    """InvalidInput unless 1 <= chunk_size and 0 <= overlap < chunk_size (reference 002's chunkSize / overlap)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidInput(f"chunk_size {chunk_size!r} must be a whole number of characters >= 1 (default 1000)",
                           field="chunk_size")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < chunk_size:
        raise InvalidInput(f"overlap {overlap!r} must be a whole number of characters from 0 to chunk_size - 1 "
                           f"({chunk_size - 1}; default 200)", field="overlap")


class _Text:
    """The document's text as a sliding buffer over its pages: ``buf`` holds the global offsets ``[off, off +
    len(buf))``; ``pages`` the (start offset, page) of the pages still in reach; ``line``/``line_at`` a known line
    number at a known offset, advanced as chunks move forward."""

    def __init__(self, pages: Iterable[tuple[int | None, str]]) -> None:
        self._pages = iter(pages)
        self.buf = ""
        self.off = 0
        self.exhausted = False
        self._first = True
        self.page_starts: list[int] = []
        self.page_numbers: list[int | None] = []
        self.line = 1
        self.line_at = 0

    @property
    def end(self) -> int:
        return self.off + len(self.buf)

    def fill(self, keep_from: int, upto: int) -> None:
        """Read pages until the buffer reaches global offset ``upto`` (or the text ends); text before ``keep_from``
        is dropped when a page is appended (it is no longer needed)."""
        while self.end < upto and not self.exhausted:
            try:
                page, text = next(self._pages)
            except StopIteration:
                self.exhausted = True
                break
            start = self.end if self._first else self.end + 1
            piece = text if self._first else "\n" + text
            self._first = False
            cut = max(0, min(keep_from, self.end) - self.off)
            if self.line_at < self.off + cut:  # count the newlines of the text about to be dropped
                self.line += self.buf.count("\n", self.line_at - self.off, cut)
                self.line_at = self.off + cut
            self.buf = self.buf[cut:] + piece
            self.off += cut
            self.page_starts.append(start)
            self.page_numbers.append(page)

    def page_of(self, offset: int) -> int | None:
        i = bisect.bisect_right(self.page_starts, offset) - 1
        return self.page_numbers[max(i, 0)] if self.page_numbers else None

    def forget_pages_before(self, offset: int) -> None:
        i = bisect.bisect_right(self.page_starts, offset) - 1
        if i > 0:
            del self.page_starts[:i], self.page_numbers[:i]

    def line_of(self, offset: int) -> int:
        """The 1-based line of ``offset`` (never before the last offset asked for: chunks only move forward)."""
        self.line += self.buf.count("\n", self.line_at - self.off, offset - self.off)
        self.line_at = offset
        return self.line


def chunk_pages(pages: Iterable[tuple[int | None, str]], *, chunk_size: int = 1000,
                overlap: int = 200) -> Generator[ChunkSpan, None, None]:
    """The chunks of the text of ``pages`` ((page or None, text) in order, joined by newlines), as described in the
    module docstring. InvalidInput for a bad ``chunk_size`` / ``overlap``."""
    check_params(chunk_size, overlap)
    t = _Text(pages)
    t.fill(0, chunk_size + 1)
    m = _NON_SPACE.search(t.buf)
    start = m.start() + t.off if m else None
    while start is None and not t.exhausted:  # leading whitespace longer than a window
        t.fill(t.end, t.end + chunk_size + 1)
        m = _NON_SPACE.search(t.buf)
        start = m.start() + t.off if m else None
    index, need = 0, start or 0  # need is read only once there is a start
    while start is not None:
        t.fill(start, start + chunk_size + 1)
        b, o = t.buf, t.off
        s = start - o
        last = t.end <= start + chunk_size  # the rest fits: the last chunk
        if last:
            stop = len(b)
        else:
            stop = _break(b, s, need - o + 1, chunk_size)
        while stop > s and b[stop - 1].isspace():
            stop -= 1
        end = stop + o
        t.forget_pages_before(start)
        line_start = t.line_of(start)
        line_end = line_start + b.count("\n", s, stop)
        yield ChunkSpan(index=index, start=start, end=end, line_start=line_start, line_end=line_end,
                        page=t.page_of(start), page_end=t.page_of(end - 1), text=b[s:stop])
        if last:
            return
        index += 1
        start, need = _next_start(t, start, end, overlap, chunk_size)


def _break(b: str, s: int, floor: int, chunk_size: int) -> int:
    """The buffer index where the chunk starting at ``b[s]`` ends (exclusive); ``b`` holds more than a window. The
    chunk ends at ``floor`` or later (just past the first non-space character after the previous chunk, so each
    chunk brings new text; ``floor <= s + chunk_size``)."""
    limit = s + chunk_size  # the chunk is b[s:stop] with stop <= limit
    lo = max(s + int(chunk_size * (1 - SENTENCE_ZONE)), floor)
    best = -1
    for m in _SENTENCE.finditer(b, lo - 1, limit + 1):
        stop = m.start() + 1 if m.group()[0] in ".?!" else m.start()
        if lo <= stop <= limit:
            best = stop
    if best > s:
        return best
    space = max(b.rfind(c, floor, limit + 1) for c in " \n\t\r\f\v")
    if space >= floor:
        return space
    last = None
    for match in _SPACE.finditer(b, floor, limit + 1):  # other (unicode) whitespace: the last one
        last = match
    return last.start() if last else limit


def _next_start(t: _Text, start: int, end: int, overlap: int,
                chunk_size: int) -> tuple[int | None, int]:
    """(where the chunk after ``[start, end)`` starts, the first non-space character after ``end``): ~``overlap``
    before ``end`` at a word start, after ``start`` and close enough for a window to reach that new character;
    (None, _) when only whitespace follows."""
    pos = end  # the first non-space character after the chunk: none means the text is done
    while True:
        t.fill(start, pos + chunk_size + 1)
        m = _NON_SPACE.search(t.buf, pos - t.off)
        if m:
            after = m.start() + t.off
            break
        if t.exhausted:
            return None, end
        pos = t.end
    candidate = max(end - overlap, start + 1, after + 1 - chunk_size)
    o = t.off
    if candidate < end:
        b = t.buf
        at = candidate - o
        if not (b[at - 1].isspace() or b[at].isspace()):  # mid-word: the next word's start, if one is before end
            m = _SPACE.search(b, at, end - o)
            if m:
                at = m.start()
        m = _NON_SPACE.search(b, at, end - o)
        if m:
            return m.start() + o, after
    return after, after  # no overlap (overlap 0, or no word start in it)

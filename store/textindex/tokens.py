"""How the text engine cuts folded text into tokens, and what a search needle asks of them.

A token is a maximal run of *word bytes* of the folded text's UTF-8: ASCII letters, digits and ``_``, and every
byte of a non-ASCII character (so a non-ASCII character always sits inside a token; which characters count as
"word" does not matter for correctness, only that indexing and searching agree). Every other byte (ASCII space,
punctuation, control characters) separates tokens; ``\\n`` separates lines.

Why this is exact for search (terms are case-insensitive substrings of a line, as ``grep -i -F``): a needle made of
word bytes only cannot span a separator, so it occurs in a line exactly when it is a substring of one of the line's
tokens. A needle with separators in it (``e-mail``, a phrase) is made of word runs; each run inside it is bounded
by a separator on a side where the needle goes on, so the line must have a token that *is* the run (bounded on both
sides), *starts* with it (bounded on the left), *ends* with it (on the right), or *contains* it (neither). That is a
necessary condition, so such needles give candidate lines the line check then decides.

Tokenising runs at C speed: ``bytes.translate`` maps separators to spaces, ``\\n`` becomes a marker token, ``split``
cuts, and a ``defaultdict`` whose default factory is its own ``__len__`` numbers new tokens inside ``map``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

import numpy as np

LINE_MARK = b"\x01"  # stands for a line break among the tokens (never a token of text: \x01 is a separator)


def _word_byte(b: int) -> bool:
    return b >= 0x80 or chr(b).isalnum() or b == ord("_")


WORD = bytes(1 if _word_byte(b) else 0 for b in range(256))
_SPLIT = bytes(b if (_word_byte(b) or b == 0x0A) else 0x20 for b in range(256))  # \n kept, then marked


def is_word_byte(b: int) -> bool:
    return bool(WORD[b])


class Vocabulary(defaultdict[bytes, int]):
    """Token bytes -> id in order of first sight; ``ids(tokens)`` numbers a list of tokens at C speed."""

    def __init__(self) -> None:
        super().__init__()
        self.default_factory = self.__len__
        self.line_mark = self[LINE_MARK]

    def ids(self, tokens: list[bytes]) -> np.ndarray:
        return np.fromiter(map(self.__getitem__, tokens), dtype=np.uint32, count=len(tokens))


def token_lines(folded: bytes, vocab: Vocabulary, first_line: int) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of ``folded`` (UTF-8 of folded text, lines split by ``\\n``) as (token ids, line ids), line ids
    counted from ``first_line`` (the text's first line). A token twice on a line is listed twice."""
    tokens = folded.translate(_SPLIT).replace(b"\n", b" \x01 ").split()
    ids = vocab.ids(tokens)
    marks = ids == vocab.line_mark
    lines = np.cumsum(marks, dtype=np.uint32)
    lines += np.uint32(first_line)
    keep = ~marks
    return ids[keep], lines[keep]


def words_of(folded: bytes) -> list[bytes]:
    """The tokens of ``folded`` (UTF-8 of folded text) in order, line breaks not marked."""
    return folded.translate(_SPLIT).split()


Bound = Literal["contains", "starts", "ends", "equals"]


@dataclass(frozen=True)
class Run:
    """A word run of a needle and how a line's token must hold it."""

    text: bytes
    bound: Bound


@dataclass(frozen=True)
class Needle:
    """What a folded needle asks of the tokens of a line: ``exact`` when a line holds the needle exactly when some
    token holds its single run (the postings answer it alone); else ``runs`` are each necessary (the line check
    decides), and no runs at all means the index cannot narrow (punctuation only). ``never``: no line can hold it
    (it spans a line break)."""

    runs: tuple[Run, ...]
    exact: bool
    never: bool = False


def analyse(needle: str) -> Needle:
    """The runs of ``needle`` (already folded) and whether the postings answer it exactly."""
    if "\n" in needle:
        return Needle((), exact=True, never=True)
    raw = needle.encode("utf-8")
    runs: list[Run] = []
    i, n = 0, len(raw)
    while i < n:
        if not WORD[raw[i]]:
            i += 1
            continue
        j = i
        while j < n and WORD[raw[j]]:
            j += 1
        left, right = i > 0, j < n
        bound: Bound = "equals" if left and right else "starts" if left else "ends" if right else "contains"
        runs.append(Run(raw[i:j], bound))
        i = j
    exact = len(runs) == 1 and runs[0].bound == "contains"
    return Needle(tuple(runs), exact=exact)

"""Citation addresses: parsed with a Lark grammar (``address.lark``) into :class:`~flows.addresses.model.Address`,
and checked against the source they cite (:func:`check_address`).

An address names a resource and, after ``#``, the part of it cited: ``doc://textbook#pages=12-15``,
``video://lecture_01#t=192-230`` (seconds, ``MM:SS`` or ``HH:MM:SS``), ``audio://talk#t=...``,
``image://diagram#bbox=0.2,0.2,0.8,0.8``, ``text://notes#lines=10-20``; without ``#`` the whole resource.

Parsing refuses, as CitationError INVALID_ADDRESS naming the column and what would be accepted, anything that cannot
denote a part of a resource whatever the file: an unknown scheme, a key of another scheme, a bbox that is not four
fractions with x1 < x2 and y1 < y2, a time range that ends at or before its start, page or line 0, a range whose
end is before its start. Times and fractions are kept to the millisecond / thousandth, so the parsed address is the
canonical one: ``parse_address(a.format()) == a``. :func:`check_address` then checks what depends on the file: its
modality and its extent (pages, lines, duration).

The parser is built once per process and the last parses are remembered: a parse costs tens of microseconds, a
repeated one well under one (it sits on the virtual resolve path).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from flows.addresses.model import MODALITY_SCHEME, SCHEME_MODALITY, Address, format_number
from flows.citations.model import SourceFacts
from store.errors import CitationError

MAX_ADDRESS_CHARS = 2_000
MAX_RESOURCE_ID_CHARS = 128
END_TOLERANCE = 0.5  # seconds an end may run past the duration (the extractor clamps it)

# what each scheme's fragment looks like, for messages
FRAGMENT_SYNTAX: dict[str, str] = {
    "doc": "pages=FIRST-LAST (or a list: pages=1,3,7 or pages=1-3,7)",
    "video": "t=START-END (seconds, MM:SS or HH:MM:SS, e.g. t=192-230 or t=00:03:12-00:03:40)",
    "audio": "t=START-END (seconds, MM:SS or HH:MM:SS, e.g. t=192-230 or t=00:03:12-00:03:40)",
    "image": "bbox=x1,y1,x2,y2 (fractions 0-1 of the width and height, x1 < x2 and y1 < y2)",
    "text": "lines=FIRST-LAST (or one line: lines=7)",
}
SCHEME_KEY: dict[str, str] = {"doc": "pages", "video": "t", "audio": "t", "image": "bbox", "text": "lines"}
SCHEMES_TEXT = ", ".join(f"{s}://" for s in SCHEME_MODALITY)
SYNTAX = "SCHEME://RESOURCE_ID#FRAGMENT; " + "; ".join(f"{s}://ID#{FRAGMENT_SYNTAX[s].split(' (')[0]}"
                                                          for s in ("doc", "video", "image", "text"))

# tokens carry their positions (the columns errors name); tree positions (propagate_positions) would double
# the cost of a parse and are not needed
_PARSER = Lark.open("address.lark", rel_to=__file__, parser="lalr")
_SCHEME_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")

# what the parser's terminals are, in words
_EXPECTED_WORDS: dict[str, str] = {
    "SCHEME": "a scheme (" + SCHEMES_TEXT + ")", "RID": "a resource id (letters, digits, _ . -)",
    "INT": "a whole number", "TIME": "a time (seconds, MM:SS or HH:MM:SS)", "NUMBER": "a number",
    "COMMA": "','", "MINUS": "'-'", "EQUAL": "'='", "HASH": "'#'", "_SEP": "'://'", "$END": "the end",
}


def _a(word: str) -> str:
    """``word`` with its article: "a doc", "an image"."""
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _error(text: str, column: int, problem: str) -> CitationError:
    return CitationError("INVALID_ADDRESS", f"invalid address {_shown(text)} at column {column}: {problem}",
                         field="address", details={"address": text[:MAX_ADDRESS_CHARS], "column": column})


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


# --- problems shared by parsing, checking and agent maps (None when fine) -----------------------------------------

def span_problem(kind: str, first: int, last: int) -> str | None:
    """A page or line range ``first``-``last`` (1-based inclusive): both >= 1, last not before first."""
    if first < 1 or last < 1:
        return f"{kind} are numbered from 1; {kind[:-1]} {first if first < 1 else last} does not exist"
    if last < first:
        return f"the range {first}-{last} ends before it starts; write FIRST-LAST with FIRST <= LAST"
    return None


def time_problem(start: float, end: float) -> str | None:
    """A time range in seconds: finite, start >= 0, end after start (no zero-length clip)."""
    if not (math.isfinite(start) and math.isfinite(end)):
        return "times must be finite numbers of seconds"
    if start < 0:
        return f"the start {format_number(start)} s is before the beginning; times start at 0"
    if end <= start:
        what = "has zero length" if end == start else "ends before it starts"
        return (f"the time range {format_number(start)}-{format_number(end)} s {what}; "
                "write START-END with END after START")
    return None


def bbox_problem(values) -> str | None:
    """A bbox: four fractions within 0-1, x1 < x2 and y1 < y2 (a region of some area)."""
    if len(values) != 4:
        return f"a bbox takes four numbers x1,y1,x2,y2, not {len(values)}"
    outside = [format_number(v) if math.isfinite(v) else str(v) for v in values if not (0.0 <= v <= 1.0)]
    if outside:
        return (f"bbox values are fractions of the width and height, within 0-1; {', '.join(outside)} "
                f"{'is' if len(outside) == 1 else 'are'} not")
    x1, y1, x2, y2 = values
    if x1 >= x2:
        return (f"the bbox has zero area: x1 {format_number(x1)} is not less than x2 {format_number(x2)} "
                "(x1,y1 is the top-left corner, x2,y2 the bottom-right)")
    if y1 >= y2:
        return (f"the bbox has zero area: y1 {format_number(y1)} is not less than y2 {format_number(y2)} "
                "(x1,y1 is the top-left corner, x2,y2 the bottom-right)")
    return None


def _rounded(value: float) -> float:
    """Times and fractions to 3 decimals, as :func:`format_number` writes them (the canonical address)."""
    return round(value, 3) + 0.0  # + 0.0: no -0.0


# --- parsing ------------------------------------------------------------------------------------------------------

def _token(node: Token | Tree[Token]) -> Token:
    """A node of the parse tree where the grammar puts a terminal (a subtree there is a bug of the grammar)."""
    if not isinstance(node, Token):
        raise TypeError(f"address.lark gave a subtree where a token belongs: {node!r}")
    return node


def _tree(node: Token | Tree[Token]) -> Tree[Token]:
    """A node of the parse tree where the grammar puts a rule (a token there is a bug of the grammar)."""
    if not isinstance(node, Tree):
        raise TypeError(f"address.lark gave a token where a rule belongs: {node!r}")
    return node


def _column(token: Token) -> int:
    """The 1-based column of ``token``: lark's lexer sets it on every token it makes (lark types it Optional for
    tokens made by hand)."""
    return token.column or 1


def _seconds(text: str, token: Token) -> float:
    """A TIME token in seconds: ``192``, ``145.5``, ``03:12``, ``00:03:12.5``."""
    parts = str(token).split(":")
    if len(parts) == 1:
        return _rounded(float(parts[0]))
    head, seconds = parts[:-1], float(parts[-1])
    if seconds >= 60:
        raise _error(text, _column(token), f"{str(token)!r}: seconds must be below 60 in MM:SS / HH:MM:SS")
    if len(head) == 2 and int(head[1]) >= 60:
        raise _error(text, _column(token), f"{str(token)!r}: minutes must be below 60 in HH:MM:SS")
    total = seconds + int(head[-1]) * 60 + (int(head[0]) * 3600 if len(head) == 2 else 0)
    return _rounded(total)


def _build(text: str, tree: Tree[Token]) -> Address:
    scheme_tok, rid_tok = _token(tree.children[0]), _token(tree.children[1])
    scheme = str(scheme_tok).lower()
    if scheme not in SCHEME_MODALITY:
        raise _error(text, 1, f"unknown scheme {str(scheme_tok)!r}; use one of {SCHEMES_TEXT}")
    rid = str(rid_tok)
    if len(rid) > MAX_RESOURCE_ID_CHARS:
        raise _error(text, _column(rid_tok), f"a resource id has at most {MAX_RESOURCE_ID_CHARS} characters, "
                                             f"this one {len(rid)}")
    if len(tree.children) == 2:
        return Address(scheme, rid)
    frag = _tree(tree.children[2])
    key_tok = _token(frag.children[0])
    if str(key_tok) != SCHEME_KEY[scheme]:
        raise _error(text, _column(key_tok), f"{_a(scheme)}:// address takes {FRAGMENT_SYNTAX[scheme]}, "
                                             f"not {str(key_tok)}=")
    kind = frag.data
    if kind == "pages" or kind == "lines":
        spans = []
        for span in map(_tree, frag.children[1:]):
            first_tok = _token(span.children[0])
            first = int(first_tok)
            last = int(_token(span.children[1])) if len(span.children) > 1 else first
            problem = span_problem(kind, first, last)
            if problem:
                raise _error(text, _column(first_tok), problem)
            spans.append((first, last))
        if kind == "lines":
            return Address(scheme, rid, lines=spans[0])
        return Address(scheme, rid, pages=tuple(spans))
    if kind == "t":
        start_tok, end_tok = _token(frag.children[1]), _token(frag.children[2])
        start, end = _seconds(text, start_tok), _seconds(text, end_tok)
        problem = time_problem(start, end)
        if problem:
            raise _error(text, _column(end_tok), problem)
        return Address(scheme, rid, t=(start, end))
    number_toks = [_token(child) for child in frag.children[1:]]
    values = tuple(_rounded(float(tok)) for tok in number_toks)
    problem = bbox_problem(values)
    if problem:
        raise _error(text, _column(number_toks[0]), problem)
    x1, y1, x2, y2 = values  # four: bbox_problem says so otherwise
    return Address(scheme, rid, bbox=(x1, y1, x2, y2))


def _syntax_error(text: str, exc: UnexpectedInput) -> CitationError:
    """The parser's complaint in words: where, what it found, and what the address's scheme would accept there."""
    token: Token | None = getattr(exc, "token", None)  # the token the parser refused (UnexpectedToken)
    at_end = token is not None and token.type == "$END"
    # pos_in_stream: always set for the parser's and the lexer's errors (lark declares it None on the base class)
    pos = len(text) if at_end else exc.pos_in_stream or 0
    column = pos + 1
    found = "the end of the address" if pos >= len(text) else repr(text[pos])
    match = _SCHEME_PREFIX.match(text)
    if match is None:
        if pos > 0 and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.\-]*", text[:pos]):
            return _error(text, column, f"expected '://' after the scheme; an address is {SYNTAX}")
        return _error(text, column, f"unexpected {found}; an address starts with one of {SCHEMES_TEXT}")
    scheme = match.group(1).lower()
    if scheme not in SCHEME_MODALITY:
        return _error(text, 1, f"unknown scheme {match.group(1)!r}; use one of {SCHEMES_TEXT}")
    hint = f"{_a(scheme)}:// address is {scheme}://ID or {scheme}://ID#{FRAGMENT_SYNTAX[scheme]}"
    hash_at = text.find("#")
    if pos == match.end():
        return _error(text, column, f"expected a resource id (a letter or digit, then letters, digits, _ . -); "
                                    f"{hint}")
    if hash_at < 0 or pos < hash_at:
        return _error(text, column, f"unexpected {found} in the resource id (letters, digits, _ . - only); {hint}")
    if pos == hash_at + 1:
        key = text[pos:].partition("=")[0]
        what = f"unknown fragment {key!r}" if key else "expected a fragment after '#'"
        return _error(text, column, f"{what}; {hint}")
    if not at_end and _complete(text[:pos]):
        return _error(text, column, f"unexpected {found} after the fragment (an address ends there); {hint}")
    expected = sorted(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    words = " or ".join(_EXPECTED_WORDS.get(e, repr(e)) for e in expected)
    if at_end:
        return _error(text, column, f"the address ends too soon, expected {words}; {hint}")
    return _error(text, column, f"unexpected {found}, expected {words}; {hint}")


def _complete(prefix: str) -> bool:
    """Whether ``prefix`` is a whole address by the grammar (what follows it is then garbage after the fragment)."""
    try:
        _PARSER.parse(prefix)
    except UnexpectedInput:
        return False
    return True


def parse_address(text: str) -> Address:
    """The :class:`Address` written in ``text``. CitationError INVALID_ADDRESS names the column and what would be
    accepted when it is malformed or cannot denote a part of any resource (see the module's docstring)."""
    if not isinstance(text, str) or not text.strip():
        raise CitationError("INVALID_ADDRESS", f"the address is empty; an address is {SYNTAX}", field="address",
                            details={"address": text if isinstance(text, str) else None, "column": 1})
    if len(text) > MAX_ADDRESS_CHARS:
        raise _error(text, MAX_ADDRESS_CHARS + 1, f"an address has at most {MAX_ADDRESS_CHARS} characters, "
                                                  f"this one {len(text)}")
    return _parse(text)


@lru_cache(maxsize=1024)
def _parse(text: str) -> Address:
    """The parse itself, remembered: an Address is immutable, and an agent resolves the same few addresses again
    and again (a refusal raises, so it is not remembered)."""
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    return _build(text, tree)


# --- checking against the source ----------------------------------------------------------------------------------

def _plural(n: int | float, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _span_text(kind: str, first: int, last: int) -> str:
    return f"{kind[:-1]} {first} is" if first == last else f"{kind} {first}-{last} are"


def extent_problem(kind: str, first: int, last: int, count: int | None) -> str | None:
    """A page/line range past the end of a source of ``count`` pages/lines (None: unknown, not checked)."""
    if count is None or last <= count:
        return None
    what = "document" if kind == "pages" else "text"
    return f"{_span_text(kind, first, last)} past the end: the {what} has {_plural(count, kind[:-1])}"


def duration_problem(start: float, end: float, duration: float | None, modality: str) -> str | None:
    """A time range against the duration (None: unknown, not checked): the start must fall inside it; the end may
    run up to END_TOLERANCE past it (the extractor clamps it)."""
    if duration is None:
        return None
    lasts = f"the {modality} lasts {format_number(duration)} s"
    if start >= duration:
        return f"t starts at {format_number(start)} s, at or after the end: {lasts}"
    if end > duration + END_TOLERANCE:
        return (f"t ends at {format_number(end)} s, past the end: {lasts} "
                f"(an end up to {format_number(END_TOLERANCE)} s past it is accepted)")
    return None


def check_address(address: Address, facts: SourceFacts) -> None:
    """Whether ``address`` can be resolved in the source ``facts`` describe: the scheme is of the source's modality,
    pages/lines within its count, the time range within its duration (an end up to 0.5 s past is accepted), and
    the range or region itself well formed (an address built from a stored location was not parsed). Extents that
    are None are not checked. CitationError INVALID_ADDRESS naming the extent."""
    def refuse(problem: str) -> CitationError:
        try:
            shown = address.format()
        except ValueError:  # a built address holding a non-finite time: named by its resource
            shown = f"{address.scheme}://{address.resource_id}"
        return CitationError("INVALID_ADDRESS", f"{shown}: {problem}", field="address",
                             details={"address": shown})

    if address.modality != facts.modality:
        scheme = MODALITY_SCHEME.get(facts.modality)
        how = (f"; cite it as {scheme}://{address.resource_id}#{FRAGMENT_SYNTAX[scheme].split(' (')[0]}"
               if scheme else "")
        raise refuse(f"{address.resource_id} is {_a(facts.modality)}{how}")
    for first, last in address.pages or ():
        problem = span_problem("pages", first, last) or extent_problem("pages", first, last, facts.page_count)
        if problem:
            raise refuse(problem)
    if address.lines is not None:
        first, last = address.lines
        problem = span_problem("lines", first, last) or extent_problem("lines", first, last, facts.line_count)
        if problem:
            raise refuse(problem)
    if address.t is not None:
        start, end = address.t
        problem = time_problem(start, end) or duration_problem(start, end, facts.duration, facts.modality)
        if problem:
            raise refuse(problem)
    if address.bbox is not None:
        problem = bbox_problem(address.bbox) or _pixel_problem(address.bbox, facts)
        if problem:
            raise refuse(problem)


def _pixel_problem(bbox, facts: SourceFacts) -> str | None:
    """A region narrower or shorter than one pixel of the image would crop to nothing."""
    x1, y1, x2, y2 = bbox
    if facts.width and (x2 - x1) * facts.width < 1:
        return f"the bbox is less than a pixel wide: the image is {facts.width} px wide"
    if facts.height and (y2 - y1) * facts.height < 1:
        return f"the bbox is less than a pixel high: the image is {facts.height} px high"
    return None

"""The ``text`` condition field of plans: ``text contains "invoice"``, ``text matches "INV-\\d{6}"``, declared by
the documents capability (``flows.documents.capability``) for the core's field registries.

Semantics (``dsl.evaluate`` states them for every content field):

- The value is the entry's extracted text as stored (``documents`` / ``document_segments``): the text last extracted,
  even when the file has changed since and is waiting to be extracted again.
- ``text contains "x"`` is true when some LINE of that text contains ``x``; ``text matches "re"`` when the RE2
  regular expression (``dsl.regex``, linear time) finds a match in some line. Lines are the document's lines
  (``flows.documents.model``): a value spanning a line break never matches. Both are case-sensitive, like every
  other text comparison of the plan language (document search, by contrast, ignores case): for any case, write
  ``text matches "(?i)invoice"``.
- An entry without extracted text (no documents row yet, or extraction failed) has no value: both are false and
  ``not (text contains "x")`` is true, as for any missing value.

Pushdown: SQL cannot decide a leaf, but the text engine (store.textindex, the one document search uses) gives a
superset (``dsl.sql.Superset``), so the plan engine reads only the entries that may match and checks those line by
line:

- entries with extracted text (a ``documents`` row with status ok), and, when the leaf needs literal text
  (``dsl.sql.content_literals``: the value of ``contains``; the literal runs a plain regex requires, in lower case
  for a ``(?i)`` one), a line the engine cannot rule out for all the pieces, folded (``store.fold``).
- A line that contains ``x`` has a fold that contains ``fold(x)``, except around a capital sigma (``str.lower``
  makes a final Σ into ς by its neighbours), so pieces are cut at Σ.

The Python check (``match``) reads the entry's segments in order, a few at a time, skips a segment whose folded text
lacks a piece (it cannot hold a matching line) and tests the lines of the others; it stops at the first matching
line, which ``plan-explain`` shows ("matched line 12 on page 3: ...").
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from sqlalchemy import Boolean, Integer, and_, bindparam, exists, or_, select
from sqlalchemy.engine import Connection, Engine

from dsl.regex import compile_regex, regex_search
from dsl.sql import content_literals
from flows.core.conditions import ContentField, Filler
from flows.documents.model import PAGED_FORMATS
from flows.documents.text_index import text_index
from store.entries import T
from store.fold import fold
from store.models import Document, DocumentSegment
from store.textindex import AllOf, Leaf, candidate_entries

PRODUCER = "text"
D = Document.__table__
S = DocumentSegment.__table__

MIN_PIECE = 1  # every piece narrows (the text engine finds any substring of a token)
MAX_LISTED = 20_000  # entries a prefilter lists at most; more, and it asks only "has text"
READ_BATCH = 8  # segments read per query (up to ~32k characters each)
EXCERPT = 240  # characters of a matching line plan-explain shows


# --- the full-text prefilter ------------------------------------------------------------------------------------


def index_pieces(op: str, value: Any) -> list[str]:
    """Folded strings that the folded text of every segment holding a line that satisfies ``op value`` contains:
    the leaf's literals (``dsl.sql.content_literals``) cut at line breaks and capital sigmas, folded, those of at
    least :data:`MIN_PIECE` characters, once each."""
    pieces: list[str] = []
    for literal in content_literals(op, value):
        for part in literal.replace("Σ", "\n").split("\n"):
            folded = fold(part)
            if len(folded) >= MIN_PIECE and folded not in pieces:
                pieces.append(folded)
    return pieces


def has_text():
    """The current entry has extracted text: a documents row with status ok."""
    return exists().where(D.c.entry_id == T.c.id, D.c.status == "ok")


class _Candidates:
    """The entries the text engine finds for some pieces, looked up when the statement runs (a plan builds its
    SQL once and runs it after earlier rules have extracted text), again when the index has changed since."""

    def __init__(self, engine: Engine, pieces: list[str]) -> None:
        self.engine, self.query = engine, AllOf(tuple(Leaf(p) for p in pieces))
        self._seen: tuple[int, frozenset[int]] | None = None
        self._found: set[int] = set()

    def _lookup(self) -> set[int]:
        snapshot = text_index(self.engine).snapshot()
        key = (snapshot.generation, snapshot.queued)
        if self._seen != key:
            self._seen, self._found = key, candidate_entries(snapshot, self.query)
        return self._found

    def too_many(self) -> bool:
        return len(self._lookup()) > MAX_LISTED

    def listed(self) -> list[int]:
        found = self._lookup()
        return [] if len(found) > MAX_LISTED else sorted(found)


def text_prefilter(op: str, value: Any, engine: Engine):
    """A clause over the entries table true for every entry whose text can satisfy ``op value``: it has extracted
    text and, when the leaf needs literal pieces, the text engine finds a line that may hold them all (entries not
    indexed yet are kept: the line check decides them). The entries are listed when the statement runs; when more
    than MAX_LISTED may match, the pieces do not narrow enough to be worth the list and only "has text" is asked."""
    pieces = index_pieces(op, value)
    if not pieces:
        return has_text()
    found = _Candidates(engine, pieces)
    every = bindparam(None, callable_=found.too_many, type_=Boolean)
    ids = bindparam(None, callable_=found.listed, expanding=True, type_=Integer)
    return and_(or_(every, T.c.id.in_(ids)), has_text())


# --- the exact check, line by line ------------------------------------------------------------------------------


def _line_test(op: str, value: Any) -> Callable[[str], int]:
    """For one line: where the leaf's match starts, or -1."""
    if op == "contains":
        needle = str(value)
        return lambda line: line.find(needle)
    if op == "matches":
        pattern = str(value)
        program = compile_regex(pattern)

        def find(line: str) -> int:
            if not regex_search(pattern, line):  # the fast yes/no program first; positions only for a match
                return -1
            found = program.search(line)
            return found.start() if found is not None else 0

        return find
    raise ValueError(f"operator {op!r} does not apply to text; use contains or matches")


def excerpt(line: str, start: int) -> str:
    """The line, or about :data:`EXCERPT` characters of it around ``start`` with ... where it is cut."""
    if len(line) <= EXCERPT:
        return line
    lo = max(0, min(start - EXCERPT // 4, len(line) - EXCERPT))
    hi = lo + EXCERPT
    return ("..." if lo else "") + line[lo:hi] + ("..." if hi < len(line) else "")


def _segments(conn: Connection, entry_id: int):
    """The entry's segments in order, :data:`READ_BATCH` per query (never the whole document in memory)."""
    after = -1
    while True:
        rows = conn.execute(select(S.c.seq, S.c.page, S.c.line_start, S.c.ocr, S.c.text)
                            .where(S.c.entry_id == entry_id, S.c.seq > after)
                            .order_by(S.c.seq).limit(READ_BATCH)).all()
        yield from rows
        if len(rows) < READ_BATCH:
            return
        after = rows[-1].seq


def text_match(conn: Connection, entry: Mapping[str, Any], op: str, value: Any) -> tuple[bool, Any]:
    """(whether some line of the entry's extracted text satisfies ``op value``, what was seen): the first matching
    line ``{line, text, page (paged formats), ocr (when read with OCR)}``; on no match ``{lines: n}``; ``{error}``
    when extraction failed; None when the entry has not been extracted."""
    doc = conn.execute(select(D.c.status, D.c.error_code, D.c.error, D.c.lines, D.c.format)
                       .where(D.c.entry_id == entry["id"])).first()
    if doc is None:
        return False, None
    if doc.status != "ok":
        return False, {"error": ": ".join(x for x in (doc.error_code, doc.error) if x) or "unknown error"}
    test = _line_test(op, value)
    pieces = index_pieces(op, value)
    for seg in _segments(conn, entry["id"]):
        if pieces:
            folded = fold(seg.text)
            if not all(p in folded for p in pieces):
                continue  # no line of this segment can match
        for i, line in enumerate(seg.text.split("\n")):
            start = test(line)
            if start >= 0:
                seen: dict[str, Any] = {"line": seg.line_start + i, "text": excerpt(line, start)}
                if doc.format in PAGED_FORMATS:
                    seen["page"] = seg.page
                if seg.ocr:
                    seen["ocr"] = True
                return True, seen
    return False, {"lines": doc.lines}


TEXT = ContentField(name="text", prefilter=text_prefilter, match=text_match)


def extract_text_fills(outcome, spec) -> bool:
    """An ``extract_text`` outcome fills the ``text`` field (for plan-preview's notes on rules that test it)."""
    return spec.producer == PRODUCER


FILLS = Filler("extract_text", extract_text_fills)

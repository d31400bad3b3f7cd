"""Reference 001's boolean search queries: parsed with a Lark grammar (``query.lark``) into the query tree of
:mod:`flows.documents.model`, checked line by line (:func:`line_matches`), and turned into the text engine's tree
(:func:`to_node`, store.textindex).

Matching is per line and case-folded with :func:`store.fold.fold`: a word or a phrase matches a line whose folded
text contains its folded text (like ``grep -i -F``). The engine answers exactly where its postings can and leaves the
other lines it cannot rule out to the line check, so a search never loses a line a plain scan would find (the
property test in tests/flows/documents/test_search.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Union

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from dsl.limits import MAX_DEPTH
from flows.documents.model import And, NotQ, Or, Query, Term
from store.errors import DocumentError
from store.fold import fold
from store.textindex.search import AllOf, AnyOf, Leaf, Node, NoneOf

MAX_QUERY_CHARS = 4_000
FUZZY_MIN = 4  # words shorter than this are matched exactly even with fuzzy
FUZZY_LONG = 8  # words this long tolerate two edits, shorter ones one
SYNTAX = ('space = AND, | = OR, a leading - = NOT, "..." = a phrase, ( ) to group; e.g. '
          '`move|teleport attack -"free action"`')

_PARSER = Lark.open("query.lark", rel_to=__file__, parser="lalr", propagate_positions=True)


def _error(query: str, column: int, problem: str) -> DocumentError:
    return DocumentError("INVALID_QUERY", f"invalid query at column {column}: {problem} ({SYNTAX})",
                         field="query", details={"query": query, "column": column})


def _check_brackets(text: str) -> None:
    """Quotes and parentheses balance, and nesting stays within MAX_DEPTH: checked before parsing, so the error can
    name the unclosed one (the parser would only see the end of the text)."""
    quote: int | None = None
    opened: list[int] = []
    nots = 0
    for i, ch in enumerate(text):
        if quote is not None:
            if ch == '"':
                quote = None
            continue
        if ch == '"':
            quote = i
        elif ch == "(":
            opened.append(i)
            if len(opened) + nots > MAX_DEPTH:
                raise _error(text, i + 1, f"groups nest at most {MAX_DEPTH} levels deep")
        elif ch == ")":
            if not opened:
                raise _error(text, i + 1, "')' closes no '('")
            opened.pop()
        if ch == "-" and (i == 0 or text[i - 1] in " \t\r\n(|-"):
            nots += 1
            if nots > MAX_DEPTH:
                raise _error(text, i + 1, f"at most {MAX_DEPTH} '-' in a row")
        elif not ch.isspace():
            nots = 0
    if quote is not None:
        raise _error(text, quote + 1, "this '\"' is never closed")
    if opened:
        raise _error(text, opened[-1] + 1, "this '(' is never closed")


def _start(token: Token) -> int:
    """Where ``token`` starts in the query: lark's lexer sets the position on every token it makes (lark types it
    Optional for tokens made by hand)."""
    return token.start_pos or 0


def _before(text: str, pos: int) -> str:
    """The last non-space character before ``pos`` ("" at the start)."""
    stripped = text[:pos].rstrip()
    return stripped[-1] if stripped else ""


def _syntax_error(text: str, exc: UnexpectedInput) -> DocumentError:
    if isinstance(exc, UnexpectedCharacters):
        at = exc.pos_in_stream or 0  # always set by the lexer (lark declares it None on the base class)
        if text[at] == "-":
            return _error(text, at + 1, "'-' must be written right before the word, phrase or group to exclude "
                                        '(quote a dash you are looking for: "-")')
        return _error(text, at + 1, f"unexpected {text[at]!r}")
    token: Token | None = getattr(exc, "token", None)  # the token the parser refused; None: the query ended
    if isinstance(exc, UnexpectedEOF) or (token is not None and token.type == "$END"):
        token = None  # UnexpectedEOF carries a placeholder token
    pos = len(text.rstrip()) if token is None else _start(token)
    prev = _before(text, pos)
    column = pos + 1
    if prev == "|":
        return _error(text, len(text[:pos].rstrip()), "'|' needs a word, phrase or group on each side")
    if prev == "-":
        return _error(text, len(text[:pos].rstrip()), "'-' must be followed by the word, phrase or group to exclude")
    if token is not None and token.type == "VBAR":
        return _error(text, column, "'|' needs a word, phrase or group on each side")
    if token is not None and token.type == "RPAR" and prev == "(":
        return _error(text, column, "empty parentheses")
    what = "the end of the query" if token is None else repr(str(token))
    return _error(text, column, f"unexpected {what}")


class _Build(Transformer):
    """The Lark tree as the model's query tree (And / Or flattened, double negation removed)."""

    def __init__(self, text: str, fuzzy: bool) -> None:
        super().__init__()
        self.text, self.fuzzy = text, fuzzy

    def _term(self, value: str, phrase: bool) -> Term:
        return Term(value, phrase=phrase, fuzzy=self.fuzzy and len(fold(value).strip()) >= FUZZY_MIN)

    @v_args(inline=True)
    def word(self, token: Token) -> Term:
        return self._term(str(token), False)

    @v_args(inline=True)
    def phrase(self, token: Token) -> Term:
        inner = str(token)[1:-1]
        if not inner.strip():
            raise _error(self.text, _start(token) + 1, "an empty phrase")
        return self._term(inner, True)

    @v_args(inline=True)
    def negate(self, _neg: Token, child: Query) -> Query:
        return child.child if isinstance(child, NotQ) else NotQ(child)

    def all_of(self, children: list[Query]) -> Query:
        flat = [g for c in children for g in (c.children if isinstance(c, And) else (c,))]
        return And(tuple(flat))

    def any_of(self, children: list[Query]) -> Query:
        flat = [g for c in children for g in (c.children if isinstance(c, Or) else (c,))]
        return Or(tuple(flat))


def _unbounded(tree: Union[Tree[Token], Token]) -> Token | None:
    """The '-' of the NOT that leaves (part of) the query without a word the line must contain, or None when every
    line it matches has to hold some positive word or phrase."""
    if isinstance(tree, Token) or tree.data in ("word", "phrase"):
        return None
    if tree.data == "negate":
        neg, child = tree.children
        assert isinstance(neg, Token)  # the grammar: negate is NEG unary, and a named terminal is kept
        if isinstance(child, Tree) and child.data == "negate":
            return _unbounded(child.children[1])
        return neg
    found = [_unbounded(c) for c in tree.children]
    if tree.data == "all_of":
        return None if any(f is None for f in found) else found[0]
    return next((f for f in found if f is not None), None)  # any_of: every alternative must be bounded


def parse_query(text: str, *, fuzzy: bool = False) -> Query:
    """The query tree of ``text`` (reference 001's syntax). A malformed query, or one that would match nearly every
    line (only exclusions), raises DocumentError INVALID_QUERY naming the column of the problem."""
    if not isinstance(text, str) or not text.strip():
        raise _error(text if isinstance(text, str) else "", 1, "the query is empty; give a word or phrase to find")
    if len(text) > MAX_QUERY_CHARS:
        raise _error(text, MAX_QUERY_CHARS + 1, f"a query has at most {MAX_QUERY_CHARS} characters")
    _check_brackets(text)
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    culprit = _unbounded(tree)
    if culprit is not None:
        column = _start(culprit) + 1
        raise _error(text, column, "this part only excludes ('-') and would match nearly every line; add a word "
                                   "or phrase the lines must contain, e.g. `attack -move`")
    try:
        return _Build(text, fuzzy).transform(tree)
    except VisitError as exc:  # an empty phrase, found while building
        raise exc.orig_exc from None


# --- the line check -------------------------------------------------------------------------------------------

_PUNCT = ".,;:!?()[]{}<>\"'`«»“”‘’*_~"


def within_distance(a: str, b: str, limit: int) -> bool:
    """Whether the Damerau-Levenshtein distance (optimal string alignment: insertions, deletions, substitutions and
    swaps of neighbours) of ``a`` and ``b`` is at most ``limit``; bounded, so it stops as soon as every path is
    over the limit."""
    if abs(len(a) - len(b)) > limit:
        return False
    if a == b:
        return True
    prev2: list[int] | None = None
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if prev2 is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
        if min(cur) > limit:
            return False
        prev2, prev = prev, cur
    return prev[len(b)] <= limit


def _fuzzy_matcher(needle: str) -> Callable[[str], bool]:
    words = needle.split()
    target = " ".join(words)
    n = len(words)
    limit = 2 if len(target) >= FUZZY_LONG else 1

    def match(line: str) -> bool:
        if needle in line:
            return True
        tokens = line.split()
        for i in range(len(tokens) - n + 1):
            window = " ".join(tokens[i:i + n])
            if within_distance(window, target, limit):
                return True
            stripped = window.strip(_PUNCT)
            if stripped != window and within_distance(stripped, target, limit):
                return True
        return False

    return match


@lru_cache(maxsize=256)
def compile_query(query: Query) -> Callable[[str], bool]:
    """A function of a FOLDED line that says whether it matches, compiled once per query tree into one Python
    expression (``"abc" in line and not ("def" in line)``): the needles are written as repr() literals and fuzzy
    terms as calls to prepared matchers, so no text of the query is ever code. Search calls it on every candidate
    line, where nested closures cost several times more."""
    env: dict[str, Callable[[str], bool]] = {}

    def expr(q: Query) -> str:
        if isinstance(q, Term):
            needle = fold(q.text)
            if q.fuzzy:
                name = f"_fuzzy{len(env)}"
                env[name] = _fuzzy_matcher(needle)
                return f"{name}(line)"
            return f"({needle!r} in line)"
        if isinstance(q, NotQ):
            return f"(not {expr(q.child)})"
        joiner = " and " if isinstance(q, And) else " or "
        return "(" + joiner.join(expr(c) for c in q.children) + ")"

    source = f"lambda line: {expr(query)}"
    return eval(compile(source, "<query>", "eval"), {"__builtins__": {}, **env})  # noqa: S307 (literals only)


def line_matches(query: Query, line: str) -> bool:
    """Whether one line matches the query (case-folded substring tests; fuzzy terms also accept a run of the
    line's words within a small edit distance)."""
    return compile_query(query)(fold(line))


def to_node(query: Query) -> Node:
    """The query tree as the text engine takes it (store.textindex): each term its folded needle (None for a fuzzy
    one: the index cannot narrow what a typo may turn into, so the line check decides every line)."""
    if isinstance(query, Term):
        return Leaf(None if query.fuzzy else fold(query.text))
    if isinstance(query, NotQ):
        return NoneOf(to_node(query.child))
    kind = AllOf if isinstance(query, And) else AnyOf
    return kind(tuple(to_node(c) for c in query.children))


def to_text(query: Query) -> str:
    """The query written back in the syntax (parenthesised where needed): parse_query(to_text(q)) == q."""
    if isinstance(query, Term):
        return f'"{query.text}"' if query.phrase else query.text
    if isinstance(query, NotQ):
        return "-" + _grouped(query.child, NotQ)
    if isinstance(query, Or):
        return "|".join(_grouped(c, Or) for c in query.children)
    return " ".join(_grouped(c, And) for c in query.children)


def _grouped(query: Query, parent: type) -> str:
    inner = to_text(query)
    if isinstance(query, And) or (isinstance(query, Or) and parent is NotQ):
        return f"({inner})"
    return inner

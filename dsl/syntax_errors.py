"""Syntax errors of DSL and expression text: a label found by matching the failure against known bad examples
(lark's ``match_examples``), the tokens that would have been accepted in plain words, and the line with a caret.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from dsl.errors import PlanSyntaxError, Problem, caret_context

log = logging.getLogger(__name__)

VALUE_HINT = 'a value such as 10MB, 7d, 2024-01-01, now - 7d, video, .pdf, [a, b] or "quoted text"'

UNCLOSED_QUOTE = "unclosed quote: end the text with the quote it starts with, on the same line"

# label -> expression texts that fail the same way
EXPRESSION_EXAMPLES: dict[str, list[str]] = {
    f"missing value after the operator; write {VALUE_HINT}": [
        "size >", "size = )", "size = ,", "size in", "size in )", "size between", "x = y and z =",
        "mtime > now -", "mtime > now - )", "size between 1 and", "size between 1 and )"],
    "unknown operator; use = != < <= > >= in, not in, contains, startswith, endswith, matches, glob or between": [
        "size is 5", "size => 5", "size 5", "size gt 5", "size x", "size not is 5", "size not = 5", "size not 5",
        "size (", "size [", "size not"],
    "missing operator and value: a comparison is field, operator, value (size > 10MB)": [
        "size", "x = y and size", "(size", "size )", "size ,", "size and y = z"],
    "unclosed parenthesis: add ')'": [
        "(x = y", "(x = y and z = w", "(x = y or z = w", "all(x = y", "all(x = y, z = w", "not (x = y",
        "all(", "((x = y)", "x = similarity(\"a\""],
    "unclosed list: add ']'": ["x in [a", "x in [a, b", "x in [a,"],
    "missing condition: write a comparison such as size > 10MB, or all(...), any(...), none(...), not ...": [
        "", "x = y and", "x = y or", "not", "x = y and )", "( )", "x = y or )", "not )", "and", "or x = y",
        "x = y and and", ")", "()"],
    "'and' or 'or' is missing between two conditions (or quote a value that has spaces)": [
        "x = y z = w", "x = y z", "x = y (", "(x = y) z = w", "x = y not z = w", "x = \"a\" b", "x = [a] b",
        "x = now b", "x = now - 1d b", "all() x = y", "x between 1 and 2 z"],
    "unbalanced parenthesis: remove the extra ')'": ["x = y)", "(x = y))", "x = y and z = w)"],
    "'between' needs two values joined by 'and': size between 1MB and 10MB": [
        "size between 1MB 5MB", "size between 1MB or 5MB", "size between 1MB )"],
    "similarity takes a quoted phrase: similarity(\"a beach at sunset\") >= 0.4": [
        "similarity > 0.5", "similarity(abc) > 0.5", "similarity(\"a\" > 0.5", "similarity("],
    "a relative time is now, now - DURATION or now + DURATION (now - 7d)": ["mtime > now 7d", "mtime > now - 7 d"],
}

# label -> DSL texts that fail the same way (expression mistakes inside a rule are added below)
DSL_EXAMPLES: dict[str, list[str]] = {
    "a plan starts with 'plan NAME'": ["rule x\n", "source x index /a\n", "x\n", "", "description x\n"],
    "missing plan name: plan NAME": ["plan\n"],
    "the plan line is 'plan NAME'; put other statements on their own lines": ["plan x y\n", "plan x when\n"],
    "unknown statement; a line starts with plan, description, mode, status, schedule, source, rule, do or prefer": [
        "plan p\nfoo\n", "plan p\nfoo bar\n", "plan p\nrule r\nfoo\n", "plan p\n\"x\"\n", "plan p\n=\n",
        "plan p\nrule r\ndo selection_set x\nfoo\n",
        "plan p\nsource s index /a\nfoo\n"],
    "missing rule name: rule NAME [when CONDITION]": ["plan p\nrule\n"],
    "after the rule name, write 'when' and a condition, or end the line": [
        "plan p\nrule r x\n", "plan p\nrule r x = y\n", "plan p\nrule r = y\n", "plan p\nrule r (\n"],
    "missing source name and type: source NAME index|watch|set|query ...": ["plan p\nsource\n", "plan p\nsource x\n"],
    "missing outcome type: do selection_set|classifier|embed|label|map|chained ...": [
        "plan p\nrule r\ndo\n", "plan p\nrule r\ndo (\n"],
    "missing value after '=': write key=value": [
        "plan p\nprefer a=\n", "plan p\nprefer a= b=c\n", "plan p\nsource s index /a recursive=\n",
        "plan p\nprefer a=[b\n", "plan p\nprefer a=[\n", "plan p\nprefer a={b=\n", "plan p\nprefer a==b\n"],
    "prefer takes key=value settings": ["plan p\nprefer\n", "plan p\nprefer a\n", "plan p\nprefer a b=c\n"],
    "missing description text: description \"...\"": ["plan p\ndescription\n"],
    "missing value: mode oneshot|continuous, status active|paused|disabled": ["plan p\nmode\n", "plan p\nstatus\n"],
    'a schedule line is schedule cron "0 3 * * *", schedule every 15m or schedule rrule "FREQ=DAILY;BYHOUR=6", '
    "then optionally timezone ZONE": ["plan p\nschedule\n", "plan p\nschedule (\n"],
    "unclosed parenthesis: add ')'": ["plan p\nrule r\ndo chained (selection_set a\n",
                                       "plan p\nrule r\ndo chained (selection_set a,\n"],
    "'do' belongs to a rule: write 'rule NAME' on a line before it": [
        "plan p\ndo selection_set x\n", "plan p\nsource s index /a\ndo x\n"],
    "an option value is a word, a quoted string, a [list] or a {key=value map}": [
        "plan p\nprefer a=)\n", "plan p\nprefer a==\n"],
}
for _label, _texts in EXPRESSION_EXAMPLES.items():
    DSL_EXAMPLES.setdefault(_label, []).extend(f"plan p\nrule r when {t}\n" for t in _texts if t)

NAMES = {"WORD": "a name or value", "STRING": "a quoted string", "OP": "an operator (= != < <= > >=)",
         "KWOP": "a word operator (in, contains, startswith, endswith, matches, glob)", "_NL": "end of line",
         "$END": "end of text", "SIGN": "+ or -", "SIMILARITY": 'similarity("...")',
         "NOT": "'not'", "_AND": "'and'", "_OR": "'or'", "_WHEN": "'when'"}


def describe_terminals(parser: Lark, names: Iterable[str]) -> str:
    words = []
    for name in sorted(set(names)):
        if name in NAMES:
            words.append(NAMES[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            words.append(name.lower())
            continue
        words.append(f"'{pattern.value}'" if pattern.type == "str" else name.lower())
    words = sorted(set(words), key=lambda w: (w.startswith("'"), w))
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


BRACKETS = {"(": "parenthesis", "[": "list", "{": "map"}
CLOSING = {"(": ")", "[": "]", "{": "}"}


def open_bracket(text: str) -> str | None:
    """The innermost bracket left open at the end of ``text`` (quoted text and comments skipped)."""
    stack: list[str] = []
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote or c == "\n":
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
        elif c in CLOSING:
            stack.append(c)
        elif c in ")]}" and stack:
            stack.pop()
        i += 1
    return stack[-1] if stack else None


ParseFn = Callable[[str], Any]
# (exception class, parser state, accepted terminals): how a parse failed, whatever the text
Key = tuple[type[UnexpectedInput], Any, frozenset[str]]


def _position(state: Any) -> Any:
    return getattr(state, "position", state)


def match_examples(exc: UnexpectedInput, parse_fn: ParseFn, examples: dict[str, list[str]]) -> str | None:
    """The label of the example that fails like ``exc``: lark's ``UnexpectedInput.match_examples``, except that
    parser states are compared by state alone, not by stack depth too (so ``size >`` also labels
    ``x = y and size >``, and an example needs no preceding statements). The examples are parsed once."""
    key = (exc.__class__, _position(exc.state), frozenset(getattr(exc, "accepts", None) or ()))
    token_type = exc.token.type if isinstance(exc, UnexpectedToken) else "*"
    labels = _failures(parse_fn, examples).get(key, {})
    return labels.get(token_type) or labels.get("*")


_FAILURES: dict[int, dict[Key, dict[str, str]]] = {}


def _failures(parse_fn: ParseFn, examples: dict[str, list[str]]) -> dict[Key, dict[str, str]]:
    """(exception class, parser state, accepted terminals) -> {token type or '*': first label failing so}."""
    if id(examples) not in _FAILURES:
        table: dict[Key, dict[str, str]] = {}
        for label, texts in examples.items():
            for text in texts:
                try:
                    parse_fn(text)
                except UnexpectedInput as ut:
                    key = (ut.__class__, _position(ut.state), frozenset(getattr(ut, "accepts", None) or ()))
                    labels = table.setdefault(key, {})
                    labels.setdefault("*", label)
                    if isinstance(ut, UnexpectedToken):
                        labels.setdefault(ut.token.type, label)
                else:
                    log.warning("syntax example %r parses; it labels nothing", text)
        _FAILURES[id(examples)] = table
    return _FAILURES[id(examples)]


def syntax_error(exc: UnexpectedInput, text: str, parse_fn: ParseFn, examples: dict[str, list[str]], parser: Lark,
                 source: str | None = None) -> PlanSyntaxError:
    """A PlanSyntaxError for ``exc`` raised while parsing ``text``, positioned in ``text``."""
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            offset = len(text.rstrip())
            got = "end of text"
        else:
            offset = token.start_pos or 0  # lexed tokens have their place
            got = "end of line" if token.type == "_NL" else f"{token.value!r}"
        expected = describe_terminals(parser, exc.accepts or exc.expected)
    elif isinstance(exc, UnexpectedCharacters):
        offset = exc.pos_in_stream or 0  # always set by the lexer (lark declares it None on the base class)
        got = f"{text[offset]!r}" if offset < len(text) else "end of text"
        expected = describe_terminals(parser, set(exc.allowed or ()) - {"_NL"})
    else:  # pragma: no cover - LALR raises the two above
        offset, got, expected = 0, "unexpected input", "valid text"
    label: str | None
    if isinstance(exc, UnexpectedCharacters) and text[offset:offset + 1] in ("\"", "'"):
        label = UNCLOSED_QUOTE
    else:
        label = match_examples(exc, parse_fn, examples)
    unclosed = open_bracket(text[:offset])
    if label is None and unclosed and (got == "end of text" or got.strip("'").isalpha()):
        label = f"unclosed {BRACKETS[unclosed]}: add {CLOSING[unclosed]!r}"
    before = text[:offset]
    line, column = before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1
    message = f"{label} (found {got}; expected {expected})" if label else f"unexpected {got}; expected {expected}"
    problem = Problem(message, line=line, column=column, context=caret_context(text, line, column))
    return PlanSyntaxError(problems=[problem], source=source)

"""Pattern matching for resource-fuzzy-match: five modes, each compiled to SQL for SQLite and PostgreSQL.

Shell globs are translated once into SQLite GLOB syntax and into an anchored regular expression, so both stores agree
on what a glob matches (`[!a]` negates, an unclosed `[` is a literal). Regular expressions use RE2 syntax
(:mod:`dsl.regex`: linear time, no backreferences or lookaround): checked with RE2 first, so a bad one is named before
any SQL runs, then run by RE2 on SQLite (the engine's REGEXP) and by PostgreSQL's ``~`` under the statement time limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import ColumnElement, func

from dsl.regex import RegexError, check_regex
from store.errors import InvalidInput, check_choice

MATCH_MODES: dict[str, str] = {
    "contains": "the field contains the pattern (LIKE %pattern%, % and _ taken literally)",
    "prefix": "the field starts with the pattern (LIKE pattern%)",
    "suffix": "the field ends with the pattern (LIKE %pattern)",
    "regex": "the pattern is a regular expression (RE2 syntax: no backreferences or lookaround) searched anywhere in "
             "the field",
    "glob": "the whole field matches a shell glob: * any run of characters (including /), ? one, [abc] a class",
}


def _glob_tokens(pattern: str) -> Iterator[tuple[Any, ...]]:
    """Shell-glob tokens: ("*",), ("?",), ("[", negate, body) or ("lit", ch). ``[!..]`` and ``[^..]`` negate; a
    ``]`` right after the opening bracket belongs to the class; an unclosed ``[`` is a literal."""
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        i += 1
        if ch in "*?":
            yield (ch,)
        elif ch == "[":
            j = i + 1 if i < n and pattern[i] in "!^" else i
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                yield ("lit", ch)
                continue
            negate = pattern[i] in "!^"
            yield ("[", negate, pattern[i + 1 if negate else i:j])
            i = j + 1
        else:
            yield ("lit", ch)


def glob_to_sqlite(pattern: str) -> str:
    """The glob in SQLite GLOB syntax (which negates with ``^`` only and matches nothing for an unclosed ``[``)."""
    out = []
    for tok in _glob_tokens(pattern):
        if tok[0] == "[":
            out.append("[" + ("^" if tok[1] else "") + tok[2] + "]")
        elif tok[0] == "lit":
            out.append("[" + tok[1] + "]" if tok[1] in "*?[" else tok[1])
        else:
            out.append(tok[0])
    return "".join(out)


def glob_to_regex(pattern: str) -> str:
    """The glob as an anchored regular expression valid in Python and PostgreSQL."""
    out = ["^"]
    for tok in _glob_tokens(pattern):
        if tok[0] == "*":
            out.append(".*")
        elif tok[0] == "?":
            out.append(".")
        elif tok[0] == "[":
            body = tok[2].replace("\\", r"\\").replace("[", r"\[")
            if body.startswith("]"):
                body = r"\]" + body[1:]
            out.append("[" + ("^" if tok[1] else "") + body + "]")
        else:
            ch = tok[1]
            out.append(ch if ch.isalnum() or ch == "_" or ord(ch) > 127 else "\\" + ch)
    out.append("$")
    return "".join(out)


def _check_regex(pattern: str, *, case_sensitive: bool) -> None:
    try:
        check_regex(pattern, ignore_case=not case_sensitive)
    except RegexError as exc:
        raise InvalidInput(f"pattern {exc}", field="pattern") from None


def match_clause(column: ColumnElement[Any], *, pattern: str, mode: str, case_sensitive: bool,
                 dialect: str) -> ColumnElement[bool]:
    """The SQL test of ``column`` against ``pattern`` in ``mode`` for ``dialect`` (sqlite | postgresql | ...)."""
    check_choice(mode, MATCH_MODES, field="mode", what="match mode")
    if not isinstance(pattern, str) or pattern == "":
        raise InvalidInput("pattern must be a non-empty string", field="pattern")
    if mode in ("contains", "prefix", "suffix"):
        target, needle = (column, pattern) if case_sensitive else (func.lower(column), pattern.lower())
        if mode == "contains":
            return target.contains(needle, autoescape=True)
        if mode == "prefix":
            return target.startswith(needle, autoescape=True)
        return target.endswith(needle, autoescape=True)
    if mode == "glob":
        if dialect == "sqlite":
            if case_sensitive:
                return column.op("GLOB")(glob_to_sqlite(pattern))
            return func.lower(column).op("GLOB")(glob_to_sqlite(pattern.lower()))
        regex = glob_to_regex(pattern)
    else:
        _check_regex(pattern, case_sensitive=case_sensitive)
        regex = pattern
    if dialect == "sqlite":  # the engine's REGEXP function is RE2's search, which takes inline flags only
        return column.regexp_match(regex if case_sensitive else "(?i)" + regex)
    return column.regexp_match(regex, flags=None if case_sensitive else "i")

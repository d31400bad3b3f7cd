"""Caller-supplied regular expressions, run with RE2 (``google-re2``): matching takes time linear in the text, so no
pattern (``^(a+)+$`` and friends) can stall the server, and compiled programs are bounded in memory.

One dialect for every pattern a caller sends: plan ``matches`` (checked here, then run by this module in Python, by
the store's SQLite ``REGEXP`` function, or checked here and run by PostgreSQL's ``~`` under its statement time limit)
and ``resource-fuzzy-match`` in ``regex`` mode. The module depends on nothing of ours, so :mod:`store` uses it too.

RE2 reads Python's syntax except for the constructs that need backtracking; :data:`RE2_DIFFERENCES` lists them and
every error says which one was used.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import re2
from re2 import _re2  # the compiled program itself: its Match is 4x faster than the wrapper's search (pinned)

RE2_DIFFERENCES = ("backreferences (\\1, (?P=name)), lookahead and lookbehind ((?=...), (?!...), (?<=...), "
                   "(?<!...)), atomic groups and possessive quantifiers ((?>...), a*+), conditionals ((?(1)...)) "
                   "and \\Z (use \\z or $) are not supported; $ matches only at the very end (not also before a "
                   "final newline); \\d, \\w, \\s and \\b match ASCII only (use \\pL, \\pN or [[:alpha:]] for "
                   "other scripts)")
MAX_PATTERN = 10_000  # characters; RE2 also refuses programs larger than its memory budget

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every rejected pattern on stderr
_OPTIONS.max_mem = 32 << 20
_TESTS = re2.Options()  # for yes/no tests: no capture groups to fill
_TESTS.log_errors = False
_TESTS.max_mem = 32 << 20
_TESTS.never_capture = True
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
_NO_MATCH = (-1, -1)

# what a caller most likely meant when RE2 rejects a construct Python's re accepts
_HINTS = (
    (re.compile(r"\\[1-9]|\(\?P="), "backreferences are not supported"),
    (re.compile(r"\(\?<?[=!]"), "lookahead and lookbehind are not supported"),
    (re.compile(r"\(\?>|[*+?}]\+"), "atomic groups and possessive quantifiers are not supported"),
    (re.compile(r"\(\?\("), "conditional groups are not supported"),
    (re.compile(r"\\Z"), "\\Z is not supported; use \\z (or $) for the end of the text"),
)


class RegexError(ValueError):
    """A pattern RE2 cannot compile; the message names the problem, the RE2 rule and an example."""


def _message(pattern: str, detail: str) -> str:
    hint = next((h for rx, h in _HINTS if rx.search(pattern)), None)
    why = f"{hint} ({detail})" if hint else detail
    return (f"{pattern!r} is not a valid regular expression: {why}. Patterns use RE2 syntax, which runs in linear "
            f"time: like Python's re, except that {RE2_DIFFERENCES}. Escape special characters with a backslash, "
            r"e.g. report_\d{4}\.pdf")


@lru_cache(maxsize=1024)
def compile_regex(pattern: str, ignore_case: bool = False) -> Any:  # an re2 program (re2 is untyped)
    """The compiled RE2 program of ``pattern`` (cached); raises :class:`RegexError` with a readable message."""
    if not isinstance(pattern, str):
        raise RegexError(f"a regular expression is text, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN:
        raise RegexError(f"the regular expression is {len(pattern)} characters long; at most {MAX_PATTERN} are "
                         "allowed")
    try:
        return re2.compile("(?i)" + pattern if ignore_case else pattern, _OPTIONS)
    except UnicodeEncodeError:  # a lone surrogate ("\udcff" in JSON) is not text RE2 can read
        raise RegexError(f"{pattern!r} is not a valid regular expression: it holds characters that are not valid "
                         "Unicode text") from None
    except re2.error as exc:
        detail = exc.args[0] if exc.args else str(exc)
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RegexError(_message(pattern, str(detail))) from None


def check_regex(pattern: str, ignore_case: bool = False) -> str:
    """``pattern`` unchanged when RE2 compiles it, else :class:`RegexError`."""
    compile_regex(pattern, ignore_case)
    return pattern


@lru_cache(maxsize=1024)
def _test_program(pattern: str) -> Any:  # an _re2.RE2
    compile_regex(pattern)  # a readable RegexError for a bad pattern
    return _re2.RE2(pattern.encode("utf-8"), _TESTS)


def regex_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` occurs anywhere in ``text`` (``re.search`` semantics, RE2 syntax, linear time)."""
    data = text.encode("utf-8", "surrogateescape")
    found: bool = _test_program(pattern).Match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH
    return found


def sqlite_regexp(pattern: str | None, value: str | None) -> bool | None:
    """SQLite's ``REGEXP`` function (``value REGEXP pattern`` calls it as ``regexp(pattern, value)``); NULL in,
    NULL out."""
    if pattern is None or value is None:
        return None
    return regex_search(pattern, value)

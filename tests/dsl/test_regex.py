"""Caller-supplied regular expressions (dsl.regex): RE2 answers as Python's re.search does for ordinary patterns, in
linear time for the ones that make re backtrack for ever, and refuses what it cannot run with a readable reason."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dsl.regex import RegexError, check_regex, regex_search, sqlite_regexp

ORDINARY = [r"\d+", r"^report_\d{4}\.pdf$", r"(copy( \d+)?)", "a|b", r"\\", r"[\"']", ".*", "x{2,}", r"(?i)JPE?G$",
            r"^[a-z]+\s\d+$", r"[^a-c]+", r"\bx", "é.", r"^$", r"a.c", r"(?s)a.c", r"\.", r"[a-z]{2,3}?b"]


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(ORDINARY), text=st.text(alphabet="abcxXJPEG 0129._\\'\"é\n-", max_size=12))
def test_ordinary_patterns_match_as_pythons_re_search_does(pattern, text):
    assume(not text.endswith("\n"))  # Python's $ also matches before a final newline; RE2's does not (below)
    assume(text.isascii() or "\\b" not in pattern)  # \b is ASCII in RE2: é is no word character there (below)
    assert regex_search(pattern, text) == (re.search(pattern, text) is not None)


@pytest.mark.parametrize("pattern, text", [
    ("^report$", "report\n"),  # $ is the very end of the text, not also before a final newline
    (r"^\w+$", "café"),  # \w, \d, \s and \b are ASCII
    (r"\d", "٣"),
    (r"\bé", "é"),  # é is a word character to Python, not to RE2
])
def test_the_documented_differences_from_python(pattern, text):
    assert re.search(pattern, text) is not None and regex_search(pattern, text) is False
    assert regex_search(r"^\pL+$", "café") and regex_search("^report\n?$", "report\n")


def test_a_catastrophic_pattern_is_answered():
    assert regex_search("^(a+)+$", "a" * 10_000 + "!") is False
    assert regex_search("(x+x+)+y", "x" * 10_000) is False


@pytest.mark.parametrize("pattern, says", [
    ("a\udcff", "not valid Unicode text"),
    ("x" * 10_001, "at most 10000"),
    ("(", r"missing \)"),
])
def test_patterns_re2_cannot_run_are_refused_with_the_reason(pattern, says):
    with pytest.raises(RegexError, match=says):
        check_regex(pattern)


def test_the_sqlite_function_passes_null_through():
    assert sqlite_regexp(None, "a") is None and sqlite_regexp("a", None) is None and sqlite_regexp("a", "ba") is True

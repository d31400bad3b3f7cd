"""dsl.sql's literals: the runs of text every match of a regex contains (what SQL narrows a content search by), and
the literals of a ``contains``."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from dsl.regex import RegexError, check_regex, regex_search
from dsl.sql import content_literals, regex_literals


@pytest.mark.parametrize("pattern, literals", [
    (r"INV-\d{6}", ["INV-"]),
    (r"report_\d+\.pdf", ["report_", ".pdf"]),
    (r"^total:\s*\$\d", ["total:", "$"]),
    ("colou?r", ["colo", "r"]),
    ("ab(c|d)ef", ["ab", "ef"]),
    ("x{2}yz", ["yz"]),
    ("abc{0}", ["ab"]),
    ("[]a]bcd", ["bcd"]),
    ("(?P<n>a)bcd", ["bcd"]),
    (r"\bword\b", ["word"]),
    ("a.b", ["a", "b"]),
    ("invoice|receipt", []),  # alternation at the top: no run is in every match
    ("(?i)Invoice", ["invoice"]),  # case-insensitive as a whole: runs in lower case
    ("(?i)INV-\\d+", ["inv-"]),
    ("(?i)sun dial", ["un dial"]),  # s also matches the long s, which does not lower to s
    ("(?i)Café", ["caf"]),  # only ASCII: other scripts have case orbits str.lower does not follow
    ("(?is)invoice", []),  # other flags change what the characters match
    ("abc(?i)def", []),
    (r"\Qa.b\E", []),
    (r"\x41BC", []),
    (r"\pLabc", []),
    ("a{,3}", []),  # RE2 reads it literally; this reader does not guess
    ("[[:alpha:]]abc", []),
])
def test_regex_literals_are_only_runs_every_match_contains(pattern, literals):
    assert regex_literals(pattern) == literals


@given(pattern=st.text(alphabet="abKs.|()?*+{}[]^$\\1,d-", max_size=10), caseless=st.booleans(), data=st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                   HealthCheck.too_slow])
def test_a_line_a_regex_matches_contains_every_literal_run_it_requires(pattern, caseless, data):
    pattern = "(?i)" + pattern if caseless else pattern
    try:
        check_regex(pattern)
        re.compile(pattern)
    except (RegexError, re.error):
        reject()
    line = data.draw(st.from_regex(pattern))  # strings holding a match (Python's reading of the pattern)
    if regex_search(pattern, line):  # RE2's reading decides
        runs = regex_literals(pattern)
        assert all(run in (line.lower() if caseless else line) for run in runs), (pattern, line, runs)


def test_content_literals_of_contains_is_the_value():
    assert content_literals("contains", "invoice") == ["invoice"]
    assert content_literals("contains", "") == []
    assert content_literals("matches", r"INV-\d+") == ["INV-"]

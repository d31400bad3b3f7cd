"""Glob translation and match clauses: SQLite and PostgreSQL agree on what a pattern matches."""

from __future__ import annotations

import re
import sqlite3

import pytest
from sqlalchemy.dialects import postgresql

from store.entries import T
from store.patterns import glob_to_regex, glob_to_sqlite, match_clause


@pytest.mark.parametrize("pattern", ["*.jpg", "a?c", "[abc]*", "[!a]*", "x[*]y", "[]]x", "a.b+c", "(x)|y", "[a-c]?",
                                     "100%_*", "back\\slash", "[unclosed"])
def test_glob_translation_agrees_with_sqlite_glob(pattern):
    samples = ["a.jpg", "abc", "aXc", "bcd", "x*y", "xay", "]x", "a.b+c", "(x)|y", "ab", "100%_done", "back\\slash",
               "[unclosed", "c1", ""]
    db = sqlite3.connect(":memory:")
    native = glob_to_sqlite(pattern)
    expected = [s for s in samples if db.execute("SELECT ? GLOB ?", (s, native)).fetchone()[0]]
    regex = re.compile(glob_to_regex(pattern))
    assert [s for s in samples if regex.search(s)] == expected


@pytest.mark.parametrize("pattern, matches, misses", [
    ("[!a]*", ["bcd", "]x"], ["abc", ""]),
    ("[^a]*", ["bcd"], ["abc"]),
    ("[unclosed", ["[unclosed"], ["unclosed"]),
    ("x[*]y", ["x*y"], ["xay"]),
])
def test_glob_negates_with_bang_or_caret_and_takes_an_unclosed_bracket_literally(pattern, matches, misses):
    db = sqlite3.connect(":memory:")
    native = glob_to_sqlite(pattern)
    assert all(db.execute("SELECT ? GLOB ?", (s, native)).fetchone()[0] for s in matches)
    assert not any(db.execute("SELECT ? GLOB ?", (s, native)).fetchone()[0] for s in misses)


def test_postgresql_gets_regex_operators_not_sqlite_functions():
    for mode, pattern in (("regex", r"report_\d{4}"), ("glob", "*.jpg")):
        clause = match_clause(T.c.path, pattern=pattern, mode=mode, case_sensitive=False, dialect="postgresql")
        sql = str(clause.compile(dialect=postgresql.dialect()))
        assert "~*" in sql and "GLOB" not in sql and "REGEXP" not in sql
    sensitive = match_clause(T.c.path, pattern="*.jpg", mode="glob", case_sensitive=True, dialect="postgresql")
    assert " ~ " in str(sensitive.compile(dialect=postgresql.dialect()))


# --- regular expressions are RE2: linear time, Python-like syntax without backtracking constructs ------------------


@pytest.mark.parametrize("pattern, named", [
    (r"(a)\1", "backreferences are not supported"),
    (r"report(?=\.pdf)", "lookahead and lookbehind are not supported"),
    (r"(?<!x)y", "lookahead and lookbehind are not supported"),
    (r"a++", "possessive quantifiers are not supported"),
    (r"end\Z", "use \\z (or $)"),
])
def test_regex_constructs_re2_lacks_are_refused_saying_why_and_that_re2_syntax_is_used(pattern, named):
    from store.errors import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        match_clause(T.c.name, pattern=pattern, mode="regex", case_sensitive=True, dialect="sqlite")
    assert named in caught.value.message and "RE2 syntax" in caught.value.message
    assert caught.value.field == "pattern"


def test_store_regexp_function_is_re2_and_answers_a_catastrophic_pattern(engine):
    """Python's re backtracks 2**34 times here (minutes, holding the GIL); RE2 answers at once."""
    from sqlalchemy import literal, select

    with engine.connect() as conn:
        evil = conn.execute(select(match_clause(
            literal("a" * 34 + "!"), pattern="^(a+)+$", mode="regex", case_sensitive=True,
            dialect="sqlite"))).scalar_one()
        plain = conn.execute(select(match_clause(
            literal("Report_2024.PDF"), pattern=r"report_\d{4}\.pdf", mode="regex",
            case_sensitive=False, dialect="sqlite"))).scalar_one()
    assert (evil, plain) == (0, 1)

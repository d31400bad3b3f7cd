"""Reference 001's boolean query syntax: parsing, errors with their column, the per-line check and the tree the
text engine takes."""

from __future__ import annotations

import pytest

from flows.documents.model import And, NotQ, Or, Term
from flows.documents.query import line_matches, parse_query, to_node, to_text, within_distance
from store.errors import DocumentError
from store.textindex import AllOf, AnyOf, Leaf, NoneOf

T = Term


@pytest.mark.parametrize("text, tree", [
    ("attack", T("attack")),
    ("move attack", And((T("move"), T("attack")))),
    ("move|teleport attack", And((Or((T("move"), T("teleport"))), T("attack")))),
    ("a | b", Or((T("a"), T("b")))),
    ('"free action" -cost', And((T("free action", phrase=True), NotQ(T("cost"))))),
    ("-(a|b) c", And((NotQ(Or((T("a"), T("b")))), T("c")))),
    ("(a b) | c d", And((Or((And((T("a"), T("b"))), T("c"))), T("d")))),
    ("INV-123 e-mail", And((T("INV-123"), T("e-mail")))),
    ("--word", T("word")),
    ("a (b c)", And((T("a"), T("b"), T("c")))),
    ('"-5" x', And((T("-5", phrase=True), T("x")))),
    ("Ünïcode straße", And((T("Ünïcode"), T("straße")))),
])
def test_queries_parse_into_the_tree_with_or_binding_tighter_than_and(text, tree):
    assert parse_query(text) == tree
    assert parse_query(to_text(tree)) == tree


@pytest.mark.parametrize("text, column, says", [
    ("", 1, "empty"),
    ("   ", 1, "empty"),
    ("a |", 3, "'|' needs"),
    ("| a", 1, "'|' needs"),
    ("a | | b", 3, "'|' needs"),
    ("a (b", 3, "'(' is never closed"),
    ("a b)", 4, "')' closes no '('"),
    ('a "free action', 3, "'\"' is never closed"),
    ("()", 2, "empty parentheses"),
    ('x ""', 3, "empty phrase"),
    ("-foo", 1, "only excludes"),
    ("-foo -bar", 1, "only excludes"),
    ("a|-b", 3, "only excludes"),
    ("a - b", 3, "'-' must be written right before"),
    ("a -", 3, "'-' must be written right before"),
    ("(" * 70 + "a" + ")" * 70, 65, "nest at most"),
])
def test_malformed_queries_are_invalid_with_the_column_of_the_problem(text, column, says):
    with pytest.raises(DocumentError) as err:
        parse_query(text)
    assert err.value.code == "INVALID_QUERY"
    assert err.value.details == {"query": text, "column": column}
    assert f"column {column}" in err.value.message and says in err.value.message


@pytest.mark.parametrize("query, line, expected", [
    ("attack", "An ATTACK of opportunity", True),
    ("attack", "counterattacks", True),  # substrings, like grep -i -F
    ("attack", "atack", False),
    ("move|teleport attack", "teleport then attack", True),
    ("move|teleport attack", "teleport away", False),
    ("attack -free", "free attack", False),
    ("attack -free", "an attack", True),
    ('"free action"', "a Free Action costs", True),
    ('"free action"', "free  action", False),
    ("straße", "STRASSE", False),  # folding is str.lower, no ß expansion
    ("ünïcode", "ÜNÏCODE text", True),
    ("INV-123", "ref inv-1234", True),
    ("-(a|b) cat", "a cat", False),
    ("-(x|y) cat", "a cat", True),
])
def test_a_line_matches_by_case_folded_substrings(query, line, expected):
    assert line_matches(parse_query(query), line) is expected


@pytest.mark.parametrize("query, line, expected", [
    ("teleport", "we telport now", True),  # one deletion
    ("teleport", "we tleeport now", True),  # a swap of neighbours
    ("teleport", "we tlport now", True),  # two edits: 8 letters tolerate two
    ("attack", "an atack,", True),  # punctuation around the word is not an edit
    ("attack", "an atakk", False),  # two edits in 6 letters
    ("move", "mvoe", True),
    ("cat", "cot", False),  # words under 4 letters match exactly
    ('"free action"', "a fre action here", True),
])
def test_fuzzy_terms_tolerate_small_typos(query, line, expected):
    assert line_matches(parse_query(query, fuzzy=True), line) is expected
    assert line_matches(parse_query(query), line) is (query.strip('"') in line)


@pytest.mark.parametrize("a, b, limit, expected", [
    ("abcd", "abcd", 0, True), ("abcd", "abdc", 1, True), ("abcd", "acbd", 1, True), ("abcd", "ab", 1, False),
    ("abcd", "ab", 2, True), ("kitten", "sitting", 2, False), ("kitten", "sitting", 3, True), ("", "ab", 2, True),
])
def test_bounded_edit_distance(a, b, limit, expected):
    assert within_distance(a, b, limit) is expected


def test_the_engine_gets_folded_needles_and_no_needle_for_fuzzy_terms():
    assert to_node(parse_query('Move|TELEport -"Free Action"')) == AllOf(
        (AnyOf((Leaf("move"), Leaf("teleport"))), NoneOf(Leaf("free action"))))
    assert to_node(parse_query("attack ab", fuzzy=True)) == AllOf((Leaf(None), Leaf("ab")))  # short words stay exact

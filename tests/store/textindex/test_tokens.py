"""Cutting folded text into tokens and what a needle asks of them (store.textindex.tokens)."""

from __future__ import annotations

import re

import pytest

from store.fold import fold
from store.textindex.tokens import LINE_MARK, Needle, Run, Vocabulary, analyse, is_word_byte, token_lines

# the ASCII bytes that are not word bytes (letters, digits, "_"): every other byte, non-ASCII ones included, is
# part of a token
_SEPARATORS = re.compile(r"[\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]+")


def words(folded: str) -> list[str]:
    return [w for w in _SEPARATORS.split(folded) if w]


def tokens_by_line(text: str, first_line: int = 0) -> list[tuple[int, str]]:
    """(line id, token) of ``text`` folded, as token_lines lists them."""
    vocab = Vocabulary()
    ids, lines = token_lines(fold(text).encode("utf-8"), vocab, first_line)
    names = {i: t.decode("utf-8") for t, i in vocab.items()}
    return list(zip(lines.tolist(), (names[i] for i in ids.tolist())))


# --- analyse ------------------------------------------------------------------------------------------------------


def test_a_needle_of_word_bytes_only_is_one_run_the_postings_answer_alone():
    assert analyse("mail") == Needle((Run(b"mail", "contains"),), exact=True)
    assert analyse("x") == Needle((Run(b"x", "contains"),), exact=True)
    assert analyse("snake_case42") == Needle((Run(b"snake_case42", "contains"),), exact=True)


@pytest.mark.parametrize(("needle", "runs"), [
    ("e-mail", [(b"e", "ends"), (b"mail", "starts")]),
    ("foo.bar", [(b"foo", "ends"), (b"bar", "starts")]),
    ("a  b", [(b"a", "ends"), (b"b", "starts")]),
    (".net", [(b"net", "starts")]),
    ("mail:", [(b"mail", "ends")]),
    ("-x-", [(b"x", "equals")]),
    (" hello world ", [(b"hello", "equals"), (b"world", "equals")]),
    ("a.b.c", [(b"a", "ends"), (b"b", "equals"), (b"c", "starts")]),
    ("(1+2)", [(b"1", "equals"), (b"2", "equals")]),
])
def test_each_run_of_a_needle_with_separators_is_bounded_where_the_needle_goes_on(needle, runs):
    found = analyse(needle)
    assert [(r.text, r.bound) for r in found.runs] == runs
    assert not found.exact and not found.never  # necessary only: the line check decides


@pytest.mark.parametrize("needle", ["a\nb", "\n", "end\n", "\nstart"])
def test_a_needle_with_a_line_break_never_matches(needle):
    assert analyse(needle) == Needle((), exact=True, never=True)


@pytest.mark.parametrize("needle", ["-", "--", " ", "...", "", "\t", "()[]{}"])
def test_a_needle_of_punctuation_only_has_no_runs_and_cannot_narrow(needle):
    found = analyse(needle)
    assert found.runs == () and not found.exact and not found.never


def test_non_ascii_characters_are_word_bytes_punctuation_included():
    assert all(is_word_byte(b) for b in "é东、«»\u00a0\u3000".encode())
    assert not any(is_word_byte(b) for b in b" -.\t\r\x00\x01\x7f")
    assert analyse(fold("CAFÉ")) == Needle((Run("café".encode(), "contains"),), exact=True)
    assert analyse("東京、大阪") == Needle((Run("東京、大阪".encode(), "contains"),), exact=True)
    assert [(r.text, r.bound) for r in analyse("é-x").runs] == [("é".encode(), "ends"), (b"x", "starts")]


# --- token_lines --------------------------------------------------------------------------------------------------


def test_token_lines_lists_each_token_with_its_line_counted_from_the_first():
    assert tokens_by_line("Foo bar\n\nbaz foo-FOO\n", first_line=10) == [
        (10, "foo"), (10, "bar"), (12, "baz"), (12, "foo"), (12, "foo")]  # a token twice on a line: listed twice


def test_every_ascii_separator_cuts_tokens_and_only_line_breaks_count_lines():
    assert tokens_by_line("a\tb\rc\x00d\x01e,f\n\ng_h") == [
        (0, "a"), (0, "b"), (0, "c"), (0, "d"), (0, "e"), (0, "f"), (2, "g_h")]
    assert tokens_by_line("\nlead") == [(1, "lead")]
    assert tokens_by_line("") == [] and tokens_by_line("\n\n") == []


def test_one_vocabulary_numbers_a_token_the_same_in_every_text():
    vocab = Vocabulary()
    assert vocab.line_mark == vocab[LINE_MARK] == 0
    ids_a, lines_a = token_lines(b"alpha beta", vocab, 0)
    ids_b, lines_b = token_lines(b"beta\ngamma alpha", vocab, 5)
    assert ids_a.tolist() == [vocab[b"alpha"], vocab[b"beta"]]
    assert ids_b.tolist() == [vocab[b"beta"], vocab[b"gamma"], vocab[b"alpha"]]
    assert lines_a.tolist() == [0, 0] and lines_b.tolist() == [5, 6, 6]
    assert sorted(vocab.values()) == [0, 1, 2, 3]


@pytest.mark.parametrize("text", [
    "Café CRÈME brûlée",
    "Straße STRASSE Maß",
    "ΟΔΟΣ ΚΑΛΟΣ σοφός Σ",
    "東京タワー、大阪城 (ＡＢＣ)",
    "İstanbul ǅemal ﬁle Ωmega",
    "naïve—résumé «quote» x\u00a0y",
])
def test_non_ascii_text_tokenises_as_its_folded_words(text):
    """A token is a run of the folded text between ASCII separators, whatever the script; and a word of the text,
    folded as a needle is, is exactly one such token: what the index holds and what a search asks agree."""
    folded = fold(text)
    assert [t for _, t in tokens_by_line(text)] == words(folded)
    for word in words(text):
        needle = analyse(fold(word))
        assert needle.exact and len(needle.runs) == 1
        assert needle.runs[0].text.decode("utf-8") in words(folded)


def test_greek_final_sigma_folds_alike_in_text_and_needle():
    assert fold("ΟΔΟΣ") == "οδος"  # a final capital sigma folds to ς, in the text and in the needle
    assert [t for _, t in tokens_by_line("ΟΔΟΣ ΚΑΛΟΣ")] == ["οδος", "καλος"]
    assert analyse(fold("ΟΔΟΣ")).runs == (Run("οδος".encode(), "contains"),)

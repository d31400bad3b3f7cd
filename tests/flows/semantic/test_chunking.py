"""flows.semantic.chunking: sentence / word / hard breaks, overlap, offsets, lines and pages (examples and
properties against a direct count over the joined text)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flows.semantic.chunking import chunk_pages
from store.errors import InvalidInput


def chunks(text_or_pages, **kw):
    pages = [(None, text_or_pages)] if isinstance(text_or_pages, str) else text_or_pages
    return list(chunk_pages(pages, **kw))


def test_a_short_text_is_one_chunk_with_its_edges_stripped():
    [c] = chunks("  Hello world.\n  ")
    assert (c.index, c.start, c.end, c.text) == (0, 2, 14, "Hello world.")
    assert (c.line_start, c.line_end, c.page, c.page_end) == (1, 1, None, None)


def test_empty_and_blank_documents_give_no_chunks():
    assert chunks("") == []
    assert chunks(" \n\t\n ") == []
    assert chunks([]) == []
    assert chunks([(1, ""), (2, "   "), (3, "\n")]) == []


def test_a_sentence_end_in_the_last_30_percent_is_preferred_to_a_later_word_break():
    text = "a" * 70 + ". " + "word " * 20  # the sentence ends at 71 (of a 100 window); words go on to 100+
    first = chunks(text, chunk_size=100, overlap=10)[0]
    assert first.text == "a" * 70 + "."


def test_a_sentence_end_before_the_last_30_percent_is_not_used():
    text = "Short. " + "word " * 40
    first = chunks(text, chunk_size=100, overlap=10)[0]
    assert first.end > 70 and first.text.endswith("word")


def test_a_paragraph_break_counts_as_a_sentence_boundary():
    text = "x" * 80 + "\n\n" + "y " * 40
    first = chunks(text, chunk_size=100, overlap=0)[0]
    assert first.text == "x" * 80


def test_without_a_sentence_end_the_chunk_breaks_between_words():
    words = " ".join(f"w{i:03d}" for i in range(100))  # 5-character slots, no sentence ends
    for c in chunks(words, chunk_size=52, overlap=12):
        assert len(c.text) <= 52
        assert all(len(w) == 4 for w in c.text.split(" "))  # no word cut


def test_a_long_word_is_cut_hard_and_its_pieces_overlap():
    cs = chunks("x" * 5000, chunk_size=1000, overlap=200)
    assert [len(c.text) for c in cs][:5] == [1000] * 5
    assert all(b.start == a.end - 200 for a, b in zip(cs, cs[1:]))
    assert cs[-1].end == 5000


def test_consecutive_chunks_overlap_by_about_overlap_and_start_at_a_word():
    text = " ".join(f"word{i}" for i in range(600))
    cs = chunks(text, chunk_size=200, overlap=50)
    assert len(cs) > 10
    for a, b in zip(cs, cs[1:]):
        assert 40 <= a.end - b.start <= 60  # ~50, moved to the next word start
        assert text[b.start - 1] == " "


def test_reference_defaults_are_1000_and_200():
    text = " ".join(f"token{i}" for i in range(1000))
    cs = chunks(text)
    assert max(len(c.text) for c in cs) <= 1000 and len(cs[0].text) > 990
    assert 180 <= cs[0].end - cs[1].start <= 210


def test_pages_and_lines_are_counted_across_pages():
    pages = [(1, "alpha one\nalpha two"), (2, "beta one\nbeta two\nbeta three"), (3, "gamma")]
    cs = chunks(pages, chunk_size=25, overlap=0)
    text = "\n".join(t for _, t in pages)
    assert [c.text for c in cs] == [text[c.start:c.end] for c in cs]
    by_text = {c.text: c for c in cs}
    first = cs[0]
    assert (first.page, first.line_start) == (1, 1)
    last = cs[-1]
    assert (last.page_end, last.line_end) == (3, 6)
    spanning = [c for c in cs if c.page != c.page_end]
    assert spanning, by_text  # some chunk crosses a page boundary
    for c in cs:
        assert c.line_start == text.count("\n", 0, c.start) + 1


def test_bad_sizes_are_refused_naming_the_parameter():
    with pytest.raises(InvalidInput, match="chunk_size"):
        chunks("abc", chunk_size=0)
    with pytest.raises(InvalidInput, match="overlap"):
        chunks("abc", chunk_size=100, overlap=100)
    with pytest.raises(InvalidInput, match="overlap"):
        chunks("abc", chunk_size=100, overlap=-1)


def test_pages_are_read_lazily():
    read = []

    def pages():
        for i in range(1, 1000):
            read.append(i)
            yield i, f"page {i} " + "text " * 50

    it = chunk_pages(pages(), chunk_size=200, overlap=20)
    next(it)
    assert len(read) <= 2


# ---- properties --------------------------------------------------------------------------------------------------

ALPHABET = st.sampled_from(list("ab c.?!\n") + ["  ", "\n\n", ". ", "xyzxyzxyz"])
PAGE_TEXT = st.lists(ALPHABET, max_size=60).map("".join)


def page_of(starts: list[tuple[int, int | None]], offset: int):
    found = None
    for start, page in starts:
        if start <= offset:
            found = page
    return found


@settings(max_examples=300, deadline=None)
@given(pages=st.lists(PAGE_TEXT, max_size=6), chunk_size=st.integers(1, 40), data=st.data(),
       paged=st.booleans())
def test_chunks_agree_with_a_direct_count_over_the_joined_text(pages, chunk_size, data, paged):
    overlap = data.draw(st.integers(0, chunk_size - 1))
    numbered = [(i + 1 if paged else None, t) for i, t in enumerate(pages)]
    text = "\n".join(pages)
    starts, at = [], 0
    for page, t in numbered:
        starts.append((at, page))
        at += len(t) + 1
    cs = list(chunk_pages(numbered, chunk_size=chunk_size, overlap=overlap))
    covered = [False] * len(text)
    for i, c in enumerate(cs):
        assert c.index == i
        assert text[c.start:c.end] == c.text  # exact: chunks start and end on non-whitespace
        assert c.text and c.text == c.text.strip()
        assert len(c.text) <= chunk_size
        assert c.line_start == text.count("\n", 0, c.start) + 1
        assert c.line_end == text.count("\n", 0, c.end - 1) + 1
        assert c.page == page_of(starts, c.start) and c.page_end == page_of(starts, c.end - 1)
        for k in range(c.start, c.end):
            covered[k] = True
    for a, b in zip(cs, cs[1:]):
        assert a.start < b.start <= a.end or text[a.end:b.start].strip() == ""  # progress; gaps only whitespace
        assert b.end > a.end  # each chunk brings text the previous one did not have
    assert all(covered[k] or text[k].isspace() for k in range(len(text)))  # every non-blank character is covered
    if not text.strip():
        assert cs == []

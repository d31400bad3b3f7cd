"""Boolean line search and ranking over a snapshot (store.textindex.search): the same lines as a plain scan, exact
counts, context within a document, scope, order, BM25 ranking, the deadline, and candidate entries."""

from __future__ import annotations

import time

import pytest

from store.fold import fold
from store.textindex import (AllOf, AnyOf, Leaf, Node, NoneOf, Scope, SearchTimeout, Snapshot, candidate_entries,
                             search)
from store.textindex.segment import DocIn
from tests.store.textindex.support import check_of, scan, snapshot_of, write_segment

MAIL = DocIn(1, 1, "/lib/a/mail.txt", "text", ["Send an e-mail to Foo.Bar", "email me", "e mail",
                                               "E-MAILS are e-mails", "foo bar", "a  b double", "a b single"])
CODE = DocIn(2, 1, "/lib/a/code.py", "code", ["import foo.bar", "x = foo.barbaz", "foo_bar = 1", "print(a  b)",
                                              "-- comment --", "x-y"])
OLD = DocIn(5, 1, "/lib/a/old.txt", "text", ["e-mail foo.bar a  b straße café x-y"])  # tombstoned
INTL = DocIn(3, 1, "/lib/b/intl.txt", "text", ["Straße und Café", "ΟΔΟΣ ΚΑΛΟΣ", "οδοσ", "東京タワーと大阪",
                                               "naïve résumé", "STRASSE"])
SHORT = DocIn(4, 1, "/lib/ab/short.md", "markdown", ["a", "b", "-", ""])
CAND = DocIn(6, 1, "/lib/b/cand.txt", "text", ["the mailbox", "e mail"])  # e-mail's runs, never e-mail itself
LIVE = [MAIL, CODE, INTL, SHORT, CAND]


@pytest.fixture(scope="module")
def snap(tmp_path_factory) -> Snapshot:
    d = tmp_path_factory.mktemp("search")
    first = write_segment(d, [MAIL, OLD, CODE])
    second = write_segment(d, [INTL, SHORT, CAND])
    return snapshot_of([first, second], deleted={first.name: frozenset({1})}, queued=[99])


def found(result) -> list[tuple[int, int]]:
    return sorted((h.entry_id, h.line) for h in result.hits)


QUERIES: list[Node] = [
    Leaf("mail"), Leaf("e-mail"), Leaf("foo.bar"), Leaf("a  b"), Leaf("a b"), Leaf("x-y"), Leaf("-- "),
    Leaf("a"), Leaf("b"), Leaf("-"), Leaf("."), Leaf(" "), Leaf(""), Leaf("a\nb"),
    Leaf("é"), Leaf("straße"), Leaf(fold("ΟΔΟΣ")), Leaf("οδοσ"), Leaf("大阪"), Leaf("京タ"), Leaf("ï"),
    AllOf((Leaf("foo"), Leaf("bar"))),
    AnyOf((Leaf("mail"), Leaf("café"))),
    AllOf((Leaf("foo"), NoneOf(Leaf("baz")))),
    NoneOf(Leaf("e")),
    NoneOf(Leaf("a  b")),
    AllOf((Leaf("e-mail"), NoneOf(Leaf("e-mails")))),
    AnyOf((Leaf("x-y"), AllOf((Leaf("import"), Leaf("foo.bar"))))),
    AllOf((Leaf("b"), AnyOf((Leaf("a  b"), Leaf("-"))))),
    AnyOf((Leaf("zzz"), Leaf("e-mail"))),
]


@pytest.mark.parametrize("query", QUERIES, ids=[repr(q)[:60] for q in QUERIES])
def test_search_finds_exactly_the_lines_a_plain_scan_finds(snap, query):
    result = search(snap, query, check_of(query), limit=1000)
    expected = scan(LIVE, query)
    assert found(result) == sorted(expected)
    assert result.total == len(expected)
    texts = {(d.entry_id, n): line for d in LIVE for n, line in enumerate(d.lines, 1)}
    assert all(h.text == texts[h.entry_id, h.line] for h in result.hits)


def test_the_total_counts_every_match_past_the_limit(snap):
    query = Leaf("a")
    result = search(snap, query, check_of(query), limit=2)
    assert len(result.hits) == 2 and result.total == len(scan(LIVE, query)) > 2


def test_a_result_reports_the_queued_entries(snap):
    assert search(snap, Leaf("mail"), check_of(Leaf("mail"))).queued == frozenset({99})


def test_context_lines_never_cross_documents(tmp_path):
    docs = [DocIn(1, 1, "/c/a", "text", ["first", "x"]), DocIn(2, 1, "/c/b", "text", ["y", "first"]),
            DocIn(3, 1, "/c/c", "text", ["first"]), DocIn(4, 1, "/c/d", "text", ["p", "q", "first", "r", "s", "t"])]
    snap = snapshot_of([write_segment(tmp_path, docs)])
    hits = search(snap, Leaf("first"), check_of(Leaf("first")), context=2, limit=10, sort="path").hits
    assert [(h.entry_id, h.line, h.before, h.after) for h in hits] == [
        (1, 1, [], ["x"]), (2, 2, ["y"], []), (3, 1, [], []), (4, 3, ["p", "q"], ["r", "s"])]


def test_hits_carry_their_document_page_and_ocr(tmp_path):
    pdf = DocIn(8, 2, "/p/book.pdf", "pdf", ["cover", "intro", "chapter one", "scanned chapter"],
                runs=[(1, 1, False), (3, 4, False), (4, 5, True)])
    snap = snapshot_of([write_segment(tmp_path, [DocIn(7, 1, "/p/x.md", "markdown", ["none"]), pdf])])
    hits = search(snap, Leaf("chapter"), check_of(Leaf("chapter")), sort="path").hits
    assert [(h.entry_id, h.path, h.format, h.line, h.text, h.page, h.ocr) for h in hits] == [
        (8, "/p/book.pdf", "pdf", 3, "chapter one", 4, False), (8, "/p/book.pdf", "pdf", 4, "scanned chapter", 5, True)]


EVERY_LINE = NoneOf(Leaf("zzzz"))


@pytest.mark.parametrize(("scope", "entries"), [
    (Scope(), {1, 2, 3, 4, 6}),
    (Scope(under=("/lib/a",)), {1, 2}),  # not /lib/ab, not the tombstoned /lib/a/old.txt
    (Scope(under=("/lib/a/",)), {1, 2}),
    (Scope(under=("/lib/b", "/lib/ab")), {3, 4, 6}),
    (Scope(under=("/lib",)), {1, 2, 3, 4, 6}),
    (Scope(under=("/nowhere",)), set()),
    (Scope(under=()), set()),
    (Scope(entry_id=2), {2}),
    (Scope(entry_id=5), set()),  # its only version is tombstoned
    (Scope(entry_id=99), set()),
])
def test_a_scope_keeps_the_documents_under_its_folders_or_the_one_entry(snap, scope, entries):
    for query in (EVERY_LINE, Leaf("e-mail"), Leaf("a")):
        result = search(snap, query, check_of(query), scope=scope, limit=1000)
        expected = [m for m in scan(LIVE, query) if m[0] in entries]
        assert found(result) == sorted(expected) and result.total == len(expected)


def test_sort_by_path_gives_documents_in_path_order_each_in_line_order(snap):
    query = Leaf("a")
    hits = search(snap, query, check_of(query), sort="path", limit=1000).hits
    assert [(h.path, h.line) for h in hits] == sorted((h.path, h.line) for h in hits)
    assert len({h.path for h in hits}) > 2


def _doc(entry_id: int, path: str, lines: int, word: str, on: int) -> DocIn:
    return DocIn(entry_id, 1, path, "text", [(f"{word} " if i < on else "") + f"filler {i}" for i in range(lines)])


def test_rare_matches_outrank_many_common_ones(tmp_path):
    docs = [_doc(10, "/r/z_rare.txt", 10, "rare", 2), _doc(11, "/r/a_common.txt", 10, "common", 6)]
    docs += [_doc(12 + k, f"/r/b_common{k}.txt", 10, "common", 5) for k in range(5)]
    snap = snapshot_of([write_segment(tmp_path, docs[:3]), write_segment(tmp_path, docs[3:])])
    query = AnyOf((Leaf("rare"), Leaf("common")))
    result = search(snap, query, check_of(query), limit=1000)
    order = list(dict.fromkeys(h.entry_id for h in result.hits))
    assert order[:2] == [10, 11]  # the rare document first, then the one with the most common matches
    assert result.total == 2 + 6 + 5 * 5
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1] > 0
    assert [h.line for h in result.hits[:2]] == [1, 2]  # a document's matches in line order


def test_for_one_term_more_matches_relative_to_length_rank_first(tmp_path):
    short, long = _doc(20, "/t/b_short.txt", 5, "term", 3), _doc(21, "/t/a_long.txt", 40, "term", 4)
    snap = snapshot_of([write_segment(tmp_path, [long, short])])
    by_relevance = search(snap, Leaf("term"), check_of(Leaf("term")), limit=100).hits
    assert list(dict.fromkeys(h.entry_id for h in by_relevance)) == [20, 21]
    by_path = search(snap, Leaf("term"), check_of(Leaf("term")), limit=100, sort="path").hits
    assert list(dict.fromkeys(h.entry_id for h in by_path)) == [21, 20]


def test_a_deadline_in_the_past_raises_search_timeout_when_lines_need_checking(snap):
    with pytest.raises(SearchTimeout):
        search(snap, Leaf("e-mail"), check_of(Leaf("e-mail")), deadline=time.monotonic() - 1)
    future = time.monotonic() + 60
    assert search(snap, Leaf("e-mail"), check_of(Leaf("e-mail")), deadline=future).total == len(
        scan(LIVE, Leaf("e-mail")))


@pytest.mark.parametrize("query", [Leaf("e-mail"), Leaf("straße"), Leaf("-"), AllOf((Leaf("foo"), Leaf("bar"))),
                                   NoneOf(Leaf("e")), Leaf("zzz")], ids=repr)
def test_candidate_entries_are_a_superset_of_the_matches_and_include_queued_ones(snap, query):
    candidates = candidate_entries(snap, query)
    assert {e for e, _ in scan(LIVE, query)} <= candidates
    assert 99 in candidates and 5 not in candidates  # queued: maybe; tombstoned: no


def test_candidate_entries_keep_documents_the_index_cannot_rule_out(snap):
    assert candidate_entries(snap, Leaf("e-mail")) == {1, 6, 99}  # "e mail" holds both runs of e-mail
    assert candidate_entries(snap, Leaf("straße")) == {3, 99}
    assert candidate_entries(snap, Leaf("a\nb")) == {99}

"""Boolean search through the index: scope, order, context across segments and pages, counts, pending and failed
documents, time limit, several queries at once — and the property that the index answers exactly what a plain
line-by-line scan of the same text does, on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flows.documents.model import Extracted, Page
from flows.documents.query import line_matches, parse_query
from flows.documents.search import search, search_many
from store import documents as docs
from store.entries import get_entry, make_row, upsert_entries
from store.errors import DocumentError, InvalidInput
from store.fold import fold
from tests.conftest import BACKENDS, backend_engine


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "search") as engine:
        yield engine


_dirs = itertools.count()


def add_documents(engine, documents: dict[str, tuple[str, list[str]]], *, segment_chars: int = 40,
                  ocr_pages: tuple[int, ...] = ()) -> dict[str, int]:
    """Entries for ``{path: (format, [page text, ...])}`` and their extracted text, stored as extraction would."""
    rows = [make_row(p, kind="file", size=1, mtime=1.0, ctime=1.0, inode=None, scan_id=None, indexed_at=0.0)
            for p in documents]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
        ids = {p: get_entry(conn, path=p)["id"] for p in documents}
    docs.write_extracted_many(engine, [
        docs.DocumentWrite(ids[p], 1, 1.0, "k", Extracted(
            path=p, format=fmt, pages=[Page(n + 1, t, ocr=n + 1 in ocr_pages) for n, t in enumerate(pages)],
            total_pages=len(pages)))
        for p, (fmt, pages) in documents.items()], segment_chars=segment_chars)
    return ids


def fresh_dir() -> str:
    return f"/s{next(_dirs)}"


def lines_of(pages: list[str]) -> list[str]:
    return [line for page in pages for line in page.split("\n")]


# --- behaviour ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def library(store):
    base = fresh_dir()
    pages = ["intro line\nthe attack begins", "free action here\nmove then attack\nquiet",
             "nothing\nteleport attack\nend"]
    ids = add_documents(store, {
        f"{base}/rules.pdf": ("pdf", pages),
        f"{base}/notes/n.md": ("markdown", ["# Notes\nan Attack of opportunity\n\nlast"]),
        f"{base}/other/skip.md": ("markdown", ["unrelated"]),
    }, segment_chars=20, ocr_pages=(3,))
    return base, ids, pages


def test_sorted_by_path_matches_come_in_path_and_line_order_with_pages_for_paged_formats(store, library):
    base, _, _ = library
    out = search(store, "attack", under=[base], context_lines=0, display=lambda p: p.removeprefix(base + "/"),
                 sort="path")
    assert [(m.document, m.line, m.text, m.page, m.ocr) for m in out.matches] == [
        ("notes/n.md", 2, "an Attack of opportunity", None, False),
        ("rules.pdf", 2, "the attack begins", 1, False),
        ("rules.pdf", 4, "move then attack", 2, False),
        ("rules.pdf", 7, "teleport attack", 3, True)]
    assert (out.total_matches, out.truncated, out.pending_documents, out.failed_documents) == (4, False, 0, 0)
    assert out.matches[-1].as_dict()["ocr"] is True and "page" not in out.matches[0].as_dict()


def test_context_spans_segments_and_pages_but_not_documents(store, library):
    base, ids, pages = library
    out = search(store, "teleport", entry_id=ids[f"{base}/rules.pdf"], context_lines=3)
    (m,) = out.matches
    assert m.context_before == ["move then attack", "quiet", "nothing"]
    assert m.context_after == ["end"]
    first = search(store, '"intro line"', under=[base], context_lines=2).matches[0]
    assert (first.context_before, first.context_after) == ([], ["the attack begins", "free action here"])


def test_boolean_operators_narrow_and_widen(store, library):
    base, _, _ = library
    texts = lambda q: [m.text for m in search(store, q, under=[base], context_lines=0).matches]  # noqa: E731
    assert texts("move|teleport attack") == ["move then attack", "teleport attack"]
    assert texts("attack -move -teleport") == ["an Attack of opportunity", "the attack begins"]
    assert texts('"free action"') == ["free action here"]
    assert texts("attack (opportunity | begins)") == ["an Attack of opportunity", "the attack begins"]


def test_results_beyond_max_results_are_counted_and_flagged(store, library):
    base, _, _ = library
    out = search(store, "attack", under=[base], max_results=2)
    assert (len(out.matches), out.total_matches, out.truncated) == (2, 4, True)


def test_scope_limits_the_documents_searched(store, library):
    base, ids, _ = library
    assert search(store, "attack", under=[f"{base}/notes"]).total_matches == 1
    assert search(store, "attack", entry_id=ids[f"{base}/rules.pdf"]).total_matches == 3
    assert search(store, "attack", under=[f"{base}/other", f"{base}/notes"]).total_matches == 1
    assert search(store, "attack", under=["/nowhere"]).total_matches == 0


def test_fuzzy_search_finds_typos_through_the_store(store, library):
    base, _, _ = library
    assert search(store, "telport", under=[base]).total_matches == 0
    assert [m.text for m in search(store, "telport", under=[base], fuzzy=True).matches] == ["teleport attack"]


def test_fuzzy_search_through_the_trigram_prefilter_loses_no_typo(store):
    base = fresh_dir()
    typos = ["oportunity", "opportunty", "opportuntiy", "opprtunity", "OPPORTUNITIES", "0pportunity", "oppotrunity"]
    lines = [f"line {t}, here" for t in typos] + ["opportunity itself", "unrelated words"]
    add_documents(store, {f"{base}/typos.md": ("markdown", ["\n".join(lines)])}, segment_chars=12)
    out = search(store, "opportunity", under=[base], fuzzy=True, max_results=50, context_lines=0)
    tree = parse_query("opportunity", fuzzy=True)
    assert [m.text for m in out.matches] == [line for line in lines if line_matches(tree, line)]
    assert out.total_matches == 7  # not OPPORTUNITIES: three edits away (eleven letters tolerate two)


def test_pending_and_failed_documents_are_reported(store):
    base = fresh_dir()
    add_documents(store, {f"{base}/done.md": ("markdown", ["kangaroo"])})
    rows = [make_row(f"{base}/{n}", kind="file", size=1, mtime=1.0, ctime=1.0, inode=None, scan_id=None,
                     indexed_at=0.0) for n in ("waiting.pdf", "broken.pdf")]
    with store.begin() as conn:
        upsert_entries(conn, rows)
        broken = get_entry(conn, path=f"{base}/broken.pdf")["id"]
    docs.write_extracted_many(store, [docs.DocumentWrite(broken, 1, 1.0, "k", Extracted(
        path="b", format="pdf", error_code="FILTER_FAILED", error="encrypted"))])
    out = search(store, "kangaroo", under=[base])
    assert (out.total_matches, out.pending_documents, out.failed_documents) == (1, 1, 1)
    many = search_many(store, ["kangaroo", "wombat", "(bad"], under=[base])  # counted once, given to each query
    assert [(o.total_matches, o.pending_documents, o.failed_documents) for o in (many["kangaroo"], many["wombat"])] \
        == [(1, 1, 1), (0, 1, 1)]


def test_a_search_past_its_time_limit_stops_with_search_timeout(store, library):
    base, _, _ = library
    with pytest.raises(DocumentError) as err:
        search(store, "attack", under=[base], timeout=1e-9)
    assert err.value.code == "SEARCH_TIMEOUT" and "ASSAY_SEARCH_TIMEOUT" in err.value.message


def test_bad_queries_and_limits_are_refused(store):
    with pytest.raises(DocumentError) as err:
        search(store, "a |")
    assert err.value.code == "INVALID_QUERY"
    with pytest.raises(InvalidInput):
        search(store, "attack", context_lines=51)
    with pytest.raises(InvalidInput):
        search(store, "attack", max_results=0)


def test_search_many_answers_each_query_and_one_failure_stops_no_other(store, library):
    base, _, _ = library
    out = search_many(store, ["attack", "(broken", "teleport", "attack"], under=[base], context_lines=0)
    assert list(out) == ["attack", "(broken", "teleport"]
    assert out["attack"].total_matches == 4 and out["teleport"].total_matches == 1
    assert isinstance(out["(broken"], DocumentError) and out["(broken"].code == "INVALID_QUERY"


# --- the property: the index answers what a line-by-line scan does ------------------------------------------------

VOCABULARY = ["attack", "move", "teleport", "Ünïcode", "ünïcode", "straße", "STRASSE", "e-mail", "INV-123", "a",
              "of", "x", "free", "action", "end.", "(note)", "a|b", '"quoted"', "ab", "tack", "Move,", "ÉCOLE",
              "opportunity", "oportunity", "opportuntiy", "Ünïcdoe", "nïcode", "teleprot", "telport", "atack"]
QUERY_WORDS = ["attack", "move", "teleport", "ünïcode", "ÜNÏCODE", "straße", "strasse", "e-mail", "inv-123", "a",
               "of", "x", "free", "action", "end.", "tack", "att", "ove", "école", "ab", "note", "zzz",
               "opportunity", "Ünïcode", "teleport"]

line_st = st.lists(st.sampled_from(VOCABULARY), max_size=6).map(" ".join)
page_st = st.lists(line_st, max_size=5).map("\n".join)
document_st = st.tuples(st.sampled_from(["pdf", "text"]), st.lists(page_st, min_size=1, max_size=3))


def _phrase(words: list[str]) -> tuple:
    return ("phrase", " ".join(words))


term_st = st.one_of(st.sampled_from(QUERY_WORDS).map(lambda w: ("word", w)),
                    st.lists(st.sampled_from(VOCABULARY[:18]), min_size=1, max_size=2).map(_phrase)
                    .filter(lambda p: '"' not in p[1]))
positive_st = st.recursive(term_st, lambda kids: st.one_of(
    st.lists(kids, min_size=2, max_size=3).map(lambda c: ("and", c)),
    st.lists(kids, min_size=2, max_size=3).map(lambda c: ("or", c))), max_leaves=4)
any_st = st.recursive(term_st, lambda kids: st.one_of(
    kids.map(lambda c: ("not", c)),
    st.lists(kids, min_size=2, max_size=3).map(lambda c: ("and", c)),
    st.lists(kids, min_size=2, max_size=3).map(lambda c: ("or", c))), max_leaves=4)
query_st = st.one_of(positive_st, st.tuples(positive_st, any_st).map(lambda t: ("and", list(t))))


def printed(q: tuple) -> str:
    kind = q[0]
    if kind == "word":
        return q[1]
    if kind == "phrase":
        return f'"{q[1]}"'
    if kind == "not":
        return "-" + (f"({printed(q[1])})" if q[1][0] in ("and", "or") else printed(q[1]))
    if kind == "or":
        return "|".join(f"({printed(c)})" if c[0] == "and" else printed(c) for c in q[1])
    return " ".join(f"({printed(c)})" if c[0] == "and" else printed(c) for c in q[1])


def holds(q: tuple, line: str) -> bool:
    kind = q[0]
    if kind in ("word", "phrase"):
        return fold(q[1]) in fold(line)
    if kind == "not":
        return not holds(q[1], line)
    results = [holds(c, line) for c in q[1]]
    return all(results) if kind == "and" else any(results)


def bounded(q: tuple) -> bool:
    """Whether every line the query matches must hold some word (the parser refuses the others)."""
    kind = q[0]
    if kind in ("word", "phrase"):
        return True
    if kind == "not":
        return q[1][0] == "not" and bounded(q[1][1])
    results = [bounded(c) for c in q[1]]
    return any(results) if kind == "and" else all(results)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents=st.lists(document_st, min_size=1, max_size=4), query=query_st,
       context=st.integers(0, 3), max_results=st.integers(1, 8), segment_chars=st.sampled_from([8, 30, 32_000]),
       fuzzy=st.booleans())
def test_the_index_answers_what_a_line_by_line_scan_does(store, documents, query, context, max_results,
                                                         segment_chars, fuzzy):
    """Plain queries are checked against an evaluator of the generated query written here; fuzzy ones against
    line_matches over every line (what is checked then is that the index and the segmenting lose nothing)."""
    base = fresh_dir()
    named = {f"{base}/d{i}.{'pdf' if fmt == 'pdf' else 'txt'}": (fmt, pages)
             for i, (fmt, pages) in enumerate(documents)}
    add_documents(store, named, segment_chars=segment_chars)
    text = printed(query)
    assert bounded(query)
    fuzzy_tree = parse_query(text, fuzzy=True) if fuzzy else None
    expected = []
    for path in sorted(named):
        fmt, pages = named[path]
        lines = lines_of(pages)
        page_of = [n + 1 for n, page in enumerate(pages) for _ in page.split("\n")]
        for i, line in enumerate(lines):
            if (line_matches(fuzzy_tree, line) if fuzzy else holds(query, line)):
                expected.append((path, i + 1, line, lines[max(0, i - context):i], lines[i + 1:i + 1 + context],
                                 page_of[i] if fmt == "pdf" else None))
    out = search(store, text, under=[base], context_lines=context, max_results=max_results, fuzzy=fuzzy, sort="path")
    got = [(m.document, m.line, m.text, m.context_before, m.context_after, m.page) for m in out.matches]
    assert got == expected[:max_results]
    assert out.total_matches == len(expected) and out.truncated == (len(expected) > max_results)
    assert (out.pending_documents, out.failed_documents) == (0, 0)
    # ranked by relevance: the same count, matches drawn from the same lines, each document's in line order
    ranked = search(store, text, under=[base], context_lines=context, max_results=max_results, fuzzy=fuzzy)
    shown = [(m.document, m.line, m.text, m.context_before, m.context_after, m.page) for m in ranked.matches]
    assert ranked.total_matches == len(expected) and len(shown) == min(max_results, len(expected))
    assert all(item in expected for item in shown)
    for doc in {m.document for m in ranked.matches}:
        lines = [m.line for m in ranked.matches if m.document == doc]
        assert lines == sorted(lines)

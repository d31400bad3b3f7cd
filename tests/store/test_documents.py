"""The store of extracted text: segmenting, replacing, reading back, staleness and the change log triggers the text
engine follows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, text

from flows.documents.formats import EXTENSIONS
from flows.documents.model import SEGMENT_CHARS, Extracted, Page, TocItem
from store import documents as docs
from store.entries import get_entry, make_row, upsert_entries
from store.models import DocumentSegment
from store.textindex.source import changes_after, last_change
from tests.conftest import BACKENDS, backend_engine


def add_files(engine, *paths: str, size: int = 10, mtime: float = 1.0) -> dict[str, int]:
    rows = [make_row(p, kind="file", size=size, mtime=mtime, ctime=mtime, inode=None, scan_id=None, indexed_at=0.0)
            for p in paths]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
        return {p: get_entry(conn, path=p)["id"] for p in paths}


def write(engine, entry_id: int, pages: list[str], *, size: int = 10, mtime: float = 1.0, key: str = "k",
          segment_chars: int = SEGMENT_CHARS, fmt: str = "pdf", **kw):
    ex = Extracted(path="x", format=fmt, pages=[Page(i + 1, t) for i, t in enumerate(pages)],
                   total_pages=len(pages), **kw)
    return docs.write_extracted_many(engine, [docs.DocumentWrite(entry_id, size, mtime, key, ex)],
                                     segment_chars=segment_chars)


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "docs") as engine:
        yield engine


def logged_since(engine, seq: int) -> list[int]:
    """The entries of the change log after ``seq``, in order."""
    return [e for _, e in changes_after(engine, seq)]


def test_segment_size_matches_the_documents_contract():
    assert docs.SEGMENT_CHARS == SEGMENT_CHARS


def test_pages_split_into_segments_of_whole_lines_numbered_across_pages():
    pages = [Page(1, "aaaa\nbbbb\ncccc"), Page(2, "dd\n" + "x" * 30 + "\ne", ocr=True), Page(3, "")]
    segs = list(docs.segment_pages(7, pages, segment_chars=10))
    assert [(s.page, s.line_start, s.line_count, s.text) for s in segs] == [
        (1, 1, 2, "aaaa\nbbbb"), (1, 3, 1, "cccc"), (2, 4, 1, "dd"), (2, 5, 1, "x" * 30), (2, 6, 1, "e"),
        (3, 7, 1, "")]
    assert [s.seq for s in segs] == list(range(6))
    assert [s.ocr for s in segs] == [False, False, True, True, True, False]


def test_written_document_reads_back_by_page_and_by_line(store):
    ids = add_files(store, "/lib/a.pdf")
    eid = ids["/lib/a.pdf"]
    write(store, eid, ["one\ntwo", "three\n\nfive"], toc=[TocItem("Intro", 1, page=1)],
          meta={"title": "A", "keywords": ["k"]}, segment_chars=4)
    row = docs.document_row(store, eid)
    assert row["status"] == "ok" and row["pages"] == 2 and row["lines"] == 5 and row["chars"] == 15
    assert row["toc"] == [{"title": "Intro", "level": 1, "page": 1, "line": None}]
    assert row["meta"] == {"title": "A", "keywords": ["k"]}
    assert row["path"] == "/lib/a.pdf" and row["stale"] is False
    assert list(docs.read_pages(store, eid)) == [(1, "one\ntwo", False), (2, "three\n\nfive", False)]
    assert list(docs.read_pages(store, eid, [2])) == [(2, "three\n\nfive", False)]
    assert list(docs.read_pages(store, eid, [9])) == []
    assert [(n, t, p) for n, t, p, _ in docs.entry_lines(store, eid)] == [
        (1, "one", 1), (2, "two", 1), (3, "three", 2), (4, "", 2), (5, "five", 2)]
    assert [n for n, *_ in docs.entry_lines(store, eid, line_from=2, line_to=4)] == [2, 3, 4]


def test_rewriting_a_document_replaces_its_segments_and_logs_each_change(store):
    eid = add_files(store, "/lib/re.md")["/lib/re.md"]
    before = last_change(store)
    write(store, eid, ["zebra crossing\nold words"], fmt="markdown")
    write(store, eid, ["giraffe neck"], fmt="markdown", key="k2")
    assert logged_since(store, before) == [eid, eid, eid]  # written, deleted, written again
    assert list(docs.read_pages(store, eid)) == [(1, "giraffe neck", False)]
    assert docs.current_work_keys(store, [eid, 10**9]) == {eid: "k2"}
    with store.connect() as conn:
        assert conn.execute(select(func.count()).where(DocumentSegment.__table__.c.entry_id == eid)).scalar() == 1


def test_a_large_document_spans_transactions_and_stays_whole(store, monkeypatch):
    monkeypatch.setattr(docs, "TX_SEGMENTS", 3)
    eid = add_files(store, "/lib/big.txt")["/lib/big.txt"]
    pages = [f"page {i} line a\npage {i} line b" for i in range(10)]
    write(store, eid, pages, fmt="text", segment_chars=14)
    write(store, eid, pages, fmt="text", segment_chars=14)  # again: the old segments go first
    assert [t for _, t, _ in docs.read_pages(store, eid)] == pages
    assert docs.document_row(store, eid)["lines"] == 20


def test_failed_extraction_is_an_error_row_without_text(store):
    eid = add_files(store, "/lib/bad.pdf")["/lib/bad.pdf"]
    write(store, eid, ["some text"])
    ex = Extracted(path="x", format="pdf", error_code="FILTER_FAILED", error="encrypted")
    docs.write_extracted_many(store, [docs.DocumentWrite(eid, 10, 1.0, "k", ex)])
    row = docs.document_row(store, eid)
    assert (row["status"], row["error_code"], row["error"], row["pages"]) == ("error", "FILTER_FAILED", "encrypted", 0)
    assert list(docs.read_pages(store, eid)) == []


def test_metadata_failure_keeps_the_text_and_records_why(store):
    eid = add_files(store, "/lib/meta.pdf")["/lib/meta.pdf"]
    write(store, eid, ["readable"], meta_error="bad XMP")
    row = docs.document_row(store, eid)
    assert (row["status"], row["error_code"], row["error"]) == ("ok", "METADATA_EXTRACTION_FAILED", "bad XMP")


def test_results_for_removed_entries_are_skipped(store):
    ex = Extracted(path="x", format="text", pages=[Page(1, "orphan")], total_pages=1)
    assert docs.write_extracted_many(store, [docs.DocumentWrite(10**8, 1, 1.0, "k", ex)]) == 0
    assert docs.document_row(store, 10**8) is None


def test_pending_counts_missing_and_stale_documents_and_failed_ones_in_scope(store):
    ids = add_files(store, "/p/a.md", "/p/b.md", "/p/c.pdf", "/p/sub/d.txt", "/p/img.png", "/q/e.md")
    write(store, ids["/p/a.md"], ["x"], fmt="markdown")  # current
    write(store, ids["/p/b.md"], ["x"], fmt="markdown", size=999)  # stale: the file is 10 bytes now
    docs.write_extracted_many(store, [docs.DocumentWrite(ids["/p/c.pdf"], 10, 1.0, "k", Extracted(
        path="x", format="pdf", error_code="FILTER_FAILED", error="truncated"))])
    # missing: d.txt; the png is not a document extension
    assert docs.pending_count(store, under=["/p"], extensions=EXTENSIONS) == (2, 1)
    assert docs.pending_count(store, under=["/p/sub/"], extensions=EXTENSIONS) == (1, 0)
    assert docs.pending_count(store, under=["/p", "/q"], extensions=EXTENSIONS) == (3, 1)
    assert docs.pending_count(store, entry_id=ids["/p/a.md"], extensions=EXTENSIONS) == (0, 0)
    assert docs.pending_count(store, entry_id=ids["/p/b.md"], extensions=EXTENSIONS) == (1, 0)
    assert docs.pending_count(store, under=[], extensions=EXTENSIONS) == (0, 0)


def test_files_under_hidden_folders_are_not_waited_for(store):
    """The built-in plan does not extract what lies under a hidden folder below a root; a search there waits for
    nothing. A root inside a hidden folder still counts its own files."""
    ids = add_files(store, "/h/.git/notes.md", "/h/.hidden.md", "/h/seen.md", "/.cfg/r/doc.md")
    assert docs.pending_count(store, under=["/h"], extensions=EXTENSIONS) == (1, 0)
    assert docs.pending_count(store, under=["/.cfg/r"], extensions=EXTENSIONS) == (1, 0)
    assert docs.pending_count(store, entry_id=ids["/h/.hidden.md"], extensions=EXTENSIONS) == (1, 0)


def test_deleting_documents_and_entries_removes_their_text_and_logs_it(store):
    ids = add_files(store, "/del/a.md", "/del/b.md")
    for eid in ids.values():
        write(store, eid, ["platypus"], fmt="markdown")
    before = last_change(store)
    assert docs.delete_documents(store, [ids["/del/a.md"]]) == 1
    assert docs.document_row(store, ids["/del/a.md"]) is None
    with store.begin() as conn:
        conn.execute(text("DELETE FROM entries WHERE path = '/del/b.md'"))
    with store.connect() as conn:
        left = conn.execute(select(func.count()).where(
            DocumentSegment.__table__.c.entry_id.in_(list(ids.values())))).scalar()
    assert left == 0
    assert logged_since(store, before) == [ids["/del/a.md"], ids["/del/b.md"]]  # the cascade is logged too


def test_moving_an_entry_with_text_is_logged_and_one_without_is_not(store):
    ids = add_files(store, "/mv/a.md", "/mv/b.md")
    write(store, ids["/mv/a.md"], ["wombat"], fmt="markdown")
    before = last_change(store)
    with store.begin() as conn:
        conn.execute(text("UPDATE entries SET path = '/mv/c.md' WHERE path = '/mv/a.md'"))
        conn.execute(text("UPDATE entries SET path = '/mv/d.md' WHERE path = '/mv/b.md'"))
        conn.execute(text("UPDATE entries SET size = 99 WHERE path = '/mv/c.md'"))
    assert logged_since(store, before) == [ids["/mv/a.md"]]


def test_the_last_of_two_results_for_one_entry_wins(store):
    eid = add_files(store, "/lib/twice.md")["/lib/twice.md"]
    first, second = (Extracted(path="x", format="markdown", pages=[Page(1, t)], total_pages=1)
                     for t in ("first\ntext", "second"))
    assert docs.write_extracted_many(store, [docs.DocumentWrite(eid, 10, 1.0, "k1", first),
                                             docs.DocumentWrite(eid, 10, 1.0, "k2", second)]) == 2
    assert list(docs.read_pages(store, eid)) == [(1, "second", False)]
    assert docs.current_work_keys(store, [eid]) == {eid: "k2"}


def _segments_by_lines(pages, segment_chars):
    """The segmenting rule written line by line (the reference the fast cut must equal)."""
    out, line_no = [], 1
    for page in pages:
        run, size = [], 0
        for line in page.text.split("\n"):
            added = len(line) + (1 if run else 0)
            if run and size + added > segment_chars:
                out.append((page.number, line_no, len(run), "\n".join(run)))
                line_no += len(run)
                run, size, added = [], 0, len(line)
            run.append(line)
            size += added
        out.append((page.number, line_no, len(run), "\n".join(run)))
        line_no += len(run)
    return out


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(alphabet="ab \n", max_size=40), min_size=1, max_size=4), limit=st.integers(1, 12))
def test_segments_cut_at_line_breaks_as_the_line_by_line_rule(texts, limit):
    pages = [Page(i + 1, t) for i, t in enumerate(texts)]
    got = [(s.page, s.line_start, s.line_count, s.text) for s in docs.segment_pages(1, pages, segment_chars=limit)]
    assert got == _segments_by_lines(pages, limit)

"""The keyword side of semantic search (flows.semantic.keywords): a collection's chunks ranked by BM25 from the text
engine's line index, with stems, filters and hostile queries, on both stores. Each entry's extracted text is stored
as the documents capability would (its chunks, one line each), so the engine indexes it."""

from __future__ import annotations

import pytest
from sqlalchemy import delete

from flows.documents.model import Extracted, Page
from flows.semantic.keywords import keyword_search
from store import semantic as sem
from store.documents import DocumentWrite, write_extracted_many
from store.models import Entry
from tests.conftest import BACKENDS, backend_engine
from tests.store.test_documents import add_files
from tests.store.test_semantic import collection, item


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "keywords") as engine:
        yield engine


def chunked(store, col: dict, entries: dict[int, tuple[str, ...]]) -> dict:
    """Store each entry's text (its chunks as its lines) and its chunks in ``col``; returns the collection as now."""
    write_extracted_many(store, [DocumentWrite(e, 10, 1.0, "k", Extracted(
        path="x", format="text", pages=[Page(1, "\n".join(texts))], total_pages=1)) for e, texts in entries.items()])
    reports = sem.replace_entries(store, col["id"], [item(e, *texts) for e, texts in entries.items()])
    found = sem.get_collection(store, col["name"])
    found["added"] = [int(i) for i in reports.added_ids]
    return found


def test_chunks_rank_by_their_words_occurrences_and_rarity_within_the_collection(store):
    col, other = collection(store, "kw-rank"), collection(store, "kw-rank-other")
    ids = add_files(store, "/kw/r/a.txt", "/kw/r/b.txt", "/kw/r/c.txt")
    a, b, c = ids["/kw/r/a.txt"], ids["/kw/r/b.txt"], ids["/kw/r/c.txt"]
    col = chunked(store, col, {a: ("the invoice was paid by the customer", "nothing relevant here"),
                               b: ("invoices and invoice totals: invoice invoice", "quarterly report of revenue")})
    chunked(store, other, {c: ("invoice in another collection",)})
    first_a, _, first_b, revenue = col["added"]
    hits = keyword_search(store, col, "Invoice?", limit=10)
    assert [h[0] for h in hits] == [first_b, first_a]  # more occurrences first; the other collection's never
    assert hits[0][1] > hits[1][1]
    # any word matches; operators and quotes of the query are words or nothing, never syntax
    hits = keyword_search(store, col, 'revenue OR "customer" NEAR(x* -zzz ^', limit=10)
    assert {h[0] for h in hits} == {first_a, revenue}
    only_a = keyword_search(store, col, "invoice", limit=10, entry_ids=[a])
    assert [h[0] for h in only_a] == [first_a]
    assert keyword_search(store, col, "invoice", limit=10, entry_ids=[]) == []
    assert keyword_search(store, col, "?!  ...", limit=10) == []
    assert keyword_search(store, col, "invoice", limit=1)[0][0] == first_b


def test_a_word_finds_the_words_of_its_stem(store):
    col = collection(store, "kw-stem")
    eid = add_files(store, "/kw/s/a.txt")["/kw/s/a.txt"]
    col = chunked(store, col, {eid: ("the baker was baking bread", "ovens were hot", "a runner runs")})
    baking, _, runner = col["added"]
    assert [h[0] for h in keyword_search(store, col, "bakes", limit=5)] == [baking]
    assert [h[0] for h in keyword_search(store, col, "RUNNING", limit=5)] == [runner]
    assert keyword_search(store, col, "bakelite", limit=5) == []


def test_a_deleted_entry_leaves_no_keyword_hit(store):
    col = collection(store, "kw-gone")
    eid = add_files(store, "/kw/g/a.txt")["/kw/g/a.txt"]
    col = chunked(store, col, {eid: ("platypus eggs", "more text")})
    assert keyword_search(store, col, "platypus", limit=5)
    with store.begin() as conn:
        conn.execute(delete(Entry.__table__).where(Entry.__table__.c.id == eid))
    assert keyword_search(store, sem.get_collection(store, col["name"]), "platypus", limit=5) == []


def test_a_ten_thousand_character_query_is_answered(store):
    col = collection(store, "kw-long")
    eid = add_files(store, "/kw/l/a.txt")["/kw/l/a.txt"]
    col = chunked(store, col, {eid: ("needle in a haystack",)})
    query = ("needle " + " ".join(f"word{i}" for i in range(2000)))[:10_000]
    assert [h[0] for h in keyword_search(store, col, query, limit=5)] == col["added"]

"""The six document tools of reference 001 through an in-process MCP client, on a generated library (PDF with an
outline and metadata, a scanned PDF, Markdown with nested headings, bad documents) indexed and extracted once per
module with the real extraction pool: every tool, every reference example adapted to the library, every error
code. Runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from mcp import Client
from sqlalchemy import select

from examples.mediagen import documents as dm
from flows.documents import search as search_module
from flows.documents.executor import extract_rows, options_for, work_key
from flows.documents.model import Extracted, Page
from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from store.documents import DocumentWrite, write_extracted_many
from store.models import Entry
from tests.conftest import ToolFailed, call, fresh_pg_database, index_sync

E = Entry.__table__


def build_library(root: Path) -> dict[str, str]:
    """documents_media.library plus what the path rules need: a nested collection, hidden files, a file that is not
    a document, symlinks, a long PDF and a document whose metadata could not be read."""
    made = dm.library(root)
    dm.markdown(root / "games" / "coop" / "legacy" / "campaign.md")
    (root / "games" / "coop" / "legacy" / "scenario.txt").write_text("Scenario one: the black barrow\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "secret.md").write_text("# Secret\nauthentication hidden\n")
    (root / "games" / ".draft.md").write_text("draft notes\n")
    (root / "games" / "box.bin").write_bytes(b"\x00\x01binary")
    os.symlink(root / "games" / "coop" / "rules.pdf", root / "games" / "link.pdf")
    os.symlink(root / "docs", root / "linked")
    dm.pdf_with_outline(root / "books" / "manual.pdf", pages=16)
    (root / "docs" / "api" / "nometa.txt").write_text("plain words without metadata\n")
    (root / "docs" / "api" / "security.md").write_text(
        "# Security\n\nauthentication uses a jwt token\nauthorization checks roles\n"
        "security of the old scheme is deprecated\nsecurity review done\nasynchronous jobs run async\n")
    return made


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def lib(request, tmp_path_factory):
    """(app, root): the library indexed and extracted once."""
    base = tmp_path_factory.mktemp("doctools")
    root = base / "library"
    build_library(root)
    with _database(request) as url:
        app = AssayApp.create(Settings(data_dir=base / "data", roots=[str(root)], use_prefect=False,
                                       database_url=url))
        try:
            index_sync(app, root)
            with app.engine.connect() as conn:
                rows = [dict(r) for r in conn.execute(select(E)).mappings()]
            extract_rows(app.engine, rows, options=options_for(None))
            _metadata_failure(app, root / "docs" / "api" / "nometa.txt")
            yield app, root
        finally:
            app.close()
            app.engine.dispose()


def _database(request):
    import contextlib

    if request.param == "sqlite":
        return contextlib.nullcontext(None)
    return fresh_pg_database(request.getfixturevalue("pg_url"))


def _metadata_failure(app, path: Path) -> None:
    """Store, for nometa.txt as it is on disk, text whose metadata extraction failed (no metadata, no toc)."""
    st = path.stat()
    with app.engine.connect() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == str(path))).scalar_one()
    extracted = Extracted(path=str(path), format="text", pages=[Page(1, "plain words without metadata")],
                          total_pages=1, meta_error="the metadata block is corrupt")
    write_extracted_many(app.engine, [DocumentWrite(entry_id, st.st_size, st.st_mtime,
                                                    work_key(st.st_size, st.st_mtime, options_for(None)),
                                                    extracted)])


@pytest.fixture
async def client(lib):
    async with Client(build_server(lib[0])) as c:
        yield c


async def refused(client, tool: str, args: dict) -> str:
    with pytest.raises(ToolFailed) as info:
        await call(client, tool, args)
    return str(info.value)


# --- list_collections -------------------------------------------------------------------------------------------


async def test_list_collections_browses_the_root_and_a_collection_as_on_disk(client, lib):
    top = await call(client, "list_collections", {"path": ""})
    assert top["current_path"] == ""
    names = [c["name"] for c in top["collections"]]
    assert names == ["books", "docs", "games", "programming"]  # hidden skipped, the symlink "linked" not followed
    games = next(c for c in top["collections"] if c["name"] == "games")
    assert games == {"name": "games", "path": "games", "document_count": 0, "subcollection_count": 1}
    coop = await call(client, "list_collections", {"path": "games/coop"})
    assert coop["current_path"] == "games/coop"
    assert coop["collections"] == [{"name": "legacy", "path": "games/coop/legacy", "document_count": 2,
                                    "subcollection_count": 0}]
    docs = {d["name"]: d for d in coop["documents"]}
    assert sorted(docs) == ["encrypted.pdf", "legacy.txt", "notes.md", "rules.pdf", "scan.pdf", "truncated.pdf"]
    rules = docs["rules.pdf"]
    assert rules["path"] == "games/coop/rules.pdf"
    assert rules["size_bytes"] == (lib[1] / "games" / "coop" / "rules.pdf").stat().st_size
    assert rules["modified"].endswith("Z") and "T" in rules["modified"]
    default = await call(client, "list_collections", {})
    assert default == top


async def test_list_collections_refuses_with_the_reference_codes(client):
    assert (await refused(client, "list_collections", {"path": "games/ghost"})).startswith("COLLECTION_NOT_FOUND")
    assert (await refused(client, "list_collections", {"path": "games/coop/rules.pdf"})).startswith(
        "NOT_A_DIRECTORY")
    assert (await refused(client, "list_collections", {"path": "../"})).startswith("PATH_TRAVERSAL_DETECTED")
    assert (await refused(client, "list_collections", {"path": "/etc"})).startswith("PATH_TRAVERSAL_DETECTED")
    assert (await refused(client, "list_collections", {"path": "linked"})).startswith("SYMLINK_NOT_ALLOWED")


async def test_error_results_carry_the_reference_details_object(client):
    result = await client.call_tool("list_collections", {"path": "games/ghost"})
    assert result.is_error and result.structured_content is None
    import json

    error = json.loads(result.content[1].text)["error"]
    assert error["data"]["type"] == "COLLECTION_NOT_FOUND" and error["data"]["details"] == {"path": "games/ghost"}


# --- find_document ------------------------------------------------------------------------------------------------


async def test_find_document_ranks_exact_then_prefix_then_contains(client):
    exact = await call(client, "find_document", {"query": "rules.pdf"})
    assert exact["matches"][0]["name"] == "rules.pdf" and exact["matches"][0]["score"] == 1.0
    assert exact["matches"][0]["path"] == "games/coop/rules.pdf"
    assert exact["matches"][0]["collection"] == "games/coop" and exact["total_found"] == 1
    partial = await call(client, "find_document", {"query": "NOTES", "limit": 20})  # case-insensitive
    assert [m["path"] for m in partial["matches"]] == ["games/coop/notes.md"]
    found = await call(client, "find_document", {"query": "."})
    scores = [m["score"] for m in found["matches"]]
    assert scores == sorted(scores, reverse=True) and found["total_found"] > len(found["matches"]) == 10
    everything = await call(client, "find_document", {"query": ".", "limit": 100})
    names = [m["name"] for m in everything["matches"]]
    assert len(names) == found["total_found"]
    assert "secret.md" not in names and ".draft.md" not in names  # hidden
    assert "box.bin" not in names  # not a document


async def test_find_document_prefix_outranks_contains(client):
    found = await call(client, "find_document", {"query": "sc"})
    names = [m["name"] for m in found["matches"]]
    assert names[:2] == ["scan.pdf", "scenario.txt"]  # prefixes first, the shorter name (more covered) first
    assert all(0.1 <= m["score"] < 0.5 for m in found["matches"][2:])  # the rest merely contain "sc"


async def test_find_document_checks_its_parameters(client):
    assert "limit" in await refused(client, "find_document", {"query": "x", "limit": 101})
    assert "query" in await refused(client, "find_document", {"query": "  "})


# --- search_documents ---------------------------------------------------------------------------------------------


async def search(client, query, scope, **extra):
    return await call(client, "search_documents", {"query": query, "scope": scope, **extra})


async def test_search_documents_reference_examples(client):
    simple = await search(client, "authentication", {"type": "global"})
    assert simple["search_type"] == "boolean" and simple["query"] == "authentication"
    docs = {m["document"] for m in simple["matches"]}
    assert "docs/api/security.md" in docs and "docs/api/guide.html" in docs
    assert simple["total_matches"] == len(simple["matches"]) and simple["truncated"] is False

    both = await search(client, "jwt token", {"type": "collection", "path": "docs/api"})
    assert [(m["document"], m["text"]) for m in both["matches"]] == [
        ("docs/api/security.md", "authentication uses a jwt token")]
    line = both["matches"][0]["line"]
    assert both["matches"][0]["citation"] == f"text://security#lines={line}"

    either = await search(client, "async|asynchronous", {"type": "global"})
    assert {m["text"] for m in either["matches"]} == {"asynchronous jobs run async"}

    negated = await search(client, "security -deprecated", {"type": "global"})
    texts = [m["text"] for m in negated["matches"]]
    assert "security review done" in texts and not any("deprecated" in t for t in texts)

    phrase = await search(client, '"cost two squares"', {"type": "document", "path": "games/coop/rules.pdf"})
    assert [(m["line"], m["page"], m["text"]) for m in phrase["matches"]] == [
        (8, 3, "Diagonal steps cost two squares.")]
    assert phrase["matches"][0]["citation"] == "doc://rules#pages=3"  # its page, in the file's resource id
    assert phrase["matches"][0]["context_before"] == [  # five lines, across the page break
        "Players cooperate against the dungeon.", "Gameplay", "Movement allows a figure to move up to four squares.",
        "Each turn has three phases.", "Movement"]

    complex_ = await search(client, "(authentication|authorization) security -deprecated",
                            {"type": "collection", "path": "docs"}, context_lines=10, max_results=50)
    assert complex_["total_matches"] == 0  # no single line holds both
    grouped = await search(client, "(authentication|authorization) -jwt", {"type": "collection", "path": "docs"},
                           context_lines=10, max_results=50)
    texts = {(m["document"], m["text"]) for m in grouped["matches"]}
    assert texts == {("docs/api/guide.html", "Authentication"), ("docs/api/security.md", "authorization checks roles")}
    roles = next(m for m in grouped["matches"] if m["document"] == "docs/api/security.md")
    assert roles["context_before"][0] == "# Security"  # 10 lines asked, the document has fewer before it


async def test_search_documents_context_truncation_fuzzy_and_ocr(client):
    one = await search(client, "squares", {"type": "document", "path": "games/coop/rules.pdf"}, max_results=1,
                       context_lines=0)
    assert one["total_matches"] == 2 and one["truncated"] is True and len(one["matches"]) == 1
    assert one["matches"][0]["context_before"] == [] and one["matches"][0]["context_after"] == []
    fuzzy = await search(client, "diagnal", {"type": "document", "path": "games/coop/rules.pdf"}, fuzzy=True)
    assert [m["text"] for m in fuzzy["matches"]] == ["Diagonal steps cost two squares."]
    exact = await search(client, "diagnal", {"type": "document", "path": "games/coop/rules.pdf"})
    assert exact["total_matches"] == 0
    if shutil.which("tesseract"):
        scanned = await search(client, "invoice", {"type": "document", "path": "games/coop/scan.pdf"})
        assert scanned["matches"][0]["ocr"] is True and scanned["matches"][0]["page"] == 1


async def test_search_documents_shows_the_best_documents_first_or_sorts_by_path(client):
    everywhere = {"type": "global"}
    best = await search(client, "security|authentication", everywhere, context_lines=0, max_results=2)
    by_path = await search(client, "security|authentication", everywhere, context_lines=0, max_results=2,
                           sort="path")
    assert best["total_matches"] == by_path["total_matches"] > 2 and best["truncated"] and by_path["truncated"]
    # security.md holds most of the matching lines: it answers best, though other paths sort before it
    assert [m["document"] for m in best["matches"]] == ["docs/api/security.md"] * 2
    everything = await search(client, "security|authentication", everywhere, context_lines=0, max_results=500,
                              sort="path")
    assert [(m["document"], m["line"]) for m in by_path["matches"]] == [
        (m["document"], m["line"]) for m in everything["matches"]][:2]
    assert [m["document"] for m in everything["matches"]] == sorted(m["document"] for m in everything["matches"])
    assert (await refused(client, "search_documents", {"query": "security", "sort": "path"})).startswith(
        "INVALID_PARAMS: sort belongs to the boolean search")
    assert (await refused(client, "search_documents", {"query": "security", "scope": everywhere,
                                                       "sort": "size"})).startswith("INVALID_PARAMS")


async def test_search_documents_counts_failed_documents_in_scope(client):
    coop = await search(client, "movement", {"type": "collection", "path": "games/coop"})
    assert coop["failed_documents"] == 2 and coop["pending_documents"] == 0  # encrypted.pdf, truncated.pdf
    assert "could not be read" in coop["note"]


async def test_search_documents_refusals(client, monkeypatch):
    assert (await refused(client, "search_documents", {"query": "(open", "scope": {"type": "global"}})
            ).startswith("INVALID_QUERY")
    for scope in ({"type": "collection", "path": "ghost"}, {"type": "document", "path": "docs/api"},
                  {"type": "collection", "path": "games/coop/rules.pdf"},
                  {"type": "document", "path": "games/ghost.pdf"}):
        assert (await refused(client, "search_documents", {"query": "x", "scope": scope})).startswith(
            "SCOPE_NOT_FOUND"), scope
    assert (await refused(client, "search_documents", {"query": "x", "scope": {"type": "collection",
                                                                                "path": "../.."}})
            ).startswith("PATH_TRAVERSAL_DETECTED")
    assert (await refused(client, "search_documents", {"query": "x", "scope": {"type": "document",
                                                                                "path": "games/link.pdf"}})
            ).startswith("SYMLINK_NOT_ALLOWED")
    no_scope = await refused(client, "search_documents", {"query": "x"})
    assert "scope" in no_scope and "semantic" in no_scope
    assert "options" in await refused(client, "search_documents",
                                      {"query": "x", "scope": {"type": "global"}, "options": {"limit": 5}})
    assert "context_lines" in await refused(client, "search_documents",
                                            {"query": "x", "scope": {"type": "global"}, "context_lines": 51})
    assert "max_results" in await refused(client, "search_documents",
                                          {"query": "x", "scope": {"type": "global"}, "max_results": 0})
    assert "scope.type" in await refused(client, "search_documents", {"query": "x", "scope": {"type": "galaxy"}})

    class Clock:  # every look at the clock is a second later: the search's deadline passes at once
        now = 0.0

        def monotonic(self):
            Clock.now += 1.0
            return Clock.now

    monkeypatch.setenv("ASSAY_SEARCH_TIMEOUT", "0.5")
    monkeypatch.setattr(search_module, "time", Clock())
    assert (await refused(client, "search_documents", {"query": "the", "scope": {"type": "global"}})
            ).startswith("SEARCH_TIMEOUT")


# --- search_multiple ----------------------------------------------------------------------------------------------


async def test_search_multiple_runs_each_query_and_keys_results_by_query(client):
    res = await call(client, "search_multiple", {"queries": ["authentication", "authorization", "security"],
                                                 "scope": {"type": "collection", "path": "docs/api"}})
    assert list(res["results"]) == ["authentication", "authorization", "security"]
    assert res["queries_completed"] == 3 and res["queries_failed"] == 0 and res["search_duration_ms"] >= 0
    assert res["results"]["authorization"]["total_matches"] == 1
    assert res["results"]["security"]["query"] == "security"
    in_doc = await call(client, "search_multiple", {"queries": ["movement", "attack", "defence"],
                                                    "scope": {"type": "document", "path": "games/coop/rules.pdf"},
                                                    "context_lines": 3})
    attack = in_doc["results"]["attack"]["matches"][0]
    assert attack["page"] == 4 and len(attack["context_before"]) == 3 and attack["citation"] == "doc://rules#pages=4"
    assert in_doc["results"]["movement"]["total_matches"] == 2


async def test_search_multiple_a_failing_query_does_not_stop_the_others(client):
    res = await call(client, "search_multiple", {"queries": ["movement", "(broken", "shuffle"],
                                                 "scope": {"type": "global"}, "max_results_per_query": 1})
    assert res["queries_completed"] == 2 and res["queries_failed"] == 1
    assert res["results"]["(broken"]["error"]["code"] == "INVALID_QUERY"
    assert res["results"]["shuffle"]["truncated"] is True and len(res["results"]["shuffle"]["matches"]) == 1


async def test_search_multiple_refusals(client):
    assert "queries" in await refused(client, "search_multiple", {"queries": [], "scope": {"type": "global"}})
    assert "queries" in await refused(client, "search_multiple",
                                      {"queries": [str(i) for i in range(11)], "scope": {"type": "global"}})
    assert (await refused(client, "search_multiple", {"queries": ["x"], "scope": {"type": "collection",
                                                                                   "path": "ghost"}})
            ).startswith("SCOPE_NOT_FOUND")


# --- read_document ------------------------------------------------------------------------------------------------


async def test_read_document_whole_text_and_pages(client):
    md = await call(client, "read_document", {"path": "games/coop/notes.md"})
    assert md["content"] == dm.MARKDOWN_TEXT.rstrip("\n") or md["content"].startswith("# Card Game Notes")
    assert md["format"] == "markdown" and md["pages_read"] == [1] and md["total_pages"] == 1
    assert "--- Page" not in md["content"] and md["char_count"] == len(md["content"])
    ignored = await call(client, "read_document", {"path": "games/coop/notes.md", "pages": [3]})
    assert ignored["content"] == md["content"]  # pages ignored for text formats

    some = await call(client, "read_document", {"path": "books/manual.pdf", "pages": [1, 2, 5, 10]})
    assert some["pages_read"] == [1, 2, 5, 10] and some["total_pages"] == 16 and some["format"] == "pdf"
    assert some["content"].startswith("--- Page 1 ---\n\nIntroduction\nWelcome to the Quest Rules handbook.")
    assert "\n\n--- Page 2 ---\n\n" in some["content"] and "--- Page 3 ---" not in some["content"]
    assert "pag" + "e10" in some["content"]
    span = await call(client, "read_document", {"path": "books/manual.pdf", "pages": [10, 11, 12, 13, 14, 15]})
    assert span["pages_read"] == [10, 11, 12, 13, 14, 15] and span["truncated"] is False
    single = await call(client, "read_document", {"path": "books/manual.pdf", "pages": 3})  # one page, no list
    assert single["pages_read"] == [3]
    whole = await call(client, "read_document", {"path": "games/coop/rules.pdf"})
    assert whole["pages_read"] == [1, 2, 3, 4, 5] and "Treasure cards are shuffled" in whole["content"]


async def test_read_document_truncates_at_the_configured_limit(client, monkeypatch):
    monkeypatch.setenv("ASSAY_MAX_DOCUMENT_READ_CHARS", "100")
    cut = await call(client, "read_document", {"path": "books/manual.pdf"})
    assert cut["truncated"] is True and cut["char_count"] == len(cut["content"]) == 100
    assert cut["pages_read"][0] == 1 and "pages" in cut["note"]


async def test_read_document_says_which_pages_were_read_with_ocr(client):
    if not shutil.which("tesseract"):
        pytest.skip("tesseract-ocr is not installed")
    scan = await call(client, "read_document", {"path": "games/coop/scan.pdf"})
    assert scan["ocr_pages"] == [1] and "INVOICE" in scan["content"].upper()


async def test_read_document_refusals(client):
    assert (await refused(client, "read_document", {"path": "books/manual.pdf", "pages": [17]})
            ).startswith("PAGE_OUT_OF_RANGE")
    message = await refused(client, "read_document", {"path": "books/manual.pdf", "pages": [2, 99]})
    assert "99" in message and "16" in message
    assert (await refused(client, "read_document", {"path": "games/missing.pdf"})).startswith("DOCUMENT_NOT_FOUND")
    assert (await refused(client, "read_document", {"path": "games/coop"})).startswith("DOCUMENT_NOT_FOUND")
    assert (await refused(client, "read_document", {"path": "games/box.bin"})).startswith("UNSUPPORTED_FORMAT")
    encrypted = await refused(client, "read_document", {"path": "games/coop/encrypted.pdf"})
    assert encrypted.startswith("FILTER_FAILED") and "password" in encrypted
    assert (await refused(client, "read_document", {"path": "games/coop/truncated.pdf"})).startswith(
        "FILTER_FAILED")
    assert (await refused(client, "read_document", {"path": "../secret.md"})).startswith("PATH_TRAVERSAL_DETECTED")
    assert (await refused(client, "read_document", {"path": "games/link.pdf"})).startswith("SYMLINK_NOT_ALLOWED")
    assert "pages" in await refused(client, "read_document", {"path": "books/manual.pdf", "pages": [0]})


async def test_read_document_extracts_a_file_not_indexed_yet(client, lib):
    app, root = lib
    late = root / "docs" / "late.md"
    late.write_text("# Late\n\nwritten after the index\n")
    read = await call(client, "read_document", {"path": "docs/late.md"})
    assert read["content"] == "# Late\n\nwritten after the index"
    info = await call(client, "get_document_info", {"path": str(late)})  # absolute paths inside the root too
    assert info["indexed"] == "not_indexed" and info["path"] == "docs/late.md"
    scoped = await search(client, "written", {"type": "document", "path": "docs/late.md"})
    assert scoped["total_matches"] == 0 and scoped["pending_documents"] == 1 and "not in the file index" in scoped[
        "note"]


async def test_read_document_reads_a_changed_file_again(client, lib):
    app, root = lib
    changing = root / "programming" / "python" / "fib.py"
    before = await call(client, "read_document", {"path": "programming/python/fib.py"})
    assert "fibonacci" in before["content"]
    changing.write_text("def lucas(n):\n    return n\n")
    os.utime(changing, (time.time() + 5, time.time() + 5))
    after = await call(client, "read_document", {"path": "programming/python/fib.py"})
    assert after["content"] == "def lucas(n):\n    return n"
    info = await call(client, "get_document_info", {"path": "programming/python/fib.py"})
    assert info["indexed"] == "pending"  # the file index has the old state: the documents plan will catch up


# --- get_document_info --------------------------------------------------------------------------------------------


async def test_get_document_info_of_a_pdf_nests_its_outline(client, lib):
    info = await call(client, "get_document_info", {"path": "games/coop/rules.pdf"})
    assert info["name"] == "rules.pdf" and info["collection"] == "games/coop" and info["format"] == "pdf"
    assert info["size_bytes"] == (lib[1] / "games" / "coop" / "rules.pdf").stat().st_size
    assert info["size_human"].endswith("KB") and info["pages"] == 5 and info["has_toc"] is True
    assert info["toc"] == [
        {"title": "Introduction", "page": 1, "level": 1},
        {"title": "Gameplay", "page": 2, "level": 1, "children": [{"title": "Movement", "page": 3, "level": 2}]},
        {"title": "Combat", "page": 4, "level": 1}]
    meta = info["metadata"]
    assert meta["title"] == "Quest Rules" and meta["author"] == "A. Designer"
    assert meta["created"].startswith("2023-05-10") and meta["keywords"] == ["dungeon", "cooperative", "rules"]
    assert meta["subject"] == "board games" and info["indexed"] == "indexed"


async def test_get_document_info_of_markdown_gives_heading_lines(client):
    info = await call(client, "get_document_info", {"path": "games/coop/notes.md"})
    assert info["format"] == "markdown" and info["pages"] == 1 and info["has_toc"] is True
    top = info["toc"]
    assert [(t["title"], t["line"]) for t in top] == [("Card Game Notes", 1), ("Appendix", 26)]
    setup = top[0]["children"][0]
    assert setup["title"] == "Setup" and setup["level"] == 2 and "page" not in setup
    assert [c["title"] for c in setup["children"]] == ["Dealing"]
    assert "not a heading" not in str(top)


async def test_get_document_info_reports_a_document_that_could_not_be_read(client):
    info = await call(client, "get_document_info", {"path": "games/coop/encrypted.pdf"})
    assert info["indexed"] == "failed" and info["error"]["code"] == "FILTER_FAILED"
    assert info["pages"] is None and info["has_toc"] is False


async def test_get_document_info_refusals(client):
    assert (await refused(client, "get_document_info", {"path": "nope.pdf"})).startswith("DOCUMENT_NOT_FOUND")
    assert (await refused(client, "get_document_info", {"path": "games/box.bin"})).startswith("UNSUPPORTED_FORMAT")
    failed = await refused(client, "get_document_info", {"path": "docs/api/nometa.txt"})
    assert failed.startswith("METADATA_EXTRACTION_FAILED") and "corrupt" in failed


async def test_a_search_during_extraction_says_how_many_documents_are_pending(client, lib):
    app, root = lib
    fresh = root / "docs" / "fresh"
    fresh.mkdir()
    (fresh / "one.md").write_text("shuffle once\n")
    (fresh / "two.txt").write_text("shuffle twice\n")
    index_sync(app, fresh)  # in the file index, not extracted yet
    res = await search(client, "shuffle", {"type": "collection", "path": "docs/fresh"})
    assert res["total_matches"] == 0 and res["pending_documents"] == 2
    assert "2 document(s) in scope are not indexed yet" in res["note"]
    multi = await call(client, "search_multiple", {"queries": ["shuffle"], "scope": {"type": "collection",
                                                                                     "path": "docs/fresh"}})
    assert multi["pending_documents"] == 2 and "not indexed yet" in multi["note"]
    info = await call(client, "get_document_info", {"path": "docs/fresh/one.md"})  # extracted now, and stored
    assert info["indexed"] == "indexed"
    again = await search(client, "shuffle", {"type": "collection", "path": "docs/fresh"})
    assert again["pending_documents"] == 1 and [m["document"] for m in again["matches"]] == ["docs/fresh/one.md"]

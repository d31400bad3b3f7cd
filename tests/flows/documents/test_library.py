"""flows.documents.library as plain functions: name scores, nested tables of contents, sizes and metadata as the
tools show them; and, on a store with two roots whose documents are written directly (no extraction pool), paths
under the roots' names, reading from the store (page separators, truncation, pages without text) and scopes."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from flows.documents import library
from flows.documents.executor import options_for, work_key
from flows.documents.model import Extracted, Page, TocItem
from flows.documents.paths import DocumentPaths
from mcp_server.app import AssayApp
from mcp_server.config import Settings
from store.documents import DocumentWrite, write_extracted_many
from store.errors import DocumentError, InvalidInput
from store.models import Entry
from tests.conftest import index_sync

E = Entry.__table__


def test_name_score_ranks_exact_over_stem_over_prefix_over_contains():
    exact = library.name_score("rules.pdf", "rules.pdf")
    stem = library.name_score("rules", "rules.pdf")
    prefix = library.name_score("rul", "rules.pdf")
    contains = library.name_score("ules", "rules.pdf")
    assert exact == 1.0 and 1.0 > stem > prefix > contains > 0
    assert library.name_score("xyz", "rules.pdf") is None
    # the more of the name the query covers, the higher, within its kind
    assert library.name_score("rul", "rules.pdf") > library.name_score("rul", "rules-of-the-game.pdf")
    assert library.name_score("ules", "rules.pdf") > library.name_score("ules", "old-rules-of-the-game.pdf")
    assert library.name_score("r", "rules-of-the-game-and-more.pdf") > library.name_score("rules.pd", "my-rules.pdf")


def test_nest_toc_puts_items_under_the_last_item_of_a_lower_level():
    flat = [{"title": "A", "level": 1, "page": 1}, {"title": "A.1", "level": 2, "page": 2},
            {"title": "A.1.a", "level": 3, "page": 2}, {"title": "A.2", "level": 2, "page": 3},
            {"title": "B", "level": 1, "page": 4}, {"title": "B deep", "level": 3, "page": 5},
            {"title": "C", "level": 1, "line": 40}]
    assert library.nest_toc(flat) == [
        {"title": "A", "page": 1, "level": 1, "children": [
            {"title": "A.1", "page": 2, "level": 2, "children": [{"title": "A.1.a", "page": 2, "level": 3}]},
            {"title": "A.2", "page": 3, "level": 2}]},
        {"title": "B", "page": 4, "level": 1, "children": [{"title": "B deep", "page": 5, "level": 3}]},
        {"title": "C", "line": 40, "level": 1}]
    assert library.nest_toc([]) == []


def test_size_human_and_iso():
    assert library.size_human(0) == "0 B" and library.size_human(1023) == "1023 B"
    assert library.size_human(1536) == "1.5 KB" and library.size_human(2457600) == "2.3 MB"
    assert library.size_human(5 * 1024 ** 3) == "5.0 GB"
    assert library.iso(0) == "1970-01-01T00:00:00Z" and library.iso(1.9) == "1970-01-01T00:00:01Z"


def test_public_metadata_always_has_the_reference_keys():
    assert library.public_metadata({}) == {"title": None, "author": None, "created": None, "keywords": []}
    meta = library.public_metadata({"title": "T", "keywords": "board game; rules, ", "subject": "s",
                                    "producer": ""})
    assert meta == {"title": "T", "author": None, "created": None, "keywords": ["board game", "rules"],
                    "subject": "s"}
    assert library.public_metadata({"keywords": ["a", " b "]})["keywords"] == ["a", "b"]


# --- two roots, documents written straight to the store -------------------------------------------------------


@pytest.fixture(scope="module")
def two_roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("library")
    books, papers = base / "books", base / "x" / "papers"
    (books / "games").mkdir(parents=True)
    (papers / "2024").mkdir(parents=True)
    (books / "games" / "rules.pdf").write_bytes(b"%PDF- stand-in: the stored text is read, not this")
    (books / "games" / "notes.md").write_text("# Notes\nshuffle well\n")
    (papers / "2024" / "study.txt").write_text("a study of shuffles\n")
    (papers / "readme.md").write_text("# Papers\n")
    app = AssayApp.create(Settings(data_dir=base / "data", roots=[str(books), str(papers)], use_prefect=False))
    for root in (books, papers):
        index_sync(app, root)
    options = options_for(None)
    docs = {
        books / "games" / "rules.pdf": Extracted(
            path="", format="pdf", total_pages=3,
            pages=[Page(1, "Rules\nshuffle the deck"), Page(2, "", no_text=True), Page(3, "End\nshuffle again")],
            toc=[TocItem("Rules", 1, page=1), TocItem("End", 1, page=3)], meta={"title": "The Rules"}),
        books / "games" / "notes.md": Extracted(path="", format="markdown", total_pages=1,
                                                pages=[Page(1, "# Notes\nshuffle well")]),
        papers / "2024" / "study.txt": Extracted(path="", format="text", total_pages=1,
                                                 pages=[Page(1, "a study of shuffles")]),
    }
    with app.engine.connect() as conn:
        ids = dict(conn.execute(select(E.c.path, E.c.id)).tuples().all())
    write_extracted_many(app.engine, [
        DocumentWrite(ids[str(p)], p.stat().st_size, p.stat().st_mtime,
                      work_key(p.stat().st_size, p.stat().st_mtime, options), x) for p, x in docs.items()])
    yield app, DocumentPaths(app.roots, False), books, papers
    app.close()
    app.engine.dispose()


def test_several_roots_are_listed_by_name_and_browsed_under_it(two_roots):
    app, paths, books, papers = two_roots
    top = library.list_collections(paths, "")
    assert top == {"current_path": "", "documents": [], "collections": [
        {"name": "books", "path": "books", "document_count": 0, "subcollection_count": 1},
        {"name": "papers", "path": "papers", "document_count": 1, "subcollection_count": 1}]}
    year = library.list_collections(paths, "papers/2024")
    assert [d["path"] for d in year["documents"]] == ["papers/2024/study.txt"]
    with pytest.raises(DocumentError) as info:
        library.list_collections(paths, "magazines")
    assert info.value.code == "COLLECTION_NOT_FOUND"


def test_find_and_search_show_paths_under_the_root_name(two_roots):
    app, paths, books, papers = two_roots
    found = library.find_document(app.engine, paths, "study", 10)
    assert found["matches"][0]["path"] == "papers/2024/study.txt"
    assert found["matches"][0]["collection"] == "papers/2024"
    everywhere = library.resolve_scope(app.engine, paths, "global", None)
    hits = library.search_documents(app.engine, paths, "shuffle", everywhere, context_lines=0)
    assert sorted((m["document"], m["line"]) for m in hits["matches"]) == [
        ("books/games/notes.md", 2), ("books/games/rules.pdf", 2), ("books/games/rules.pdf", 5),
        ("papers/2024/study.txt", 1)]
    papers_only = library.resolve_scope(app.engine, paths, "collection", "papers")
    assert library.search_documents(app.engine, paths, "shuffle", papers_only)["total_matches"] == 1
    one = library.resolve_scope(app.engine, paths, "document", "books/games/rules.pdf")
    assert library.search_documents(app.engine, paths, "again", one)["matches"][0]["page"] == 3


def test_read_document_from_the_store_with_separators_limits_and_empty_pages(two_roots):
    app, paths, books, papers = two_roots
    options = options_for(None)
    whole = library.read_document(app.engine, paths, "books/games/rules.pdf", [], max_chars=10_000,
                                  options=options)
    assert whole["content"] == ("--- Page 1 ---\n\nRules\nshuffle the deck\n\n--- Page 2 ---\n\n\n\n"
                                "--- Page 3 ---\n\nEnd\nshuffle again")
    assert whole["pages_read"] == [1, 2, 3] and whole["no_text_pages"] == [2] and "no text layer" in whole["note"]
    cut = library.read_document(app.engine, paths, "books/games/rules.pdf", [], max_chars=20, options=options)
    assert cut["content"] == whole["content"][:20] and cut["truncated"] is True and cut["pages_read"] == [1]
    exact = library.read_document(app.engine, paths, "books/games/rules.pdf", [3], max_chars=33, options=options)
    assert exact["content"] == "--- Page 3 ---\n\nEnd\nshuffle again" and exact["truncated"] is False
    with pytest.raises(DocumentError) as info:
        library.read_document(app.engine, paths, "books/games/rules.pdf", [1, 4], max_chars=100, options=options)
    assert info.value.code == "PAGE_OUT_OF_RANGE" and info.value.details["total_pages"] == 3
    info_ = library.get_document_info(app.engine, paths, "books/games/rules.pdf", options=options)
    assert info_["path"] == "books/games/rules.pdf" and info_["collection"] == "books/games"
    assert info_["pages"] == 3 and info_["no_text_pages"] == 1 and info_["metadata"]["title"] == "The Rules"
    assert info_["indexed"] == "indexed"


def test_scope_parameters_are_checked(two_roots):
    app, paths, books, papers = two_roots
    with pytest.raises(InvalidInput):
        library.resolve_scope(app.engine, paths, "global", "books")
    with pytest.raises(InvalidInput):
        library.resolve_scope(app.engine, paths, "document", "")
    with pytest.raises(DocumentError) as info:
        library.resolve_scope(app.engine, paths, "collection", "books/games/rules.pdf")
    assert info.value.code == "SCOPE_NOT_FOUND" and info.value.details == {"path": "books/games/rules.pdf"}
    with pytest.raises(DocumentError) as info:
        library.resolve_scope(app.engine, paths, "collection", "journals/x")
    assert info.value.code == "SCOPE_NOT_FOUND"
    assert library.resolve_scope(app.engine, paths, "collection", "").under == list(paths.roots.paths)


def test_a_markdown_file_ignores_pages_and_has_no_separators(two_roots):
    app, paths, books, papers = two_roots
    read = library.read_document(app.engine, paths, str(books / "games" / "notes.md"), [7], max_chars=100,
                                 options=options_for(None))
    assert read["content"] == "# Notes\nshuffle well" and read["pages_read"] == [1] and read["total_pages"] == 1


def test_list_collections_follows_symlinks_inside_the_roots_only_when_allowed(tmp_path):
    import os

    from flows.core.roots import Roots

    root = tmp_path / "lib"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.md").write_text("# A\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "b.md").write_text("# B\n")
    os.symlink(root / "real", root / "alias")
    os.symlink(tmp_path / "outside", root / "away")
    os.symlink(root / "real" / "a.md", root / "a-link.md")
    strict = library.list_collections(DocumentPaths(Roots.of([str(root)]), False), "")
    assert [c["name"] for c in strict["collections"]] == ["real"] and strict["documents"] == []
    lenient = library.list_collections(DocumentPaths(Roots.of([str(root)]), True), "")
    assert [c["name"] for c in lenient["collections"]] == ["alias", "real"]  # "away" leads out: never listed
    assert lenient["collections"][0]["document_count"] == 1
    assert [d["name"] for d in lenient["documents"]] == ["a-link.md"]
    assert library.list_collections(DocumentPaths(Roots.of([str(root)]), True), "alias")["current_path"] == "real"

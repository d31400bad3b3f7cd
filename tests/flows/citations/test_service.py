"""CitationService: maps built on first use, nodes, virtual and physical resolution of nodes and addresses, ids for
paths inside the roots only, and staleness (an auto map rebuilt after its source changed, an agent map marked stale
and refused until supplied again or explicitly allowed). Real PyMuPDF files; a small store per test."""

from __future__ import annotations

import os
import re

import pymupdf
import pytest
from sqlalchemy import delete, select

from examples.mediagen.citations import MARKDOWN_HEADINGS, markdown_headings
from examples.mediagen.documents import pdf_lines, pdf_with_outline
from flows.citations import builders
from flows.citations.service import CitationService
from flows.index.indexer import index_tree
from flows.media.hashing import hash_file
from flows.core.roots import Roots
from store import citations as store_citations
from store.diagnostics import counter_mismatches
from store.engine import make_engine
from store.entries import T as E
from store.errors import CitationError
from tests.conftest import BACKENDS, backend_engine


@pytest.fixture
def lib(tmp_path):
    """A root with a 5-page PDF with a nested outline (book.pdf), Markdown with nested headings (notes.md) and a
    file nothing can cite (data.bin); an empty store (files are indexed on demand)."""
    root = tmp_path / "root"
    pdf_with_outline(root / "book.pdf", pages=5)
    markdown_headings(root / "notes.md")
    (root / "data.bin").write_bytes(b"\x00\x01")
    (root / "sub").mkdir()
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    yield CitationService(engine, Roots.of([str(root)]), tmp_path / "data"), root
    engine.dispose()


def _code(exc_info) -> str:
    return exc_info.value.code


def _no_building(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the map was built again")

    monkeypatch.setattr(builders, "build", refuse)


def _edit(path, text: str) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, (st.st_atime, st.st_mtime + 5))  # a new mtime even on a coarse clock


def test_first_get_structure_builds_the_outline_map_and_stores_it(lib, monkeypatch):
    svc, root = lib
    assert svc.list_resources() == {"resources": [], "total": 0}
    rid = svc.resource_id_for("book.pdf")
    assert rid == "book" and svc.resource_id_for(str(root / "book.pdf")) == "book"
    assert svc.list_resources() == {"resources": ["book"], "total": 1}
    book = svc.get_structure(rid)
    assert (book.resource_id, book.type, book.source_path) == ("book", "document", str(root / "book.pdf"))
    assert [n.id for n in book.nodes] == ["introduction", "gameplay", "combat"]
    gameplay = book.nodes[1]
    assert gameplay.location.pages == [2, 3] and gameplay.location.virtual_address == "doc://book#pages=2-3"
    assert [c.id for c in gameplay.children] == ["gameplay.movement"]
    meta = book.metadata
    assert meta["source_hash"] == hash_file(str(root / "book.pdf"))
    assert meta["source_size"] == (root / "book.pdf").stat().st_size
    assert (meta["origin"], meta["strategy"], meta["stale"], meta["page_count"]) == ("outline", "auto", False, 5)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", book.created_at)

    _no_building(monkeypatch)  # stored: the next calls read it
    assert svc.get_structure(rid).model_dump() == book.model_dump()


def test_get_node_gives_children_as_ids_and_names_existing_ids_when_missing(lib):
    svc, _ = lib
    rid = svc.resource_id_for("book.pdf")
    node = svc.get_node(rid, "gameplay")
    assert node == {"id": "gameplay", "title": "Gameplay", "type": "section",
                    "location": {"modality": "document", "pages": [2, 3], "virtual_address": "doc://book#pages=2-3"},
                    "children": [{"id": "gameplay.movement"}]}
    with pytest.raises(CitationError) as err:
        svc.get_node(rid, "chapter_9")
    assert _code(err) == "NODE_NOT_FOUND" and "introduction, gameplay, gameplay.movement, combat" in str(err.value)


def test_resolve_virtual_and_physical_pages_of_a_node(lib):
    svc, root = lib
    rid = svc.resource_id_for("book.pdf")
    virtual = svc.resolve(rid, "gameplay", virtual=True)
    assert virtual["output_path"] is None and virtual["address"] == "doc://book#pages=2-3"
    assert virtual["modality"] == "document" and virtual["resource_id"] == "book"
    assert virtual["node"]["id"] == "gameplay" and "children" not in virtual["node"]
    assert virtual["source_hash"] == hash_file(str(root / "book.pdf")) and virtual["stale"] is False

    physical = svc.resolve(rid, "gameplay")
    out = physical["output_path"]
    assert out and physical["cache_path"].startswith("cache/") and physical["mime_type"] == "application/pdf"
    with pymupdf.open(out) as doc:
        assert doc.page_count == 2
        assert pdf_lines(2)[0] in doc[0].get_text() and pdf_lines(3)[0] in doc[1].get_text()
    again = svc.resolve(rid, "gameplay")
    assert again["cached"] is True and again["output_path"] == out
    with svc.engine.connect() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == str(root / "book.pdf"))).scalar_one()
        assert [a["cache_path"] for a in store_citations.extracts(conn, entry_id)] == [physical["cache_path"]]


def test_resolve_an_address_finds_its_node_or_stands_alone(lib):
    svc, _ = lib
    svc.get_structure(svc.resource_id_for("book.pdf"))
    exact = svc.resolve(address="doc://book#pages=2-3", virtual=True)
    assert exact["node"]["id"] == "gameplay" and exact["address"] == "doc://book#pages=2-3"
    loose = svc.resolve(address="doc://book#pages=1,3")
    assert loose["node"]["id"] == "address" and loose["node"]["type"] == "address"
    with pymupdf.open(loose["output_path"]) as doc:
        assert doc.page_count == 2 and pdf_lines(3)[0] in doc[1].get_text()
    assert svc.resolve(resource_id="book", address="doc://book#pages=4", virtual=True)["address"] == \
        "doc://book#pages=4"


def test_bad_addresses_and_unknown_resources_are_refused_saying_what_is_wrong(lib):
    svc, _ = lib
    svc.resource_id_for("book.pdf")
    with pytest.raises(CitationError) as err:
        svc.resolve(address="doc://book#pages=7-9")
    assert _code(err) == "INVALID_ADDRESS" and "5 pages" in str(err.value)
    with pytest.raises(CitationError) as err:
        svc.resolve(address="doc://book#pages=2", resource_id="other")
    assert _code(err) == "INVALID_ADDRESS"
    with pytest.raises(CitationError) as err:
        svc.resolve(address="doc://nothing#pages=1")
    assert _code(err) == "RESOURCE_NOT_FOUND"
    assert "no resource 'nothing'; listResources lists the 1 resource (e.g. book)" in str(err.value)
    with pytest.raises(CitationError) as err:
        svc.get_structure("nothing")
    assert _code(err) == "RESOURCE_NOT_FOUND"
    with pytest.raises(CitationError) as err:
        svc.resolve("book")
    assert _code(err) == "INVALID_ADDRESS" and "node_id" in str(err.value)


def test_paths_outside_the_roots_folders_and_files_nothing_can_cite_are_refused(lib, tmp_path):
    svc, root = lib
    (tmp_path / "outside.pdf").write_bytes(b"%PDF")
    for path, code in (("../outside.pdf", "INVALID_PATH"), (str(tmp_path / "outside.pdf"), "INVALID_PATH"),
                       ("sub", "INVALID_PATH"), ("missing.pdf", "INVALID_PATH"),
                       ("data.bin", "UNSUPPORTED_FORMAT")):
        with pytest.raises(CitationError) as err:
            svc.resource_id_for(path)
        assert _code(err) == code, path
    assert "PDF" in str(err.value) and "video" in str(err.value)  # what can be cited


def test_an_edited_markdown_source_gets_its_auto_map_rebuilt(lib):
    svc, root = lib
    rid = svc.resource_id_for("notes.md")
    first = svc.get_structure(rid)
    assert [n.id for n in first.nodes] == ["alpha", "beta"]
    assert first.nodes[1].location.lines == MARKDOWN_HEADINGS["beta"][2]
    _edit(root / "notes.md", "# Gamma\ntext\n# Delta\nmore\n")
    second = svc.get_structure(rid)
    assert [n.id for n in second.nodes] == ["gamma", "delta"]
    assert second.metadata["source_hash"] != first.metadata["source_hash"]
    assert second.metadata["stale"] is False and second.metadata["line_count"] == 4
    resolved = svc.resolve(rid, "delta", virtual=True)
    assert resolved["address"] == "text://notes#lines=3-4" and resolved["source_hash"] == hash_file(
        str(root / "notes.md"))


def test_a_touched_file_with_the_same_bytes_keeps_its_map(lib, monkeypatch):
    svc, root = lib
    rid = svc.resource_id_for("book.pdf")
    svc.get_structure(rid)
    st = (root / "book.pdf").stat()
    os.utime(root / "book.pdf", (st.st_atime, st.st_mtime + 10))
    _no_building(monkeypatch)
    again = svc.get_structure(rid)
    assert again.metadata["source_mtime"] == st.st_mtime + 10 and again.metadata["origin"] == "outline"


def test_an_agent_map_goes_stale_when_its_source_changes_until_supplied_again(lib):
    svc, root = lib
    nodes = [{"id": "intro", "title": "Intro", "type": "section",
              "location": {"modality": "text", "lines": [1, 3]}, "summary": "the start",
              "children": [{"id": "intro.first", "location": {"modality": "text", "lines": [1, 1]}}]}]
    supplied = svc.put_map("notes.md", nodes, title="My notes")
    rid = supplied.resource_id
    assert supplied.title == "My notes" and supplied.metadata["origin"] == "agent"
    assert svc.get_node(rid, "intro")["children"] == [{"id": "intro.first"}]
    assert svc.resolve(rid, "intro", virtual=True)["node"]["summary"] == "the start"

    _edit(root / "notes.md", "changed\n" * 30)
    shown = svc.get_structure(rid)
    assert shown.metadata["stale"] is True and "map-put" in shown.metadata["note"]
    assert [n.id for n in shown.nodes] == ["intro"]  # never rebuilt: an agent's map is the agent's
    for call in (lambda: svc.resolve(rid, "intro", virtual=True), lambda: svc.resolve(rid, "intro")):
        with pytest.raises(CitationError) as err:
            call()
        assert _code(err) == "SOURCE_CHANGED"
        assert f"changed since its map was supplied at {shown.created_at}" in str(err.value)
        assert "allow_stale" in str(err.value)
    assert svc.get_node(rid, "intro")["stale"] is True  # shown, marked, as getStructure shows the map
    # an address is checked against the file as it is now: the stale map does not stand in its way
    by_address = svc.resolve(address=f"text://{rid}#lines=1-2", virtual=True)
    assert by_address["stale"] is False and by_address["node"]["id"] == "address"
    allowed = svc.resolve(rid, "intro", allow_stale=True)
    assert allowed["stale"] is True and allowed["source_hash"] == hash_file(str(root / "notes.md"))
    assert open(allowed["output_path"]).read().splitlines() == ["changed"] * 3

    again = svc.put_map(rid, nodes)
    assert again.metadata["stale"] is False and svc.resolve(rid, "intro", virtual=True)["stale"] is False


def test_an_agent_map_with_problems_is_refused_whole(lib):
    svc, _ = lib
    bad = [{"id": "a", "location": {"modality": "document", "pages": [4, 9]}},
           {"id": "b.c", "location": {"modality": "document", "pages": [1, 1]}}]
    with pytest.raises(CitationError) as err:
        svc.put_map("book.pdf", bad)
    assert _code(err) == "INVALID_MAP" and len(err.value.details["problems"]) >= 2
    assert svc.get_structure("book").metadata["origin"] == "outline"  # nothing stored: built on first use


def test_deleting_the_map_keeps_the_id_and_deleting_the_entry_removes_everything(lib):
    svc, root = lib
    rid = svc.resource_id_for("book.pdf")
    svc.get_structure(rid)
    assert svc.delete_map(rid) is True and svc.delete_map(rid) is False
    assert svc.list_resources()["resources"] == ["book"]
    assert svc.get_structure(rid).metadata["origin"] == "outline"  # built again on use
    with svc.engine.begin() as conn:
        conn.execute(delete(E).where(E.c.path == str(root / "book.pdf")))
    assert svc.list_resources()["resources"] == []
    with pytest.raises(CitationError) as err:
        svc.get_structure(rid)
    assert _code(err) == "RESOURCE_NOT_FOUND"


def test_search_hits_get_addresses_under_resource_ids(lib):
    svc, root = lib
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs

    run_index_job(svc.engine, job_id=store_jobs.create_job(svc.engine, root=str(root)), root=str(root))
    with svc.engine.connect() as conn:
        ids = dict(conn.execute(select(E.c.name, E.c.id)).all())
    assert svc.list_resources()["total"] == 0  # indexed files have no ids until something cites them
    assert svc.resource_ids_for_entries([ids["book.pdf"], ids["notes.md"], ids["data.bin"]]) == {
        ids["book.pdf"]: "book", ids["notes.md"]: "notes"}
    assert svc.address_for(ids["book.pdf"], page=2, page_end=3) == "doc://book#pages=2-3"
    address = svc.address_for(ids["notes.md"], line_start=4, line_end=9)
    assert address == "text://notes#lines=4-9"
    assert svc.resolve(address=address, virtual=True)["node"]["id"] == "address"  # no map needed to resolve it
    svc.get_structure("notes")
    assert svc.resolve(address=address, virtual=True)["node"]["id"] == "alpha.alpha_one"  # the map's node


def test_html_is_cited_in_the_lines_of_its_extracted_text(lib, monkeypatch):
    from flows.documents import executor as doc_exec
    from flows.documents.model import Extracted, Page

    def extraction(tasks, options, *, should_cancel):  # stands in for the pool: the "text" of the page
        for entry_id, path in tasks:
            yield entry_id, Extracted(path=path, format="html", pages=[Page(1, "Title\nfirst para\nsecond para")],
                                      total_pages=1)

    monkeypatch.setattr(doc_exec.DEFAULT_RUN, "extract", extraction)
    svc, root = lib
    (root / "page.html").write_text("<html><body><h1>Title</h1><p>first para</p><p>second para</p></body></html>")
    rid = svc.resource_id_for("page.html")
    assert svc.get_structure(rid).metadata["line_count"] == 3
    out = svc.resolve(address=f"text://{rid}#lines=2-3")
    assert open(out["output_path"]).read().splitlines() == ["first para", "second para"]
    with pytest.raises(CitationError) as err:
        svc.resolve(address=f"text://{rid}#lines=2-4")
    assert _code(err) == "INVALID_ADDRESS" and "3 lines" in str(err.value)


def test_build_map_takes_a_strategy_and_a_rebuild_falls_back_to_auto_when_it_no_longer_applies(lib):
    svc, root = lib
    windows = svc.build_map("notes.md", strategy="windows", window=5)
    assert [n.location.lines for n in windows.nodes] == [[1, 5], [6, 10], [11, 15], [16, 20]]
    assert windows.metadata["window"] == 5 and windows.metadata["strategy"] == "windows"
    with pytest.raises(CitationError) as err:
        svc.build_map("notes", strategy="outline")
    assert _code(err) == "UNSUPPORTED_FORMAT"
    assert svc.build_map("notes", strategy="headings").metadata["origin"] == "headings"
    _edit(root / "notes.md", "no headings\nany more\n")
    rebuilt = svc.get_structure("notes")
    assert (rebuilt.metadata["origin"], rebuilt.metadata["strategy"]) == ("windows", "auto")


@pytest.fixture(params=BACKENDS)
def any_store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "citations_service") as engine:
        yield engine


def test_the_service_works_alike_on_both_stores(any_store, tmp_path):
    root = tmp_path / "root"
    pdf_with_outline(root / "book.pdf", pages=5)
    svc = CitationService(any_store, Roots.of([str(root)]), tmp_path / "data")
    rid = svc.resource_id_for("book.pdf")  # indexed on demand
    assert [n.id for n in svc.get_structure(rid).nodes] == ["introduction", "gameplay", "combat"]
    assert svc.get_node(rid, "gameplay")["children"] == [{"id": "gameplay.movement"}]
    assert svc.resolve(address="doc://book#pages=2-3", virtual=True)["node"]["id"] == "gameplay"
    assert svc.resolve(rid, "combat")["size_bytes"] > 0


def test_a_file_indexed_on_demand_counts_in_the_sizes_of_its_indexed_folders(engine, tmp_path):
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "old.md").write_text("# Old\n\ntext\n")
    index_tree(engine, str(root), scan_id=1)
    (root / "docs" / "new.md").write_text("# New\n\nmore text\n")  # after the index: cited by its path
    svc = CitationService(engine, Roots.of([str(root)]), tmp_path / "data")
    assert svc.resource_id_for("docs/new.md") == "new"
    assert counter_mismatches(engine) == {}


def test_a_resource_is_named_first_by_its_path_or_by_the_bare_name_of_an_indexed_file(lib):
    svc, root = lib
    by_path = svc.get_structure("book.pdf")  # a root-relative path where an id is expected reserves the file's id
    assert by_path.resource_id == "book" and svc.list_resources()["resources"] == ["book"]
    with pytest.raises(CitationError) as err:  # a bare name the index does not know yet: how to name it instead
        svc.get_structure("notes")
    assert _code(err) == "RESOURCE_NOT_FOUND" and "by its path" in str(err.value)
    svc.resource_id_for("notes.md")
    svc.delete_map("notes")
    with svc.engine.begin() as conn:  # the file stays indexed, its id is forgotten
        conn.execute(delete(store_citations.R).where(store_citations.R.c.resource_id == "notes"))
    assert svc.resolve(address="text://notes#lines=1-2", virtual=True)["resource_id"] == "notes"
    (root / "sub" / "notes.md").write_text("# other\n")
    svc.resource_id_for("sub/notes.md")  # now two files are named notes: the second has notes_md
    assert svc.resolve(address="text://notes_md#lines=1", virtual=True)["source_path"] == str(root / "sub/notes.md")


def test_a_bare_name_of_several_indexed_files_is_refused_naming_them(lib):
    svc, root = lib
    (root / "dup.md").write_text("# a\n")
    (root / "sub" / "dup.md").write_text("# b\n")
    svc.resource_id_for("dup.md"), svc.resource_id_for("sub/dup.md")
    with svc.engine.begin() as conn:
        conn.execute(delete(store_citations.R))
    with pytest.raises(CitationError) as err:
        svc.get_structure("dup")
    assert _code(err) == "RESOURCE_NOT_FOUND" and "dup.md, sub/dup.md" in str(err.value)

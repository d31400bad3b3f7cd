"""flows.semantic.library: get_file_details (details, whole text, one chunk with lines of context, the errors) and
the views of search results, on a small library indexed, extracted and chunked once per module into the store
(fake vectors: nothing here ranks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from examples.mediagen import documents as dm
from flows.documents.executor import extract_rows, options_for
from flows.documents.paths import DocumentPaths
from flows.semantic import library
from flows.semantic.chunking import chunk_pages
from flows.semantic.model import EmbedParams, Hit, entry_work_key
from mcp_server.app import AssayApp
from mcp_server.config import Settings
from store import semantic as store_semantic
from store.documents import read_pages
from store.errors import AssayError, InvalidInput
from store.models import Entry
from tests.conftest import fresh_pg_database, index_sync
from tests.flows.semantic.fakes import FakeEncoder

E = Entry.__table__
NOTES_LINES = [f"Line {n}: the lighthouse keeper counted {n} ships." for n in range(1, 61)]


def _embed(engine, coll: dict, entry_id: int, path: Path, encoder: FakeEncoder, params: EmbedParams) -> int:
    pages = [(page, text) for page, text, _ in read_pages(engine, entry_id)]
    paged = path.suffix == ".pdf"
    spans = list(chunk_pages([(p if paged else None, t) for p, t in pages], chunk_size=params.chunk_size,
                             overlap=params.overlap))
    st = path.stat()
    store_semantic.replace_entries(engine, coll["id"], [store_semantic.EntryChunks(
        entry_id=entry_id, work_key=entry_work_key(st.st_size, st.st_mtime, params), status="ok", chunks=spans,
        vectors=encoder.encode([s.text for s in spans]))])
    return len(spans)


def _database(request):
    import contextlib

    if request.param == "sqlite":
        return contextlib.nullcontext(None)
    return fresh_pg_database(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def lib(request, tmp_path_factory):
    """(app, paths, root, chunk counts): notes.md and rules.pdf in collection "default" (notes.md also in "extra"),
    plain.txt extracted but in no collection. On SQLite and on PostgreSQL."""
    base = tmp_path_factory.mktemp("semlib")
    root = base / "library"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "notes.md").write_text("\n".join(NOTES_LINES) + "\n")
    dm.pdf_with_outline(root / "books" / "rules.pdf")
    (root / "notes" / "plain.txt").write_text("A plain file nobody embedded.\nSecond line.\n")
    with _database(request) as url:
        yield from _library(base, root, url)


def _library(base: Path, root: Path, url: str | None):
    app = AssayApp.create(Settings(data_dir=base / "data", roots=[str(root)], use_prefect=False, database_url=url))
    try:
        index_sync(app, root)
        with app.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(select(E)).mappings()]
        extract_rows(app.engine, rows, options=options_for(None))
        ids = {r["path"]: r["id"] for r in rows}
        encoder = FakeEncoder()
        params = EmbedParams(chunk_size=300, overlap=50, model=encoder.model)
        counts = {}
        for name in ("default", "extra"):
            coll = store_semantic.ensure_collection(app.engine, name, model=encoder.model, backend="torch",
                                                    dim=encoder.dim, chunk_size=300, overlap=50)
            for rel in (("notes/notes.md", "books/rules.pdf") if name == "default" else ("notes/notes.md",)):
                counts[(name, rel)] = _embed(app.engine, coll, ids[str(root / rel)], root / rel, encoder, params)
        yield app, DocumentPaths(app.roots), root, counts
    finally:
        app.close()
        app.engine.dispose()


def details(lib, path: str, **kw):
    app, paths, _, _ = lib
    return library.get_file_details(app.engine, paths, path, max_chars=100_000, options=options_for(None), **kw)


def test_details_without_chunk_give_the_whole_text_and_the_collections_holding_the_file(lib):
    _, _, root, counts = lib
    out = details(lib, "notes/notes.md")
    assert out["path"] == "notes/notes.md" and out["absolute_path"] == str(root / "notes" / "notes.md")
    assert out["format"] == "markdown" and out["size_bytes"] == (root / "notes" / "notes.md").stat().st_size
    assert [c["name"] for c in out["collections"]] == ["default", "extra"]
    assert out["collection"] == "default" and out["chunk_count"] == counts[("default", "notes/notes.md")] > 3
    assert all(c["current"] and c["status"] == "ok" for c in out["collections"])
    assert out["content"].splitlines() == NOTES_LINES and out["truncated"] is False
    assert "chunk" not in out and "note" not in out


def test_a_chunk_comes_with_its_place_and_the_lines_around_it(lib):
    out = details(lib, "notes/notes.md", chunk_index=2, context_lines=2)
    chunk = out["chunk"]
    assert chunk["index"] == 2 and chunk["page"] is None
    first, last = chunk["line_start"], chunk["line_end"]
    assert first > 2 and chunk["text"].startswith(NOTES_LINES[first - 1][:10])
    assert chunk["context_before"] == NOTES_LINES[first - 3:first - 1]
    assert chunk["context_after"] == NOTES_LINES[last:last + 2]
    assert chunk["citation"] == f"text://notes#lines={first}-{last}"  # the file's resource id: its name
    assert "content" not in out


def test_a_pdf_chunk_names_its_pages_and_context_stops_at_the_document_edges(lib):
    out = details(lib, "books/rules.pdf", chunk_index=0, context_lines=50)
    chunk = out["chunk"]
    assert chunk["page"] == 1 and chunk["line_start"] == 1 and chunk["context_before"] == []
    assert "Welcome to the Quest Rules handbook." in chunk["text"]
    assert chunk["citation"] == f"doc://rules#pages=1-{chunk['page_end']}" and chunk["page_end"] > 1
    last = out["chunk_count"] - 1
    tail = details(lib, "books/rules.pdf", chunk_index=last, context_lines=5)["chunk"]
    assert tail["context_after"] == [] and tail["page_end"] == 5


def test_another_collection_is_chosen_by_name(lib):
    _, _, _, counts = lib
    out = details(lib, "notes/notes.md", collection="extra", chunk_index=0, context_lines=0)
    assert out["collection"] == "extra" and out["chunk_count"] == counts[("extra", "notes/notes.md")]
    assert out["chunk"]["context_before"] == [] and out["chunk"]["context_after"] == []


def test_a_file_in_no_collection_shows_its_text_but_has_no_chunks(lib):
    out = details(lib, "notes/plain.txt")
    assert out["collections"] == [] and out["collection"] is None and out["chunk_count"] == 0
    assert out["content"].startswith("A plain file nobody embedded.") and "no collection" in out["note"]
    with pytest.raises(AssayError) as err:
        details(lib, "notes/plain.txt", chunk_index=0)
    assert err.value.code == "INDEX_NOT_FOUND" and err.value.field == "chunkIndex"
    with pytest.raises(AssayError) as err:
        details(lib, "books/rules.pdf", collection="extra")
    assert err.value.code == "INDEX_NOT_FOUND" and "default" in str(err.value)


def test_a_chunk_index_out_of_range_names_the_valid_range(lib):
    count = details(lib, "notes/notes.md")["chunk_count"]
    with pytest.raises(InvalidInput) as err:
        details(lib, "notes/notes.md", chunk_index=count)
    assert f"0-{count - 1}" in str(err.value) and err.value.field == "chunkIndex"
    with pytest.raises(InvalidInput, match="contextLines must be 0-50"):
        details(lib, "notes/notes.md", chunk_index=0, context_lines=51)


def test_paths_outside_the_roots_or_naming_nothing_are_refused_with_reference_codes(lib):
    _, _, root, _ = lib
    for path, code in [("notes/ghost.md", "INVALID_PATH"), ("notes", "INVALID_PATH"),
                       ("../../etc/passwd", "PATH_TRAVERSAL_DETECTED"), ("/etc/hostname", "PATH_TRAVERSAL_DETECTED")]:
        with pytest.raises(AssayError) as err:
            details(lib, path)
        assert err.value.code == code, path
        assert err.value.field == "filePath", path
    (root / "notes" / "data.bin").write_bytes(b"\x00\x01")
    with pytest.raises(AssayError) as err:
        details(lib, "notes/data.bin")
    assert err.value.code == "UNSUPPORTED_FORMAT"


def test_a_changed_file_is_flagged_as_not_current(lib, tmp_path):
    _, _, root, _ = lib
    target = root / "notes" / "notes.md"
    before = target.stat()
    try:
        target.write_text("\n".join(NOTES_LINES) + "\nLine 61: one more ship.\n")
        out = details(lib, "notes/notes.md")
        assert out["collections"][0]["current"] is False and "changed since" in out["note"]
    finally:
        target.write_text("\n".join(NOTES_LINES) + "\n")
        import os

        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_hits_are_shown_with_the_root_relative_path_and_a_citation(lib):
    app, paths, root, _ = lib
    path = str(root / "books" / "rules.pdf")
    with app.engine.connect() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == path)).scalar_one()
    hit = Hit(chunk_id=5, entry_id=entry_id, path=path, collection="default", chunk_index=1,
              text="Movement", start=10, end=20, line_start=4, line_end=6, page=2, page_end=3, score=0.5,
              semantic_score=0.5, semantic_rank=1)
    gone = Hit(chunk_id=6, entry_id=10**9, path=str(root / "gone.md"), collection="default", chunk_index=0,
               text="x", start=0, end=1, line_start=1, line_end=1, page=None, page_end=None, score=0.1)
    view = library.search_view(app.engine, {"query": "q", "mode": "semantic", "collection": "default",
                                            "hits": [hit, gone]}, paths)
    assert view["total_hits"] == 2
    assert view["hits"][0] == {**view["hits"][0], "file": "books/rules.pdf", "absolute_path": hit.path,
                               "citation": "doc://rules#pages=2-3", "keyword_score": None, "semantic_rank": 1}
    assert view["hits"][1]["citation"] is None  # a file deleted since the ranking has no resource to cite
    reference = library.semantic_documents_view(paths, {"results": [{"filePath": hit.path, "id": "5"}]})
    assert reference["results"] == [{"filePath": "books/rules.pdf", "absolutePath": hit.path, "id": "5"}]
    assert library.citation("notes", None, None, 3, 9) == "text://notes#lines=3-9"
    assert library.citation("scan", None, None, 3, 9, "image") == "image://scan"  # OCR'd lines: the whole image

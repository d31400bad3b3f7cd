"""flows.semantic.search with the fake bag-of-words encoder over a small store: the three modes, each filter (sets
through the DAG, a plan condition, paths) alone and together, min_score, limit, empty and huge queries, the
collection chosen or refused, and hits that say where they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.documents.model import Extracted, Page
from flows.semantic.model import ChunkSpan, entry_work_key, EmbedParams
from flows.semantic.search import Filters, rrf_fuse, search, semantic_search
from store.documents import DocumentWrite, write_extracted_many
from store.errors import DocumentError, InvalidInput, NotFound, PathNotAllowed
from tests.conftest import BACKENDS, backend_engine
from tests.flows.semantic.fakes import FakeEncoder

# file -> chunks: (text, page) ; a page of None means an unpaged format (lines are cited)
DOCS = {
    "garden/tomatoes.txt": [("Tomatoes need full sun and deep watering in summer.", None),
                            ("Prune the tomato suckers weekly so the plant grows strong.", None)],
    "garden/roses.md": [("Roses bloom in early summer; deadhead roses after each flush.", None)],
    "space/orbits.pdf": [("Planets follow elliptical orbits around the star.", 1),
                         ("A comet orbit crosses the orbits of planets near the star.", 2),
                         ("Telescope mirrors gather faint starlight from galaxies.", 3)],
    "kitchen/bread.txt": [("Knead the bread dough ten minutes; part number ZX4471 is the mixer hook.", None)],
}


def _spans(chunks) -> list[ChunkSpan]:
    spans, offset = [], 0
    for i, (text, page) in enumerate(chunks):
        line = 1 + 3 * i
        spans.append(ChunkSpan(index=i, start=offset, end=offset + len(text), line_start=line, line_end=line + 2,
                               page=page, page_end=page, text=text))
        offset += len(text) + 1
    return spans


def document_of(entry: dict, chunks) -> DocumentWrite:
    """The extracted text the chunks of ``_spans`` come from (as the documents capability stores it before
    chunking): chunk i on line 1 + 3 i, two blank lines after it, each on its page (the text engine indexes it and
    keyword search reads the chunks' lines there)."""
    pages: dict[int, list[str]] = {}
    for text, page in chunks:
        pages.setdefault(page or 1, []).extend([text.replace("\n", " "), "", ""])
    paged = any(page for _, page in chunks)
    return DocumentWrite(int(entry["id"]), int(entry["size"]), float(entry["mtime"]), "test", Extracted(
        path=entry["path"], format="pdf" if paged else "text",
        pages=[Page(p, "\n".join(lines)) for p, lines in sorted(pages.items())], total_pages=len(pages)))


def write_collection(engine, name: str, docs: dict[str, list], root: Path, *, model="all-MiniLM-L6-v2",
                     encoder=None) -> dict:
    """A collection holding ``docs`` (paths relative to ``root``, already indexed entries; each a list of (chunk
    text, page)), with vectors by ``encoder`` (default: a FakeEncoder named ``model``), and the documents' text."""
    from store import semantic as store_semantic
    from store.entries import get_entry

    fake = encoder or FakeEncoder(model=model)
    coll = store_semantic.ensure_collection(engine, name, model=fake.model, backend=fake.backend, dim=fake.dim)
    items = []
    texts = []
    for rel, chunks in docs.items():
        entry = get_entry(engine, path=str(root / rel))
        texts.append(document_of(entry, chunks))
        spans = _spans(chunks)
        items.append(store_semantic.EntryChunks(
            entry_id=int(entry["id"]), work_key=entry_work_key(entry["size"], entry["mtime"], EmbedParams(name)),
            chunks=spans, vectors=fake.encode([s.text for s in spans])))
    write_extracted_many(engine, texts)
    store_semantic.replace_entries(engine, coll["id"], items)
    return store_semantic.get_collection(engine, name)


@pytest.fixture(scope="module", params=BACKENDS)
def library(request, tmp_path_factory):
    """An indexed tree of four documents in collection ``default``; sets ``reading`` (roses) with child set
    ``science`` (orbits); the bread file in collection ``recipes`` only. On SQLite and on PostgreSQL."""
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store import sets as store_sets

    root = tmp_path_factory.mktemp("semantic-search") / "library"
    for rel, chunks in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("\n".join(t for t, _ in chunks) + "\n")
    with backend_engine(request, tmp_path_factory, "semantic-search") as engine:
        run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
        write_collection(engine, "default", {k: v for k, v in DOCS.items() if not k.startswith("kitchen")}, root)
        write_collection(engine, "recipes", {"kitchen/bread.txt": DOCS["kitchen/bread.txt"]}, root)
        store_sets.create_set(engine, name="reading")
        store_sets.create_set(engine, name="science")
        store_sets.add_child(engine, parent="reading", child="science")
        store_sets.modify_members(engine, name="reading", operation="add", paths=[str(root / "garden/roses.md")])
        store_sets.modify_members(engine, name="science", operation="add", paths=[str(root / "space/orbits.pdf")])
        yield engine, root


def _files(result) -> list[str]:
    return [Path(h.path).name for h in result["hits"]]


@pytest.mark.parametrize("mode", ["semantic", "keyword", "hybrid"])
def test_each_mode_ranks_the_chunk_sharing_the_query_words_first(library, fake_encoder, mode):
    engine, root = library
    result = search(engine, "comet orbit planets", mode=mode, limit=3)
    assert result["mode"] == mode and result["collection"] == "default" and result["candidates"] is None
    first = result["hits"][0]
    assert first.path == str(root / "space/orbits.pdf") and first.chunk_index == 1
    assert len(result["hits"]) <= 3 and len({h.chunk_id for h in result["hits"]}) == len(result["hits"])
    scores = [h.score for h in result["hits"]]
    assert scores == sorted(scores, reverse=True)


def test_semantic_mode_scores_are_cosines_and_keyword_mode_never_encodes(library, fake_encoder):
    engine, _ = library
    query = "comet orbit planets"
    hit = search(engine, query, mode="semantic", limit=1)["hits"][0]
    expected = float(fake_encoder.encode_query(query) @ fake_encoder.encode_query(hit.text))
    assert hit.score == pytest.approx(expected, abs=1e-5) and hit.semantic_score == hit.score
    assert hit.semantic_rank == 1 and hit.keyword_score is None
    calls = fake_encoder.calls
    encoded = len(fake_encoder.encoded)
    result = search(engine, query, mode="keyword", limit=5)
    assert (fake_encoder.calls, len(fake_encoder.encoded)) == (calls, encoded)
    assert all(h.semantic_score is None and h.keyword_score > 0 for h in result["hits"])


def test_hybrid_fuses_by_reciprocal_rank_and_gives_keyword_only_hits_their_cosine(library, fake_encoder):
    engine, _ = library
    result = search(engine, "deadhead roses after each flush", mode="hybrid", limit=10)
    first = result["hits"][0]
    assert Path(first.path).name == "roses.md"
    assert first.semantic_rank == 1 and first.keyword_rank == 1
    assert first.score == pytest.approx(2 / 61)
    # every hit has a cosine, those only the keyword side found included
    assert all(h.semantic_score is not None for h in result["hits"])
    for h in result["hits"]:
        expected = sum(1 / (60 + r) for r in (h.semantic_rank, h.keyword_rank) if r is not None)
        assert h.score == pytest.approx(expected)


def test_rrf_fuse_counts_each_list_once_per_chunk():
    fused = rrf_fuse([(1, 0.9), (2, 0.8), (1, 0.7)], [(2, 5.0), (3, 4.0)])
    assert [s.chunk_id for s in fused] == [2, 1, 3]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].semantic_rank == 1 and fused[1].keyword_rank is None


def test_a_set_filter_takes_the_child_sets_entries_too(library, fake_encoder):
    engine, root = library
    result = search(engine, "summer orbits star tomatoes", limit=10, filters=Filters(sets=["reading"]))
    assert set(_files(result)) == {"roses.md", "orbits.pdf"}
    assert result["candidates"] == 4  # one roses chunk and three orbits chunks
    result = search(engine, "summer orbits star tomatoes", limit=10, filters=Filters(sets=["science"]))
    assert set(_files(result)) == {"orbits.pdf"}


def test_an_unknown_set_is_not_found_by_name(library, fake_encoder):
    engine, _ = library
    with pytest.raises(NotFound, match="'nosuch'"):
        search(engine, "anything", filters=Filters(sets=["nosuch"]))


@pytest.mark.parametrize("condition", ["extension = .md or extension = .pdf",
                                       {"any": [{"field": "extension", "op": "=", "value": ".md"},
                                                "extension = .pdf"]}])
def test_a_condition_filter_in_text_or_object_form(library, fake_encoder, condition):
    engine, _ = library
    result = search(engine, "summer tomatoes roses star", limit=10, filters=Filters(condition=condition))
    assert set(_files(result)) == {"roses.md", "orbits.pdf"}


def test_a_condition_on_time_and_media_type_passes_fresh_documents(library, fake_encoder):
    engine, _ = library
    recent = search(engine, "tomatoes", mode="keyword", filters=Filters(condition="mtime > now - 30d and size > 0"))
    assert "tomatoes.txt" in _files(recent)
    old = search(engine, "tomatoes", mode="keyword", filters=Filters(condition="mtime < now - 30d"))
    assert old["hits"] == [] and old["candidates"] == 0 and "filters" in old["note"]


def test_a_condition_python_decides_filters_too(library, fake_encoder, monkeypatch):
    """similarity(...) is decided per entry in Python (SQL only narrows it), as plan-preview decides it; the entries
    are read a page at a time (here one)."""
    import flows.semantic.search as search_module

    monkeypatch.setattr(search_module, "_PAGE", 1)
    engine, _ = library
    condition = 'similarity("telescope mirrors gather faint starlight from galaxies") > 0.9 and size > 0'
    result = search(engine, "summer tomatoes roses star orbits", limit=10, filters=Filters(condition=condition))
    assert set(_files(result)) == {"orbits.pdf"} and result["candidates"] == 3


def test_a_bad_condition_is_invalid_input_with_its_column(library, fake_encoder):
    engine, _ = library
    with pytest.raises(InvalidInput, match="column 7") as exc:
        search(engine, "x", filters=Filters(condition="size >"))
    assert exc.value.field == "condition"
    with pytest.raises(InvalidInput, match="unknown field 'colour'"):
        search(engine, "x", filters=Filters(condition="colour = red"))


def test_a_path_filter_keeps_files_at_or_under_the_paths(library, fake_encoder):
    engine, root = library
    result = search(engine, "summer tomatoes roses star orbits", limit=10,
                    filters=Filters(paths=[str(root / "garden")]))
    assert set(_files(result)) == {"tomatoes.txt", "roses.md"}
    result = search(engine, "summer tomatoes roses star orbits", limit=10,
                    filters=Filters(paths=[str(root / "space/orbits.pdf"), str(root / "garden/roses.md")]))
    assert set(_files(result)) == {"roses.md", "orbits.pdf"}
    with pytest.raises(InvalidInput, match="not an absolute path"):
        search(engine, "x", filters=Filters(paths=["garden"]))


def test_paths_are_confined_to_the_roots_when_given(library, fake_encoder):
    from flows.core.roots import Roots

    engine, root = library
    roots = Roots.of([str(root / "garden")])
    with pytest.raises(PathNotAllowed):
        search(engine, "x", filters=Filters(paths=[str(root / "space")]), roots=roots)
    result = search(engine, "tomato", mode="keyword", filters=Filters(paths=[str(root / "garden")]), roots=roots)
    assert set(_files(result)) == {"tomatoes.txt"}


def test_filters_and_together(library, fake_encoder):
    engine, root = library
    query = "summer tomatoes roses star orbits"
    both = search(engine, query, limit=10, filters=Filters(sets=["reading"], paths=[str(root / "garden")]))
    assert _files(both) == ["roses.md"]
    all_three = search(engine, query, limit=10, filters=Filters(sets=["reading"], paths=[str(root / "garden")],
                                                                condition="extension = .pdf"))
    assert all_three["hits"] == [] and all_three["candidates"] == 0


def test_min_score_bounds_the_cosine_and_is_refused_in_keyword_mode(library, fake_encoder):
    engine, _ = library
    query = "comet orbit crosses the orbits of planets near the star"
    everything = search(engine, query, mode="semantic", limit=10, min_score=0.0)
    assert any(h.semantic_score < 0.5 for h in everything["hits"])
    assert (everything["min_score"], everything["min_score_fitted"]) == (0.0, False)
    close = search(engine, query, mode="semantic", limit=10, min_score=0.5)
    assert close["hits"] and all(h.semantic_score >= 0.5 for h in close["hits"])
    hybrid = search(engine, query, mode="hybrid", limit=10, min_score=0.5)
    assert {h.chunk_id for h in hybrid["hits"]} == {h.chunk_id for h in close["hits"]}
    none = search(engine, "quantum zebra", mode="semantic", limit=10, min_score=0.99)
    assert none["hits"] == [] and "min_score" in none["note"]
    with pytest.raises(InvalidInput, match="keyword") as exc:
        search(engine, query, mode="keyword", min_score=0.5)
    assert exc.value.field == "min_score"


@pytest.mark.parametrize("params, field", [({"limit": 0}, "limit"), ({"limit": 101}, "limit"),
                                           ({"limit": True}, "limit"), ({"min_score": 1.5}, "min_score"),
                                           ({"min_score": -0.1}, "min_score"), ({"mode": "fuzzy"}, "mode")])
def test_bad_parameters_name_themselves_and_what_is_accepted(library, fake_encoder, params, field):
    engine, _ = library
    with pytest.raises(InvalidInput) as exc:
        search(engine, "orbits", **params)
    assert exc.value.field == field
    assert any(word in exc.value.message for word in ("1 to 100", "0 to 1", "semantic, keyword, hybrid"))


def test_limit_caps_the_hits(library, fake_encoder):
    engine, _ = library
    assert len(search(engine, "the star summer roses tomatoes", limit=2)["hits"]) == 2
    # every chunk of the collection (min_score 0: the fitted cut-off would leave out those far from the best)
    assert len(search(engine, "the star summer roses tomatoes", limit=100, min_score=0.0)["hits"]) == 6


@pytest.mark.parametrize("query", ["", "   \n\t "])
def test_an_empty_query_is_invalid_query(library, fake_encoder, query):
    engine, _ = library
    with pytest.raises(DocumentError) as exc:
        search(engine, query)
    assert exc.value.code == "INVALID_QUERY" and "empty" in exc.value.message


def test_a_10000_character_query_is_answered_with_a_note(library, fake_encoder):
    engine, _ = library
    query = ("planets comet orbit " * 600)[:10_000]
    assert len(query) == 10_000
    for mode in ("semantic", "keyword", "hybrid"):
        result = search(engine, query, mode=mode, limit=3)
        assert Path(result["hits"][0].path).name == "orbits.pdf"
        assert f"{len(query.strip()):,} characters long" in result["note"]
        assert result["query"] == query.strip()


def test_the_collection_is_named_or_default_and_a_missing_one_names_those_that_exist(library, fake_encoder):
    engine, _ = library
    result = search(engine, "bread dough mixer", collection="recipes")
    assert result["collection"] == "recipes" and _files(result) == ["bread.txt"]
    with pytest.raises(DocumentError) as exc:
        search(engine, "bread", collection="nosuch")
    assert exc.value.code == "INDEX_NOT_FOUND"
    assert "default" in exc.value.message and "recipes" in exc.value.message


def test_without_a_default_collection_the_only_one_answers_and_several_are_refused(tmp_path, fake_encoder):
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store.engine import make_engine

    root = tmp_path / "lib"
    (root / "kitchen").mkdir(parents=True)
    (root / "kitchen/bread.txt").write_text("Knead the bread dough.\n")
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    try:
        run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
        with pytest.raises(DocumentError) as exc:
            search(engine, "bread")
        assert exc.value.code == "INDEX_NOT_FOUND" and "nothing has been indexed" in exc.value.message
        with pytest.raises(DocumentError) as exc:
            semantic_search(engine, "bread")
        assert exc.value.code == "INDEX_NOT_FOUND"
        write_collection(engine, "recipes", {"kitchen/bread.txt": [("Knead the bread dough.", None)]}, root)
        assert search(engine, "bread")["collection"] == "recipes"
        write_collection(engine, "more", {"kitchen/bread.txt": [("Knead the bread dough.", None)]}, root)
        with pytest.raises(DocumentError) as exc:
            search(engine, "bread")
        assert exc.value.code == "INDEX_NOT_FOUND" and "more, recipes" in exc.value.message
    finally:
        engine.dispose()


def test_the_query_is_encoded_by_the_collections_own_model(tmp_path, fake_encoder, monkeypatch):
    import flows.semantic.encoder as encoder_module
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store.engine import make_engine

    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.txt").write_text("Knead the bread dough.\n")
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    asked: dict[str, list[str]] = {"other-model": [], "default": []}
    for name, encoder in (("other-model", encoder_module.get_encoder("other-model", "torch")),
                          ("default", fake_encoder)):
        monkeypatch.setattr(encoder, "encode_query",
                            lambda text, f=encoder.encode_query, name=name: asked[name].append(text) or f(text))
    try:
        run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
        write_collection(engine, "other", {"a.txt": [("Knead the bread dough.", None)]}, root, model="other-model")
        result = search(engine, "bread dough", mode="semantic")
        assert asked == {"other-model": ["bread dough"], "default": []}
        fake = FakeEncoder()
        expected = float(fake.encode_query("bread dough") @ fake.encode_query("Knead the bread dough."))
        assert result["hits"][0].semantic_score == pytest.approx(expected, abs=1e-5)
    finally:
        engine.dispose()


def test_hits_say_where_they_are(library, fake_encoder):
    engine, root = library
    pdf = search(engine, "telescope mirrors galaxies", mode="keyword", limit=1)["hits"][0]
    assert (pdf.page, pdf.page_end, pdf.chunk_index) == (3, 3, 2)
    assert pdf.citation("orbits") == "doc://orbits#pages=3"
    text = search(engine, "prune suckers", mode="keyword", limit=1)["hits"][0]
    assert (text.page, text.line_start, text.line_end) == (None, 4, 6)
    assert text.citation("tomatoes") == "text://tomatoes#lines=4-6"
    assert text.path == str(root / "garden/tomatoes.txt") and text.collection == "default"
    assert text.text.startswith("Prune the tomato suckers") and text.start > 0


def test_semantic_search_gives_reference_002s_result(library, fake_encoder):
    engine, root = library
    result = semantic_search(engine, "comet orbit crosses the orbits of planets", limit=5, min_score=0.5)
    assert result["search_type"] == "semantic" and result["collection"] == "default"
    assert result["total_results"] == len(result["results"]) >= 1
    top = result["results"][0]
    assert top["filePath"] == str(root / "space/orbits.pdf") and top["chunkIndex"] == 1
    assert isinstance(top["id"], str) and top["score"] >= 0.5 and top["content"].startswith("A comet")
    meta = top["metadata"]
    assert meta["fileSize"] == (root / "space/orbits.pdf").stat().st_size
    assert meta["lastModified"].endswith("Z") and meta["page"] == 2 and meta["citation"] == "doc://orbits#pages=2"
    assert meta["chunkOffset"] > 0 and meta["lineStart"] == 4
    bare = semantic_search(engine, "comet orbit", include_metadata=False, min_score=None)
    assert all("metadata" not in r for r in bare["results"])
    zebra = semantic_search(engine, "zebra whiskey")  # shares no word (nor hash bucket): under the fitted cut-off
    assert zebra["results"] == [] and zebra["minScoreFitted"] is True and "unrelated text" in zebra["note"]


def test_without_min_score_the_cut_off_is_fitted_and_spares_the_keyword_hits(library, fake_encoder):
    """No min_score: the cut-off fitted to the model (flows.semantic.cutoff; the fake encoder is named after the
    packaged model, so its floor of 0.2 applies) keeps the chunks near the best one; in hybrid mode a chunk holding
    the query's words is kept however far its meaning."""
    engine, root = library
    close = search(engine, "comet orbit crosses the orbits of planets near the star", mode="semantic")
    assert close["min_score_fitted"] is True and 0.2 < close["min_score"] <= close["hits"][0].semantic_score
    assert all(h.semantic_score >= close["min_score"] for h in close["hits"])
    everything = search(engine, "comet orbit crosses the orbits of planets near the star", mode="semantic",
                        min_score=0.0)
    assert len(everything["hits"]) > len(close["hits"])
    # one word of six in the query (the others in no hash bucket of the chunks): too far in meaning, but the
    # full-text side finds it
    query = "prune zebra alpha bravo delta hotel"
    assert search(engine, query, mode="semantic")["hits"] == []
    hybrid = search(engine, query, mode="hybrid")
    assert [h.path for h in hybrid["hits"]] == [str(root / "garden/tomatoes.txt")]
    assert hybrid["hits"][0].semantic_score < 0.2 and hybrid["min_score_fitted"] is True
    assert search(engine, query, mode="keyword")["min_score"] is None


def test_searches_answer_while_a_writer_holds_its_transaction(library, fake_encoder):
    """An indexing job's write transaction (here: open, with rows changed and not committed) never holds a search up:
    searches only read, and read what was committed."""
    from sqlalchemy import update

    from store.entries import T
    from store.models import Collection

    engine, root = library
    with engine.begin() as conn:
        conn.execute(update(T).where(T.c.path == str(root / "garden/roses.md")).values(size=0))
        conn.execute(update(Collection.__table__).values(version=Collection.__table__.c.version + 1))
        for mode in ("semantic", "keyword", "hybrid"):
            result = search(engine, "deadhead roses summer", mode=mode, filters=Filters(condition="size > 0"))
            assert _files(result)[0] == "roses.md"
        conn.rollback()

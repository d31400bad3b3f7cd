"""The semantic tools (index_files, update_index, get_file_details, search, index-cancel) and search_documents' two
call shapes through an in-process MCP client, with the fake encoder (hashed bag of words: a query ranks first the
document sharing its words). One library per module, indexed by the first tool call; the tests run in file order
where one builds on another (indexing before searching, updates last)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from tests.conftest import ToolFailed, call, index_sync
from tests.flows.semantic.fakes import FakeEncoder

pytestmark = pytest.mark.anyio

COOKING = ("# Bread\n\nKnead the dough with yeast and flour.\nLet the dough rise before the oven bakes the bread.\n"
           "A sourdough starter needs flour and water every day.\n")
ASTRONOMY = ("The telescope shows the planets in their orbit.\nJupiter has many moons; Saturn has rings.\n"
             "Astronomers measure the orbit of a comet with the telescope.\n")
GARDEN_PAGES = ["Tomatoes need sunny soil and compost.", "Prune the roses in spring; water the garden at dawn."]


def make_library(root: Path) -> Path:
    import pymupdf

    (root / "kitchen").mkdir(parents=True)
    (root / "sky").mkdir()
    (root / "kitchen" / "bread.md").write_text(COOKING)
    (root / "sky" / "planets.txt").write_text(ASTRONOMY)
    doc = pymupdf.open()
    for text in GARDEN_PAGES:
        doc.new_page().insert_text((72, 72), text)
    doc.save(root / "garden.pdf")
    return root


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    base = tmp_path_factory.mktemp("semtools")
    root = make_library(base / "library")
    import flows.semantic.encoder as encoder_module

    fakes: dict[tuple, FakeEncoder] = {}

    def get_encoder(model=None, backend=None, device=None):
        key = (model or "all-MiniLM-L6-v2", backend or "torch")
        return fakes.setdefault(key, FakeEncoder(model=key[0], backend=key[1]))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(encoder_module, "get_encoder", get_encoder)
        app = AssayApp.create(Settings(data_dir=base / "data", roots=[str(root)], use_prefect=False))
        try:
            index_sync(app, root)
            yield app
        finally:
            app.close()
            app.engine.dispose()


@pytest.fixture
async def client(app):
    async with Client(build_server(app)) as c:
        yield c


def root_of(app) -> Path:
    return Path(app.roots.paths[0])


async def refused(client, tool: str, args: dict) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None, (tool, args, result)
    return result.content[0].text


async def test_tools_are_listed_with_reference_parameters_and_annotations(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert list(tools["index_files"].input_schema["properties"])[:2] == ["folderPath", "options"]
    assert list(tools["get_file_details"].input_schema["properties"])[:3] == ["filePath", "chunkIndex",
                                                                              "contextLines"]
    assert list(tools["update_index"].input_schema["properties"])[:2] == ["folderPath", "changes"]
    assert tools["search"].annotations.read_only_hint and tools["get_file_details"].annotations.read_only_hint
    assert not tools["index_files"].annotations.read_only_hint
    assert not tools["update_index"].annotations.read_only_hint
    results = tools["search_documents"].output_schema["properties"]
    assert {"matches", "results", "search_type", "total_results", "total_matches"} <= set(results)


async def test_before_indexing_the_semantic_searches_say_index_not_found(client):
    text = await refused(client, "search_documents", {"query": "bread dough"})
    assert text.startswith("INDEX_NOT_FOUND: ") and "index_files" in text and "scope" in text
    assert (await refused(client, "search", {"query": "bread"})).startswith("INDEX_NOT_FOUND: ")
    assert (await refused(client, "update_index", {"folderPath": "", "changes": ["kitchen/bread.md"]})
            ).startswith("INDEX_NOT_FOUND: ")


async def test_index_files_indexes_the_folder_then_skips_what_did_not_change(client, app):
    first = await call(client, "index_files", {"folderPath": "", "options": {"chunkSize": 200, "overlap": 20}})
    assert first["collection"] == "default" and first["status"] == "success", first
    assert first["files_indexed"] == 3 and first["files_failed"] == 0
    assert first["documents_total"] == 3 and first["chunks_total"] >= 3
    again = await call(client, "index_files", {"folderPath": str(root_of(app)),
                                               "options": {"chunkSize": 200, "overlap": 20}})
    assert again["files_indexed"] == 0 and again["files_unchanged"] == 3
    assert again["chunks_total"] == first["chunks_total"]


async def test_index_files_in_another_collection_with_file_types_as_one_string(client):
    only_md = await call(client, "index_files", {"folderPath": "kitchen", "collection": "recipes",
                                                 "options": {"fileTypes": ".md", "chunkSize": 200,
                                                             "overlap": 0}})
    assert only_md["collection"] == "recipes" and only_md["files_indexed"] == 1 and only_md["documents_total"] == 1


async def test_search_documents_has_two_shapes_and_says_which_ran(client):
    semantic = await call(client, "search_documents", {"query": "dough yeast flour bread",
                                                       "options": {"minScore": 0.1, "limit": 3}})
    assert semantic["search_type"] == "semantic" and semantic["collection"] == "default"
    top = semantic["results"][0]
    assert top["filePath"] == "kitchen/bread.md" and top["absolutePath"].endswith("/kitchen/bread.md")
    assert top["score"] >= 0.1 and top["metadata"]["fileSize"] == len(COOKING)
    assert top["metadata"]["citation"].startswith("text://bread#lines=")  # the file's resource id: its name
    assert "matches" not in semantic and semantic["total_results"] == len(semantic["results"]) <= 3
    bare = await call(client, "search_documents", {"query": "telescope orbit planets"})  # minScore fitted
    assert bare["search_type"] == "semantic" and bare["results"] and bare["minScoreFitted"] is True
    assert bare["results"][0]["filePath"] == "sky/planets.txt"
    assert all(r["score"] >= bare["minScore"] > 0.2 for r in bare["results"])  # above the model's noise floor
    lean = await call(client, "search_documents", {"query": "telescope", "options": {"includeMetadata": False,
                                                                                     "minScore": 0.0}})
    assert "metadata" not in lean["results"][0]
    boolean = await call(client, "search_documents", {"query": "telescope", "scope": {"type": "global"}})
    assert boolean["search_type"] == "boolean" and "results" not in boolean
    # each matching line cited in its file's resource (named after the file), as resolve takes it
    assert [m["citation"] for m in boolean["matches"]] == ["text://planets#lines=1", "text://planets#lines=3"]
    paged = await call(client, "search_documents", {"query": "roses", "scope": {"type": "global"}})
    assert [m["citation"] for m in paged["matches"]] == ["doc://garden#pages=2"]


async def test_search_ranks_fuses_and_cites(client):
    hybrid = await call(client, "search", {"query": "compost soil tomatoes", "limit": 5})
    assert hybrid["mode"] == "hybrid" and hybrid["total_hits"] == len(hybrid["hits"])
    top = hybrid["hits"][0]
    assert top["file"] == "garden.pdf" and (top["page"], top["page_end"]) == (1, 2)  # both short pages, one chunk
    assert top["citation"] == "doc://garden#pages=1-2"
    assert top["semantic_rank"] == 1 and top["keyword_rank"] == 1 and top["semantic_score"] > 0
    keyword = await call(client, "search", {"query": "rings", "mode": "keyword"})
    assert [h["file"] for h in keyword["hits"]] == ["sky/planets.txt"] and keyword["hits"][0]["semantic_rank"] is None
    recipes = await call(client, "search", {"query": "telescope bread", "collection": "recipes"})
    assert {h["file"] for h in recipes["hits"]} == {"kitchen/bread.md"}


async def test_search_filters_by_path_set_and_condition(client, app):
    scoped = await call(client, "search", {"query": "the", "path": "sky", "mode": "keyword"})
    assert {h["file"] for h in scoped["hits"]} == {"sky/planets.txt"}
    await call(client, "resource-set-create", {"name": "starry"})
    await call(client, "resource-set-modify", {"name": "starry", "operation": "add",
                                               "paths": [str(root_of(app) / "sky" / "planets.txt")]})
    in_set = await call(client, "search", {"query": "bread telescope", "sets": "starry"})
    assert {h["file"] for h in in_set["hits"]} == {"sky/planets.txt"}
    pdf_only = await call(client, "search", {"query": "bread telescope garden", "condition": "extension = .pdf"})
    assert {h["file"] for h in pdf_only["hits"]} == {"garden.pdf"}


async def test_search_refuses_bad_input_naming_the_parameter(client):
    assert (await refused(client, "search", {"query": "  "})).startswith("INVALID_QUERY: ")
    assert "mode" in await refused(client, "search", {"query": "x", "mode": "fuzzy"})
    assert "limit" in await refused(client, "search", {"query": "x", "limit": 0})
    assert "min_score" in await refused(client, "search", {"query": "x", "mode": "keyword", "min_score": 0.5})
    assert (await refused(client, "search", {"query": "x", "collection": "nope"})).startswith("INDEX_NOT_FOUND: ")
    assert "condition" in await refused(client, "search", {"query": "x", "condition": "size >>> 3"})
    assert (await refused(client, "search", {"query": "x", "path": "../.."})).startswith("PATH_TRAVERSAL_DETECTED")
    assert (await refused(client, "search", {"query": "x", "sets": "no-such-set"})).startswith("NOT_FOUND")
    assert "minScore" in await refused(client, "search_documents", {"query": "x", "options": {"minScore": 2}})
    assert "options" in await refused(client, "search_documents", {"query": "x", "options": {"top": 2}})
    boolean_only = await refused(client, "search_documents", {"query": "x", "max_results": 5, "fuzzy": True})
    assert boolean_only.startswith("INVALID_PARAMS: max_results, fuzzy belong to the boolean search")
    assert "scope" in boolean_only and "options" in boolean_only


async def test_get_file_details_whole_text_and_one_chunk(client):
    whole = await call(client, "get_file_details", {"filePath": "kitchen/bread.md"})
    assert whole["content"].startswith("# Bread") and whole["truncated"] is False
    assert {c["name"] for c in whole["collections"]} == {"default", "recipes"} and whole["chunk_count"] >= 1
    chunk = await call(client, "get_file_details", {"filePath": "garden.pdf", "chunkIndex": 0, "contextLines": 1})
    assert chunk["chunk"]["page"] == 1 and "Tomatoes" in chunk["chunk"]["text"]
    assert chunk["chunk"]["citation"] == "doc://garden#pages=1-2"  # the one chunk spans both short pages
    assert chunk["chunk"]["context_before"] == [] and "content" not in chunk
    assert (await refused(client, "get_file_details", {"filePath": "garden.pdf", "chunkIndex": 99})
            ).startswith("INVALID_PARAMS: ")
    assert (await refused(client, "get_file_details", {"filePath": "kitchen/ghost.md"})).startswith("INVALID_PATH")
    assert "contextLines" in await refused(client, "get_file_details", {"filePath": "garden.pdf",
                                                                         "contextLines": 51})


async def test_index_files_refuses_bad_folders_and_options(client):
    assert (await refused(client, "index_files", {"folderPath": "nowhere"})).startswith("INVALID_PATH: ")
    assert (await refused(client, "index_files", {"folderPath": "../.."})).startswith("INVALID_PATH: ")
    assert (await refused(client, "index_files", {"folderPath": "garden.pdf"})).startswith("INVALID_PATH: ")
    unknown = await refused(client, "index_files", {"folderPath": "", "options": {"chunk_size": 10}})
    assert "chunk_size" in unknown and "chunkSize" in unknown and "fileTypes" in unknown
    assert (await refused(client, "index_files", {"folderPath": "", "options": {"fileTypes": [".exe"]}})
            ).startswith("UNSUPPORTED_FORMAT: ")
    assert "overlap" in await refused(client, "index_files", {"folderPath": "",
                                                              "options": {"chunkSize": 200, "overlap": 300}})


async def test_index_files_without_waiting_answers_an_execution_that_can_be_cancelled(client, app):
    started = await call(client, "index_files", {"folderPath": "sky", "collection": "sky", "wait": False,
                                                 "options": {"chunkSize": 200, "overlap": 0}})
    assert started["status"] == "running" and started["execution_id"] >= 1 and "index-cancel" in started["message"]
    cancel = await call(client, "index-cancel", {"executionId": started["execution_id"]})
    assert cancel["execution_id"] == started["execution_id"] and isinstance(cancel["cancelled"], bool)
    missing = await call(client, "index-cancel", {"executionId": 999999})
    assert missing["cancelled"] is False


async def test_update_index_redoes_changed_files_and_drops_deleted_ones(client, app):
    root = root_of(app)
    (root / "sky" / "planets.txt").write_text(ASTRONOMY + "A nebula glows between the galaxies.\n")
    (root / "kitchen" / "bread.md").unlink()
    out = await call(client, "update_index", {"folderPath": "", "changes": ["sky/planets.txt",
                                                                             str(root / "kitchen" / "bread.md")]})
    assert out["updated"] == 1 and out["removed"] == 1 and out["documents_total"] == 2, out
    nebula = await call(client, "search", {"query": "nebula galaxies", "mode": "keyword"})
    assert [h["file"] for h in nebula["hits"]] == ["sky/planets.txt"]
    gone = await call(client, "search", {"query": "dough yeast", "mode": "keyword"})
    assert "kitchen/bread.md" not in {h["file"] for h in gone["hits"]}
    one = await call(client, "update_index", {"folderPath": "sky", "changes": "planets.txt"})
    assert one["unchanged"] == 1 and one["updated"] == 0


async def test_unknown_tool_arguments_fail_as_errors_not_crashes(client):
    with pytest.raises(ToolFailed, match="accepted"):
        await call(client, "get_file_details", {"filePath": "garden.pdf", "chunk": 1})

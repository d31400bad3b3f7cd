"""The semantic index end to end: ONE real `assay serve` process for the module (Streamable HTTP), the real
embedding model (loaded once by that server), the Python MCP client, on a generated library whose documents each
hold one known topic (baking, astronomy, invoices; a PDF whose pages are gardening, car engines and sailing), so
ranking is checkable: a question about a topic ranks its document (or page) first.

The checks are batched into few tests, in file order: index_files (with MCP progress), both shapes of
search_documents, the search tool (hybrid, and with set, condition and path filters), get_file_details, update_index
(a file modified, one deleted), the errors. The TypeScript client test runs these tools over stdio."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import REPO, _call, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = pytest.mark.e2e

TOPICS = {
    "kitchen/bread.md": "# Baking bread\n\n" + (
        "Mix flour, water, salt and yeast into a dough. Knead the dough for ten minutes until it is smooth and "
        "elastic. Let it rise in a warm place until doubled, shape the loaf, and bake it in a hot oven until the "
        "crust is golden brown and the loaf sounds hollow.\n"),
    "space/planets.txt": (
        "The planets of the solar system orbit the Sun. Jupiter is the largest planet, a gas giant with dozens of "
        "moons; Saturn is famous for its rings of ice. Astronomers observe them with telescopes at night.\n"),
    "finance/invoices.md": "# Paying invoices\n\n" + (
        "Every supplier invoice is checked against the purchase order, approved by the budget owner, and paid by "
        "bank transfer within thirty days. Late payments incur interest.\n"),
}
PDF_PAGES = [
    "Gardening. Plant tomatoes in sunny beds with rich compost. Water the vegetables at dawn and pull the weeds "
    "every week so the seedlings grow strong. Prune the roses in early spring, mulch the flower borders, and "
    "sow lettuce and carrots in rows a hand apart. Harvest the beans while they are young and tender.",
    "Car maintenance. Change the engine oil every ten thousand kilometres, check the tyre pressure monthly, and "
    "replace worn brake pads before they damage the discs. Top up the coolant, test the battery before winter, "
    "and have the mechanic inspect the timing belt and the spark plugs at every service of the engine.",
    "Sailing. Hoist the mainsail into the wind, trim the jib, and tack the boat across the harbour while watching "
    "the tide and the weather. Reef the sails when the wind rises, keep a lookout for other vessels, and tie "
    "the boat to the mooring with a bowline knot when you return to port.",
]


def make_library(root: Path) -> Path:
    import pymupdf

    for rel, text in TOPICS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    doc = pymupdf.open()
    for text in PDF_PAGES:
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 540, 700), text, fontsize=11)
    doc.save(root / "handbook.pdf")
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(url, library root): one `assay serve --transport http` for the whole module."""
    base = tmp_path_factory.mktemp("semantic-e2e")
    tree = make_library(base / "library")
    port = free_port()
    log = base / "http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve_args(tree, prefect=False, extra=["--transport", "http", "--port", str(port)]),
                                stdout=out, stderr=subprocess.STDOUT, env=server_env(base, prefect=False), cwd=REPO,
                                start_new_session=True)
    try:
        wait_listening(proc, port, log)
        yield f"http://127.0.0.1:{port}/mcp", tree
    finally:
        _stop(proc)


async def refused(client, tool: str, args: dict) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None, (tool, args)
    return result.content[0].text


async def test_index_then_search_both_ways_with_filters_and_details(server):
    url, tree = server
    async with Client(url) as client:
        with anyio.fail_after(300):
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"index_files", "search_documents", "get_file_details", "update_index", "search"} <= names
            text = await refused(client, "search_documents", {"query": "how is bread baked?"})
            assert text.startswith("INDEX_NOT_FOUND: ")

            progress: list[float] = []

            async def on_progress(value, total, message):
                progress.append(value)

            result = await client.call_tool("index_files", {"folderPath": str(tree), "options": {
                "chunkSize": 300, "overlap": 30}}, progress_callback=on_progress)
            assert not result.is_error, result.content
            stats = result.structured_content
            assert stats["status"] == "success" and stats["files_indexed"] == 4 and stats["files_failed"] == 0
            assert stats["documents_total"] == 4 and stats["chunks_total"] >= 4
            assert progress and progress[-1] == 100.0 and progress == sorted(progress)

            # search_documents, reference 002's shape: the question ranks its document first
            for question, expected in [("How do I bake a loaf of bread?", "kitchen/bread.md"),
                                       ("Which planet has rings?", "space/planets.txt"),
                                       ("Who approves supplier invoices before payment?", "finance/invoices.md")]:
                answer = await _call(client, "search_documents", {"query": question, "options": {"minScore": 0.1}})
                assert answer["search_type"] == "semantic", answer
                assert answer["results"][0]["filePath"] == expected, (question, answer["results"][:2])
                assert answer["results"][0]["metadata"]["fileSize"] == len(TOPICS[expected].encode())
            boolean = await _call(client, "search_documents", {"query": "telescopes", "scope": {"type": "global"}})
            assert boolean["search_type"] == "boolean"
            assert [m["document"] for m in boolean["matches"]] == ["space/planets.txt"]
            line = boolean["matches"][0]["line"]
            assert boolean["matches"][0]["citation"] == f"text://planets#lines={line}"  # its resource id

            # search: hybrid, the PDF page that answers, cited by page
            engine = await _call(client, "search", {"query": "when should I change the engine oil?", "limit": 3})
            top = engine["hits"][0]
            assert engine["mode"] == "hybrid" and top["file"] == "handbook.pdf", engine["hits"]
            pages = str(top["page"]) if top["page"] == top["page_end"] else f"{top['page']}-{top['page_end']}"
            assert top["page"] <= 2 <= top["page_end"] and top["citation"] == f"doc://handbook#pages={pages}"
            assert top["semantic_score"] > 0.2 and top["semantic_rank"] == 1 and top["keyword_rank"] is not None
            # filters: a resource set, a condition, a path
            await _call(client, "resource-set-create", {"name": "astro"})
            await _call(client, "resource-set-modify", {"name": "astro", "operation": "add",
                                                        "paths": [str(tree / "space" / "planets.txt")]})
            # (questions the filtered files do not answer: min_score 0 shows their nearest chunks; without it the
            # cut-off fitted to the model leaves nothing, and says so)
            nothing = await _call(client, "search", {"query": "baking bread", "sets": ["astro"]})
            assert nothing["hits"] == [] and nothing["min_score_fitted"] and "unrelated text" in nothing["note"]
            in_set = await _call(client, "search", {"query": "baking bread", "sets": ["astro"], "min_score": 0})
            assert {h["file"] for h in in_set["hits"]} == {"space/planets.txt"}
            pdfs = await _call(client, "search", {"query": "baking bread", "condition": "extension = .pdf",
                                                  "min_score": 0})
            assert pdfs["hits"] and {h["file"] for h in pdfs["hits"]} == {"handbook.pdf"}
            finance = await _call(client, "search", {"query": "planets", "path": "finance", "mode": "semantic",
                                                     "min_score": 0})
            assert {h["file"] for h in finance["hits"]} == {"finance/invoices.md"}
            text_hit = (await _call(client, "search", {"query": "invoice approval", "mode": "keyword"}))["hits"][0]
            assert text_hit["citation"] == f"text://invoices#lines={text_hit['line_start']}-{text_hit['line_end']}"

            # get_file_details: the whole text, then the chunk a hit named with its context
            whole = await _call(client, "get_file_details", {"filePath": "kitchen/bread.md"})
            assert whole["content"].startswith("# Baking bread") and "golden brown" in whole["content"]
            assert whole["collections"][0]["name"] == "default" and whole["chunk_count"] >= 1
            chunk = await _call(client, "get_file_details", {"filePath": str(tree / "handbook.pdf"),
                                                             "chunkIndex": top["chunk_index"], "contextLines": 1})
            assert chunk["chunk"]["text"] == top["text"] and chunk["chunk"]["citation"] == top["citation"]

            # each hit's citation is an address resolve accepts: the pages into a PDF, the lines into a text file
            pages = await _call(client, "resolve", {"address": top["citation"]})
            assert pages["address"] == top["citation"] and pages["modality"] == "document"
            assert pages["output_path"].endswith(".pdf") and pages["source_path"] == str(tree / "handbook.pdf")
            lines = await _call(client, "resolve", {"address": text_hit["citation"]})
            assert text_hit["text"].splitlines()[0] in Path(lines["output_path"]).read_text()
            assert chunk["path"] == "handbook.pdf" and "content" not in chunk


async def test_update_index_and_refusals(server):
    url, tree = server
    async with Client(url) as client:
        with anyio.fail_after(300):
            (tree / "space" / "planets.txt").write_text(
                TOPICS["space/planets.txt"] + "A black hole bends light; nothing escapes its event horizon.\n")
            (tree / "finance" / "invoices.md").unlink()
            update = await _call(client, "update_index", {"folderPath": "", "changes": [
                "space/planets.txt", "finance/invoices.md"]})
            assert (update["updated"], update["removed"], update["documents_total"]) == (1, 1, 3), update
            hole = await _call(client, "search", {"query": "what escapes a black hole?", "limit": 2})
            assert hole["hits"][0]["file"] == "space/planets.txt" and "black hole" in hole["hits"][0]["text"]
            money = await _call(client, "search_documents", {"query": "paying supplier invoices",
                                                             "options": {"minScore": 0.0, "limit": 10}})
            assert "finance/invoices.md" not in {r["filePath"] for r in money["results"]}

            expected = [
                ("search", {"query": "x", "collection": "nowhere"}, "INDEX_NOT_FOUND"),
                ("update_index", {"folderPath": "", "changes": ["x.md"], "collection": "nowhere"}, "INDEX_NOT_FOUND"),
                ("index_files", {"folderPath": "no/such/folder"}, "INVALID_PATH"),
                ("index_files", {"folderPath": "/etc"}, "INVALID_PATH"),
                ("index_files", {"folderPath": "", "options": {"fileTypes": ".exe"}}, "UNSUPPORTED_FORMAT"),
                ("index_files", {"folderPath": "", "options": {"maxfiles": 3}}, "INVALID_PARAMS"),
                ("get_file_details", {"filePath": "kitchen/none.md"}, "INVALID_PATH"),
                ("get_file_details", {"filePath": "kitchen/bread.md", "chunkIndex": 500}, "INVALID_PARAMS"),
                ("search_documents", {"query": ""}, "INVALID_QUERY"),
                ("search_documents", {"query": "x", "options": {"limit": 0}}, "INVALID_PARAMS"),
                ("search", {"query": "x", "path": "../outside"}, "PATH_TRAVERSAL_DETECTED"),
            ]
            for tool, args, code in expected:
                text = await refused(client, tool, args)
                assert text.startswith(code + ": "), (tool, args, text)
            assert "accepted" in await refused(client, "search", {"query": "x", "colection": "default"})

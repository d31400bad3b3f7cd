"""The document library end to end: a real `assay serve --root LIBRARY` process, the Python MCP client, over stdio
and over Streamable HTTP, on the generated library of tests/documents_media.py (a PDF with an outline and
metadata, a scanned PDF, Markdown with nested headings, cp1252 and UTF-16 text, HTML, DOCX, EPUB, source code, and
bad documents: encrypted, truncated, binary with a text extension, empty).

No call starts the extraction: the built-in "documents" plan indexes and extracts the roots at server start. The
session waits by polling (find_document sees every document, search_documents reports no pending document), then
makes every example call of reference 001, adapted to the library, and one refused call per error code."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from examples.mediagen import documents as dm
from flows.documents.model import Extracted, Page
from store.documents import DocumentWrite, write_extracted_many
from store.engine import make_engine
from store.entries import get_entry
from tests.e2e.conftest import REPO, _call, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = pytest.mark.e2e

DOCUMENTS = 14  # what documents_media.library writes; all have a document extension


def make_library(root: Path) -> Path:
    dm.library(root)
    (root / "docs" / "api" / "security.md").write_text(
        "# Security\n\nauthentication uses a jwt token\nauthorization checks roles\n"
        "security of the old scheme is deprecated\nsecurity review done\nasynchronous jobs run async\n")
    os.symlink(root / "docs", root / "linked")
    (root / "games" / "box.bin").write_bytes(b"\x00\x01")
    return root


def documents_env(base: Path) -> dict[str, str]:
    """The e2e server environment with the built-in documents plan on (the shared e2e fixtures turn it off)."""
    return {**server_env(base, prefect=False), "ASSAY_DOCUMENTS_PLAN": "on"}


async def refused(client, tool: str, args: dict) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None, (tool, args)
    return result.content[0].text


async def wait_extracted(client, timeout: float = 240.0) -> dict:
    """Poll until the file index holds every document and no document in the roots waits for extraction."""
    with anyio.fail_after(timeout):
        while True:
            found = await _call(client, "find_document", {"query": ".", "limit": 100})
            state = await _call(client, "search_documents", {"query": "quest", "scope": {"type": "global"}})
            if found["total_found"] >= DOCUMENTS + 1 and state["pending_documents"] == 0:
                return state
            await anyio.sleep(0.25)


async def documents_session(client, tree: Path) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"list_collections", "find_document", "search_documents", "search_multiple", "read_document",
            "get_document_info"} <= names
    state = await wait_extracted(client)
    assert state["failed_documents"] >= 3  # encrypted.pdf, truncated.pdf, blob.txt: recorded, the rest went on
    plans = await _call(client, "plan-list", {})
    assert "documents" in [p["name"] for p in plans["plans"]]

    # list_collections: browse the root, then a collection
    top = await _call(client, "list_collections", {"path": ""})
    assert [c["name"] for c in top["collections"]] == ["docs", "games", "programming"]  # the symlink is not listed
    coop = await _call(client, "list_collections", {"path": "games/coop"})
    assert {d["path"] for d in coop["documents"]} >= {"games/coop/rules.pdf", "games/coop/notes.md"}
    python = await _call(client, "list_collections", {"path": "programming/python"})
    assert python["current_path"] == "programming/python" and len(python["documents"]) == 2

    # find_document: by exact name, by part of a name
    exact = await _call(client, "find_document", {"query": "rules.pdf"})
    assert exact["matches"][0] == {**exact["matches"][0], "name": "rules.pdf", "path": "games/coop/rules.pdf",
                                   "collection": "games/coop", "score": 1.0}
    partial = await _call(client, "find_document", {"query": "notes", "limit": 20})
    assert partial["matches"][0]["path"] == "games/coop/notes.md" and partial["total_found"] == 1

    # search_documents: the six examples
    search = lambda q, scope, **kw: _call(client, "search_documents", {"query": q, "scope": scope, **kw})  # noqa: E731
    simple = await search("authentication", {"type": "global"})
    assert {m["document"] for m in simple["matches"]} == {"docs/api/security.md", "docs/api/guide.html"}
    assert simple["query"] == "authentication" and simple["truncated"] is False
    jwt = await search("jwt token", {"type": "collection", "path": "docs/api"})
    assert [m["text"] for m in jwt["matches"]] == ["authentication uses a jwt token"]
    either = await search("async|asynchronous", {"type": "global"})
    assert [m["line"] for m in either["matches"]] == [7]
    assert [m["citation"] for m in either["matches"]] == ["text://security#lines=7"]  # the file's resource id
    negated = await search("security -deprecated", {"type": "global"})
    assert "security review done" in [m["text"] for m in negated["matches"]]
    assert not any("deprecated" in m["text"] for m in negated["matches"])
    phrase = await search('"move up to four"', {"type": "document", "path": "games/coop/rules.pdf"})
    assert [(m["line"], m["page"], m["citation"]) for m in phrase["matches"]] == [(5, 2, "doc://rules#pages=2")]
    assert phrase["matches"][0]["context_before"] == ["Introduction", "Welcome to the Quest Rules handbook.",
                                                      "Players cooperate against the dungeon.", "Gameplay"]
    complex_ = await search("(authentication|authorization) -jwt", {"type": "collection", "path": "docs"},
                            context_lines=10, max_results=50)
    assert {m["text"] for m in complex_["matches"]} == {"Authentication", "authorization checks roles"}
    accents = await search("crème brûlée", {"type": "global"})  # cp1252 text, decoded
    assert accents["matches"][0]["document"] == "games/coop/legacy.txt"
    if shutil.which("tesseract"):
        scanned = await search("invoice 4711", {"type": "global"})
        assert scanned["matches"][0]["document"] == "games/coop/scan.pdf" and scanned["matches"][0]["ocr"] is True

    # search_multiple: in a collection, in a document
    multi = await _call(client, "search_multiple", {"queries": ["authentication", "authorization", "security"],
                                                    "scope": {"type": "collection", "path": "docs/api"}})
    assert list(multi["results"]) == ["authentication", "authorization", "security"]
    assert multi["queries_completed"] == 3 and multi["queries_failed"] == 0
    in_doc = await _call(client, "search_multiple", {"queries": ["movement", "attack", "defence", "(bad"],
                                                     "scope": {"type": "document", "path": "games/coop/rules.pdf"},
                                                     "context_lines": 3})
    assert in_doc["results"]["movement"]["total_matches"] == 2 and in_doc["queries_failed"] == 1
    assert in_doc["results"]["(bad"]["error"]["code"] == "INVALID_QUERY"

    # read_document: a whole Markdown file, some PDF pages, a page range
    readme = await _call(client, "read_document", {"path": "programming/python/README.md"})
    assert readme["format"] == "markdown" and "Shuffle the deck before dealing." in readme["content"]
    pdf = await _call(client, "read_document", {"path": "games/coop/rules.pdf", "pages": [1, 2, 5]})
    assert pdf["pages_read"] == [1, 2, 5] and pdf["total_pages"] == 5 and pdf["truncated"] is False
    assert pdf["content"].startswith("--- Page 1 ---\n\nIntroduction") and "--- Page 5 ---" in pdf["content"]
    span = await _call(client, "read_document", {"path": "games/coop/rules.pdf", "pages": [2, 3, 4]})
    assert span["pages_read"] == [2, 3, 4] and span["char_count"] == len(span["content"])
    docx = await _call(client, "read_document", {"path": "docs/api/plan.docx"})
    assert "Project Plan" in docx["content"]

    # get_document_info: a PDF (outline), a Markdown file (headings)
    info = await _call(client, "get_document_info", {"path": "games/coop/rules.pdf"})
    assert info["pages"] == 5 and info["has_toc"] is True and info["indexed"] == "indexed"
    assert [t["title"] for t in info["toc"]] == ["Introduction", "Gameplay", "Combat"]
    assert info["toc"][1]["children"] == [{"title": "Movement", "page": 3, "level": 2}]
    assert info["metadata"]["title"] == "Quest Rules" and info["metadata"]["author"] == "A. Designer"
    md = await _call(client, "get_document_info", {"path": "games/coop/notes.md"})
    assert md["toc"][0]["title"] == "Card Game Notes" and md["toc"][0]["line"] == 1
    assert md["toc"][0]["children"][0]["children"][0]["title"] == "Dealing"
    broken = await _call(client, "get_document_info", {"path": "games/coop/encrypted.pdf"})
    assert broken["indexed"] == "failed" and broken["error"]["code"] == "FILTER_FAILED"

    # one refusal per error code, as the error text's first word
    expected = [
        ("read_document", {"path": "games/missing.pdf"}, "DOCUMENT_NOT_FOUND"),
        ("list_collections", {"path": "games/ghost"}, "COLLECTION_NOT_FOUND"),
        ("list_collections", {"path": "games/coop/rules.pdf"}, "NOT_A_DIRECTORY"),
        ("list_collections", {"path": "../"}, "PATH_TRAVERSAL_DETECTED"),
        ("read_document", {"path": "linked/api/guide.html"}, "SYMLINK_NOT_ALLOWED"),
        ("search_documents", {"query": "(a", "scope": {"type": "global"}}, "INVALID_QUERY"),
        ("search_documents", {"query": "a", "scope": {"type": "collection", "path": "nowhere"}}, "SCOPE_NOT_FOUND"),
        ("read_document", {"path": "games/box.bin"}, "UNSUPPORTED_FORMAT"),
        ("get_document_info", {"path": "games/box.bin"}, "UNSUPPORTED_FORMAT"),
        ("read_document", {"path": "games/coop/rules.pdf", "pages": [6]}, "PAGE_OUT_OF_RANGE"),
        ("read_document", {"path": "games/coop/truncated.pdf"}, "FILTER_FAILED"),
    ]
    for tool, args, code in expected:
        text = await refused(client, tool, args)
        assert text.startswith(code + ": "), (tool, args, text)


@pytest.fixture(scope="module")
def http_documents_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("documents-http")
    tree = make_library(base / "library")
    port = free_port()
    log = base / "http.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve_args(tree, prefect=False, extra=["--transport", "http", "--port", str(port)]),
                                stdout=out, stderr=subprocess.STDOUT, env=documents_env(base), cwd=REPO,
                                start_new_session=True)
    try:
        wait_listening(proc, port, log)
        yield port, tree, log
    finally:
        _stop(proc)


async def test_document_tools_over_http(http_documents_server):
    port, tree, log = http_documents_server
    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
        with anyio.fail_after(360):
            await documents_session(client, tree)


async def test_the_text_index_follows_another_writer_and_rebuilds_when_its_files_go(http_documents_server):
    """The server's text index follows the store, not only its own work: text this process (another one than the
    server) writes into the store is found at the next search; with the index's files deleted under the running
    server, the next search rebuilds them from the store and answers the same."""
    port, tree, log = http_documents_server
    base = tree.parent
    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
        with anyio.fail_after(360):
            await wait_extracted(client)
            query = {"query": "zanzibar quokka", "scope": {"type": "global"}}
            assert (await _call(client, "search_documents", query))["total_matches"] == 0
            engine = make_engine(f"sqlite:///{base / 'data' / 'assay.db'}")
            try:
                entry = get_entry(engine, path=str(tree / "docs" / "api" / "security.md"))
                write_extracted_many(engine, [DocumentWrite(
                    int(entry["id"]), int(entry["size"]), float(entry["mtime"]), "written-elsewhere",
                    Extracted(path="x", format="markdown", pages=[Page(1, "intro\nthe zanzibar quokka line\nend")],
                              total_pages=1))])
            finally:
                engine.dispose()
            found = await _call(client, "search_documents", {**query, "context_lines": 1})
            assert [(m["document"], m["line"], m["text"], m["context_before"]) for m in found["matches"]] == [
                ("docs/api/security.md", 2, "the zanzibar quokka line", ["intro"])]
            before = await _call(client, "search_documents", {"query": "quest|zanzibar", "scope": {"type": "global"}})
            shutil.rmtree(base / "data" / "assay.db.textindex")
            with anyio.fail_after(60):
                while True:  # rebuilt at the next search; until then what it has not indexed counts as pending
                    after = await _call(client, "search_documents",
                                        {"query": "quest|zanzibar", "scope": {"type": "global"}})
                    if after["pending_documents"] == 0:
                        break
                    await anyio.sleep(0.2)
            assert after["total_matches"] == before["total_matches"] > 1
            assert sorted((m["document"], m["line"]) for m in after["matches"]) == sorted(
                (m["document"], m["line"]) for m in before["matches"])
            assert (base / "data" / "assay.db.textindex" / "manifest.json").exists()


async def test_document_tools_over_stdio(tmp_path_factory):
    base = tmp_path_factory.mktemp("documents-stdio")
    tree = make_library(base / "library")
    args = serve_args(tree, prefect=False)
    params = StdioServerParameters(command=args[0], args=args[1:], env=documents_env(base),
                                   cwd=str(REPO))
    async with Client(params) as client:
        with anyio.fail_after(360):
            await documents_session(client, tree)

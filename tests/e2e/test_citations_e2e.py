"""Citations end to end: ONE real `assay serve` process over stdio with the Python MCP client, on a generated library
(a 12-page PDF with a nested outline, Markdown with nested headings, a chaptered video, a 100x100 PNG, a text file):
map-build gives the ids, listResources lists them, getStructure / getNode show the maps, resolve cites virtually and
physically (the PDF excerpt opens with PyMuPDF, the clip is probed with ffprobe, the crop has its size), the outputs
read back through synthesis://content, a search hit's address resolves, and editing a file is noticed (an auto map
rebuilt, an agent's map refused until allowed). (resolve's url over HTTP: tests/mcp_server/test_citation_tools.py
with the HTTP app in process, and the TypeScript client's HTTP session.)"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from examples.mediagen import citations as citations_media
from examples.mediagen import png
from tests.e2e.conftest import REPO, _call, serve_args, server_env

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")]

SEARCH_TEXT = "".join(f"line {n} of the plain text\n" for n in range(1, 30)) + "the quokka hides on line 30\n"


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("citations-e2e")
    root = base / "library"
    citations_media.pdf_outline(root / "book.pdf")
    citations_media.markdown_headings(root / "notes.md")
    citations_media.video_with_chapters(root / "lecture.mp4", chapters=(("Intro", 0, 2), ("Main", 2, 5)))
    png(root / "diagram.png", size=(100, 100))
    (root / "plain.txt").write_text(SEARCH_TEXT)
    return base, root


async def refused(client, tool: str, args: dict) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None, (tool, args)
    return result.content[0].text


async def blob(client, uri: str) -> tuple[str, bytes]:
    content = (await client.read_resource(uri)).contents[0]
    return content.mime_type, base64.b64decode(content.blob)


def duration(path: str) -> float:
    done = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", path],
                          capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout)["format"]["duration"])


async def citations_session(client, root: Path) -> dict[str, str]:
    import pymupdf
    from PIL import Image

    names = {t.name for t in (await client.list_tools()).tools}
    assert {"listResources", "getStructure", "getNode", "resolve", "map-build", "map-put", "map-delete"} <= names
    await _call(client, "index", {"root": str(root), "async": False})
    ids = {}
    for name in ("book.pdf", "notes.md", "lecture.mp4", "diagram.png", "plain.txt"):
        ids[name] = (await _call(client, "map-build", {"resource": str(root / name)}))["resource_id"]
    assert (await _call(client, "listResources", {}))["resources"] == sorted(ids.values())

    book = ids["book.pdf"]
    structure = await _call(client, "getStructure", {"resource_id": book})
    assert structure["type"] == "document" and [n["id"] for n in structure["nodes"]] == ["chapter_1", "chapter_2",
                                                                                          "appendix"]
    assert structure["metadata"]["source_size"] == (root / "book.pdf").stat().st_size
    node = await _call(client, "getNode", {"resource_id": book, "node_id": "chapter_2"})
    assert node["location"]["modality"] == "document" and node["location"]["pages"] == [5, 10]
    assert node["children"] == [{"id": "chapter_2.method"}, {"id": "chapter_2.results"}]

    virtual = await _call(client, "resolve", {"resource_id": book, "node_id": "chapter_1.intro", "virtual": True})
    assert virtual["output_path"] is None and virtual["address"] == f"doc://{book}#pages=1-2"
    pages = await _call(client, "resolve", {"address": f"doc://{book}#pages=2-3"})
    with pymupdf.open(pages["output_path"]) as doc:
        assert doc.page_count == 2 and doc[1].get_text().strip() == "page 3"
    mime, data = await blob(client, pages["uri"])
    assert mime == "application/pdf" and data == Path(pages["output_path"]).read_bytes()

    lecture = ids["lecture.mp4"]
    chapters = await _call(client, "getStructure", {"resource_id": lecture})
    assert [n["title"] for n in chapters["nodes"]] == ["Intro", "Main"]
    clip = await _call(client, "resolve", {"resource_id": lecture, "node_id": chapters["nodes"][1]["id"]})
    assert clip["address"].startswith(f"video://{lecture}#t=2-") and 2.5 <= duration(clip["output_path"]) <= 3.3
    mime, data = await blob(client, clip["uri"])
    assert mime == "video/mp4" and len(data) == clip["size_bytes"]
    exact = await _call(client, "resolve", {"address": f"video://{lecture}#t=00:01.5-00:03", "exact": True})
    assert abs(duration(exact["output_path"]) - 1.5) < 0.2

    crop = await _call(client, "resolve", {"address": f"image://{ids['diagram.png']}#bbox=0.2,0.2,0.8,0.8"})
    with Image.open(crop["output_path"]) as img:
        assert img.size == (60, 60)

    # errors, as a model sees them
    assert (await refused(client, "getStructure", {"resource_id": "nonexistent"})).startswith("RESOURCE_NOT_FOUND:")
    assert (await refused(client, "resolve", {"address": f"doc://{book}#pages=7-14"})).startswith("INVALID_ADDRESS:")
    assert (await refused(client, "resolve", {"address": f"image://{ids['diagram.png']}#bbox=1,2"})).startswith(
        "INVALID_ADDRESS:")

    # a change of a file is noticed: the auto map is rebuilt, the agent's map refused until allowed or supplied
    text_id = ids["plain.txt"]
    before = await _call(client, "getStructure", {"resource_id": text_id})
    with open(root / "plain.txt", "a") as fh:
        fh.write("one more line\n")
    after = await _call(client, "getStructure", {"resource_id": text_id})
    assert after["metadata"]["source_hash"] != before["metadata"]["source_hash"]
    assert after["metadata"]["line_count"] == 31
    notes = ids["notes.md"]
    await _call(client, "map-put", {"resource": notes, "nodes": [
        {"id": "first", "title": "The first lines", "location": {"modality": "text", "lines": [1, 3]}}]})
    (root / "notes.md").write_text("# Changed\n\n" + citations_media.MARKDOWN_TEXT)
    assert (await refused(client, "resolve", {"resource_id": notes, "node_id": "first"})).startswith(
        "SOURCE_CHANGED:")
    stale = await _call(client, "resolve", {"resource_id": notes, "node_id": "first", "allow_stale": True})
    assert stale["stale"] is True and Path(stale["output_path"]).read_text() == "# Changed\n\n# Alpha\n"
    return ids


async def search_hit_session(client, root: Path, ids: dict[str, str]) -> None:
    """A search hit's address is one resolve accepts (the documents tools' boolean search)."""
    with anyio.fail_after(120):
        while True:
            found = await _call(client, "search_documents", {"query": "quokka", "scope": {"type": "global"}})
            if found["pending_documents"] == 0 and found["matches"]:
                break
            await anyio.sleep(0.25)
    hit = found["matches"][0]
    address = hit["citation"]
    assert address.startswith(f"text://{ids['plain.txt']}#lines=")
    cited = await _call(client, "resolve", {"address": address})
    assert "quokka" in Path(cited["output_path"]).read_text()


async def test_citations_over_stdio(library):
    base, root = library
    args = serve_args(root, prefect=False)
    env = {**server_env(base, prefect=False), "ASSAY_DOCUMENTS_PLAN": "on"}
    params = StdioServerParameters(command=args[0], args=args[1:], env=env, cwd=str(REPO))
    async with Client(params) as client:
        with anyio.fail_after(300):
            ids = await citations_session(client, root)
            await search_hit_session(client, root, ids)


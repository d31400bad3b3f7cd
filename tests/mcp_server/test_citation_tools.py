"""The citation tools (listResources, getStructure, getNode, resolve of reference 003; map-build, map-put, map-delete)
and the synthesis://maps resources through an in-process MCP client, on one generated library per module: a PDF with
a nested outline (12 pages), Markdown with nested headings, a chaptered video, a 100x100 PNG and a text file. Every
example call shape of the reference, the outputs against the tools' output schemas, and each error as a tool error
(isError, the code first, no structured content)."""

from __future__ import annotations

import base64
import json
import shutil
import typing
from pathlib import Path

import jsonschema
import pytest
from mcp import Client

from examples.mediagen import citations as citations_media
from examples.mediagen import duration_of, keyframe_times, png
from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from tests.conftest import call, index_sync

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")]

TEXT = "".join(f"line {n}\n" for n in range(1, 31))  # 30 lines


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("citetools") / "library"
    citations_media.pdf_outline(root / "book.pdf")
    citations_media.markdown_headings(root / "notes.md")
    citations_media.video_with_chapters(root / "lecture.mp4", chapters=(("Intro", 0, 2), ("Main", 2, 5)))
    png(root / "diagram.png", size=(100, 100))
    (root / "plain.txt").write_text(TEXT)
    return root


@pytest.fixture(scope="module")
def app(library):
    app = AssayApp.create(Settings(data_dir=library.parent / "data", roots=[str(library)], use_prefect=False))
    try:
        index_sync(app, library)
        yield app
    finally:
        app.close()
        app.engine.dispose()


@pytest.fixture(scope="module")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
async def client(app):
    """One server and client for the module (the tests build on each other in file order)."""
    async with Client(build_server(app)) as c:
        yield c


@pytest.fixture(scope="module")
def ids() -> dict[str, str]:
    """file name -> resource id, filled by the first test (map-build gives them out)."""
    return {}


async def refused(client, tool: str, args: dict) -> str:
    """The text of a tool error; it has no structured content and the second item is the error object."""
    result = await client.call_tool(tool, args)
    assert result.is_error and result.structured_content is None, (tool, args, result)
    text = result.content[0].text
    detail = json.loads(result.content[1].text)["error"]["data"]
    assert text.startswith(detail["type"] + ": ")
    return text


def no_nulls(value) -> bool:
    if isinstance(value, dict):
        return all(v is not None and no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(no_nulls(v) for v in value)
    return True


async def schemas(client) -> dict[str, dict]:
    return {t.name: t.output_schema for t in (await client.list_tools()).tools}


async def test_the_tools_are_listed_with_the_reference_parameters_and_annotations(client):
    from flows.citations.model import STRATEGIES
    from mcp_server.tools.citations import Strategy

    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("listResources", "getStructure", "getNode"):
        assert tools[name].annotations.read_only_hint is True, name
    assert set(tools["getNode"].input_schema["required"]) == {"resource_id", "node_id"}
    assert tools["getStructure"].input_schema["required"] == ["resource_id"]
    resolve = tools["resolve"]
    assert {"resource_id", "node_id", "virtual", "address", "exact", "allow_stale"} == set(
        resolve.input_schema["properties"])
    assert resolve.input_schema["properties"]["virtual"]["default"] is False
    assert resolve.annotations.read_only_hint is False and resolve.annotations.destructive_hint is False
    assert resolve.annotations.idempotent_hint is True
    assert "video://ID#t=192-230" in resolve.description and "bbox" in resolve.description
    for name in ("map-build", "map-put", "map-delete"):  # each may replace an agent's map
        assert tools[name].annotations.destructive_hint is True, name
    assert typing.get_args(Strategy) == STRATEGIES


async def test_map_build_gives_each_file_an_id_that_list_resources_lists(client, library, ids):
    assert (await call(client, "listResources", {}))["resources"] == []  # nothing mapped or cited yet
    for name in ("book.pdf", "notes.md", "lecture.mp4", "diagram.png", "plain.txt"):
        built = await call(client, "map-build", {"resource": str(library / name)})
        assert built["source_path"] == str(library / name)
        ids[name] = built["resource_id"]
    assert ids["book.pdf"].startswith("book") and len(set(ids.values())) == 5
    listed = await call(client, "listResources", {})
    assert listed["resources"] == sorted(ids.values()) and listed["total"] == 5 and "next_offset" not in listed
    first = await call(client, "listResources", {"limit": 2})
    assert first["resources"] == sorted(ids.values())[:2] and first["next_offset"] == 2
    rest = await call(client, "listResources", {"limit": 2, "offset": 4})
    assert rest["resources"] == sorted(ids.values())[4:] and "next_offset" not in rest
    # a path as the document tools show it (relative to the root) names the same file
    again = await call(client, "map-build", {"resource": "notes.md", "strategy": "windows", "window": 5})
    assert again["resource_id"] == ids["notes.md"] and again["metadata"]["origin"] == "windows"
    assert [n["location"]["lines"] for n in again["nodes"]] == [[1, 5], [6, 10], [11, 15], [16, 20]]
    await call(client, "map-build", {"resource": ids["notes.md"], "strategy": "headings"})


async def test_get_structure_is_the_reference_resource_map_without_nulls(client, library, ids):
    book = ids["book.pdf"]
    structure = await call(client, "getStructure", {"resource_id": book})
    jsonschema.validate(structure, (await schemas(client))["getStructure"])
    assert no_nulls(structure)
    assert structure["resource_id"] == book and structure["type"] == "document"
    assert structure["source_path"] == str(library / "book.pdf") and structure["title"] == "Outlined Book"
    assert structure["metadata"]["source_hash"].startswith("xxh128:")
    assert structure["metadata"]["source_size"] == (library / "book.pdf").stat().st_size
    assert structure["metadata"]["page_count"] == 12 and structure["created_at"].endswith("Z")
    found = {}

    def walk(nodes):
        for node in nodes:
            assert set(node["location"]) <= {"modality", "pages", "virtual_address"}
            found[node["id"]] = node["location"]["pages"]
            walk(node["children"])

    walk(structure["nodes"])
    assert found == citations_media.PDF_RANGES
    chapter = structure["nodes"][0]
    assert chapter["location"]["virtual_address"] == f"doc://{book}#pages=1-4"
    assert [c["id"] for c in chapter["children"]] == ["chapter_1.intro", "chapter_1.definition"]

    video = await call(client, "getStructure", {"resource_id": ids["lecture.mp4"]})
    assert video["type"] == "video" and no_nulls(video)
    spans = [(n["title"], n["location"]["start"], n["location"]["end"]) for n in video["nodes"]]
    assert spans == [("Intro", 0, 2), ("Main", 2, pytest.approx(5, abs=0.1))]
    assert set(video["nodes"][0]["location"]) == {"modality", "start", "end", "virtual_address"}

    notes = await call(client, "getStructure", {"resource_id": ids["notes.md"]})
    assert notes["type"] == "text" and notes["metadata"]["origin"] == "headings"
    assert notes["nodes"][0]["location"]["lines"] == citations_media.MARKDOWN_HEADINGS["alpha"][2]


async def test_get_node_shows_one_node_with_its_children_as_ids(client, ids):
    book = ids["book.pdf"]
    node = await call(client, "getNode", {"resource_id": book, "node_id": "chapter_2.method"})
    jsonschema.validate(node, (await schemas(client))["getNode"])
    assert node["id"] == "chapter_2.method" and node["title"] == "Method"
    assert node["location"]["pages"] == [6, 8] and node["location"]["modality"] == "document"
    assert node["children"] == [{"id": "chapter_2.method.details"}]
    leaf = await call(client, "getNode", {"resource_id": book, "node_id": "appendix"})
    assert leaf["children"] == [] and no_nulls(leaf) and "stale" not in leaf


async def test_resolve_answers_each_reference_call_shape(client, app, ids):
    import pymupdf

    book = ids["book.pdf"]
    virtual = await call(client, "resolve", {"resource_id": book, "node_id": "chapter_1.definition", "virtual": True})
    jsonschema.validate(virtual, (await schemas(client))["resolve"])
    assert virtual["output_path"] is None and virtual["modality"] == "document"
    assert virtual["address"] == f"doc://{book}#pages=3-4" and virtual["resource_id"] == book
    assert virtual["node"]["id"] == "chapter_1.definition" and virtual["source_hash"].startswith("xxh128:")
    assert "uri" not in virtual and "url" not in virtual  # nothing extracted, nothing to fetch

    physical = await call(client, "resolve", {"resource_id": book, "node_id": "chapter_1.definition",
                                              "virtual": False})
    jsonschema.validate(physical, (await schemas(client))["resolve"])
    assert physical["address"] == virtual["address"] and physical["mime_type"] == "application/pdf"
    with pymupdf.open(physical["output_path"]) as doc:
        assert doc.page_count == 2 and "page 3" in doc[0].get_text()
    assert physical["uri"] == "synthesis://content/" + physical["cache_path"] and "url" not in physical  # stdio
    blob = (await client.read_resource(physical["uri"])).contents[0]
    assert blob.mime_type == "application/pdf"
    assert base64.b64decode(blob.blob) == Path(physical["output_path"]).read_bytes()

    default = await call(client, "resolve", {"resource_id": book, "node_id": "chapter_1.definition"})
    assert default["output_path"] == physical["output_path"] and default["cached"] is True

    by_address = await call(client, "resolve", {"address": f"doc://{book}#pages=1,3,7"})
    with pymupdf.open(by_address["output_path"]) as doc:
        assert [p.get_text().strip() for p in doc] == ["page 1", "page 3", "page 7"]
    assert by_address["node"]["type"] == "address"
    same_id = await call(client, "resolve", {"resource_id": book, "address": f"doc://{book}#pages=1-4",
                                             "virtual": True})
    assert same_id["node"]["id"] == "chapter_1"  # the map's node of exactly that place


async def test_resolve_cuts_clips_crops_and_lines(client, ids):
    from PIL import Image

    clip = await call(client, "resolve", {"address": f"video://{ids['lecture.mp4']}#t=00:01-00:03"})
    assert clip["address"] == f"video://{ids['lecture.mp4']}#t=1-3" and clip["mime_type"] == "video/mp4"
    # a stream copy: from the source's last keyframe at or before 1 s to 3 s
    keyframe = max(k for k in keyframe_times(Path(clip["source_path"])) if k <= 1.0)
    assert duration_of(Path(clip["output_path"])) == pytest.approx(3.0 - keyframe, abs=0.1)

    chapter = await call(client, "resolve", {"resource_id": ids["lecture.mp4"], "node_id": "main", "virtual": True})
    assert chapter["address"].startswith(f"video://{ids['lecture.mp4']}#t=2-")

    crop = await call(client, "resolve", {"address": f"image://{ids['diagram.png']}#bbox=0.2,0.2,0.8,0.8"})
    with Image.open(crop["output_path"]) as img:
        assert img.size == (60, 60)

    lines = await call(client, "resolve", {"address": f"text://{ids['plain.txt']}#lines=10-12"})
    assert Path(lines["output_path"]).read_text() == "line 10\nline 11\nline 12\n"
    assert lines["mime_type"].startswith("text/plain")


async def test_an_agent_map_is_checked_stored_and_marked_stale_when_its_file_changes(client, library, ids):
    diagram = ids["diagram.png"]
    regions = [{"id": "legend", "title": "Legend", "type": "region",
                "location": {"modality": "image", "bbox": [0.0, 0.0, 0.5, 0.25]},
                "children": [{"id": "legend.key", "type": "region",
                              "location": {"modality": "image", "bbox": [0.1, 0.1, 0.2, 0.2]}}]}]
    stored = await call(client, "map-put", {"resource": str(library / "diagram.png"), "nodes": regions,
                                            "title": "A diagram"})
    assert stored["resource_id"] == diagram and stored["metadata"]["origin"] == "agent"
    assert stored["title"] == "A diagram"
    assert (await call(client, "getNode", {"resource_id": diagram, "node_id": "legend"}))["children"] == [
        {"id": "legend.key"}]
    crop = await call(client, "resolve", {"resource_id": diagram, "node_id": "legend"})
    assert crop["address"] == f"image://{diagram}#bbox=0,0,0.5,0.25" and crop["stale"] is False

    bad = [{"id": "a", "location": {"modality": "image", "bbox": [0.5, 0.5, 0.4, 0.9]}},
           {"id": "b", "location": {"modality": "image", "bbox": [0.1, 0.2, 0.3]}},
           {"id": "a", "location": {"modality": "image", "bbox": [0, 0, 1, 1]},
            "children": [{"id": "c.d", "location": {"modality": "image", "bbox": [0, 0, 1, 1]}}]}]
    text = await refused(client, "map-put", {"resource": diagram, "nodes": bad})
    assert text.startswith("INVALID_MAP:")
    result = await client.call_tool("map-put", {"resource": diagram, "nodes": bad})
    problems = json.loads(result.content[1].text)["error"]["data"]["details"]["problems"]
    assert len(problems) >= 4 and {"a", "b"} <= {p["node"] for p in problems}
    assert (await call(client, "getStructure", {"resource_id": diagram}))["metadata"]["origin"] == "agent"  # kept

    notes = ids["notes.md"]
    sections = [{"id": "intro", "title": "Intro", "location": {"modality": "text", "lines": [1, 3]}}]
    await call(client, "map-put", {"resource": notes, "nodes": sections})
    (library / "notes.md").write_text(citations_media.MARKDOWN_TEXT + "An added line.\n")
    structure = await call(client, "getStructure", {"resource_id": notes})
    assert structure["metadata"]["stale"] is True and structure["nodes"][0]["id"] == "intro"
    assert (await call(client, "getNode", {"resource_id": notes, "node_id": "intro"}))["stale"] is True
    text = await refused(client, "resolve", {"resource_id": notes, "node_id": "intro"})
    assert text.startswith("SOURCE_CHANGED:")
    allowed = await call(client, "resolve", {"resource_id": notes, "node_id": "intro", "allow_stale": True})
    assert allowed["stale"] is True and Path(allowed["output_path"]).read_text().startswith("# Alpha\n")
    await call(client, "map-put", {"resource": notes, "nodes": sections})  # supplied again: current
    current = await call(client, "resolve", {"resource_id": notes, "node_id": "intro", "virtual": True})
    assert current["stale"] is False


async def test_map_delete_forgets_the_map_but_keeps_the_id(client, ids):
    text_id = ids["plain.txt"]
    deleted = await call(client, "map-delete", {"resource_id": text_id})
    assert deleted == {"resource_id": text_id, "deleted": True, "message": "map deleted"}
    assert text_id in (await call(client, "listResources", {}))["resources"]
    rebuilt = await call(client, "getStructure", {"resource_id": text_id})  # built again on first use
    assert rebuilt["nodes"] and rebuilt["metadata"]["line_count"] == 30


async def test_errors_name_their_code_and_what_would_be_accepted(client, ids):
    book, video, image = ids["book.pdf"], ids["lecture.mp4"], ids["diagram.png"]
    assert (await refused(client, "getStructure", {"resource_id": "nonexistent_id"})).startswith(
        "RESOURCE_NOT_FOUND:")
    assert "nonexistent" in await refused(client, "getNode", {"resource_id": "nonexistent", "node_id": "x"})
    text = await refused(client, "getNode", {"resource_id": book, "node_id": "invalid.node"})
    assert text.startswith("NODE_NOT_FOUND:") and "invalid.node" in text and "chapter_1" in text
    assert (await refused(client, "resolve", {"resource_id": book, "node_id": "nope"})).startswith("NODE_NOT_FOUND:")
    text = await refused(client, "resolve", {"address": f"doc://{book}#pages=7-14"})
    assert text.startswith("INVALID_ADDRESS:") and "12" in text
    text = await refused(client, "resolve", {"address": f"image://{image}#bbox=0.2,0.2,0.8"})
    assert text.startswith("INVALID_ADDRESS:") and "bbox" in text
    assert (await refused(client, "resolve", {"address": f"video://{video}#t=4-2"})).startswith("INVALID_ADDRESS:")
    assert (await refused(client, "resolve", {"address": f"doc://{video}#pages=1"})).startswith("INVALID_ADDRESS:")
    assert (await refused(client, "resolve", {"address": "doc://nobody#pages=1"})).startswith("RESOURCE_NOT_FOUND:")
    text = await refused(client, "resolve", {"resource_id": book})
    assert text.startswith("INVALID_PARAMS:") and "node_id" in text and "doc://ID#pages=3-5" in text
    text = await refused(client, "resolve", {"resource_id": book, "node_id": "appendix",
                                             "address": f"doc://{book}#pages=1"})
    assert text.startswith("INVALID_PARAMS:") and "not both" in text
    text = await refused(client, "resolve", {"resource_id": image, "address": f"doc://{book}#pages=1"})
    assert text.startswith("INVALID_ADDRESS:") and book in text
    assert (await refused(client, "map-build", {"resource": "/etc/passwd"})).startswith("INVALID_PATH:")
    text = await refused(client, "map-build", {"resource": book, "strategy": "chapters"})
    assert text.startswith("UNSUPPORTED_FORMAT:")
    assert (await refused(client, "map-build", {"resource": book, "strategy": "pages"})).startswith("INVALID_PARAMS:")
    assert (await refused(client, "getNode", {"resource_id": book})).startswith("INVALID_PARAMS:")


async def test_maps_are_exported_as_synthesis_resources(client, ids):
    listing = json.loads((await client.read_resource("synthesis://maps")).contents[0].text)
    assert [m["resource_id"] for m in listing["maps"]] == sorted(ids.values()) and listing["hasMore"] is False
    assert listing["maps"][0]["uri"] == f"synthesis://maps/{listing['maps'][0]['resource_id']}"
    page = json.loads((await client.read_resource("synthesis://maps?limit=2&offset=1")).contents[0].text)
    assert [m["resource_id"] for m in page["maps"]] == sorted(ids.values())[1:3]
    assert page["nextUri"] == "synthesis://maps?limit=2&offset=3" and page["total"] == 5
    exported = await client.read_resource(f"synthesis://maps/{ids['book.pdf']}")
    assert exported.contents[0].mime_type == "application/json"
    assert json.loads(exported.contents[0].text) == await call(client, "getStructure",
                                                                {"resource_id": ids["book.pdf"]})
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND"):
        await client.read_resource("synthesis://maps/nonexistent")


async def test_over_http_resolve_gives_the_url_the_content_route_serves(app, ids):
    import dataclasses

    from starlette.testclient import TestClient

    from mcp_server.http import http_app

    settings = app.settings.model_copy(update={"transport": "http", "port": 3999})
    served = dataclasses.replace(app, settings=settings)
    async with Client(build_server(served)) as http_client:
        cited = await call(http_client, "resolve", {"address": f"doc://{ids['book.pdf']}#pages=5"})
    assert cited["url"] == f"http://127.0.0.1:3999/api/content?path={cited['cache_path']}"
    with TestClient(http_app(build_server(served), settings), base_url="http://127.0.0.1:3999") as web:
        r = web.get(cited["url"])
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
    assert r.content == Path(cited["output_path"]).read_bytes()

"""Saved-query tools through an in-process MCP client (reference 000 examples)."""

from __future__ import annotations

import pytest

from tests.conftest import ToolFailed, call, index_sync

EXAMPLE = {"name": "large-videos", "description": "Videos larger than 1GB",
           "query": {"kind": "file", "extension": ".mp4", "min_size": 1073741824}}


@pytest.fixture
async def indexed(app, tree):
    index_sync(app, tree)
    return tree


async def test_query_create_reference_example(client):
    res = await call(client, "query-create", EXAMPLE)
    assert res["name"] == "large-videos" and res["description"] == "Videos larger than 1GB"
    assert res["query"] == EXAMPLE["query"] and res["executionCount"] == 0 and res["createdAt"].endswith("Z")


async def test_query_execute_pages_and_reports_total(client, indexed):
    await call(client, "query-create", EXAMPLE)
    res = await call(client, "query-execute", {"name": "large-videos"})
    assert res["entries"] == [] and res["total"] == 0 and res["limit"] == 100 and res["offset"] == 0
    await call(client, "query-create", {"name": "videos", "query": {"media_type": "video"}})
    page = await call(client, "query-execute", {"name": "videos", "limit": 1})
    assert page["total"] == 2 and page["hasMore"] is True and len(page["entries"]) == 1
    first = page["entries"][0]
    assert first["name"] == "clip.mov" and first["path"] == str(indexed / "Videos" / "clip.mov")
    page2 = await call(client, "query-execute", {"name": "videos", "limit": 1, "offset": 1})
    assert [e["name"] for e in page2["entries"]] == ["movie.mp4"] and page2["hasMore"] is False


async def test_query_list_get_update_delete(client):
    await call(client, "query-create", EXAMPLE)
    await call(client, "query-create", {"name": "docs", "query": {"media_type": "document"}})
    listed = await call(client, "query-list")
    assert [q["name"] for q in listed["queries"]] == ["docs", "large-videos"] and listed["total"] == 2
    got = await call(client, "query-get", {"name": "large-videos"})
    assert got["query"] == EXAMPLE["query"]
    updated = await call(client, "query-update", {"name": "large-videos", "query": {"kind": "file", "min_size": 1}})
    assert updated["query"] == {"kind": "file", "min_size": 1} and updated["description"] == EXAMPLE["description"]
    updated = await call(client, "query-update", {"name": "large-videos", "description": "anything"})
    assert updated["description"] == "anything" and updated["query"] == {"kind": "file", "min_size": 1}
    gone = await call(client, "query-delete", {"name": "large-videos"})
    assert gone["deleted"]["name"] == "large-videos" and "Deleted" in gone["message"]
    assert [q["name"] for q in (await call(client, "query-list"))["queries"]] == ["docs"]


async def test_query_given_as_json_text_is_accepted(client):
    res = await call(client, "query-create", {"name": "q", "query": '{"kind": "directory"}'})
    assert res["query"] == {"kind": "directory"}


@pytest.mark.parametrize("tool, args, fragments", [
    ("query-create", {"name": "bad", "query": {"kind": "file", "min_sise": 5}}, ["query.min_sise", "min_size"]),
    ("query-create", {"name": "large-videos", "query": {}}, ["already exists"]),
    ("query-get", {"name": "nope"}, ["'nope' not found", "large-videos"]),
    ("query-execute", {"name": "nope"}, ["not found", "large-videos"]),
    ("query-update", {"name": "large-videos"}, ["nothing to update"]),
    ("query-update", {"name": "large-videos", "query": {"sort": "size"}}, ["query.sort"]),
    ("query-delete", {"name": "nope"}, ["not found"]),
    ("query-execute", {"name": "large-videos", "limit": 0}, ["limit"]),
])
async def test_errors_say_what_was_wrong(client, tool, args, fragments):
    await call(client, "query-create", EXAMPLE)
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, args)
    assert all(f in str(err.value) for f in fragments), str(err.value)


async def test_schemas_use_the_reference_parameter_names(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools["query-create"].input_schema["properties"]) == {"name", "description", "query"}
    assert set(tools["query-create"].input_schema["required"]) == {"name", "query"}
    assert set(tools["query-execute"].input_schema["properties"]) == {"name", "limit", "offset"}
    assert set(tools["query-update"].input_schema["required"]) == {"name"}
    assert tools["query-list"].annotations.read_only_hint is True
    assert tools["query-delete"].annotations.destructive_hint is True

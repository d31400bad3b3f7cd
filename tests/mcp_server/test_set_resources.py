"""synthesis://resource-sets resources read through an in-process MCP client."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import call, index_sync, read_json


@pytest.fixture
async def sets(client, app, tree):
    index_sync(app, tree)
    for name in ("all-media", "photos", "vacation"):
        await call(client, "resource-set-create", {"name": name})
    await call(client, "resource-set-add-child", {"parent": "all-media", "child": "photos"})
    await call(client, "resource-set-add-child", {"parent": "photos", "child": "vacation"})
    jpgs = sorted(str(p) for p in tree.rglob("*.jpg"))
    await call(client, "resource-set-modify", {"name": "photos", "operation": "add", "paths": jpgs})
    return jpgs


async def test_all_sets_resource_lists_counts_and_uris(client, sets):
    res = await read_json(client, "synthesis://resource-sets")
    assert [(s["name"], s["entry_count"], s["child_count"], s["uri"]) for s in res["resource_sets"]] == [
        ("all-media", 0, 1, "synthesis://resource-sets/all-media"),
        ("photos", 3, 1, "synthesis://resource-sets/photos"),
        ("vacation", 0, 0, "synthesis://resource-sets/vacation")]


async def test_set_resource_is_json_metadata_with_links(client, sets):
    result = await client.read_resource("synthesis://resource-sets/photos")
    assert result.contents[0].mime_type == "application/json"
    res = await read_json(client, "synthesis://resource-sets/photos")
    assert res == {**res, "name": "photos", "entry_count": 3, "child_count": 1, "parents": ["all-media"],
                   "children": ["vacation"], "entriesUri": "synthesis://resource-sets/photos/entries"}
    assert "entries" not in res


async def test_entries_resource_pages_with_query_parameters(client, sets):
    everything = await read_json(client, "synthesis://resource-sets/photos/entries")
    assert [e["path"] for e in everything["entries"]] == sets
    assert everything["total"] == 3 and everything["hasMore"] is False and everything["limit"] == 1000
    page = await read_json(client, "synthesis://resource-sets/photos/entries?limit=2&offset=1")
    assert [e["path"] for e in page["entries"]] == sets[1:] and page["offset"] == 1
    first = await read_json(client, "synthesis://resource-sets/photos/entries?limit=1")
    assert first["hasMore"] is True


async def test_children_and_parents_resources_follow_one_edge(client, sets):
    down = await read_json(client, "synthesis://resource-sets/photos/children")
    assert down["resource_set"] == "photos" and [c["name"] for c in down["children"]] == ["vacation"]
    up = await read_json(client, "synthesis://resource-sets/photos/parents")
    assert [(p["name"], p["entry_count"], p["child_count"]) for p in up["parents"]] == [("all-media", 0, 1)]


@pytest.mark.parametrize("uri", ["synthesis://resource-sets/ghost", "synthesis://resource-sets/ghost/entries",
                                 "synthesis://resource-sets/ghost/children", "synthesis://resource-sets/ghost/parents"])
async def test_unknown_set_is_an_invalid_params_error_naming_it(client, sets, uri):
    with pytest.raises(MCPError, match="resource-set 'ghost' not found") as err:
        await client.read_resource(uri)
    assert err.value.error.code == -32602


async def test_bad_page_parameter_is_explained(client, sets):
    with pytest.raises(MCPError, match="limit must be a whole number"):
        await client.read_resource("synthesis://resource-sets/photos/entries?limit=lots")


async def test_templates_are_listed(client):
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert {"synthesis://resource-sets/{name}", "synthesis://resource-sets/{name}/entries{?limit,offset}",
            "synthesis://resource-sets/{name}/children", "synthesis://resource-sets/{name}/parents"} <= templates
    static = {str(r.uri) for r in (await client.list_resources()).resources}
    assert "synthesis://resource-sets" in static

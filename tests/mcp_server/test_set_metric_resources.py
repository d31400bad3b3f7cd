"""synthesis://resource-sets/{name}/stats and /metrics/{metric} through an in-process MCP client."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import call, index_sync, read_json
from tests.store.test_set_queries import ALL_MEDIA_FILES, GIB, MIB, add_corpus, build_sets


@pytest.fixture
def populated(app, tree):
    add_corpus(tree)
    index_sync(app, tree)
    build_sets(app.engine, tree)
    return tree


async def test_stats_cover_the_set_with_its_descendants_once(client, populated):
    stats = await read_json(client, "synthesis://resource-sets/all-media/stats")
    assert stats["resource_set"] == "all-media"
    assert (stats["count"], stats["files"], stats["directories"]) == (11, 10, 1)
    assert stats["total_size"] == sum(ALL_MEDIA_FILES.values())
    assert stats["min_mtime"] == "2023-05-01T00:00:00Z" and stats["max_mtime"] > "2025"
    assert stats["sets_counted"] == 4 and stats["child_count"] == 2 and stats["direct_count"] == 1
    top_media = stats["by_media_type"][0]
    assert top_media == {"media_type": "image", "count": 5, "size": 5000 + 3000 + 2000 + 5 * MIB}
    extensions = {g["extension"]: g["count"] for g in stats["by_extension"]}
    assert extensions == {".jpg": 5, ".mp4": 1, ".mov": 1, ".mkv": 1, ".pdf": 1, ".txt": 1}


async def test_stats_of_an_empty_set(client, populated):
    stats = await read_json(client, "synthesis://resource-sets/empty-set/stats")
    assert stats["count"] == 0 and stats["total_size"] == 0 and stats["min_mtime"] is None
    assert stats["by_media_type"] == [] and stats["by_extension"] == []


@pytest.mark.parametrize("metric, value", [
    ("size", sum(ALL_MEDIA_FILES.values())),
    ("count", 11),
    ("files", 10),
    ("directories", 1),
])
async def test_metric_resource_is_the_resource_sum_value(client, populated, metric, value):
    res = await read_json(client, f"synthesis://resource-sets/all-media/metrics/{metric}")
    assert res["resource_set"] == "all-media" and res["metric"] == metric and res["value"] == value
    summed = await call(client, "resource-sum", {"name": "all-media", "metric": metric})
    assert summed["value"] == value


async def test_metric_of_a_leaf_set(client, populated):
    res = await read_json(client, "synthesis://resource-sets/videos/metrics/size")
    assert res["value"] == 40000 + 8000 + 2 * GIB + 3000 + 2000 + 3 * MIB  # vacation is a child of videos


async def test_unknown_metric_lists_the_accepted_ones(client, populated):
    with pytest.raises(MCPError, match="size, count, files, directories"):
        await client.read_resource("synthesis://resource-sets/all-media/metrics/weight")


@pytest.mark.parametrize("uri", ["synthesis://resource-sets/ghost/stats",
                                 "synthesis://resource-sets/ghost/metrics/size"])
async def test_unknown_set_is_resource_not_found(client, populated, uri):
    with pytest.raises(MCPError, match="resource-set 'ghost' not found") as err:
        await client.read_resource(uri)
    assert err.value.error.code == -32602


async def test_templates_are_listed(client):
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert {"synthesis://resource-sets/{name}/stats", "synthesis://resource-sets/{name}/metrics/{metric}"} <= templates

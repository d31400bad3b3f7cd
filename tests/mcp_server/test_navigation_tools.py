"""navigate and inspect through an in-process MCP client."""

from __future__ import annotations

import pytest

from tests.conftest import ToolFailed, call, index_sync


@pytest.fixture
async def indexed(client, app, tree):
    index_sync(app, tree)
    return tree


async def test_navigate_reference_example_sorts_by_size_descending(client, indexed):
    photos = indexed / "Photos"
    res = await call(client, "navigate", {"path": str(photos), "sort": "size", "desc": True})
    assert res["path"] == str(photos)
    assert [e["name"] for e in res["entries"]] == ["vacation", "photo.jpg", "notes.txt"]
    first = res["entries"][0]
    assert first == {**first, "name": "vacation", "path": str(photos / "vacation"), "size": 5000,
                     "kind": "directory"}
    assert first["mtime"].endswith("Z")
    assert res["total"] == 3 and res["hasMore"] is False


async def test_navigate_pages_with_limit_and_offset(client, indexed):
    page1 = await call(client, "navigate", {"path": str(indexed), "limit": 2})
    page2 = await call(client, "navigate", {"path": str(indexed), "limit": 2, "offset": 2})
    assert page1["total"] == 5 and page1["hasMore"] is True
    assert [e["name"] for e in page1["entries"]] == [".hidden", "Photos"]
    assert [e["name"] for e in page2["entries"]] == ["Videos", "docs"]
    last = await call(client, "navigate", {"path": str(indexed), "limit": 2, "offset": 4})
    assert last["hasMore"] is False and [e["name"] for e in last["entries"]] == ["empty"]


async def test_navigate_sorts_by_mtime(app, client, indexed):
    import os

    os.utime(indexed / "Videos" / "clip.mov", (1_000_000_000, 1_000_000_000))
    os.utime(indexed / "Videos" / "movie.mp4", (1_500_000_000, 1_500_000_000))
    index_sync(app, indexed)
    oldest_first = await call(client, "navigate", {"path": str(indexed / "Videos"), "sort": "mtime"})
    assert [e["name"] for e in oldest_first["entries"]] == ["clip.mov", "movie.mp4"]
    newest_first = await call(client, "navigate", {"path": str(indexed / "Videos"), "sort": "mtime", "desc": True})
    assert [e["name"] for e in newest_first["entries"]] == ["movie.mp4", "clip.mov"]


@pytest.mark.parametrize("args, message", [
    ({"sort": "path"}, "sort"),
    ({"limit": 0}, "limit"),
    ({"offset": -1}, "offset"),
])
async def test_navigate_rejects_bad_parameters_naming_them(client, indexed, args, message):
    with pytest.raises(ToolFailed) as err:
        await call(client, "navigate", {"path": str(indexed), **args})
    assert message in str(err.value)


async def test_navigate_explains_unindexed_file_and_outside_paths(client, indexed, tmp_path):
    with pytest.raises(ToolFailed, match="not a directory"):
        await call(client, "navigate", {"path": str(indexed / "Photos" / "photo.jpg")})
    (indexed / "later").mkdir()
    with pytest.raises(ToolFailed, match="not in the index"):
        await call(client, "navigate", {"path": str(indexed / "later")})
    with pytest.raises(ToolFailed, match="outside the allowed roots"):
        await call(client, "navigate", {"path": str(tmp_path)})


@pytest.mark.parametrize("tool", ["navigate", "inspect"])
async def test_a_path_with_nothing_on_disk_does_not_exist_rather_than_wanting_an_index(client, indexed, tool):
    """"not in the index" only where indexing would help: a path with nothing on disk is said not to exist."""
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, {"path": str(indexed / "ghost")})
    assert "does not exist" in str(err.value) and "not in the index" not in str(err.value)
    (indexed / "later.txt").write_text("on disk, not indexed")
    with pytest.raises(ToolFailed, match="not in the index; index it"):
        await call(client, tool, {"path": str(indexed / "later.txt")})


async def test_inspect_reference_example_shape(client, indexed):
    movie = indexed / "Videos" / "movie.mp4"
    res = await call(client, "inspect", {"path": str(movie)})
    assert res["path"] == str(movie) and res["kind"] == "file" and res["size"] == 40000
    assert res["modifiedAt"].endswith("Z") and res["createdAt"].endswith("Z")
    assert res["resourceUri"] == "synthesis://nodes" + str(movie)
    assert res["metadataUri"] == "synthesis://nodes" + str(movie) + "/metadata"
    assert res["metadataCount"] == 0 and res["metadata"] == []
    assert res["mediaType"] == "video"


async def test_inspect_directory_reports_child_count(client, indexed):
    res = await call(client, "inspect", {"path": str(indexed / "docs")})
    assert res["kind"] == "directory" and res["childCount"] == 3 and res["size"] == 1627


async def test_navigate_follows_the_default_sort_and_show_hidden_preferences(client, indexed):
    await call(client, "session-set-preferences", {"preferences": {"default_sort": "size", "show_hidden": False}})
    res = await call(client, "navigate", {"path": str(indexed)})
    assert ".hidden" not in [e["name"] for e in res["entries"]] and res["total"] == 4
    sizes = [e["size"] for e in res["entries"]]
    assert sizes == sorted(sizes)
    by_name = await call(client, "navigate", {"path": str(indexed), "sort": "name"})  # an explicit sort wins
    assert [e["name"] for e in by_name["entries"]] == ["Photos", "Videos", "docs", "empty"]
    await call(client, "session-set-preferences", {"preferences": {"show_hidden": None}})  # back to the default
    res = await call(client, "navigate", {"path": str(indexed)})
    assert res["total"] == 5 and ".hidden" in [e["name"] for e in res["entries"]]

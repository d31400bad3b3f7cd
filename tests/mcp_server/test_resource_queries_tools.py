"""The resource-query tools through an in-process MCP client: every example call of reference 000, and bad input."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from store.entries import T
from store.models import ResourceSet, SetMember
from tests.conftest import ToolFailed, call, index_sync
from tests.store.test_set_queries import ALL_MEDIA_FILES, GIB, MIB, add_corpus, build_sets

PAGE_FIELDS = {"resource_set", "entries", "total_count", "returned_count", "offset", "limit", "has_more"}


@pytest.fixture
def populated(app, tree):
    add_corpus(tree)
    index_sync(app, tree)
    build_sets(app.engine, tree)
    with app.engine.begin() as conn:  # "all-files" of the reference's "Find Large Files" workflow
        set_id = conn.execute(insert(ResourceSet.__table__).values(name="all-files")).inserted_primary_key[0]
        conn.execute(insert(SetMember.__table__).from_select(
            ["set_id", "entry_id"], select(set_id, T.c.id).where(T.c.kind == "file")))
    return tree


def names(res: dict) -> list[str]:
    return [e["name"] for e in res["entries"]]


# --- the reference's examples -----------------------------------------------------------------------------------


async def test_resource_sum_reference_example(client, populated):
    res = await call(client, "resource-sum", {"name": "all-media", "metric": "size"})
    assert res["resource_set"] == "all-media" and res["metric"] == "size"
    assert res["value"] == sum(ALL_MEDIA_FILES.values())
    photos = 5000 + 10 + 3000 + 2 * MIB + 2000 + 3 * MIB
    videos = 40000 + 8000 + 2 * GIB + 3000 + 2000 + 3 * MIB  # vacation is below videos too
    assert res["breakdown"] == [{"name": "photos", "value": photos}, {"name": "videos", "value": videos}]


async def test_resource_time_range_reference_example(client, populated):
    res = await call(client, "resource-time-range",
                     {"name": "photos", "field": "mtime", "min": "2024-01-01", "max": "2024-12-31"})
    assert PAGE_FIELDS <= set(res)
    assert names(res) == ["big.jpg", "photo.jpg", "panorama.JPG", "sunset.jpg"]  # sunset: 31 Dec, 23:00
    assert res["field"] == "mtime" and res["min"] == "2024-01-01T00:00:00Z"
    assert all(e["mtime"].startswith("2024-") for e in res["entries"])


async def test_resource_metric_range_reference_example(client, populated):
    res = await call(client, "resource-metric-range", {"name": "videos", "metric": "size", "min": 1073741824})
    assert PAGE_FIELDS <= set(res) and res["resource_set"] == "videos"
    assert names(res) == ["huge.mkv"] and res["entries"][0]["size"] == 2 * GIB
    assert res["total_count"] == 1 and res["has_more"] is False


async def test_find_large_files_workflow(client, populated):
    res = await call(client, "resource-metric-range", {"name": "all-files", "metric": "size", "min": 1073741824})
    assert [e["path"] for e in res["entries"]] == [str(populated / "Videos" / "huge.mkv")]


async def test_resource_is_reference_example(client, populated):
    res = await call(client, "resource-is", {"name": "photos", "field": "kind", "value": "file"})
    assert PAGE_FIELDS <= set(res) and res["field"] == "kind" and res["value"] == "file"
    assert res["total_count"] == 6 and {e["kind"] for e in res["entries"]} == {"file"}


async def test_resource_fuzzy_match_reference_example(client, populated):
    res = await call(client, "resource-fuzzy-match",
                     {"name": "photos", "field": "path", "pattern": ".jpg", "mode": "suffix"})
    assert PAGE_FIELDS <= set(res) and res["mode"] == "suffix" and res["case_sensitive"] is False
    assert names(res) == ["big.jpg", "photo.jpg", "beach.jpg", "panorama.JPG", "sunset.jpg"]


async def test_resource_search_reference_example(client, populated):
    res = await call(client, "resource-search", {
        "name": "all-media", "include_children": True, "kind": "file", "extension": ".jpg",
        "min_size": 1048576, "sort_by": "mtime", "limit": 50})
    assert set(res) >= PAGE_FIELDS
    assert res["resource_set"] == "all-media" and res["offset"] == 0 and res["limit"] == 50
    assert names(res) == ["panorama.JPG", "big.jpg"]  # newest first
    assert res["total_count"] == 2 and res["returned_count"] == 2 and res["has_more"] is False


# --- the modes and parameters around the examples --------------------------------------------------------------


@pytest.mark.parametrize("mode, pattern, expected", [
    ("contains", "vacation", ["vacation", "beach.jpg", "panorama.JPG", "sunset.jpg"]),
    ("prefix", "/", ["big.jpg", "notes.txt", "photo.jpg", "vacation", "beach.jpg", "panorama.JPG", "sunset.jpg"]),
    ("regex", r"/(beach|sunset)\.jpg$", ["beach.jpg", "sunset.jpg"]),
    ("glob", "*/vacation/*.jpg", ["beach.jpg", "panorama.JPG", "sunset.jpg"]),
])
async def test_fuzzy_match_modes_through_mcp(client, populated, mode, pattern, expected):
    res = await call(client, "resource-fuzzy-match", {"name": "photos", "field": "path", "pattern": pattern,
                                                      "mode": mode})
    assert names(res) == expected


async def test_fuzzy_match_case_sensitive_and_literal_wildcards(client, populated):
    res = await call(client, "resource-fuzzy-match", {"name": "photos", "field": "name", "pattern": "*.jpg",
                                                      "mode": "glob", "case_sensitive": True})
    assert "panorama.JPG" not in names(res) and len(names(res)) == 4
    odd = await call(client, "resource-fuzzy-match", {"name": "odd", "field": "name", "pattern": "100%"})
    assert names(odd) == ["100%_done.txt"]


async def test_resource_is_confines_paths_to_the_roots(client, populated, tmp_path):
    photo = populated / "Photos" / "photo.jpg"
    res = await call(client, "resource-is", {"name": "all-media", "field": "path",
                                             "value": str(populated / "Photos" / ".." / "Photos" / "photo.jpg")})
    assert [e["path"] for e in res["entries"]] == [str(photo)]
    with pytest.raises(ToolFailed, match="outside the allowed roots"):
        await call(client, "resource-is", {"name": "all-media", "field": "parent", "value": str(tmp_path)})


async def test_resource_sum_other_metrics_and_depth(client, populated):
    res = await call(client, "resource-sum", {"name": "all-media", "metric": "count", "depth": 1})
    assert res["value"] == 9 and res["breakdown"] == [{"name": "photos", "value": 5}, {"name": "videos", "value": 3}]
    alone = await call(client, "resource-sum", {"name": "all-media", "metric": "files", "include_children": False})
    assert alone["value"] == 1 and alone["breakdown"] == []


async def test_resource_search_pages_and_takes_a_list_of_extensions(client, populated):
    first = await call(client, "resource-search", {"name": "all-media", "include_children": True, "kind": "file",
                                                   "extension": ["jpg", "MP4"], "sort_by": "name",
                                                   "sort_desc": False, "limit": 4})
    assert names(first) == ["beach.jpg", "big.jpg", "movie.mp4", "panorama.JPG"]
    assert first["total_count"] == 6 and first["has_more"] is True
    rest = await call(client, "resource-search", {"name": "all-media", "include_children": True, "kind": "file",
                                                  "extension": ["jpg", "MP4"], "sort_by": "name",
                                                  "sort_desc": False, "limit": 4, "offset": 4})
    assert names(rest) == ["photo.jpg", "sunset.jpg"] and rest["has_more"] is False


async def test_resource_search_time_and_name_filters(client, populated):
    res = await call(client, "resource-search", {"name": "photos", "include_children": True,
                                                 "min_mtime": "2024-06-01", "max_mtime": "2024-12-31",
                                                 "name_contains": "O", "sort_by": "name", "sort_desc": False})
    assert names(res) == ["panorama.JPG", "photo.jpg"]


async def test_time_range_takes_unix_seconds_as_numbers_and_is_takes_numeric_values(client, populated):
    res = await call(client, "resource-time-range", {"name": "vacation", "field": "mtime", "min": 1704067200,
                                                     "max": "1735689599"})  # 2024, as a number and as text
    assert names(res) == ["panorama.JPG", "sunset.jpg"] and res["min"] == "2024-01-01T00:00:00Z"
    sized = await call(client, "resource-is", {"name": "videos", "field": "size", "value": 8000})
    assert names(sized) == ["clip.mov"] and sized["value"] == 8000
    total = await call(client, "resource-sum", {"name": "all-media", "metric": "count", "depth": None})
    assert total["value"] == 11 and total["depth"] is None


# --- errors -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tool, args, message", [
    ("resource-sum", {"name": "ghost", "metric": "size"}, "resource-set 'ghost' not found"),
    ("resource-sum", {"name": "all-media", "metric": "bytes"}, "metric"),
    ("resource-time-range", {"name": "photos", "field": "mtime", "min": "last week"}, "ISO 8601"),
    ("resource-time-range", {"name": "photos", "field": "atime"}, "field"),
    ("resource-metric-range", {"name": "videos", "metric": "size", "min": 5, "max": 1}, "greater than max"),
    ("resource-is", {"name": "photos", "field": "colour", "value": "red"}, "kind, path, parent"),
    ("resource-fuzzy-match", {"name": "photos", "field": "path", "pattern": "([", "mode": "regex"},
     "not a valid regular expression"),
    ("resource-fuzzy-match", {"name": "photos", "field": "path", "pattern": "x", "mode": "fuzzy"}, "mode"),
    ("resource-search", {"name": "photos", "sort_by": "size desc"}, "sort_by"),
    ("resource-search", {"name": "photos", "limit": 0}, "limit"),
    ("resource-search", {"name": "photos", "max_mtime": "soon"}, "max_mtime"),
])
async def test_bad_input_is_an_error_naming_what_was_wrong(client, populated, tool, args, message):
    with pytest.raises(ToolFailed, match=message.replace("(", r"\(")):
        await call(client, tool, args)


async def test_tools_are_listed_read_only_with_reference_parameters(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    expected = {
        "resource-sum": {"name", "metric", "include_children", "depth"},
        "resource-time-range": {"name", "field", "min", "max", "include_children"},
        "resource-metric-range": {"name", "metric", "min", "max", "include_children"},
        "resource-is": {"name", "field", "value", "include_children"},
        "resource-fuzzy-match": {"name", "field", "pattern", "mode", "case_sensitive", "include_children"},
        "resource-search": {"name", "include_children", "kind", "extension", "path_contains", "name_contains",
                            "min_size", "max_size", "min_mtime", "max_mtime", "limit", "offset", "sort_by",
                            "sort_desc"},
    }
    for name, params in expected.items():
        schema = tools[name].input_schema
        assert params <= set(schema["properties"]), name
        assert tools[name].annotations.read_only_hint is True

"""resource-children and resource-parent through an in-process MCP client (reference 000, "Resource Navigation")."""

from __future__ import annotations

import pytest

from tests.conftest import ToolFailed, call, index_sync


@pytest.fixture
async def dag(client, app, tree):
    """all-media -> photos, videos; photos -> vacation, portraits; videos -> vacation.

    photos holds the three jpgs, videos the two videos, vacation the two vacation jpgs (also in photos).
    """
    index_sync(app, tree)
    for name in ("all-media", "photos", "videos", "vacation", "portraits"):
        await call(client, "resource-set-create", {"name": name})
    for parent, child in [("all-media", "photos"), ("all-media", "videos"), ("photos", "vacation"),
                          ("photos", "portraits"), ("videos", "vacation")]:
        await call(client, "resource-set-add-child", {"parent": parent, "child": child})
    vacation = sorted(str(p) for p in (tree / "Photos" / "vacation").glob("*.jpg"))
    members = {"photos": vacation + [str(tree / "Photos" / "photo.jpg")],
               "videos": [str(tree / "Videos" / "movie.mp4"), str(tree / "Videos" / "clip.mov")],
               "vacation": vacation}
    for name, paths in members.items():
        await call(client, "resource-set-modify", {"name": name, "operation": "add", "paths": paths})
    return tree


async def test_children_reference_example_lists_direct_children_with_counts(client, dag):
    res = await call(client, "resource-children", {"name": "all-media", "depth": 1})
    assert res["resource_set"] == "all-media"
    assert [(c["name"], c["entry_count"], c["child_count"]) for c in res["children"]] == [
        ("photos", 3, 2), ("videos", 2, 1)]
    assert all("entries" not in c or c["entries"] is None for c in res["children"])


async def test_children_default_depth_is_one(client, dag):
    res = await call(client, "resource-children", {"name": "all-media"})
    assert res["depth"] == 1 and [c["name"] for c in res["children"]] == ["photos", "videos"]


async def test_children_with_null_depth_lists_every_descendant_once(client, dag):
    res = await call(client, "resource-children", {"name": "all-media", "depth": None})
    assert [(c["name"], c["depth"]) for c in res["children"]] == [
        ("photos", 1), ("videos", 1), ("portraits", 2), ("vacation", 2)]
    vacation = res["children"][3]
    assert vacation["parents"] == ["photos", "videos"] and vacation["entry_count"] == 2


async def test_children_with_entries_lists_each_childs_own_entries(client, dag):
    res = await call(client, "resource-children", {"name": "photos", "include_entries": True})
    by_name = {c["name"]: c for c in res["children"]}
    assert [e["name"] for e in by_name["vacation"]["entries"]] == ["beach.jpg", "sunset.jpg"]
    assert by_name["vacation"]["entries_has_more"] is False and by_name["portraits"]["entries"] == []
    limited = await call(client, "resource-children", {"name": "photos", "include_entries": True, "limit": 1})
    vacation = next(c for c in limited["children"] if c["name"] == "vacation")
    assert [e["name"] for e in vacation["entries"]] == ["beach.jpg"] and vacation["entries_has_more"] is True


async def test_parent_reference_example_lists_both_parents(client, dag):
    res = await call(client, "resource-parent", {"name": "vacation"})
    assert res["resource_set"] == "vacation"
    assert [p["name"] for p in res["parents"]] == ["photos", "videos"]


async def test_parent_with_null_depth_walks_up_to_every_ancestor_once(client, dag):
    res = await call(client, "resource-parent", {"name": "vacation", "depth": None})
    assert [(p["name"], p["depth"]) for p in res["parents"]] == [("photos", 1), ("videos", 1), ("all-media", 2)]
    assert (await call(client, "resource-parent", {"name": "all-media"}))["parents"] == []


@pytest.mark.parametrize("tool, args, message", [
    ("resource-children", {"name": "ghost"}, "resource-set 'ghost' not found"),
    ("resource-parent", {"name": "ghost"}, "resource-set 'ghost' not found"),
    ("resource-children", {"name": "photos", "depth": 0}, "depth"),
    ("resource-parent", {"name": "photos", "depth": -2}, "depth"),
    ("resource-children", {"name": "photos", "include_entries": True, "limit": 0}, "limit"),
])
async def test_navigation_rejects_bad_input_naming_it(client, dag, tool, args, message):
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, args)
    assert message in str(err.value)

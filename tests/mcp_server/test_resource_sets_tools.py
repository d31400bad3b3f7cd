"""resource-set-* tools through an in-process MCP client (reference 000, "Resource-Set Management")."""

from __future__ import annotations

import pytest

from tests.conftest import ToolFailed, call, index_sync


@pytest.fixture
async def indexed(client, app, tree):
    index_sync(app, tree)
    return tree


async def test_create_reference_example_returns_the_new_set(client):
    res = await call(client, "resource-set-create", {"name": "photos", "description": "All photo files"})
    assert res == {**res, "name": "photos", "description": "All photo files", "entry_count": 0, "child_count": 0}
    assert res["created_at"].endswith("Z")
    with pytest.raises(ToolFailed, match="resource-set 'photos' already exists"):
        await call(client, "resource-set-create", {"name": "photos"})


@pytest.mark.parametrize("name", ["", "has space", "a/b", "../x"])
async def test_create_rejects_names_that_would_not_work_in_uris(client, name):
    with pytest.raises(ToolFailed, match="not a valid resource-set name; use 1-128 characters"):
        await call(client, "resource-set-create", {"name": name})


async def test_example_workflow_step_1_builds_a_two_level_dag(client):
    assert (await call(client, "resource-set-create", {"name": "photos"}))["name"] == "photos"
    assert (await call(client, "resource-set-create", {"name": "all-media"}))["name"] == "all-media"
    edge = await call(client, "resource-set-add-child", {"parent": "all-media", "child": "photos"})
    assert edge == {"parent": "all-media", "child": "photos", "created": True}
    listed = await call(client, "resource-set-list")
    assert [(s["name"], s["entry_count"], s["child_count"]) for s in listed["resource_sets"]] == [
        ("all-media", 0, 1), ("photos", 0, 0)]


async def test_list_reports_own_entry_counts_and_direct_children(client, indexed):
    for name in ("photos", "videos", "vacation"):
        await call(client, "resource-set-create", {"name": name})
    await call(client, "resource-set-add-child", {"parent": "photos", "child": "vacation"})
    await call(client, "resource-set-add-child", {"parent": "videos", "child": "vacation"})
    await call(client, "resource-set-modify", {"name": "photos", "operation": "add", "paths": [
        str(indexed / "Photos" / "photo.jpg"), str(indexed / "Photos" / "vacation" / "beach.jpg")]})
    res = await call(client, "resource-set-list", {})
    assert res["resource_sets"] == [{**s, "name": n, "entry_count": e, "child_count": c}
                                    for s, (n, e, c) in zip(res["resource_sets"], [
                                        ("photos", 2, 1), ("vacation", 0, 0), ("videos", 0, 1)])]
    assert len(res["resource_sets"]) == 3


async def test_modify_reference_example_adds_both_paths(client, indexed):
    await call(client, "resource-set-create", {"name": "favorites"})
    photo, video = indexed / "Photos" / "photo.jpg", indexed / "Videos" / "movie.mp4"
    res = await call(client, "resource-set-modify", {
        "name": "favorites", "operation": "add", "paths": [str(photo), str(video)]})
    assert res == {"name": "favorites", "operation": "add", "requested": 2, "added": 2, "removed": 0,
                   "unchanged": 0, "notFound": [], "entry_count": 2}
    got = await call(client, "resource-set-get", {"name": "favorites", "include_entries": True})
    assert [e["path"] for e in got["entries"]] == [str(photo), str(video)]


async def test_modify_accepts_a_single_string_for_paths(client, indexed):
    await call(client, "resource-set-create", {"name": "favorites"})
    res = await call(client, "resource-set-modify", {
        "name": "favorites", "operation": "add", "paths": str(indexed / "docs" / "readme.md")})
    assert res["added"] == 1 and res["entry_count"] == 1


async def test_modify_remove_and_repeat_add_report_what_changed(client, indexed):
    await call(client, "resource-set-create", {"name": "favorites"})
    photo, notes = str(indexed / "Photos" / "photo.jpg"), str(indexed / "Photos" / "notes.txt")
    await call(client, "resource-set-modify", {"name": "favorites", "operation": "add", "paths": [photo, notes]})
    again = await call(client, "resource-set-modify", {"name": "favorites", "operation": "add", "paths": [photo]})
    assert (again["added"], again["unchanged"]) == (0, 1)
    removed = await call(client, "resource-set-modify", {"name": "favorites", "operation": "remove",
                                                         "paths": [notes]})
    assert (removed["removed"], removed["entry_count"]) == (1, 1)


async def test_modify_lists_unindexed_paths_and_fails_when_none_is_indexed(client, indexed):
    await call(client, "resource-set-create", {"name": "favorites"})
    (indexed / "later.txt").write_text("new")
    res = await call(client, "resource-set-modify", {"name": "favorites", "operation": "add", "paths": [
        str(indexed / "Photos" / "photo.jpg"), str(indexed / "later.txt")]})
    assert res["added"] == 1 and res["notFound"] == [str(indexed / "later.txt")]
    with pytest.raises(ToolFailed, match="none of the paths is in the index"):
        await call(client, "resource-set-modify", {"name": "favorites", "operation": "add",
                                                   "paths": [str(indexed / "later.txt")]})


async def test_modify_adds_a_directory_entry_not_its_contents(client, indexed):
    await call(client, "resource-set-create", {"name": "dirs"})
    res = await call(client, "resource-set-modify", {"name": "dirs", "operation": "add",
                                                     "paths": str(indexed / "Photos")})
    assert res["entry_count"] == 1
    got = await call(client, "resource-set-get", {"name": "dirs", "include_entries": True})
    assert [(e["path"], e["kind"]) for e in got["entries"]] == [(str(indexed / "Photos"), "directory")]


@pytest.mark.parametrize("args, message", [
    ({"operation": "append"}, 'operation \'append\' is not supported; use "add" or "remove"'),
    ({"paths": "relative/photo.jpg"}, "paths 'relative/photo.jpg' is relative"),
    ({"paths": "/etc/passwd"}, "outside the allowed roots"),
    ({"paths": []}, "at least one indexed entry"),
    ({"name": "ghost"}, "resource-set 'ghost' not found"),
])
async def test_modify_rejects_bad_input_naming_it(client, indexed, args, message):
    await call(client, "resource-set-create", {"name": "favorites"})
    params = {"name": "favorites", "operation": "add", "paths": str(indexed / "Photos" / "photo.jpg"), **args}
    with pytest.raises(ToolFailed) as err:
        await call(client, "resource-set-modify", params)
    assert message in str(err.value)


async def test_get_returns_metadata_and_pages_entries(client, indexed):
    await call(client, "resource-set-create", {"name": "all-media", "description": "everything"})
    await call(client, "resource-set-create", {"name": "photos"})
    await call(client, "resource-set-add-child", {"parent": "all-media", "child": "photos"})
    jpgs = sorted(str(p) for p in indexed.rglob("*.jpg"))
    await call(client, "resource-set-modify", {"name": "photos", "operation": "add", "paths": jpgs})
    top = await call(client, "resource-set-get", {"name": "all-media"})
    assert top == {**top, "name": "all-media", "description": "everything", "entry_count": 0, "child_count": 1,
                   "total_entry_count": 3, "parents": [], "children": ["photos"]}
    assert top["created_at"].endswith("Z") and top.get("entries") is None
    page = await call(client, "resource-set-get", {"name": "photos", "include_entries": True, "limit": 2,
                                                   "offset": 1})
    assert page["parents"] == ["all-media"] and page["entry_count"] == 3
    assert [e["path"] for e in page["entries"]] == jpgs[1:3] and page["hasMore"] is False
    entry = page["entries"][0]
    assert entry == {**entry, "kind": "file", "extension": ".jpg", "media_type": "image"}
    first = await call(client, "resource-set-get", {"name": "photos", "include_entries": True, "limit": 1})
    assert first["hasMore"] is True and [e["path"] for e in first["entries"]] == jpgs[:1]


@pytest.mark.parametrize("args, message", [({"limit": 0}, "limit"), ({"offset": -1}, "offset"),
                                           ({"name": "ghost"}, "not found")])
async def test_get_rejects_bad_parameters(client, args, message):
    await call(client, "resource-set-create", {"name": "photos"})
    with pytest.raises(ToolFailed) as err:
        await call(client, "resource-set-get", {"name": "photos", **args})
    assert message in str(err.value)


async def test_delete_removes_the_set_its_edges_and_memberships_only(client, indexed):
    for name in ("all-media", "photos", "vacation"):
        await call(client, "resource-set-create", {"name": name})
    await call(client, "resource-set-add-child", {"parent": "all-media", "child": "photos"})
    await call(client, "resource-set-add-child", {"parent": "photos", "child": "vacation"})
    photo = str(indexed / "Photos" / "photo.jpg")
    await call(client, "resource-set-modify", {"name": "photos", "operation": "add", "paths": photo})
    await call(client, "resource-set-modify", {"name": "vacation", "operation": "add", "paths": photo})
    res = await call(client, "resource-set-delete", {"name": "photos"})
    assert res == {"name": "photos", "deleted": True, "memberships_removed": 1, "edges_removed": 2}
    assert [s["name"] for s in (await call(client, "resource-set-list"))["resource_sets"]] == ["all-media",
                                                                                              "vacation"]
    vacation = await call(client, "resource-set-get", {"name": "vacation"})
    assert vacation["parents"] == [] and vacation["entry_count"] == 1
    assert (await call(client, "inspect", {"path": photo}))["path"] == photo  # the entry stays indexed
    with pytest.raises(ToolFailed, match="resource-set 'photos' not found"):
        await call(client, "resource-set-get", {"name": "photos"})


async def test_add_child_reference_example_is_idempotent(client):
    await call(client, "resource-set-create", {"name": "all-media"})
    await call(client, "resource-set-create", {"name": "photos"})
    params = {"parent": "all-media", "child": "photos"}
    assert (await call(client, "resource-set-add-child", params))["created"] is True
    assert (await call(client, "resource-set-add-child", params))["created"] is False
    assert (await call(client, "resource-set-get", {"name": "all-media"}))["children"] == ["photos"]


async def test_add_child_refuses_cycles_naming_them(client):
    for name in ("a", "b", "c"):
        await call(client, "resource-set-create", {"name": name})
    await call(client, "resource-set-add-child", {"parent": "a", "child": "b"})
    await call(client, "resource-set-add-child", {"parent": "b", "child": "c"})
    with pytest.raises(ToolFailed, match="CONFLICT: adding c -> a would create a cycle: c -> a -> b -> c"):
        await call(client, "resource-set-add-child", {"parent": "c", "child": "a"})
    with pytest.raises(ToolFailed, match="would create a cycle: b -> b"):
        await call(client, "resource-set-add-child", {"parent": "b", "child": "b"})
    with pytest.raises(ToolFailed, match="resource-set 'nope' not found"):
        await call(client, "resource-set-add-child", {"parent": "a", "child": "nope"})


async def test_remove_child_removes_only_the_edge(client):
    await call(client, "resource-set-create", {"name": "all-media"})
    await call(client, "resource-set-create", {"name": "photos"})
    await call(client, "resource-set-add-child", {"parent": "all-media", "child": "photos"})
    res = await call(client, "resource-set-remove-child", {"parent": "all-media", "child": "photos"})
    assert res == {"parent": "all-media", "child": "photos", "removed": True}
    assert (await call(client, "resource-set-get", {"name": "all-media"}))["children"] == []
    assert len((await call(client, "resource-set-list"))["resource_sets"]) == 2
    with pytest.raises(ToolFailed, match="photos is not a child of all-media"):
        await call(client, "resource-set-remove-child", {"parent": "all-media", "child": "photos"})


async def test_tools_carry_annotations(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["resource-set-list"].annotations.read_only_hint is True
    assert tools["resource-set-get"].annotations.read_only_hint is True
    assert tools["resource-set-delete"].annotations.destructive_hint is True
    assert tools["resource-set-add-child"].annotations.idempotent_hint is True
    schema = tools["resource-set-modify"].input_schema["properties"]["paths"]
    assert {"type": "string"} in schema["anyOf"]

"""The resource-set DAG in the store: creation, membership by path, edges, cycles, counts and deletion."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from store import sets
from store.entries import T, make_row, upsert_entries
from store.errors import AlreadyExists, Conflict, InvalidInput, NotFound
from store.models import SetEdge, SetMember

PATHS = ["/r/a.jpg", "/r/b.jpg", "/r/c.mp4", "/r/d.txt"]


@pytest.fixture
def store(engine):
    rows = [make_row("/r", kind="directory", size=0, mtime=1.0, ctime=1.0, inode=None, scan_id=None, indexed_at=1.0)]
    rows += [make_row(p, kind="file", size=10 * (i + 1), mtime=2.0, ctime=2.0, inode=None, scan_id=None,
                      indexed_at=2.0) for i, p in enumerate(PATHS)]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
    return engine


def make(engine, *names):
    for n in names:
        sets.create_set(engine, name=n)


def edges(engine, *pairs):
    for parent, child in pairs:
        sets.add_child(engine, parent=parent, child=child)


def table_count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


# --- names and creation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["photos", "all-media", "2024_trip.v2", "A"])
def test_valid_names_are_accepted(store, name):
    assert sets.create_set(store, name=name)["name"] == name


@pytest.mark.parametrize("name", ["", " photos", "a/b", "-x", ".hidden", "a b", "x" * 129, "caf\u00e9"])
def test_invalid_names_are_rejected_saying_what_is_accepted(store, name):
    with pytest.raises(InvalidInput, match="letters A-Z a-z, digits") as err:
        sets.create_set(store, name=name)
    assert err.value.field == "name"


def test_create_reports_empty_counts_and_refuses_a_duplicate(store):
    created = sets.create_set(store, name="photos", description="All photo files")
    assert created == {**created, "name": "photos", "description": "All photo files", "entry_count": 0,
                       "child_count": 0, "parent_count": 0}
    assert created["created_at"].endswith("Z")
    with pytest.raises(AlreadyExists, match="already exists"):
        sets.create_set(store, name="photos")


def test_ensure_set_creates_once_and_checks_the_name(store):
    with store.begin() as conn:
        first = sets.ensure_set(conn, name="auto")
        assert sets.ensure_set(conn, name="auto")["id"] == first["id"]
        with pytest.raises(InvalidInput):
            sets.ensure_set(conn, name="bad name")


# --- membership -----------------------------------------------------------------------------------------------------


def test_add_counts_new_members_unchanged_ones_and_unknown_paths(store):
    make(store, "fav")
    res = sets.modify_members(store, name="fav", operation="add", paths=["/r/a.jpg", "/r/b.jpg", "/r/nope.jpg"])
    assert res == {"name": "fav", "operation": "add", "requested": 3, "added": 2, "removed": 0, "unchanged": 0,
                   "notFound": ["/r/nope.jpg"], "entry_count": 2}
    again = sets.modify_members(store, name="fav", operation="add", paths=["/r/a.jpg", "/r/a.jpg", "/r/c.mp4"])
    assert (again["requested"], again["added"], again["unchanged"], again["entry_count"]) == (2, 1, 1, 3)


def test_remove_takes_out_members_and_counts_non_members_as_unchanged(store):
    make(store, "fav")
    sets.modify_members(store, name="fav", operation="add", paths=["/r/a.jpg", "/r/b.jpg"])
    res = sets.modify_members(store, name="fav", operation="remove", paths=["/r/a.jpg", "/r/d.txt"])
    assert (res["removed"], res["added"], res["unchanged"], res["entry_count"]) == (1, 0, 1, 1)


def test_adding_a_directory_adds_only_its_own_entry(store):
    make(store, "dirs")
    res = sets.modify_members(store, name="dirs", operation="add", paths=["/r"])
    assert res["added"] == 1 and res["entry_count"] == 1


def test_modify_with_no_indexed_path_changes_nothing_and_says_so(store):
    make(store, "fav")
    with pytest.raises(NotFound, match="none of the paths is in the index") as err:
        sets.modify_members(store, name="fav", operation="add", paths=["/r/x", "/r/y"])
    assert err.value.field == "paths"


@pytest.mark.parametrize("operation", ["append", "ADD", "", None])
def test_unknown_operation_lists_both_accepted(store, operation):
    make(store, "fav")
    with pytest.raises(InvalidInput, match='use "add" or "remove"'):
        sets.modify_members(store, name="fav", operation=operation, paths=["/r/a.jpg"])


def test_modify_of_a_missing_set_is_not_found(store):
    with pytest.raises(NotFound, match="resource-set 'ghost' not found"):
        sets.modify_members(store, name="ghost", operation="add", paths=["/r/a.jpg"])


def test_add_members_from_a_query_inserts_in_one_statement(store):
    make(store, "jpgs")
    with store.begin() as conn:
        sid = sets.require_set(conn, name="jpgs")["id"]
        assert sets.add_members_from(conn, set_id=sid, entry_ids=select(T.c.id).where(T.c.extension == ".jpg")) == 2
        assert sets.add_members_from(conn, set_id=sid, entry_ids=select(T.c.id)) == 3  # only the new ones


# --- the DAG ----------------------------------------------------------------------------------------------------------


def test_a_set_may_have_several_parents(store):
    make(store, "photos", "videos", "vacation")
    edges(store, ("photos", "vacation"), ("videos", "vacation"))
    up = sets.parents_of(store, name="vacation")
    assert [p["name"] for p in up["parents"]] == ["photos", "videos"]
    assert sets.describe_set(store, name="vacation")["parents"] == ["photos", "videos"]


def test_adding_an_existing_edge_is_idempotent(store):
    make(store, "a", "b")
    assert sets.add_child(store, parent="a", child="b")["created"] is True
    assert sets.add_child(store, parent="a", child="b")["created"] is False
    assert table_count(store, SetEdge.__table__) == 1


def test_self_edge_is_refused_as_a_cycle(store):
    make(store, "a")
    with pytest.raises(Conflict, match="would create a cycle: a -> a"):
        sets.add_child(store, parent="a", child="a")


def test_two_set_cycle_is_refused_naming_it(store):
    make(store, "a", "b")
    edges(store, ("a", "b"))
    with pytest.raises(Conflict, match="would create a cycle: b -> a -> b"):
        sets.add_child(store, parent="b", child="a")
    assert table_count(store, SetEdge.__table__) == 1  # the refused edge was rolled back


def test_long_cycle_is_refused_with_its_whole_path(store):
    names = [f"s{i}" for i in range(8)]
    make(store, *names)
    edges(store, *zip(names, names[1:]))
    with pytest.raises(Conflict) as err:
        sets.add_child(store, parent="s7", child="s0")
    assert "s7 -> s0 -> s1 -> s2 -> s3 -> s4 -> s5 -> s6 -> s7" in err.value.message
    with store.connect() as conn:
        ids = {n: sets.require_set(conn, name=n)["id"] for n in names}
        assert sets.would_create_cycle(conn, parent_id=ids["s5"], child_id=ids["s2"])
        assert not sets.would_create_cycle(conn, parent_id=ids["s2"], child_id=ids["s5"])


def test_a_diamond_is_not_a_cycle(store):
    make(store, "top", "left", "right", "bottom")
    edges(store, ("top", "left"), ("top", "right"), ("left", "bottom"), ("right", "bottom"))
    assert sets.add_child(store, parent="top", child="bottom")["created"] is True


def test_remove_child_removes_the_edge_and_explains_a_swapped_pair(store):
    make(store, "a", "b", "c")
    edges(store, ("a", "b"))
    with pytest.raises(NotFound, match="a is not a child of b; b is a child of a — swap parent and child"):
        sets.remove_child(store, parent="b", child="a")
    with pytest.raises(NotFound, match="c is not a child of a"):
        sets.remove_child(store, parent="a", child="c")
    assert sets.remove_child(store, parent="a", child="b") == {"parent": "a", "child": "b", "removed": True}
    assert table_count(store, SetEdge.__table__) == 0


def test_edge_with_an_unknown_set_names_the_parameter(store):
    make(store, "a")
    with pytest.raises(NotFound) as err:
        sets.add_child(store, parent="a", child="zzz")
    assert err.value.field == "child"


# --- counts ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def media(store):
    """all-media -> photos, videos; photos -> vacation; videos -> vacation (vacation reachable two ways)."""
    make(store, "all-media", "photos", "videos", "vacation")
    edges(store, ("all-media", "photos"), ("all-media", "videos"), ("photos", "vacation"), ("videos", "vacation"))
    sets.modify_members(store, name="photos", operation="add", paths=["/r/a.jpg", "/r/b.jpg"])
    sets.modify_members(store, name="videos", operation="add", paths=["/r/c.mp4", "/r/a.jpg"])
    sets.modify_members(store, name="vacation", operation="add", paths=["/r/a.jpg"])
    return store


def test_entry_count_is_own_members_and_child_count_direct_children(media):
    listed = {s["name"]: s for s in sets.list_sets(media)}
    assert [s for s in listed] == ["all-media", "photos", "vacation", "videos"]
    assert {n: (s["entry_count"], s["child_count"], s["parent_count"]) for n, s in listed.items()} == {
        "all-media": (0, 2, 0), "photos": (2, 1, 1), "videos": (2, 1, 1), "vacation": (1, 0, 2)}


def test_total_entry_count_counts_an_entry_reachable_by_several_paths_once(media):
    top = sets.describe_set(media, name="all-media")
    assert top["entry_count"] == 0
    assert top["total_entry_count"] == 3  # a.jpg is in photos, videos and vacation: counted once
    assert sets.describe_set(media, name="photos")["total_entry_count"] == 2


def test_children_lists_each_descendant_once_with_its_shortest_depth(media):
    direct = sets.children_of(media, name="all-media")
    assert [(c["name"], c["depth"]) for c in direct["children"]] == [("photos", 1), ("videos", 1)]
    everything = sets.children_of(media, name="all-media", depth=None)
    assert [(c["name"], c["depth"]) for c in everything["children"]] == [("photos", 1), ("videos", 1),
                                                                          ("vacation", 2)]
    vacation = everything["children"][2]
    assert vacation["parents"] == ["photos", "videos"] and vacation["entry_count"] == 1


def test_children_with_entries_are_limited_per_child(media):
    res = sets.children_of(media, name="all-media", include_entries=True, limit=1)
    photos = res["children"][0]
    assert [e["path"] for e in photos["entries"]] == ["/r/a.jpg"]
    assert photos["entries_has_more"] is True


def test_parents_follow_all_ancestors_when_depth_is_none(media):
    assert [p["name"] for p in sets.parents_of(media, name="vacation")["parents"]] == ["photos", "videos"]
    up = sets.parents_of(media, name="vacation", depth=None)["parents"]
    assert [(p["name"], p["depth"]) for p in up] == [("photos", 1), ("videos", 1), ("all-media", 2)]
    assert up[2]["children"] == ["photos", "videos"]


@pytest.mark.parametrize("depth", [0, -1, 1.5, True])
def test_depth_must_be_positive_or_none(media, depth):
    with pytest.raises(InvalidInput, match="depth"):
        sets.children_of(media, name="all-media", depth=depth)


def test_describe_pages_entries_by_path(media):
    page = sets.describe_set(media, name="photos", include_entries=True, limit=1, offset=1)
    assert [e["path"] for e in page["entries"]] == ["/r/b.jpg"] and page["hasMore"] is False
    first = sets.describe_set(media, name="photos", include_entries=True, limit=1)
    assert first["hasMore"] is True and first["entries"][0]["name"] == "a.jpg"
    assert "entries" not in sets.describe_set(media, name="photos")


# --- deletion -------------------------------------------------------------------------------------------------------


def test_delete_removes_edges_and_memberships_but_not_entries_or_other_sets(media):
    entries_before = table_count(media, T)
    res = sets.delete_set(media, name="videos")
    assert res == {"name": "videos", "deleted": True, "memberships_removed": 2, "edges_removed": 2}
    assert [s["name"] for s in sets.list_sets(media)] == ["all-media", "photos", "vacation"]
    assert table_count(media, T) == entries_before
    assert sets.describe_set(media, name="vacation")["parents"] == ["photos"]
    assert sets.describe_set(media, name="all-media")["children"] == ["photos"]
    assert table_count(media, SetMember.__table__) == 3
    with pytest.raises(NotFound):
        sets.delete_set(media, name="videos")


def test_removing_an_entry_from_the_index_drops_its_memberships(media):
    from store.entries import delete_subtree

    with media.begin() as conn:
        delete_subtree(conn, path="/r/a.jpg")
    assert sets.describe_set(media, name="vacation")["entry_count"] == 0

"""Set queries as plain functions: sums over the DAG, ranges, exact and pattern matches, search, stats."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from flows.index.indexer import index_tree
from store import set_queries as q
from store.engine import make_engine
from store.entries import T
from store.errors import InvalidInput, NotFound
from store.filters import EntryFilter
from store.models import ResourceSet, SetEdge, SetMember
from tests.conftest import index_sync

GIB = 1 << 30
MIB = 1 << 20


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


# Sets of the reference's examples, with a diamond: all-media -> photos -> vacation and all-media -> videos -> vacation.
SETS = {
    "all-media": ["docs/report_2024.pdf"],
    "photos": ["Photos/photo.jpg", "Photos/notes.txt", "Photos/vacation", "Photos/vacation/beach.jpg",
               "Photos/big.jpg"],
    "vacation": ["Photos/vacation/beach.jpg", "Photos/vacation/sunset.jpg", "Photos/vacation/panorama.JPG"],
    "videos": ["Videos/movie.mp4", "Videos/clip.mov", "Videos/huge.mkv"],
    "odd": ["odd/100%_done.txt", "odd/100x_done.txt", "odd/a_b.txt", "odd/axb.txt"],
    "empty-set": [],
}
EDGES = [("all-media", "photos"), ("all-media", "videos"), ("photos", "vacation"), ("videos", "vacation")]
MTIMES = {
    "Photos/photo.jpg": "2024-06-01T12:00:00",
    "Photos/vacation/beach.jpg": "2023-05-01T00:00:00",
    "Photos/vacation/sunset.jpg": "2024-12-31T23:00:00",
    "Photos/big.jpg": "2024-03-01T00:00:00",
    "Photos/vacation/panorama.JPG": "2024-08-01T00:00:00",
    "Photos/notes.txt": "2025-01-01T00:00:00",
}


def add_corpus(tree: Path) -> None:
    """Files beyond the shared tree: big sparse files (no disk used) and names with LIKE wildcards."""
    for rel, size in {"Photos/big.jpg": 2 * MIB, "Photos/vacation/panorama.JPG": 3 * MIB,
                      "Videos/huge.mkv": 2 * GIB}.items():
        with open(tree / rel, "wb") as fh:
            fh.truncate(size)
    (tree / "odd").mkdir()
    for name in ("100%_done.txt", "100x_done.txt", "a_b.txt", "axb.txt"):
        (tree / "odd" / name).write_bytes(b"y" * 4)
    for rel, when in MTIMES.items():
        stamp = ts(when)
        os.utime(tree / rel, (stamp, stamp))


def build_sets(engine, tree: Path) -> dict[str, int]:
    """Rows straight into resource_sets / set_members / set_edges (independent of the set-management tools)."""
    ids: dict[str, int] = {}
    with engine.begin() as conn:
        for name in SETS:
            ids[name] = conn.execute(insert(ResourceSet.__table__).values(name=name)).inserted_primary_key[0]
        for name, rels in SETS.items():
            for rel in rels:
                entry_id = conn.execute(select(T.c.id).where(T.c.path == str(tree / rel))).scalar_one()
                conn.execute(insert(SetMember.__table__).values(set_id=ids[name], entry_id=entry_id,
                                                                added_at=ts("2024-02-01T00:00:00")))
        for parent, child in EDGES:
            conn.execute(insert(SetEdge.__table__).values(parent_id=ids[parent], child_id=ids[child]))
    return ids


@pytest.fixture
def populated(app, tree):
    add_corpus(tree)
    index_sync(app, tree)
    build_sets(app.engine, tree)
    return tree


@pytest.fixture
def conn(app, populated):
    with app.engine.connect() as c:
        yield c


def names(page: dict) -> list[str]:
    return [e["name"] for e in page["entries"]]


# --- resource-sum ---------------------------------------------------------------------------------------------------

ALL_MEDIA_FILES = {"report_2024.pdf": 1500, "photo.jpg": 5000, "notes.txt": 10, "beach.jpg": 3000, "big.jpg": 2 * MIB,
                   "sunset.jpg": 2000, "panorama.JPG": 3 * MIB, "movie.mp4": 40000, "clip.mov": 8000,
                   "huge.mkv": 2 * GIB}


def test_sum_over_a_diamond_counts_each_entry_once(conn):
    # beach.jpg is in photos and vacation; vacation is reached through photos and through videos
    res = q.resource_sum(conn, name="all-media", metric="size")
    assert res["value"] == sum(ALL_MEDIA_FILES.values())
    assert q.resource_sum(conn, name="all-media", metric="count")["value"] == len(ALL_MEDIA_FILES) + 1  # + a dir
    assert q.resource_sum(conn, name="all-media", metric="files")["value"] == len(ALL_MEDIA_FILES)
    assert q.resource_sum(conn, name="all-media", metric="directories")["value"] == 1
    assert res["sets_counted"] == 4


def test_sum_breaks_down_by_direct_child_each_with_its_descendants(conn):
    res = q.resource_sum(conn, name="all-media", metric="count")
    assert res["breakdown"] == [{"name": "photos", "value": 7}, {"name": "videos", "value": 6}]
    assert res["direct_value"] == 1


def test_sum_without_children_or_with_depth_limit(conn):
    alone = q.resource_sum(conn, name="all-media", metric="count", include_children=False)
    assert alone["value"] == 1 and alone["breakdown"] == []
    one_level = q.resource_sum(conn, name="all-media", metric="count", depth=1)
    # all-media + photos + videos, not vacation: photos' 5 + videos' 3 + report
    assert one_level["value"] == 9 and one_level["sets_counted"] == 3
    assert one_level["breakdown"] == [{"name": "photos", "value": 5}, {"name": "videos", "value": 3}]
    assert q.resource_sum(conn, name="all-media", metric="count", depth=0)["breakdown"] == []


def test_size_counts_a_member_directory_with_its_subtree_and_its_member_files_once(conn):
    photos = q.resource_sum(conn, name="photos", metric="size", include_children=False)
    vacation_dir = 3000 + 2000 + 3 * MIB  # beach.jpg is a member too, but lies inside the member directory
    assert photos["value"] == 5000 + 10 + vacation_dir + 2 * MIB


def test_size_with_many_directory_members_agrees_with_the_listed_form(conn, monkeypatch):
    listed = q.resource_sum(conn, name="all-media", metric="size")["value"]
    monkeypatch.setattr(q, "MAX_DIRECTORY_MEMBERS", 0)  # forces the correlated form
    assert q.resource_sum(conn, name="all-media", metric="size")["value"] == listed


def test_empty_set_sums_to_zero(conn):
    for metric in q.METRICS:
        assert q.resource_sum(conn, name="empty-set", metric=metric)["value"] == 0


def test_unknown_metric_lists_the_accepted_ones(conn):
    with pytest.raises(InvalidInput) as err:
        q.resource_sum(conn, name="all-media", metric="bytes")
    assert err.value.field == "metric" and "size, count, files, directories" in err.value.message


def test_unknown_set_is_not_found_naming_the_parameter(conn):
    with pytest.raises(NotFound) as err:
        q.resource_sum(conn, name="nope", metric="size")
    assert err.value.field == "name"


def test_negative_depth_is_rejected(conn):
    with pytest.raises(InvalidInput, match="depth"):
        q.resource_sum(conn, name="all-media", metric="size", depth=-1)


# --- ranges ---------------------------------------------------------------------------------------------------------


def test_time_range_takes_iso_dates_and_includes_the_whole_max_day(conn):
    res = q.time_range(conn, name="photos", field="mtime", min="2024-01-01", max="2024-12-31")
    assert names(res) == ["big.jpg", "photo.jpg", "panorama.JPG", "sunset.jpg"]
    assert res["min"] == "2024-01-01T00:00:00Z" and res["max"].startswith("2024-12-31T23:59:59")


def test_time_range_takes_unix_seconds_and_open_ends(conn):
    res = q.time_range(conn, name="photos", field="mtime", min=str(int(ts("2024-07-01T00:00:00"))),
                       include_children=False)
    assert names(res) == ["notes.txt", "vacation"]  # the directory's mtime is when its files were written
    older = q.time_range(conn, name="vacation", field="mtime", max=ts("2024-01-01T00:00:00"))
    assert names(older) == ["beach.jpg"]


def test_time_range_on_added_at_uses_the_membership_time(conn):
    hit = q.time_range(conn, name="videos", field="added_at", min="2024-01-31", max="2024-02-01")
    assert hit["total_count"] == 6
    assert q.time_range(conn, name="videos", field="added_at", min="2024-02-02")["total_count"] == 0


@pytest.mark.parametrize("args, field", [
    ({"field": "atime"}, "field"),
    ({"field": "mtime", "min": "yesterday"}, "min"),
    ({"field": "mtime", "max": "2024-13-01"}, "max"),
    ({"field": "mtime", "min": "2025-01-01", "max": "2024-01-01"}, "min"),
])
def test_time_range_rejects_bad_input_naming_the_parameter(conn, args, field):
    with pytest.raises(InvalidInput) as err:
        q.time_range(conn, name="photos", **args)
    assert err.value.field == field
    if field in ("min", "max") and "after" not in err.value.message:
        assert "ISO 8601" in err.value.message and "unix" in err.value.message


def test_metric_range_sorts_largest_first_and_counts_once(conn):
    res = q.metric_range(conn, name="all-media", metric="size", min=MIB)
    assert names(res) == ["huge.mkv", "vacation", "panorama.JPG", "big.jpg"]  # a directory's size is its subtree's
    small = q.metric_range(conn, name="vacation", metric="size", max=2500)
    assert names(small) == ["sunset.jpg"]
    assert q.metric_range(conn, name="videos", metric="size", min=GIB)["total_count"] == 1


def test_metric_range_checks_metric_and_bounds(conn):
    with pytest.raises(InvalidInput, match="size, depth, mtime, ctime"):
        q.metric_range(conn, name="videos", metric="bitrate", min=1)
    with pytest.raises(InvalidInput) as err:
        q.metric_range(conn, name="videos", metric="size", min=10, max=1)
    assert err.value.field == "min"


# --- exact match ----------------------------------------------------------------------------------------------------


def test_is_matches_exactly(conn, populated):
    assert q.field_is(conn, name="photos", field="kind", value="directory")["total_count"] == 1
    assert q.field_is(conn, name="photos", field="kind", value="file")["total_count"] == 6
    jpgs = q.field_is(conn, name="all-media", field="extension", value="jpg")  # stored lower case, given with no dot
    assert names(jpgs) == ["big.jpg", "photo.jpg", "beach.jpg", "panorama.JPG", "sunset.jpg"]
    parent = str(populated / "Photos" / "vacation")
    assert q.field_is(conn, name="all-media", field="parent", value=parent)["total_count"] == 3
    assert names(q.field_is(conn, name="videos", field="size", value="8000")) == ["clip.mov"]
    assert q.field_is(conn, name="vacation", field="name", value="BEACH.JPG")["total_count"] == 0


@pytest.mark.parametrize("field, value, bad, accepted", [
    ("colour", "red", "field", "kind, path, parent"),
    ("kind", "folder", "value", "file, directory, symlink, other"),
    ("size", "big", "value", "whole number"),
])
def test_is_rejects_unknown_fields_and_values(conn, field, value, bad, accepted):
    with pytest.raises(InvalidInput) as err:
        q.field_is(conn, name="photos", field=field, value=value)
    assert err.value.field == bad and accepted in err.value.message


# --- fuzzy match ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode, pattern, case_sensitive, expected", [
    ("contains", "CATI", False, ["vacation"]),
    ("contains", "VACATION", True, []),
    ("prefix", "photo", False, ["photo.jpg"]),
    ("suffix", ".jpg", False, ["beach.jpg", "big.jpg", "panorama.JPG", "photo.jpg", "sunset.jpg"]),
    ("suffix", ".jpg", True, ["beach.jpg", "big.jpg", "photo.jpg", "sunset.jpg"]),
    ("regex", r"^(beach|sunset)\.jpg$", False, ["beach.jpg", "sunset.jpg"]),
    ("regex", r"[A-Z]", True, ["panorama.JPG"]),
    ("glob", "*.jpg", False, ["beach.jpg", "big.jpg", "panorama.JPG", "photo.jpg", "sunset.jpg"]),
    ("glob", "*.jpg", True, ["beach.jpg", "big.jpg", "photo.jpg", "sunset.jpg"]),
    ("glob", "[bs]*", False, ["beach.jpg", "big.jpg", "sunset.jpg"]),
    ("glob", "b??.jpg", False, ["big.jpg"]),
])
def test_each_fuzzy_mode_on_names(conn, mode, pattern, case_sensitive, expected):
    res = q.fuzzy_match(conn, name="photos", field="name", pattern=pattern, mode=mode, case_sensitive=case_sensitive)
    assert sorted(names(res)) == sorted(expected)
    assert res["mode"] == mode and res["total_count"] == len(expected)


def test_prefix_on_paths_and_glob_star_crosses_directories(conn, populated):
    res = q.fuzzy_match(conn, name="all-media", field="path", pattern=str(populated / "Videos"), mode="prefix")
    assert sorted(names(res)) == ["clip.mov", "huge.mkv", "movie.mp4"]
    deep = q.fuzzy_match(conn, name="all-media", field="path", pattern="*/vacation/*", mode="glob")
    assert sorted(names(deep)) == ["beach.jpg", "panorama.JPG", "sunset.jpg"]


@pytest.mark.parametrize("mode, pattern, expected", [
    ("contains", "%", ["100%_done.txt"]),
    ("contains", "0%_", ["100%_done.txt"]),
    ("contains", "a_b", ["a_b.txt"]),
    ("prefix", "100%", ["100%_done.txt"]),
    ("suffix", "_b.txt", ["a_b.txt"]),
    ("contains", "_", ["100%_done.txt", "100x_done.txt", "a_b.txt"]),
])
def test_like_wildcards_in_patterns_match_literally(conn, mode, pattern, expected):
    res = q.fuzzy_match(conn, name="odd", field="name", pattern=pattern, mode=mode)
    assert sorted(names(res)) == expected


def test_reference_regex_example_matches_report_names(conn):
    res = q.fuzzy_match(conn, name="all-media", field="name", pattern=r"report_\d{4}\.pdf", mode="regex")
    assert names(res) == ["report_2024.pdf"]


@pytest.mark.parametrize("args, field, accepted", [
    ({"field": "path", "pattern": "(unclosed", "mode": "regex"}, "pattern", "not a valid regular expression"),
    ({"field": "path", "pattern": "x", "mode": "fuzzy"}, "mode", "contains, prefix, suffix, regex, glob"),
    ({"field": "size", "pattern": "x"}, "field", "path, name, parent"),
    ({"field": "path", "pattern": ""}, "pattern", "non-empty"),
])
def test_fuzzy_rejects_bad_input_naming_it(conn, args, field, accepted):
    with pytest.raises(InvalidInput) as err:
        q.fuzzy_match(conn, name="photos", **args)
    assert err.value.field == field and accepted in err.value.message


# --- search ---------------------------------------------------------------------------------------------------------


def test_search_combines_filters_sorts_and_pages(conn):
    flt = EntryFilter(kind="file", extension=".jpg", min_size=MIB)
    res = q.search(conn, name="all-media", include_children=True, filters=flt, sort_by="mtime", limit=50)
    assert names(res) == ["panorama.JPG", "big.jpg"]  # extensions are stored in lower case; newest first
    assert res["total_count"] == 2 and res["returned_count"] == 2 and res["has_more"] is False


def test_search_defaults_to_the_set_alone_by_size_descending(conn):
    res = q.search(conn, name="all-media")
    assert names(res) == ["report_2024.pdf"]
    photos = q.search(conn, name="photos", limit=2)
    assert names(photos) == ["vacation", "big.jpg"]  # a directory's size is the total of its subtree
    assert photos["total_count"] == 5 and photos["has_more"] is True
    rest = q.search(conn, name="photos", limit=2, offset=4)
    assert names(rest) == ["notes.txt"] and rest["has_more"] is False and rest["total_count"] == 5


def test_search_pages_cover_every_entry_once(conn):
    seen = []
    offset = 0
    while True:
        page = q.search(conn, name="all-media", include_children=True, sort_by="name", sort_desc=False, limit=3,
                        offset=offset)
        seen += names(page)
        offset += page["returned_count"]
        if not page["has_more"]:
            break
    assert len(seen) == len(set(seen)) == 11


def test_search_name_and_path_filters_take_wildcards_literally(conn, populated):
    res = q.search(conn, name="odd", filters=EntryFilter(name_contains="a_b"))
    assert names(res) == ["a_b.txt"]
    res = q.search(conn, name="all-media", include_children=True, filters=EntryFilter(path_contains="/Videos/"),
                   sort_by="name", sort_desc=False)
    assert names(res) == ["clip.mov", "huge.mkv", "movie.mp4"]


def test_search_rejects_unknown_sort(conn):
    with pytest.raises(InvalidInput) as err:
        q.search(conn, name="photos", sort_by="size; DROP TABLE entries")
    assert err.value.field == "sort_by" and "size, name, mtime" in err.value.message


def test_search_limit_and_offset_are_checked(conn):
    with pytest.raises(InvalidInput, match="limit"):
        q.search(conn, name="photos", limit=0)
    with pytest.raises(InvalidInput, match="offset"):
        q.search(conn, name="photos", offset=-3)


# --- stats ----------------------------------------------------------------------------------------------------------


def test_stats_count_each_entry_once_with_breakdowns(conn):
    stats = q.set_stats(conn, name="all-media")
    assert stats["count"] == 11 and stats["files"] == 10 and stats["directories"] == 1
    assert stats["total_size"] == sum(ALL_MEDIA_FILES.values())
    assert stats["largest_file_size"] == 2 * GIB
    assert stats["sets_counted"] == 4 and stats["child_count"] == 2 and stats["direct_count"] == 1
    assert stats["min_mtime"] == "2023-05-01T00:00:00Z"
    media = {g["media_type"]: (g["count"], g["size"]) for g in stats["by_media_type"]}
    assert media["image"] == (5, 5000 + 3000 + 2000 + 2 * MIB + 3 * MIB)
    assert media["video"] == (3, 48000 + 2 * GIB)
    assert stats["by_extension"][0] == {"extension": ".jpg", "count": 5, "size": media["image"][1]}


def test_stats_top_limits_the_groups(conn):
    assert len(q.set_stats(conn, name="all-media", top=2)["by_extension"]) == 2


def test_set_metric_is_the_sum_with_every_descendant(conn):
    res = q.set_metric(conn, name="all-media", metric="files")
    assert res["value"] == 10 and res["metric"] == "files"
    with pytest.raises(InvalidInput, match="size, count, files, directories"):
        q.set_metric(conn, name="all-media", metric="weight")


def test_page_totals_hold_past_the_end_and_with_filters(conn):
    flt = EntryFilter(kind="file")
    page = q.search(conn, name="all-media", include_children=True, filters=flt, limit=3, offset=3)
    assert page["total_count"] == 10 and page["returned_count"] == 3 and page["has_more"] is True
    past = q.search(conn, name="all-media", include_children=True, filters=flt, limit=3, offset=50)
    assert past["entries"] == [] and past["total_count"] == 10 and past["has_more"] is False
    unfiltered = q.search(conn, name="photos", limit=3, offset=50)
    assert unfiltered["total_count"] == 5 and unfiltered["has_more"] is False


# --- the same queries on PostgreSQL ---------------------------------------------------------------------------------


@pytest.mark.postgres
def test_queries_agree_on_postgresql(pg_url, tree):
    add_corpus(tree)
    eng = make_engine(pg_url)
    try:
        index_tree(eng, str(tree), scan_id=1)
        build_sets(eng, tree)
        with eng.connect() as pg:
            assert q.resource_sum(pg, name="all-media", metric="size")["value"] == sum(ALL_MEDIA_FILES.values())
            assert q.resource_sum(pg, name="all-media", metric="count")["value"] == 11
            for mode, pattern, sensitive, expected in [
                ("regex", r"^(beach|sunset)\.jpg$", False, ["beach.jpg", "sunset.jpg"]),
                ("regex", r"report_\d{4}\.pdf", True, []),
                ("glob", "*.jpg", False, ["beach.jpg", "big.jpg", "panorama.JPG", "photo.jpg", "sunset.jpg"]),
                ("glob", "[!bp]*", True, ["notes.txt", "sunset.jpg", "vacation"]),
                ("suffix", ".JPG", False, ["beach.jpg", "big.jpg", "panorama.JPG", "photo.jpg", "sunset.jpg"]),
            ]:
                res = q.fuzzy_match(pg, name="photos", field="name", pattern=pattern, mode=mode,
                                    case_sensitive=sensitive)
                assert sorted(names(res)) == expected, (mode, pattern)
            odd = q.fuzzy_match(pg, name="odd", field="name", pattern="0%_", mode="contains")
            assert names(odd) == ["100%_done.txt"]
            found = q.search(pg, name="all-media", include_children=True, filters=EntryFilter(kind="file"), limit=3,
                             offset=3, sort_by="name", sort_desc=False)
            assert found["total_count"] == 10 and names(found) == ["huge.mkv", "movie.mp4", "notes.txt"]
            stats = q.set_stats(pg, name="all-media")
            assert (stats["count"], stats["files"], stats["total_size"]) == (11, 10, sum(ALL_MEDIA_FILES.values()))
            added = q.time_range(pg, name="videos", field="added_at", min="2024-01-31", max="2024-02-01")
            assert added["total_count"] == 6
        with eng.connect() as pg:  # Python accepts a named group; PostgreSQL's regex engine does not
            with pytest.raises(InvalidInput, match="rejected by the database") as err:
                q.fuzzy_match(pg, name="photos", field="name", pattern="(?P<x>a)", mode="regex")
            assert err.value.field == "pattern"
    finally:
        from sqlmodel import SQLModel

        SQLModel.metadata.drop_all(eng)
        eng.dispose()

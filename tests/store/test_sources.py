"""Source rows in the store: names, types, duplicates, lookups that name what exists, scan totals, status."""

from __future__ import annotations

import pytest

from store import sources
from store.errors import AlreadyExists, InvalidInput, NotFound


def make(engine, name="photos-watch", type="live", path="/home/user/Photos", **kw):
    return sources.create_source(engine, name=name, type=type, path=path, **kw)


def test_create_returns_the_row_with_its_config_decoded(engine):
    row = make(engine, config={"watch_recursive": False, "debounce_ms": 250})
    assert (row["name"], row["type"], row["path"], row["enabled"], row["status"]) == (
        "photos-watch", "live", "/home/user/Photos", True, "stopped")
    assert row["config"] == {"watch_recursive": False, "debounce_ms": 250}
    public = sources.source_public(row)
    assert (public["watch_recursive"], public["debounce_ms"], public["total_scans"], public["last_scan_at"]) == (
        False, 250, 0, None)
    assert public["created_at"].endswith("Z")


@pytest.mark.parametrize("name", ["", "has space", "a/b", "-dash-first", "x" * 129])
def test_bad_names_are_rejected_with_the_rule(engine, name):
    with pytest.raises(InvalidInput, match="not a valid source name; use 1-128 characters"):
        make(engine, name=name)


@pytest.mark.parametrize("type", ["filesystem.watch", "LIVE", "", None])
def test_unknown_types_are_rejected_listing_the_accepted_ones(engine, type):
    with pytest.raises(InvalidInput, match="use one of: live, manual") as err:
        make(engine, type=type)
    assert err.value.field == "type"


def test_duplicate_names_are_refused(engine):
    make(engine)
    with pytest.raises(AlreadyExists, match="source 'photos-watch' already exists"):
        make(engine, type="manual")


def test_not_found_lists_the_existing_names(engine):
    with pytest.raises(NotFound, match="there are no sources yet"):
        sources.require_source(engine, name="ghost")
    make(engine)
    make(engine, name="archive-scan", type="manual", path="/mnt/archive", enabled=False)
    assert sources.get_source(engine, name="ghost") is None
    with pytest.raises(NotFound, match="source 'ghost' not found; existing sources: archive-scan, photos-watch"):
        sources.require_source(engine, name="ghost")
    for fn in (sources.delete_source, sources.record_scan, sources.update_source):
        kwargs = {"duration_ms": 1, "entries_indexed": 1} if fn is sources.record_scan else {}
        with pytest.raises(NotFound):
            fn(engine, name="ghost", **kwargs)


def test_list_filters_by_type_and_enabled(engine):
    make(engine)
    make(engine, name="archive-scan", type="manual", path="/mnt/archive", enabled=False)
    make(engine, name="docs-watch", path="/home/user/docs", enabled=False)
    assert [r["name"] for r in sources.list_sources(engine)] == ["archive-scan", "docs-watch", "photos-watch"]
    assert [r["name"] for r in sources.list_sources(engine, type="live", enabled=True)] == ["photos-watch"]
    assert [r["name"] for r in sources.list_sources(engine, enabled=False)] == ["archive-scan", "docs-watch"]


def test_record_scan_sums_scans_and_averages_their_durations(engine):
    make(engine)
    sources.record_scan(engine, name="photos-watch", duration_ms=1000, entries_indexed=10, at=1718445600.0)
    row = sources.record_scan(engine, name="photos-watch", duration_ms=4000, entries_indexed=12, at=1718445600.0)
    assert (row["total_scans"], row["total_scan_ms"], row["entries_indexed"]) == (2, 5000, 12)
    public = sources.source_public(row)
    assert public["average_scan_duration_ms"] == 2500
    assert public["last_scan_at"] == "2024-06-15T10:00:00Z"


def test_status_update_and_reset_after_a_restart(engine):
    make(engine)
    sources.set_status(engine, name="photos-watch", status="error", error="watch failed")
    assert sources.get_source(engine, name="photos-watch")["last_error"] == "watch failed"
    sources.set_status(engine, name="photos-watch", status="running")
    row = sources.get_source(engine, name="photos-watch")
    assert (row["status"], row["last_error"]) == ("running", None)
    assert sources.reset_running(engine) == 1
    assert sources.get_source(engine, name="photos-watch")["status"] == "stopped"
    with pytest.raises(InvalidInput, match="use one of: running, stopped, error"):
        sources.set_status(engine, name="photos-watch", status="paused")


def test_update_changes_only_known_fields(engine):
    make(engine)
    row = sources.update_source(engine, name="photos-watch", enabled=False, config={"debounce_ms": 100})
    assert row["enabled"] is False and row["config"] == {"debounce_ms": 100}
    with pytest.raises(InvalidInput, match="cannot update type of a source"):
        sources.update_source(engine, name="photos-watch", type="manual")


def test_delete_removes_the_row(engine):
    make(engine)
    assert sources.delete_source(engine, name="photos-watch")["name"] == "photos-watch"
    assert sources.list_sources(engine) == []

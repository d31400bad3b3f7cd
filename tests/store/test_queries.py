"""Saved queries as plain functions: validated bodies, unique names, paginated execution, persisted."""

from __future__ import annotations

import pytest

from flows.index.indexer import index_tree
from store import queries
from store.engine import make_engine
from store.errors import AlreadyExists, InvalidInput, NotFound


@pytest.fixture
def indexed(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    return tree


def test_create_stores_the_validated_body_and_get_returns_it(engine):
    saved = queries.create_query(engine, name="large-videos", description="Videos larger than 1GB",
                                 query={"kind": "file", "extension": ".mp4", "min_size": 1073741824})
    assert saved["name"] == "large-videos" and saved["description"] == "Videos larger than 1GB"
    assert saved["query"] == {"kind": "file", "extension": ".mp4", "min_size": 1073741824}
    assert saved["executionCount"] == 0 and saved["lastExecutedAt"] is None and saved["createdAt"].endswith("Z")
    assert queries.get_query(engine, name="large-videos") == saved


def test_unknown_key_is_rejected_naming_it_and_the_accepted_keys(engine):
    with pytest.raises(InvalidInput) as err:
        queries.create_query(engine, name="typo", query={"kind": "file", "minsize": 10})
    message = str(err.value)
    assert "query.minsize" in message and "min_size" in message and "Accepted keys" in message
    with pytest.raises(NotFound):
        queries.get_query(engine, name="typo")


@pytest.mark.parametrize("body, where", [
    ({"kind": "folder"}, "query.kind"),
    ({"min_size": -1}, "query.min_size"),
    ({"min_mtime": "last tuesday"}, "query.min_mtime"),
    ("not json", "JSON"),
    (None, "required"),
    ([1, 2], "object"),
])
def test_bad_bodies_are_rejected_with_what_was_wrong(engine, body, where):
    with pytest.raises(InvalidInput) as err:
        queries.create_query(engine, name="q", query=body)
    assert where in str(err.value)


def test_body_may_arrive_as_json_text(engine):
    saved = queries.create_query(engine, name="q", query='{"media_type": "video"}')
    assert saved["query"] == {"media_type": "video"}


def test_names_are_unique(engine):
    queries.create_query(engine, name="q", query={})
    with pytest.raises(AlreadyExists, match="already exists"):
        queries.create_query(engine, name="q", query={"kind": "file"})


def test_not_found_lists_the_existing_queries(engine):
    queries.create_query(engine, name="alpha", query={})
    queries.create_query(engine, name="beta", query={})
    with pytest.raises(NotFound) as err:
        queries.execute_query(engine, name="gamma")
    assert "'gamma'" in str(err.value) and "alpha, beta" in str(err.value)


def test_not_found_on_an_empty_store_says_how_to_make_one(engine):
    with pytest.raises(NotFound, match="query-create"):
        queries.delete_query(engine, name="x")


def test_execute_pages_through_matches_in_path_order_and_counts_runs(engine, indexed):
    queries.create_query(engine, name="jpgs", query={"kind": "file", "extension": "jpg"})
    first = queries.execute_query(engine, name="jpgs", limit=2)
    assert [e["name"] for e in first["entries"]] == ["photo.jpg", "beach.jpg"]
    assert first["total"] == 3 and first["hasMore"] is True
    rest = queries.execute_query(engine, name="jpgs", limit=2, offset=2)
    assert [e["name"] for e in rest["entries"]] == ["sunset.jpg"] and rest["hasMore"] is False
    stats = queries.get_query(engine, name="jpgs")
    assert stats["executionCount"] == 2 and stats["lastExecutedAt"] is not None


def test_execute_applies_size_and_path_filters(engine, indexed):
    queries.create_query(engine, name="big", query={"kind": "file", "min_size": 5000, "path_contains": "/videos/"})
    res = queries.execute_query(engine, name="big")
    assert sorted(e["name"] for e in res["entries"]) == ["clip.mov", "movie.mp4"]


def test_update_changes_description_or_body_and_validates_the_body(engine):
    queries.create_query(engine, name="q", description="old", query={"kind": "file"})
    updated = queries.update_query(engine, name="q", description="new")
    assert updated["description"] == "new" and updated["query"] == {"kind": "file"}
    updated = queries.update_query(engine, name="q", query={"kind": "directory"})
    assert updated["description"] == "new" and updated["query"] == {"kind": "directory"}
    with pytest.raises(InvalidInput, match="query.bogus"):
        queries.update_query(engine, name="q", query={"bogus": 1})
    with pytest.raises(InvalidInput, match="nothing to update"):
        queries.update_query(engine, name="q")
    assert queries.get_query(engine, name="q")["query"] == {"kind": "directory"}


def test_delete_removes_and_returns_the_query(engine):
    queries.create_query(engine, name="q", query={})
    assert queries.delete_query(engine, name="q")["name"] == "q"
    assert queries.list_queries(engine) == []


def test_saved_queries_persist_across_engines(engine, data_dir):
    queries.create_query(engine, name="kept", query={"media_type": "image"})
    engine.dispose()
    again = make_engine(f"sqlite:///{data_dir / 'assay.db'}")
    try:
        assert [q["name"] for q in queries.list_queries(again)] == ["kept"]
    finally:
        again.dispose()


@pytest.mark.parametrize("kwargs, field", [({"limit": 0}, "limit"), ({"offset": -1}, "offset")])
def test_execute_rejects_bad_paging(engine, kwargs, field):
    queries.create_query(engine, name="q", query={})
    with pytest.raises(InvalidInput) as err:
        queries.execute_query(engine, name="q", **kwargs)
    assert err.value.field == field


@pytest.mark.parametrize("name", ["  ", "", "two words", "../up", "-dash-first", "x" * 129, "naïve"])
def test_a_new_query_name_follows_the_rule_of_set_and_plan_names(engine, name):
    with pytest.raises(InvalidInput, match="not a valid query name; use 1-128 characters") as err:
        queries.create_query(engine, name=name, query={})
    assert err.value.field == "name"


def test_a_query_saved_under_an_older_name_rule_can_still_be_read_and_deleted(engine):
    from sqlalchemy import insert

    from store.models import SavedQuery

    with engine.begin() as conn:
        conn.execute(insert(SavedQuery.__table__).values(name="two words", query_json="{}", execution_count=0))
    assert queries.get_query(engine, name="two words")["name"] == "two words"
    assert queries.delete_query(engine, name="two words")["name"] == "two words"


@pytest.mark.parametrize("body, field, says", [
    ({"min_size": 10, "max_size": 5}, "query.min_size", "query.min_size (10) is greater than query.max_size (5)"),
    ({"min_mtime": "2024-02-01", "max_mtime": "2024-01-01"}, "query.min_mtime", "is after query.max_mtime"),
    ({"min_ctime": 200, "max_ctime": 100}, "query.min_ctime", "is after query.max_ctime"),
    ({"media_type": "vidoe"}, "query", "media_type"),
])
def test_contradictory_or_impossible_filters_are_refused_rather_than_saved_to_match_nothing(engine, body, field, says):
    with pytest.raises(InvalidInput) as err:
        queries.create_query(engine, name="q", query=body)
    assert says in err.value.message and err.value.field == field


def test_a_stored_body_that_no_longer_validates_is_reported_with_how_to_fix_it(engine):
    from sqlalchemy import insert

    from store.models import SavedQuery

    with engine.begin() as conn:
        conn.execute(insert(SavedQuery.__table__).values(name="old", query_json='{"retired_key": 1}'))
    with pytest.raises(InvalidInput) as err:
        queries.execute_query(engine, name="old")
    assert "no longer valid" in str(err.value) and "retired_key" in str(err.value) and "query-update" in str(err.value)

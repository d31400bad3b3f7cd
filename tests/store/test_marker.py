"""The store's change marker: equal while nothing is written, different after any commit."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from store.marker import change_marker
from tests.conftest import BACKENDS, backend_engine


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "marker") as engine:
        yield engine


def test_the_marker_stays_while_nothing_is_written_and_moves_after_a_commit(store):
    first = change_marker(store)
    assert change_marker(store) == first
    with store.begin() as conn:
        conn.execute(text("INSERT INTO preferences(key, value_json, updated_at) VALUES ('marker-test', '1', 0)"))
    second = change_marker(store)
    assert second != first
    assert change_marker(store) == second
    with store.begin() as conn:
        conn.execute(text("DELETE FROM preferences WHERE key = 'marker-test'"))
    assert change_marker(store) != second

"""query_sql (reference 004's read-only SQL) through an in-process MCP client, on both stores: reads of the store
and of the audit database, the 100-row cap, and attacks refused with the store left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from sqlalchemy import text

from mcp_server.app import AssayApp, build_server
from store import sets as store_sets
from store.engine import dispose_engines
from tests.conftest import ToolFailed, call, index_sync

COUNT_TO_250 = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 250) "
                "SELECT i FROM n ORDER BY i")


def make_app(settings, **update):
    return AssayApp.create(settings.model_copy(update={"tool_groups": ["sql"], **update}))


@pytest.fixture
def app(settings, tree):
    made = make_app(settings)
    index_sync(made, tree)
    store_sets.create_set(made.engine, name="photos")
    yield made
    made.close()
    made.engine.dispose()
    dispose_engines()


@pytest.fixture
async def client(app):
    async with Client(build_server(app)) as c:
        yield c


def store_state(app) -> tuple:
    """What an attack must leave as it was: the entries (count and paths) and the sets."""
    with app.engine.connect() as conn:
        return (conn.execute(text("SELECT count(*) FROM entries")).scalar_one(),
                conn.execute(text("SELECT count(*) FROM resource_sets")).scalar_one(),
                tuple(conn.execute(text("SELECT path FROM entries ORDER BY path")).scalars()))


async def failure(client, args: dict) -> str:
    with pytest.raises(ToolFailed) as caught:
        await call(client, "query_sql", args)
    return str(caught.value)


async def test_query_sql_is_listed_as_read_only(client):
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert listed["query_sql"].annotations.read_only_hint
    assert listed["query_sql"].input_schema["properties"]["db"]["enum"] == ["store", "audit"]


async def test_a_select_on_the_store(client, tree):
    res = await call(client, "query_sql", {"db": "store", "query": "SELECT name, size FROM entries "
                                                                   "WHERE name LIKE '%.jpg' ORDER BY name"})
    assert res["db"] == "store" and res["columns"] == ["name", "size"]
    assert res["rows"] == [["beach.jpg", 3000], ["photo.jpg", 5000], ["sunset.jpg", 2000]]
    assert res["row_count"] == 3 and res["truncated"] is False and res["note"] is None
    assert res["guarantee"] and res["elapsed_ms"] >= 0
    sets = await call(client, "query_sql", {"db": "store", "query": "SELECT name FROM resource_sets"})
    assert sets["rows"] == [["photos"]]


async def test_rows_are_capped_at_100_and_limit_offset_pages(client):
    res = await call(client, "query_sql", {"db": "store", "query": COUNT_TO_250})
    assert res["row_count"] == 100 and len(res["rows"]) == 100 and res["truncated"] is True
    assert res["rows"][0] == [1] and res["rows"][-1] == [100] and "LIMIT/OFFSET" in res["note"]
    last = await call(client, "query_sql", {"db": "store", "query": COUNT_TO_250 + " LIMIT 100 OFFSET 200"})
    assert last["row_count"] == 50 and last["truncated"] is False and last["rows"][0] == [201]


ATTACKS = [
    "COMMIT; DELETE FROM entries",
    "/* c */ DELETE FROM entries",
    "-- c\nDELETE FROM entries",
    "SELECT 1; DELETE FROM entries",
    "DELETE FROM resource_sets",
    "WITH d AS (DELETE FROM entries RETURNING *) SELECT * FROM d",
    "PRAGMA query_only=0",
]


@pytest.mark.parametrize("query", ATTACKS)
async def test_attacks_are_refused_and_the_store_is_unchanged(client, app, query):
    before = store_state(app)
    refused = await failure(client, {"db": "store", "query": query})
    assert refused.startswith("SQL_NOT_ALLOWED")
    assert store_state(app) == before and before[0] > 0 and before[1] == 1


async def test_attach_is_refused_and_creates_no_file(client, app, tmp_path: Path):
    before = store_state(app)
    target = tmp_path / "x"
    refused = await failure(client, {"db": "store", "query": f"ATTACH DATABASE '{target}' AS x"})
    assert refused.startswith("SQL_NOT_ALLOWED")
    assert not target.exists() and store_state(app) == before


async def test_errors_of_the_database_and_unknown_databases(client):
    missing = await failure(client, {"db": "store", "query": "SELECT * FROM no_such_table"})
    assert missing.startswith("SQL_ERROR") and "no_such_table" in missing
    empty = await failure(client, {"db": "store", "query": "  "})
    assert empty.startswith("SQL_NOT_ALLOWED")
    other = await failure(client, {"db": "prefect", "query": "SELECT 1"})
    assert other.startswith("INVALID_PARAMS") and "'store'" in other and "'audit'" in other


async def test_a_query_past_the_time_limit_is_stopped(settings, tree, store_backend):
    app = make_app(settings, guard={"sql_timeout": 0.5})
    endless = ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
               if store_backend == "sqlite" else "SELECT pg_sleep(30)")
    try:
        async with Client(build_server(app)) as client:
            refused = await failure(client, {"db": "store", "query": endless})
        assert refused.startswith("QUERY_TIMEOUT") and "0.5" in refused
    finally:
        app.close()
        app.engine.dispose()
        dispose_engines()


async def test_the_audit_database_shows_the_calls_made_before(client):
    await call(client, "query_sql", {"db": "store", "query": "SELECT 1"})
    await failure(client, {"db": "store", "query": "SELECT 1; DELETE FROM entries"})
    # no flush here: query_sql on the audit database writes the queued calls first
    res = await call(client, "query_sql", {"db": "audit", "query": "SELECT kind, name, outcome, error_code, "
                                                                   "arguments FROM audit_events ORDER BY id"})
    assert res["columns"] == ["kind", "name", "outcome", "error_code", "arguments"]
    calls = [row[:4] for row in res["rows"]]
    assert calls == [["tool", "query_sql", "ok", None], ["tool", "query_sql", "error", "SQL_NOT_ALLOWED"]]
    assert "DELETE FROM entries" in res["rows"][1][4]


async def test_attacks_on_the_audit_database_are_refused(client, app):
    await call(client, "query_sql", {"db": "store", "query": "SELECT 1"})
    app.guard.audit.flush()
    refused = await failure(client, {"db": "audit", "query": "COMMIT; DELETE FROM audit_events"})
    assert refused.startswith("SQL_NOT_ALLOWED")
    kept = await call(client, "query_sql", {"db": "audit", "query": "SELECT count(*) FROM audit_events "
                                                                    "WHERE name = 'query_sql'"})
    assert kept["rows"] == [[2]]  # the first call and the refused one; this one is recorded once it is done


async def test_the_audit_database_is_refused_when_auditing_is_off(settings):
    app = make_app(settings, guard={"audit": False})
    try:
        async with Client(build_server(app)) as client:
            refused = await failure(client, {"db": "audit", "query": "SELECT 1"})
            assert refused.startswith("INVALID_PARAMS") and "no audit log" in refused
            assert (await call(client, "query_sql", {"db": "store", "query": "SELECT 1"}))["rows"] == [[1]]
    finally:
        app.close()
        app.engine.dispose()
        dispose_engines()

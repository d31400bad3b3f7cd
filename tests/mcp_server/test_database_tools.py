"""db-diagnose through an in-process MCP client."""

from __future__ import annotations

from sqlalchemy import delete

from store.entries import T
from tests.conftest import call, index_sync

REFERENCE_FIELDS = ("database_path", "database_size", "integrity_check", "entry_count", "resource_set_count",
                    "orphaned_entries", "stale_entries")


async def test_db_diagnose_reports_the_reference_fields(client, app, tree, data_dir):
    index_sync(app, tree)
    res = await call(client, "db-diagnose")
    assert all(k in res for k in REFERENCE_FIELDS)
    if app.engine.dialect.name == "sqlite":
        assert res["database_path"] == str(data_dir / "assay.db")
    else:
        assert res["database_path"].startswith("postgresql+psycopg://postgres:***@127.0.0.1:")
    assert res["database_size"] > 0
    on_sqlite = app.engine.dialect.name == "sqlite"
    assert (res["integrity_check"] == "ok") if on_sqlite else ("SQLite-only" in res["integrity_check"])
    assert res["entry_count"] == 19 and res["resource_set_count"] == 0
    assert res["orphaned_entries"] == 0 and res["stale_entries"] == 0
    assert res["healthy"] is True and res["backend"] == app.engine.dialect.name


async def test_db_diagnose_flags_a_hole_in_the_tree(client, app, tree):
    index_sync(app, tree)
    with app.engine.begin() as conn:
        conn.execute(delete(T).where(T.c.path == str(tree / "Photos" / "vacation")))
    res = await call(client, "db-diagnose")
    assert res["orphaned_entries"] == 2 and res["healthy"] is False and res["warnings"]


async def test_db_diagnose_shows_a_folder_size_that_is_not_its_childrens(client, app, tree):
    index_sync(app, tree)
    res = await call(client, "db-diagnose")
    assert res["counter_mismatches"] == {} or not any(res["counter_mismatches"].values())
    assert res["unfinished_documents"] == 0
    with app.engine.begin() as conn:  # a counter a crash could have left behind its rows
        conn.execute(T.update().where(T.c.path == str(tree / "Photos")).values(size=1))
    res = await call(client, "db-diagnose")
    assert any(res["counter_mismatches"].values()) and res["healthy"] is False, res


async def test_db_diagnose_is_read_only_and_takes_no_parameters(client):
    tool = next(t for t in (await client.list_tools()).tools if t.name == "db-diagnose")
    assert tool.annotations.read_only_hint is True and not tool.input_schema.get("properties")

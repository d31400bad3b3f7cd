"""session-info and session-set-preferences through an in-process MCP client (reference 000 examples)."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_server.app import AssayApp, build_server
from mcp_server.config import TOOL_GROUPS, Settings
from store.engine import dispose_engines
from tests.conftest import ToolFailed, call, index_sync

EXAMPLE = {"preferences": {"default_sort": "size", "show_hidden": False, "thumbnail_size": "medium"}}


async def test_session_info_reports_the_reference_fields_and_ours(client, app, tree, data_dir):
    index_sync(app, tree)
    res = await call(client, "session-info")
    if app.engine.dialect.name == "sqlite":
        assert res["database_path"] == str(data_dir / "assay.db")
        assert res["store_url"] == f"sqlite:///{data_dir / 'assay.db'}"
    else:  # the password is never shown
        assert res["store_url"].startswith("postgresql+psycopg://postgres:***@") and "secret" not in str(res)
    assert res["database_size"] > 0
    assert res["entry_count"] == 19 and res["resource_set_count"] == 0
    assert res["source_count"] == 0 and res["plan_count"] == 0
    assert res["roots"] == [str(tree)] and res["backend"] == app.engine.dialect.name
    assert res["tool_groups"] == list(TOOL_GROUPS) and res["available_tool_groups"] == list(TOOL_GROUPS)
    assert res["version"] and res["server"] == "assay"
    assert res["preferences"] == {"default_sort": "name", "show_hidden": True, "thumbnail_size": "medium",
                                  "thumbnail.max_width": 320, "thumbnail.max_height": 320, "timeline.frame_count": 5}


async def test_session_info_lists_only_the_enabled_tool_groups(tree, data_dir):
    settings = Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, tool_groups=["session", "queries"])
    app = AssayApp.create(settings)
    try:
        async with Client(build_server(app)) as client:
            res = await call(client, "session-info")
            names = {t.name for t in (await client.list_tools()).tools}
        assert res["tool_groups"] == ["session", "queries"]
        assert "session-info" in names and "query-create" in names and "move-files" not in names
    finally:
        app.close()
        dispose_engines()


async def test_set_preferences_reference_example_echoes_and_persists_across_a_restart(client, app, settings):
    res = await call(client, "session-set-preferences", EXAMPLE)
    assert {k: res["preferences"][k] for k in EXAMPLE["preferences"]} == EXAMPLE["preferences"]
    assert sorted(res["updated"]) == ["default_sort", "show_hidden", "thumbnail_size"]
    assert app.preferences["default_sort"] == "size"
    restarted = AssayApp.create(settings)
    try:
        async with Client(build_server(restarted)) as again:
            info = await call(again, "session-info")
        assert {k: info["preferences"][k] for k in EXAMPLE["preferences"]} == EXAMPLE["preferences"]
    finally:
        restarted.close()


async def test_null_resets_a_preference_to_its_default(client):
    await call(client, "session-set-preferences", EXAMPLE)
    res = await call(client, "session-set-preferences", {"preferences": {"default_sort": None}})
    assert res["preferences"]["default_sort"] == "name" and res["updated"] == ["default_sort"]


@pytest.mark.parametrize("prefs, fragments", [
    ({"default_sort": "colour"}, ["preferences.default_sort", "name, size, mtime"]),
    ({"show_hiden": True}, ["unknown preference 'show_hiden'", "show_hidden"]),
    ({"thumbnail_size": 128}, ["small, medium, large"]),
    ({"show_hidden": "maybe"}, ["true or false"]),
])
async def test_bad_preferences_are_rejected_and_nothing_is_stored(client, prefs, fragments):
    with pytest.raises(ToolFailed) as err:
        await call(client, "session-set-preferences", {"preferences": {"default_sort": "mtime", **prefs}})
    assert all(f in str(err.value) for f in fragments), str(err.value)
    info = await call(client, "session-info")
    assert info["preferences"]["default_sort"] == "name"

"""The application object and the server around it: services declared on the app, the app reached through the
server's lifespan, tools made whole before the server (no look into the SDK's private attributes), and the plain
store functions the resources call instead of SQL of their own."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import Context

from mcp_server.app import AssayApp, AssayServer, build_server
from mcp_server.tools.common import READ_ONLY, ToolSet, tool
from store import set_queries
from store import sets as store_sets
from store.completions import names_starting
from store.entries import list_within
from tests.conftest import call, index_sync

MCP_SERVER = Path(__file__).resolve().parents[2] / "mcp_server"


async def test_a_tool_reaches_the_app_through_the_servers_lifespan(app):
    tools = ToolSet()

    @tool(tools, "data-dir", READ_ONLY)
    def data_dir(ctx: Context) -> dict:
        """The data dir of the app the lifespan yields."""
        served = ctx.request_context.lifespan_context
        return {"same": served is app, "data_dir": str(served.settings.data_dir)}

    async with Client(AssayServer(app, tools)) as client:
        assert await call(client, "data-dir") == {"same": True, "data_dir": str(app.settings.data_dir)}


async def test_serving_leaves_no_attribute_the_app_does_not_declare(client, app, tree):
    index_sync(app, tree)
    await call(client, "listResources")  # the citation service, made on first use
    await call(client, "navigate", {"path": str(tree)})
    declared = {f.name for f in dataclasses.fields(AssayApp)}
    assert set(vars(app)) <= declared, set(vars(app)) - declared


def test_the_citation_service_is_made_once_on_first_use(app):
    assert app._citations is None
    service = app.citations()
    assert app.citations() is service and service.engine is app.engine and service.roots is app.roots


def test_a_tool_name_registered_twice_is_refused():
    tools = ToolSet()

    def make() -> None:
        @tool(tools, "twice", READ_ONLY)
        def twice() -> dict:
            """Registered twice."""
            return {}

    make()
    with pytest.raises(ValueError, match="tool 'twice' is registered twice"):
        make()


def test_the_server_offers_exactly_the_tools_of_its_tool_set(app):
    server = build_server(app)
    assert {"navigate", "resolve", "plan-create"} <= server.tool_names
    assert "navigat" not in server.tool_names


@pytest.mark.parametrize("private", [r"\._tool_manager\b", r"\._resource_manager\b", r"\._prompt_manager\b",
                                     r"\._lowlevel_server\b"])
def test_the_server_code_uses_no_private_attribute_of_the_sdk(private):
    offending = [f"{path.relative_to(MCP_SERVER.parent)}:{n}" for path in sorted(MCP_SERVER.rglob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1) if re.search(private, line)]
    assert offending == []


@pytest.mark.parametrize("folder", ["tools", "resources"])
def test_tools_and_resources_hold_no_sql(folder):
    sql = re.compile(r"\bselect\(|\b(conn|connection|session)\.execute\(|\.connect\(\)|\.begin\(\)|__table__|"
                     r"from sqlalchemy import|from store\.models")
    offending = [f"{path.name}:{n}" for path in sorted((MCP_SERVER / folder).glob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1) if sql.search(line)]
    assert offending == []


# --- the store functions the resources call ----------------------------------------------------------------------


def test_list_within_pages_the_entries_of_the_roots_by_path(app, tree):
    index_sync(app, tree)
    rows, total = list_within(app.engine, roots=[str(tree / "Photos")], limit=2, offset=1)
    assert total == 6  # Photos, its three files, vacation and its two
    assert [r["path"] for r in rows] == [str(tree / "Photos" / "notes.txt"), str(tree / "Photos" / "photo.jpg")]
    assert list_within(app.engine, roots=[str(tree / "nowhere")]) == ([], 0)


def test_names_starting_completes_case_sensitively_and_counts_all(app):
    for name in ("Photos", "photos", "photos-2024", "videos"):
        store_sets.create_set(app.engine, name=name)
    values, total = names_starting(app.engine, named="resource-set", prefix="Pho", limit=10)
    assert (values, total) == (["Photos"], 1)
    assert names_starting(app.engine, named="resource-set", prefix="photos", limit=1) == (["photos"], 2)
    assert names_starting(app.engine, named="resource-set", prefix="", limit=10) == \
        (["Photos", "photos", "photos-2024", "videos"], 4)


def test_set_queries_run_gives_a_query_a_connection_of_its_own(app):
    store_sets.create_set(app.engine, name="empty")
    result = set_queries.run(app.engine, set_queries.set_metric, name="empty", metric="count")
    assert result["resource_set"] == "empty" and result["value"] == 0

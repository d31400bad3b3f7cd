"""Under stdio (and an in-process client) the caller is the local operator, with guard.local_permissions (default:
all); the operator's groups are listed only when asked for or on a guarded server."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from mcp_server.guard import placement
from mcp_server.tools import OPERATOR_GROUPS, group_modules

pytestmark = pytest.mark.anyio


@pytest.fixture
def local_app(tree, data_dir, request):
    settings = Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, **getattr(request, "param", {}))
    app = AssayApp.create(settings)
    yield app
    app.close()
    app.engine.dispose()


async def test_the_local_operator_sees_every_tool_but_the_operators_groups_by_default(local_app):
    async with Client(build_server(local_app)) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        listed = await c.list_tools()
    assert "delete-files" in names and "index" in names
    assert not names & {"query_sql", "create_user", "get_server_info"}
    assert listed.cache_scope == "public"  # the same for every caller of this server


@pytest.mark.parametrize("local_app", [{"tool_groups": list(group_modules())}], indirect=True)
async def test_named_groups_bring_the_operator_tools(local_app):
    async with Client(build_server(local_app)) as c:
        names = {t.name for t in (await c.list_tools()).tools}
    assert {"query_sql", "create_user", "get_server_info"} <= names
    assert set(OPERATOR_GROUPS) <= set(group_modules())


@pytest.mark.parametrize("local_app", [{"guard": {"local_permissions": ["mcp_access", "read"]}}], indirect=True)
async def test_local_permissions_narrow_what_the_local_operator_sees_and_calls(local_app, tree):
    async with Client(build_server(local_app)) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await c.call_tool("delete-files", {"paths": [str(tree / "docs")]})
        fine = await c.call_tool("session-info", {})
    assert names and all(placement.TOOL_PERMISSIONS[n] == "read" for n in names)
    assert refused.value.code == -32002 and (tree / "docs").exists()
    assert not fine.is_error


def test_an_unknown_local_permission_is_a_config_error(tree, data_dir):
    from flows.env import ConfigError

    with pytest.raises(ConfigError, match="unknown permission"):
        Settings.load({"data_dir": str(data_dir), "roots": [str(tree)],
                       "guard": {"local_permissions": ["read", "sudo"]}})

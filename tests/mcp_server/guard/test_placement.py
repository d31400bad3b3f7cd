"""Every tool has its place: a tool added without one fails here (the guard would hide it from everyone), and a
place left for a tool that is gone fails too."""

from __future__ import annotations

import importlib

import pytest

from mcp_server.guard import placement
from mcp_server.tools import group_modules
from mcp_server.tools.common import ToolSet
from store.access import PERMISSIONS, ROLES


def every_tool(app) -> ToolSet:
    tools = ToolSet()
    for module in group_modules().values():
        importlib.import_module(f"mcp_server.tools.{module}").register(tools, app)
    return tools


@pytest.mark.parametrize("store_backend", ["sqlite"], indirect=True)
def test_every_registered_tool_is_placed_and_every_place_is_a_tool(app):
    registered = set(every_tool(app).names())
    placed = set(placement.TOOL_PERMISSIONS)
    assert registered - placed == set(), "tools without a place in mcp_server/guard/placement.py"
    assert placed - registered == set(), "places for tools that do not exist"


def test_places_are_permissions_and_roles_nest():
    assert set(placement.TOOL_PERMISSIONS.values()) <= set(PERMISSIONS)
    assert ROLES["viewer"] < ROLES["editor"] < ROLES["admin"]


@pytest.mark.parametrize("tool, arguments, needed", [
    ("resolve", {"address": "doc://x#pages=1"}, {"read"}),
    ("resolve", {"address": "doc://x#pages=1", "virtual": False}, {"read", "run"}),
    ("delete-files", {}, {"file_operations"}),
    ("query_sql", {}, {"admin"}),
    ("nope", {}, None),
])
def test_a_call_needs_the_permission_of_its_group_and_what_its_arguments_add(tool, arguments, needed):
    got = placement.tool_permissions(tool, arguments)
    assert (set(got) if got is not None else None) == needed


@pytest.mark.parametrize("tool, category", [
    ("navigate", "read"), ("get_config", "read"), ("index", "write"), ("delete-files", "write"),
    ("create_user", "write"), ("query_sql", "sql"),
])
def test_each_tool_counts_in_one_rate_limit_category(tool, category):
    assert placement.category(tool) == category


def test_resources_need_read_and_the_operator_resources_admin():
    assert placement.resource_permission("synthesis://nodes/1") == "read"
    assert placement.resource_permission("jobs://plan:x/output") == "admin"
    assert placement.resource_permission("logs://recent") == "admin"
    assert placement.resource_permission("file:///etc/passwd") is None

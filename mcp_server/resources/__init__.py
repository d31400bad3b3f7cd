"""synthesis:// resources of reference 000, one module per area: those the installed capabilities declare
(``Capability.resources``, ``flows.core.capability``), then the server's own over the store. Each module has
``register(mcp, app)``, which adds its resources (and templates) to the server."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer

from flows.core.capability import installed

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

# the server's own resource modules, over the store itself: resource sets, their metrics, jobs; and last the
# completions of every template's arguments (one handler for them all)
SERVER_RESOURCES: tuple[str, ...] = ("sets", "set_metrics", "jobs", "operator", "completions")


def resource_modules() -> tuple[str, ...]:
    """The modules under mcp_server.resources the server registers, in order: the installed capabilities', in the
    order they are installed, then the server's own."""
    return (*(r for capability in installed() for r in capability.resources), *SERVER_RESOURCES)


def register(mcp: MCPServer, app: AssayApp) -> None:
    for name in resource_modules():
        importlib.import_module(f"mcp_server.resources.{name}").register(mcp, app)

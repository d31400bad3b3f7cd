"""synthesis:// resources of reference 000, one module per area."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer

from mcp_server.resources import completions, jobs, maps, metadata, nodes, plans, set_metrics, sets

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


def register(mcp: MCPServer, app: AssayApp) -> None:
    nodes.register(mcp, app)
    metadata.register(mcp, app)
    sets.register(mcp, app)
    set_metrics.register(mcp, app)
    jobs.register(mcp, app)
    plans.register(mcp, app)
    maps.register(mcp, app)
    completions.register(mcp, app)

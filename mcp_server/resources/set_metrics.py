"""synthesis://resource-sets/{name}/stats and /metrics/{metric} (to be written)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def register(mcp: MCPServer, app) -> None:
    pass

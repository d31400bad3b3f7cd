"""synthesis://plans resources: all plans, one plan, a plan's executions, and every execution."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer

from mcp_server.resources.common import json_resource
from store import plans as store_plans

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

JSON = "application/json"
LIMIT = 100


_json = json_resource


def register(mcp: MCPServer, app: AssayApp) -> None:
    @mcp.resource("synthesis://plans", name="plans", mime_type=JSON)
    @_json
    def plans() -> dict[str, Any]:
        """All plans, by name, with mode, status and definition."""
        rows = store_plans.list_plans(app.engine)
        return {"plans": rows, "total": len(rows)}

    @mcp.resource("synthesis://plan-executions", name="plan-executions", mime_type=JSON)
    @_json
    def executions() -> dict[str, Any]:
        """All plan executions, newest first (at most 100, with the total)."""
        rows, total = store_plans.list_executions(app.engine, limit=LIMIT)
        return {"executions": rows, "total": total, "hasMore": total > len(rows)}

    @mcp.resource("synthesis://plans/{name}", name="plan", mime_type=JSON)
    @_json
    def plan(name: str) -> dict[str, Any]:
        """Plan by name: its definition, and the URI of its executions."""
        row = store_plans.get_plan(app.engine, name=name)
        return {**row, "executionsUri": f"synthesis://plans/{name}/executions"}

    @mcp.resource("synthesis://plans/{name}/executions", name="plan-execution-history", mime_type=JSON)
    @_json
    def plan_executions(name: str) -> dict[str, Any]:
        """A plan's execution history, newest first (at most 100, with the total)."""
        store_plans.get_plan(app.engine, name=name)
        rows, total = store_plans.list_executions(app.engine, plan_name=name, limit=LIMIT)
        return {"plan_name": name, "executions": rows, "total": total, "hasMore": total > len(rows)}

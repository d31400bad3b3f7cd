"""synthesis://resource-sets/{name}/stats and synthesis://resource-sets/{name}/metrics/{metric}.

Both cover the set with all its descendants, each entry counted once. An unknown set is resource-not-found (-32602);
an unknown metric invalid params (-32602) listing the accepted ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer

from mcp_server.resources.common import json_resource
from store import set_queries

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

JSON = "application/json"
BASE = "synthesis://resource-sets"
STATS_TOP = 10


_json = json_resource


def register(mcp: MCPServer, app: AssayApp) -> None:
    @mcp.resource(BASE + "/{name}/stats", name="resource-set-stats", mime_type=JSON,
                  description="Comprehensive statistics of a resource set with its descendants: entry, file, "
                              "directory and symlink counts, total file size, mtime span, top media types and "
                              "extensions")
    @_json
    def set_stats(name: str) -> dict:
        return set_queries.run(app.engine, set_queries.set_stats, name=name, top=STATS_TOP)

    @mcp.resource(BASE + "/{name}/metrics/{metric}", name="resource-set-metric", mime_type=JSON,
                  description="Aggregated metric of a resource set with its descendants: "
                              + ", ".join(set_queries.METRICS))
    @_json
    def set_metric(name: str, metric: str) -> dict:
        return set_queries.run(app.engine, set_queries.set_metric, name=name, metric=metric)

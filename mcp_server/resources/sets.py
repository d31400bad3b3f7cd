"""synthesis://resource-sets resources: all sets, one set's metadata, its entries (paged), children and parents.

(``/stats`` and ``/metrics/{metric}`` live in set_metrics.py.) Unknown sets are reported as resource-not-found
(-32602) with the store's message; other bad input (a non-numeric limit) as invalid params (-32602) with its message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer

from mcp_server.resources.common import int_param, json_resource
from store import sets as store_sets

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

JSON = "application/json"
BASE = "synthesis://resource-sets"
ENTRIES_DEFAULT_LIMIT = 1000
ENTRIES_MAX_LIMIT = 10000


_json = json_resource


def set_links(name: str) -> dict[str, str]:
    uri = f"{BASE}/{name}"
    return {"uri": uri, "entriesUri": uri + "/entries", "childrenUri": uri + "/children",
            "parentsUri": uri + "/parents", "statsUri": uri + "/stats"}


def register(mcp: MCPServer, app: AssayApp) -> None:
    @mcp.resource(BASE, name="resource-sets", mime_type=JSON)
    @_json
    def all_sets() -> dict[str, Any]:
        """All resource sets with their own entry_count and direct child_count."""
        return {"resource_sets": [{**s, "uri": f"{BASE}/{s['name']}"} for s in store_sets.list_sets(app.engine)]}

    @mcp.resource(BASE + "/{name}", name="resource-set", mime_type=JSON)
    @_json
    def one_set(name: str) -> dict[str, Any]:
        """Resource-set metadata: counts, direct parents and children, times, and the URIs of its sub-resources."""
        return {**store_sets.describe_set(app.engine, name=name), **set_links(name)}

    @mcp.resource(BASE + "/{name}/entries{?limit,offset}", name="resource-set-entries", mime_type=JSON)
    @_json
    def set_entries(name: str, limit: str | None = None, offset: str | None = None) -> dict[str, Any]:
        """File entries in the set, by path, one page at a time (?limit=1-10000, default 1000; ?offset=N)."""
        size = int_param(limit, field="limit", default=ENTRIES_DEFAULT_LIMIT, low=1, high=ENTRIES_MAX_LIMIT)
        start = int_param(offset, field="offset", default=0, low=0)
        detail = store_sets.describe_set(app.engine, name=name, include_entries=True, limit=size, offset=start)
        return {"resource_set": name, "total": detail["entry_count"], "limit": size, "offset": start,
                "hasMore": detail["hasMore"], "entries": detail["entries"]}

    @mcp.resource(BASE + "/{name}/children", name="resource-set-children", mime_type=JSON)
    @_json
    def set_children(name: str) -> dict[str, Any]:
        """Direct child resource-sets (DAG downstream) with their counts."""
        return store_sets.children_of(app.engine, name=name)

    @mcp.resource(BASE + "/{name}/parents", name="resource-set-parents", mime_type=JSON)
    @_json
    def set_parents(name: str) -> dict[str, Any]:
        """Direct parent resource-sets (DAG upstream) with their counts."""
        return store_sets.parents_of(app.engine, name=name)

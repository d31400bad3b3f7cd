"""synthesis://maps resources: the citation maps (reference 003's ResourceMap) exported as JSON for any MCP client.

- ``synthesis://maps`` (``?limit=1-10000&offset=N``): the resource ids that can be cited, one page at a time, each
  with the URI of its map, the total and nextUri (the paging of the other synthesis listings).
- ``synthesis://maps/{resource_id}``: that resource's map, exactly what getStructure answers (built on first use;
  an agent's map of a changed file carries ``metadata.stale``).

A resolved output is not here: it is a file of the content cache, read as a blob through
``synthesis://content/{+path}`` (resolve's ``uri``). An unknown resource is resource-not-found, any other refusal
invalid params (-32602 both), with the citation error's message.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any, Callable

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_server.resources.common import int_param
from mcp_server.tools.citations import map_view
from store.errors import AssayError, CitationError

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

JSON = "application/json"
BASE = "synthesis://maps"
DEFAULT_LIMIT = 1000
MAX_LIMIT = 10000


def _json(fn: Callable[..., Any]) -> Callable[..., str]:
    """Serialise the result; RESOURCE_NOT_FOUND becomes resource-not-found, any other error of ours invalid params,
    both with our message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return json.dumps(fn(*args, **kwargs))
        except CitationError as exc:
            if exc.code == "RESOURCE_NOT_FOUND":
                raise ResourceNotFoundError(str(exc)) from exc
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"type": exc.code, "field": exc.field}) from exc
        except AssayError as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc), data={"type": exc.code, "field": exc.field}) from exc

    return wrapper


def maps_listing(service, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> dict[str, Any]:
    """One page of resource ids with their map URIs, the total, and nextUri when there are more."""
    page = service.list_resources(limit=limit, offset=offset)
    ids = page["resources"]
    total = page.get("total", len(ids))
    has_more = offset + len(ids) < total
    return {"total": total, "offset": offset, "limit": limit, "hasMore": has_more,
            "maps": [{"resource_id": rid, "uri": f"{BASE}/{rid}"} for rid in ids],
            "nextUri": f"{BASE}?limit={limit}&offset={offset + len(ids)}" if has_more else None}


def register(mcp: MCPServer, app: AssayApp) -> None:
    @mcp.resource(BASE, name="maps", mime_type=JSON)
    @_json
    def all_maps() -> dict[str, Any]:
        """The citable resources (ids sorted) with the URI of each one's map: the first 1000, the total and nextUri
        (?limit=1-10000&offset=N)."""
        return maps_listing(app.citations())

    @mcp.resource(BASE + "{?limit,offset}", name="maps-page", mime_type=JSON)
    @_json
    def maps_page(limit: str | None = None, offset: str | None = None) -> dict[str, Any]:
        """One page of citable resources (?limit=1-10000, ?offset=N)."""
        return maps_listing(app.citations(),
                            limit=int_param(limit, field="limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT),
                            offset=int_param(offset, field="offset", default=0, low=0))

    @mcp.resource(BASE + "/{resource_id}", name="map", mime_type=JSON)
    @_json
    def one_map(resource_id: str) -> dict[str, Any]:
        """A resource's map as reference 003's ResourceMap JSON (what getStructure answers)."""
        return map_view(app.citations().get_structure(resource_id))

"""Query management tools: query-create, -execute, -list, -get, -update, -delete (saved entry filters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.tools.common import DESTRUCTIVE, READ_ONLY, WRITES, Limit, Offset, ToolSet, tool
from store import queries as store_queries
from store.filters import EntryFilter

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

QueryName = Annotated[str, Field(description="Query name")]
_KEYS = ", ".join(EntryFilter.model_fields)
QUERY_HELP = (f"Query definition: an object of entry filters, all of which must hold. Keys: {_KEYS}. "
              'Example: {"kind": "file", "extension": ".mp4", "min_size": 1073741824}. Unknown keys are rejected, '
              "as are empty ranges (min above max); path_prefix and parent must lie inside the allowed roots.")


class SavedQueryInfo(BaseModel):
    name: str
    description: str | None
    query: dict[str, Any]
    createdAt: str | None
    updatedAt: str | None
    lastExecutedAt: str | None
    executionCount: int


class QueryListResponse(BaseModel):
    queries: list[SavedQueryInfo]
    total: int


class QueryEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    path: str
    size: int
    kind: str
    mtime: str | None


class QueryExecuteResponse(BaseModel):
    name: str
    query: dict[str, Any]
    entries: list[QueryEntry]
    total: int
    hasMore: bool
    offset: int
    limit: int


class QueryDeleteResponse(BaseModel):
    deleted: SavedQueryInfo
    message: str


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "query-create", WRITES)
    def query_create(
        name: Annotated[str, Field(description="Unique query name: " + store_queries.NAME_RULE)],
        query: Annotated[dict[str, Any], Field(description=QUERY_HELP)],
        description: Annotated[str | None, Field(description="Optional description")] = None,
    ) -> SavedQueryInfo:
        """Create a saved query for reuse. The query is checked now, so a typo in a key is reported instead of
        matching everything later."""
        return SavedQueryInfo.model_validate(
            store_queries.create_query(app.engine, name=name, query=query, description=description,
                                       resolve_path=app.roots.resolve))

    @tool(tools, "query-execute", READ_ONLY)
    def query_execute(
        name: Annotated[str, Field(description="Query name to execute")],
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> QueryExecuteResponse:
        """Execute a saved query: one page of the matching index entries (ordered by path), with the total."""
        return QueryExecuteResponse.model_validate(
            store_queries.execute_query(app.engine, name=name, limit=limit, offset=offset))

    @tool(tools, "query-list", READ_ONLY)
    def query_list() -> QueryListResponse:
        """List all saved queries with their definitions and how often they ran."""
        found = store_queries.list_queries(app.engine)
        return QueryListResponse.model_validate({"queries": found, "total": len(found)})

    @tool(tools, "query-get", READ_ONLY)
    def query_get(name: QueryName) -> SavedQueryInfo:
        """Get a saved query definition."""
        return SavedQueryInfo.model_validate(store_queries.get_query(app.engine, name=name))

    @tool(tools, "query-update", WRITES)
    def query_update(
        name: QueryName,
        description: Annotated[str | None, Field(description="New description")] = None,
        query: Annotated[dict[str, Any] | None, Field(description="New query definition. " + QUERY_HELP)] = None,
    ) -> SavedQueryInfo:
        """Update a saved query's description and/or definition (the new definition is checked first)."""
        return SavedQueryInfo.model_validate(
            store_queries.update_query(app.engine, name=name, description=description, query=query,
                                       resolve_path=app.roots.resolve))

    @tool(tools, "query-delete", DESTRUCTIVE)
    def query_delete(name: Annotated[str, Field(description="Query name to delete")]) -> QueryDeleteResponse:
        """Delete a saved query (the files it matched are not touched)."""
        gone = store_queries.delete_query(app.engine, name=name)
        return QueryDeleteResponse.model_validate({"deleted": gone, "message": f"Deleted query '{gone['name']}'"})

"""Resource navigation over the set DAG: resource-children (downstream) and resource-parent (upstream, like "..")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.tools.common import READ_ONLY, ToolSet, tool
from mcp_server.tools.resource_sets import SetEntry
from store import sets as store_sets

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

Depth = Annotated[int | None, Field(ge=1, description="Traversal depth (null = unlimited)")]


class DagNode(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    description: str | None = None
    entry_count: int = Field(description="entries that are members of this set itself")
    child_count: int = Field(description="direct child sets")
    parent_count: int
    depth: int = Field(description="shortest number of edges from the starting set")


class ChildNode(DagNode):
    parents: list[str] = Field(description="its direct parents among the starting set and the listed sets")
    entries: list[SetEntry] | None = None
    entries_has_more: bool | None = None


class ParentNode(DagNode):
    children: list[str] = Field(description="its direct children among the starting set and the listed sets")


class ChildrenResponse(BaseModel):
    resource_set: str
    depth: int | None
    children: list[ChildNode]


class ParentsResponse(BaseModel):
    resource_set: str
    depth: int | None
    parents: list[ParentNode]


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "resource-children", READ_ONLY)
    def resource_children(
        name: Annotated[str, Field(description="Resource-set name")],
        depth: Depth = 1,
        include_entries: Annotated[bool, Field(description="Include file entries in response")] = False,
        limit: Annotated[int, Field(ge=1, le=1000, description="With include_entries: entries per child "
                                                                "(1-1000, by path)")] = 100,
    ) -> ChildrenResponse:
        """Get child nodes in the DAG (downstream navigation): each set below `name` once, nearest first, with its
        own entry_count, child_count and depth. With include_entries each child lists up to `limit` of its own
        entries and entries_has_more."""
        return ChildrenResponse(**store_sets.children_of(app.engine, name=name, depth=depth,
                                                         include_entries=include_entries, limit=limit))

    @tool(tools, "resource-parent", READ_ONLY)
    def resource_parent(
        name: Annotated[str, Field(description="Resource-set name")],
        depth: Annotated[int | None, Field(ge=1, description="Traversal depth (null = all ancestors)")] = 1,
    ) -> ParentsResponse:
        """Get parent nodes in the DAG (upstream navigation, like ".."): each set above `name` once, nearest
        first."""
        return ParentsResponse(**store_sets.parents_of(app.engine, name=name, depth=depth))

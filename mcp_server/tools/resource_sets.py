"""Resource-set management tools: resource-set-create, -list, -get, -modify, -delete, -add-child, -remove-child."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.tools.common import (
    DESTRUCTIVE, IDEMPOTENT_WRITE, READ_ONLY, WRITES, Limit, Offset, StrList, ToolSet, tool,
)
from store import sets as store_sets

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

SetName = Annotated[str, Field(description="Resource-set name")]


class SetSummary(BaseModel):
    name: str
    description: str | None
    entry_count: int = Field(description="entries that are members of this set itself")
    child_count: int = Field(description="direct child sets")
    parent_count: int = Field(description="direct parent sets")
    created_at: str | None
    updated_at: str | None


class SetListResponse(BaseModel):
    resource_sets: list[SetSummary]


class SetEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    path: str
    size: int
    kind: str
    mtime: str | None
    ctime: str | None
    extension: str | None
    media_type: str | None
    parent: str | None


class SetDetail(SetSummary):
    total_entry_count: int = Field(description="distinct entries of this set and all its descendants, each once")
    parents: list[str]
    children: list[str]
    entries: list[SetEntry] | None = None
    limit: int | None = None
    offset: int | None = None
    hasMore: bool | None = None


class ModifyResponse(BaseModel):
    name: str
    operation: str
    requested: int = Field(description="distinct paths given")
    added: int
    removed: int
    unchanged: int = Field(description="indexed paths already in the set (add) or not in it (remove)")
    notFound: list[str] = Field(description="paths that are not in the index (index them first)")
    entry_count: int


class DeleteResponse(BaseModel):
    name: str
    deleted: bool
    memberships_removed: int
    edges_removed: int


class AddChildResponse(BaseModel):
    parent: str
    child: str
    created: bool = Field(description="false when the edge already existed (the call is idempotent)")


class RemoveChildResponse(BaseModel):
    parent: str
    child: str
    removed: bool


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "resource-set-create", WRITES)
    def resource_set_create(
        name: Annotated[str, Field(description="Unique name: 1-128 of A-Z a-z 0-9 - _ . starting with a letter or "
                                               "digit")],
        description: Annotated[str | None, Field(description="Optional description")] = None,
    ) -> SetSummary:
        """Create a new resource-set (DAG node). Fails if a set of that name exists."""
        return SetSummary(**store_sets.create_set(app.engine, name=name, description=description))

    @tool(tools, "resource-set-list", READ_ONLY)
    def resource_set_list() -> SetListResponse:
        """List all resource-sets, by name, with their own entry_count and direct child_count."""
        return SetListResponse(resource_sets=store_sets.list_sets(app.engine))

    @tool(tools, "resource-set-get", READ_ONLY)
    def resource_set_get(
        name: SetName,
        include_entries: Annotated[bool, Field(description="Include file entries (one page, by path)")] = False,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> SetDetail:
        """Get a specific resource-set with metadata: counts, direct parents and children, creation time, and with
        include_entries one page of its own entries (limit/offset, hasMore)."""
        return SetDetail(**store_sets.describe_set(app.engine, name=name, include_entries=include_entries,
                                                   limit=limit, offset=offset))

    @tool(tools, "resource-set-modify", WRITES)
    def resource_set_modify(
        name: SetName,
        operation: Annotated[str, Field(description='"add" or "remove"')],
        paths: Annotated[StrList, Field(description="List of entry paths (one string is accepted too)")],
    ) -> ModifyResponse:
        """Add or remove indexed entries from a resource-set, named by path. A directory path adds or removes that
        directory's own entry, not its contents. Paths not in the index are listed in notFound; if none is in the
        index the call fails and nothing changes. Adding a member again or removing a non-member is harmless and
        counted as unchanged."""
        store_sets.check_operation(operation)
        resolved = [app.roots.resolve(p, field="paths", follow_last=False) for p in paths]
        return ModifyResponse(**store_sets.modify_members(app.engine, name=name, operation=operation,
                                                          paths=resolved))

    @tool(tools, "resource-set-delete", DESTRUCTIVE)
    def resource_set_delete(name: SetName) -> DeleteResponse:
        """Delete a resource-set with its memberships and DAG edges. The entries themselves and the parent and child
        sets stay."""
        return DeleteResponse(**store_sets.delete_set(app.engine, name=name))

    @tool(tools, "resource-set-add-child", IDEMPOTENT_WRITE)
    def resource_set_add_child(
        parent: Annotated[str, Field(description="Parent resource-set name")],
        child: Annotated[str, Field(description="Child resource-set name")],
    ) -> AddChildResponse:
        """Create a parent-child edge in the DAG. A set may have several parents. Idempotent: an existing edge is
        kept (created: false). An edge that would create a cycle is refused, naming the cycle."""
        return AddChildResponse(**store_sets.add_child(app.engine, parent=parent, child=child))

    @tool(tools, "resource-set-remove-child", DESTRUCTIVE)
    def resource_set_remove_child(
        parent: Annotated[str, Field(description="Parent resource-set name")],
        child: Annotated[str, Field(description="Child resource-set name")],
    ) -> RemoveChildResponse:
        """Remove a parent-child edge from the DAG (both sets stay). Fails if there is no such edge."""
        return RemoveChildResponse(**store_sets.remove_child(app.engine, parent=parent, child=child))

"""File operation tools: rename-files, delete-files, move-files (thin wrappers over flows.fileops.operations)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from flows.fileops.operations import delete_files, move_files, rename_files
from mcp_server.tools.common import DESTRUCTIVE, WRITES, StrList, ToolSet, as_object_list, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class PathOp(BaseModel):
    """One {from, to} operation."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from", description="Current absolute path")
    to: str = Field(description="New absolute path")


RenameOps = Annotated[list[PathOp], BeforeValidator(as_object_list), Field(
    min_length=1,
    description='Array of {from, to} rename operations; "to" is a full path or a new name in the same folder')]
MoveOps = Annotated[list[PathOp], BeforeValidator(as_object_list), Field(
    min_length=1,
    description='Array of {from, to} move operations; if "to" is an existing folder the item moves into it')]


DryRun = Annotated[bool, Field(description="Preview changes without applying: report what each item would do")]
Status = Literal["success", "error", "preview"]


class _ItemResult(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    status: Status = Field(description="success, error (see error), or preview (dry run: would succeed)")
    kind: str | None = Field(None, description="file, directory, symlink or other")
    error: str | None = Field(None, description="why this item failed, and what to do")
    errorCode: str | None = None
    indexedEntries: int | None = Field(None, description="index entries moved or removed with this item")


class MoveResult(_ItemResult):
    from_: str | None = Field(None, alias="from")
    to: str | None = None
    membershipsKept: int | None = Field(None, description="resource-set memberships that moved with the entries")
    createdDirectories: list[str] | None = Field(None, description="folders made (or that would be made) for to")


class DeleteResult(_ItemResult):
    path: str | None = None


class _Response(BaseModel):
    successCount: int = Field(description="items that succeeded (in a dry run: would succeed)")
    errorCount: int
    dryRun: bool


class MoveResponse(_Response):
    results: list[MoveResult]


class DeleteResponse(_Response):
    results: list[DeleteResult]


def _dicts(ops: list[PathOp]) -> list[dict[str, str]]:
    return [op.model_dump(by_alias=True) for op in ops]


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "rename-files", WRITES)
    def rename_files_tool(
        renames: RenameOps,
        dryRun: DryRun = False,
    ) -> MoveResponse:
        """Rename one or more files or directories. Never overwrites an existing target; each item reports its own
        result. Index entries follow the rename, keeping their resource-set memberships."""
        return MoveResponse.model_validate(rename_files(app.engine, app.roots, renames=_dicts(renames),
                                                        dry_run=dryRun))

    @tool(tools, "delete-files", DESTRUCTIVE)
    def delete_files_tool(
        paths: Annotated[StrList, Field(description="Paths to delete (one path or an array)")],
        dryRun: DryRun = False,
        force: Annotated[bool, Field(description="Force deletion of non-empty directories")] = False,
    ) -> DeleteResponse:
        """Delete one or more files or directories from disk and from the index. Symlinks are removed themselves,
        never their targets; a non-empty directory needs force: true."""
        return DeleteResponse.model_validate(delete_files(app.engine, app.roots, paths=paths, dry_run=dryRun,
                                                          force=force))

    @tool(tools, "move-files", WRITES)
    def move_files_tool(
        moves: MoveOps,
        dryRun: DryRun = False,
    ) -> MoveResponse:
        """Move files or directories to a new location (missing folders are created). Never overwrites an existing
        target; across filesystems the source is removed only after its copy is complete. Index entries follow the
        move, keeping their resource-set memberships."""
        return MoveResponse.model_validate(move_files(app.engine, app.roots, moves=_dicts(moves), dry_run=dryRun))

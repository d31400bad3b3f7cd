"""File operation tools: rename-files, delete-files, move-files (thin wrappers over flows.fileops.operations), each
journalled under its call's id (the guarded server's user as the caller), and file-history, the journal read back
(store.file_journal)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from flows.fileops.operations import delete_files, move_files, rename_files
from flows.fileops.undo import undo
from mcp_server.guard import caller as callers
from mcp_server.tools.common import DESTRUCTIVE, READ_ONLY, WRITES, Offset, StrList, ToolSet, as_object_list, tool
from store import file_journal
from store.errors import InvalidInput
from store.file_journal import Origin

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
    trashedTo: str | None = Field(None, description="where it is in the trash of its volume (undo brings it back); "
                                                    "null when deleted for good")


class _Response(BaseModel):
    successCount: int = Field(description="items that succeeded (in a dry run: would succeed)")
    errorCount: int
    dryRun: bool
    callId: str | None = Field(None, description="this call's id in the journal of file operations: file-history "
                                                 "lists what it did, undo reverses it (null in a dry run)")


class MoveResponse(_Response):
    results: list[MoveResult]


class DeleteResponse(_Response):
    results: list[DeleteResult]


class FileOperationItem(BaseModel):
    """One file operation of the journal."""

    model_config = ConfigDict(populate_by_name=True)
    id: int = Field(description="the operation's id (undo takes it)")
    time: str = Field(description="when it was written down, before the disk changed (ISO 8601 UTC)")
    op: Literal["move", "copy", "rename", "trash", "delete", "restore"]
    from_: str = Field(alias="from", description="the path it acted on")
    to: str | None = Field(description="where it went (null for a delete)")
    kind: Literal["file", "directory"]
    state: Literal["intent", "copying", "done", "failed", "undone", "purged"] = Field(
        description="done, failed (the disk is as it was), undone, purged (a trashed file emptied from the trash for "
                    "good: error says by what, undoneAt when), or intent / copying while in flight")
    origin: Literal["tool", "plan"] = Field(description="a tool call or a plan execution")
    tool: str | None = Field(description="the tool called (move-files, undo, ...); null for a plan")
    executionId: int | None = Field(description="the plan execution it belongs to")
    callId: str = Field(description="the tool call (or execution-<id>) it belongs to")
    caller: str | None = Field(description="the user who called, on a guarded server")
    contentHash: str | None = Field(description="xxh128 of the file's bytes before the operation; null for a folder")
    error: str | None = Field(description="why it failed, or what finishing it after an interruption found")
    undoneAt: str | None = Field(description="when it was undone (ISO 8601 UTC)")
    undoOf: int | None = Field(description="the operation this one reverses")


class FileHistoryResponse(BaseModel):
    operations: list[FileOperationItem] = Field(description="newest first")
    count: int = Field(description="operations in this page")
    hasMore: bool = Field(description="more operations past this page (raise offset)")
    limit: int
    offset: int


class UndoItem(BaseModel):
    """One operation undo looked at."""

    model_config = ConfigDict(populate_by_name=True)
    operationId: int = Field(description="the journal's operation (file-history's id)")
    op: str = Field(description="what it was: move, rename, copy, trash, delete")
    from_: str | None = Field(alias="from", description="where the file is now")
    to: str = Field(description="where undo puts it back (a copy: the copy is removed)")
    status: Literal["undone", "would_undo", "refused"]
    reason: str | None = Field(default=None, description="why it was refused (the file changed, its place is taken)")
    restored: dict[str, int] | None = Field(
        default=None, description="a trashed file or folder: what came back with it ({memberships, maps})")
    note: str | None = Field(default=None, description="what could not come back (a set deleted since)")


class UndoResponse(BaseModel):
    callId: str = Field(description="this undo's own call in the journal (undo it to redo)")
    dryRun: bool
    undone: int
    refused: int
    wouldUndo: int
    results: list[UndoItem] = Field(description="the last operation done first")


def _dicts(ops: list[PathOp]) -> list[dict[str, str]]:
    return [op.model_dump(by_alias=True) for op in ops]


def _origin(tool_name: str) -> Origin:
    """A fresh call of ``tool_name``, by the guarded server's user (none for the local operator)."""
    who = callers.current()
    return Origin.for_tool(tool_name, who.user if who is not None and who.authenticated else None)


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "rename-files", WRITES)
    def rename_files_tool(
        renames: RenameOps,
        dryRun: DryRun = False,
    ) -> MoveResponse:
        """Rename one or more files or directories. Never overwrites an existing target; each item reports its own
        result. Index entries follow the rename, keeping their resource-set memberships."""
        return MoveResponse.model_validate(rename_files(app.engine, app.roots, renames=_dicts(renames),
                                                        dry_run=dryRun, origin=_origin("rename-files")))

    @tool(tools, "delete-files", DESTRUCTIVE)
    def delete_files_tool(
        paths: Annotated[StrList, Field(description="Paths to delete (one path or an array)")],
        dryRun: DryRun = False,
        force: Annotated[bool, Field(description="Force deletion of non-empty directories")] = False,
        permanent: Annotated[bool, Field(description="Delete for good instead of moving to the trash (undo cannot "
                                                     "bring it back)")] = False,
    ) -> DeleteResponse:
        """Delete one or more files or directories from the index and the disk: to the trash of their volume, so
        undo (with the answer's callId) brings them back, or for good with permanent: true. Symlinks are removed
        themselves, never their targets; a non-empty directory needs force: true."""
        return DeleteResponse.model_validate(delete_files(app.engine, app.roots, paths=paths, dry_run=dryRun,
                                                          force=force, permanent=permanent,
                                                          origin=_origin("delete-files")))

    @tool(tools, "move-files", WRITES)
    def move_files_tool(
        moves: MoveOps,
        dryRun: DryRun = False,
    ) -> MoveResponse:
        """Move files or directories to a new location (missing folders are created). Never overwrites an existing
        target; across filesystems the source is removed only after its copy is complete. Index entries follow the
        move, keeping their resource-set memberships."""
        return MoveResponse.model_validate(move_files(app.engine, app.roots, moves=_dicts(moves), dry_run=dryRun,
                                                      origin=_origin("move-files")))

    @tool(tools, "file-history", READ_ONLY)
    def file_history(
        path: Annotated[str | None, Field(description="Operations on this path or under it (as from or to)")] = None,
        executionId: Annotated[int | None, Field(ge=1, description="Operations of this plan execution")] = None,
        callId: Annotated[str | None, Field(min_length=1, max_length=100,
                                            description="Operations of this tool call (its answer's callId)")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Maximum operations to return (1-1000)")] = 100,
        offset: Offset = 0,
    ) -> FileHistoryResponse:
        """List the journal of file operations (moves, copies, renames, trashes, deletes, restores by tools and plans),
        newest first, for a path, a plan execution or a tool call: when, from, to, state, who asked, content hash.
        Give at least one of path, executionId, callId; several narrow together."""
        if path is None and executionId is None and callId is None:
            raise InvalidInput("file-history needs at least one of path, executionId or callId (the callId a "
                               "file tool answered, or a plan execution's id)", field="path")
        where = app.roots.resolve(path, field="path", follow_last=False) if path is not None else None
        rows = file_journal.history(app.engine, path=where, execution_id=executionId, call_id=callId,
                                    limit=limit + 1, offset=offset)
        page = [FileOperationItem.model_validate(file_journal.operation_public(r)) for r in rows[:limit]]
        return FileHistoryResponse(operations=page, count=len(page), hasMore=len(rows) > limit, limit=limit,
                                   offset=offset)

    @tool(tools, "undo", WRITES)
    def undo_tool(
        operationId: Annotated[int | None, Field(ge=1, description="One operation (file-history's id)")] = None,
        callId: Annotated[str | None, Field(min_length=1, max_length=100,
                                            description="Every operation of one tool call (its answer's callId)")]
        = None,
        executionId: Annotated[int | None, Field(ge=1, description="Every file operation of one plan execution")]
        = None,
        dryRun: DryRun = False,
    ) -> UndoResponse:
        """Reverse file operations from the journal: one operation, a whole tool call (move-files, rename-files,
        delete-files) or a whole plan execution. Moves and renames go back (index entries follow, keeping their
        sets, metadata and text), copies are removed, trashed files return; the last done is undone first. An
        operation whose file changed since, is gone, or whose old place is taken is refused, naming the file; the
        rest go on. Give exactly one of operationId, callId, executionId."""
        return UndoResponse.model_validate(undo(app.engine, app.roots, origin=_origin("undo"),
                                                operation_id=operationId, call_id=callId, execution_id=executionId,
                                                dry_run=dryRun))

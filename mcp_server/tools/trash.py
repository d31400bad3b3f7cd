"""The trash tools: trash-list (read) and trash-empty (destructive, with the file operations' permission), thin
wrappers over flows.fileops.emptying."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from flows.fileops.emptying import MAX_LIST, empty, listing
from mcp_server.tools.common import DESTRUCTIVE, READ_ONLY, Offset, ToolSet, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class TrashedItem(BaseModel):
    """One file or folder assay put in the trash."""

    operationId: int = Field(description="its trash operation in the journal (undo takes it to restore the file)")
    path: str = Field(description="where it was")
    trashedTo: str = Field(description="where it is in the trash")
    trashedAt: str | None = Field(description="when it went (ISO 8601 UTC)")
    kind: Literal["file", "directory"]
    size: int | None = Field(description="bytes, when it was trashed")
    callId: str = Field(description="the tool call (or execution-<id>) that trashed it")
    tool: str | None = Field(description="the tool that trashed it (delete-files, undo, ...); null for a plan")
    executionId: int | None = Field(description="the plan execution that trashed it")
    caller: str | None = Field(description="the user who called, on a guarded server")
    inTrash: bool = Field(description="whether it is still there (false: emptied outside assay, or its trash is "
                                      "on a volume this machine does not see)")
    note: str | None = Field(description="why it is not in the trash, when it is not")


class TrashListResponse(BaseModel):
    items: list[TrashedItem] = Field(description="oldest first")
    count: int = Field(description="items in this page")
    hasMore: bool = Field(description="more items past this page (raise offset)")
    limit: int
    offset: int
    retentionDays: float = Field(description="days before assay empties what it trashed (0: never by itself)")
    retention: str = Field(description="the retention, in words")


class EmptiedItem(BaseModel):
    """One trashed file or folder trash-empty looked at."""

    operationId: int
    path: str = Field(description="where it was before the trash")
    trashedTo: str
    status: Literal["purged", "gone", "skipped", "error", "preview"] = Field(
        description="purged (deleted for good), gone (already emptied outside assay: now marked so), skipped (its "
                    "trash is not visible here), error, or preview (dry run: would be purged)")
    bytesFreed: int | None = Field(description="bytes deleted (in a dry run: its size when trashed)")
    error: str | None = Field(description="why it failed or was skipped")


class TrashEmptyResponse(BaseModel):
    results: list[EmptiedItem]
    dryRun: bool
    purgedCount: int = Field(description="items deleted for good (or found gone)")
    errorCount: int
    skippedCount: int
    bytesFreed: int


Days = Annotated[float | None, Field(ge=0, description="Only what has been in the trash more than this many days")]


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "trash-list", READ_ONLY)
    def trash_list(
        path: Annotated[str | None, Field(description="Only what was trashed from this path or under it")] = None,
        olderThanDays: Days = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST, description=f"Maximum items to return (1-{MAX_LIST})")] = 100,
        offset: Offset = 0,
    ) -> TrashListResponse:
        """List what assay put in the trash (delete-files, the trash outcome, an overwrite) and has not been restored
        or emptied, oldest first: where each came from, where it is now, when, and its operationId (undo restores
        it; trash-empty deletes it for good). The desktop's own trashed files are not listed."""
        where = app.roots.resolve(path, field="path", follow_last=False) if path is not None else None
        return TrashListResponse.model_validate(listing(app.engine, path=where, older_than_days=olderThanDays,
                                                        limit=limit, offset=offset))

    @tool(tools, "trash-empty", DESTRUCTIVE)
    def trash_empty(
        operationIds: Annotated[list[int] | None, Field(
            min_length=1, max_length=10000, description="These trashed items (trash-list's operationId)")] = None,
        path: Annotated[str | None, Field(description="What was trashed from this path or under it")] = None,
        olderThanDays: Days = None,
        all: Annotated[bool, Field(description="Everything assay trashed (alone: not with the other choices)")]
        = False,
        dryRun: Annotated[bool, Field(description="Say what would be deleted, delete nothing")] = False,
    ) -> TrashEmptyResponse:
        """Delete for good what assay put in the trash: given items, what came from a path, what is older than some
        days, or all: true. Undo can no longer restore them. Only what assay trashed is touched, never the
        desktop's own trashed files. Several choices narrow together."""
        where = app.roots.resolve(path, field="path", follow_last=False) if path is not None else None
        return TrashEmptyResponse.model_validate(empty(app.engine, operation_ids=operationIds, path=where,
                                                       older_than_days=olderThanDays, everything=all,
                                                       dry_run=dryRun))

"""Source management tools (reference 000): source-create, -start, -stop, -list, -get, -delete, -stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field

from mcp_server.tools.common import DESTRUCTIVE, IDEMPOTENT_WRITE, READ_ONLY, WRITES, ToolSet, tool
from store import sources as store_sources

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

SourceName = Annotated[str, Field(description="Source name")]


class WatcherCounters(BaseModel):
    running: bool
    events_seen: int
    entries_upserted: int
    entries_removed: int
    entries_moved: int = Field(description="renames and moves that kept their entry ids (and set memberships)")
    change_sets: int
    catch_ups: int = Field(description="scans at start of what changed while nobody watched")
    last_error: str | None


class SourceInfo(BaseModel):
    name: str
    type: str = Field(description="live (watched for changes) or manual (indexed on source-start)")
    path: str
    enabled: bool = Field(description="live sources that are enabled start with the server")
    status: str = Field(description="running, stopped or error (last_error says why; a running live source also "
                                    "names there the folders it could not read)")
    watch_recursive: bool
    debounce_ms: int
    entries_indexed: int = Field(description="entries under the source's path in the index now (as source-stats)")
    last_scan_at: str | None
    total_scans: int
    average_scan_duration_ms: int
    last_error: str | None
    created_at: str | None
    updated_at: str | None
    job_id: int | None = Field(default=None, description="the running index job of a manual source")
    watcher: WatcherCounters | None = None


class SourceListResponse(BaseModel):
    sources: list[SourceInfo]
    total: int


class StartResponse(BaseModel):
    name: str
    type: str
    status: str
    started: bool = Field(description="false when the source was already running")
    job_id: int | None = Field(description="the index job of a manual source (see synthesis://jobs/{id})")
    message: str


class StopResponse(BaseModel):
    name: str
    type: str
    status: str
    stopped: bool = Field(description="false when the source was not running")
    message: str


class DeleteResponse(BaseModel):
    name: str
    type: str
    path: str
    deleted: bool


class SourceStats(BaseModel):
    name: str
    type: str
    status: str
    entries_indexed: int = Field(description="entries under the source's path in the index now")
    last_scan_at: str | None
    total_scans: int
    average_scan_duration_ms: int
    path: str
    last_error: str | None
    watcher: WatcherCounters | None = None


def register(tools: ToolSet, app: AssayApp) -> None:
    sources = app.sources
    if sources is None:  # AssayApp.create always makes one
        raise RuntimeError("the source tools need the app's SourceManager")

    @tool(tools, "source-create", WRITES)
    def source_create(
        name: Annotated[str, Field(description=f"Unique source name: {store_sources.NAME_RULE}")],
        type: Annotated[Literal["live", "manual"], Field(
            description="live: watch the path and keep its index current; manual: index it when source-start is "
                        "called")],
        path: Annotated[str, Field(description="Root path to watch/index (absolute, inside the allowed roots)")],
        enabled: Annotated[bool, Field(description="Whether source should start automatically (live sources: now "
                                                   "and whenever the server starts)")] = True,
        watch_recursive: Annotated[bool, Field(description="For live sources: watch subdirectories")] = True,
        debounce_ms: Annotated[int, Field(ge=0, le=600_000,
                                          description="For live sources: debounce delay in ms")] = 500,
    ) -> SourceInfo:
        """Create a new filesystem source for monitoring or indexing. A live source watches its path (debounced;
        files are indexed once they settle, partial downloads ignored, deletes and renames kept in step); an
        enabled live source starts at once. A manual source is indexed each time source-start is called."""
        return SourceInfo(**sources.create(name=name, type=type, path=path, enabled=enabled,
                                           watch_recursive=watch_recursive, debounce_ms=debounce_ms))

    @tool(tools, "source-start", IDEMPOTENT_WRITE)
    def source_start(name: SourceName) -> StartResponse:
        """Start a source: a live source catches up on changes since its last scan, then watches; a manual source
        starts a one-time index job (its job_id; synthesis://jobs/{id} shows progress)."""
        return StartResponse(**sources.start(name))

    @tool(tools, "source-stop", IDEMPOTENT_WRITE)
    def source_stop(name: SourceName) -> StopResponse:
        """Stop a running source: a live source stops watching (the next start catches up); a manual source's
        running index job is cancelled, keeping what it wrote."""
        return StopResponse(**sources.stop(name))

    @tool(tools, "source-list", READ_ONLY)
    def source_list() -> SourceListResponse:
        """List all sources with status."""
        found = sources.list()
        return SourceListResponse(sources=[SourceInfo(**s) for s in found], total=len(found))

    @tool(tools, "source-get", READ_ONLY)
    def source_get(name: SourceName) -> SourceInfo:
        """Get a specific source with details: path, settings, status, scan totals and, for a live source, its
        watcher's counters."""
        return SourceInfo(**sources.get(name))

    @tool(tools, "source-delete", DESTRUCTIVE)
    def source_delete(name: SourceName) -> DeleteResponse:
        """Delete a source (stopping it first). The entries it indexed stay in the index."""
        return DeleteResponse(**sources.delete(name))

    @tool(tools, "source-stats", READ_ONLY)
    def source_stats(name: SourceName) -> SourceStats:
        """Get statistics for a source including scan history and performance metrics: entries under its path now,
        last scan time, number of scans and their average duration."""
        return SourceStats(**sources.stats(name))

"""Indexing tools: index, job-progress, list-jobs, cancel-job."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field

from flows.core.roots import current_limit
from flows.index.indexer import IndexProgress
from flows.index.service import index_path
from store import jobs as store_jobs
from store.errors import NotFound
from store.filters import check_range
from mcp_server.tools.common import IDEMPOTENT_WRITE, READ_ONLY, WRITES, McpProgress, ToolSet, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class IndexResponse(BaseModel):
    """Async: jobId, root, status "pending", statusUrl. Sync or skipped: the counts of the finished scan."""

    model_config = ConfigDict(extra="allow")
    root: str
    status: str
    jobId: int | None = None
    statusUrl: str | None = None
    files: int | None = None
    directories: int | None = None
    totalSize: int | None = None
    durationMs: int | None = None
    skipped: bool | None = None
    skipReason: str | None = None
    errors: int | None = Field(default=None, description="how many paths the scan skipped (as in job-progress)")
    issues: list[dict[str, str]] | None = Field(
        default=None, description="paths skipped and why (first 20), as in job-progress")


class JobInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    jobId: str
    id: int
    kind: str
    root: str
    status: str
    progress: float
    files: int
    directories: int
    totalSize: int
    removed: int
    errors: int = Field(description="how many paths the scan skipped (unreadable, vanished, ...); job-progress "
                                    "lists them under issues")
    error: str | None
    currentPath: str | None
    createdAt: str | None
    startedAt: str | None
    completedAt: str | None
    durationMs: int | None
    flowRunId: str | None
    statusUrl: str


class JobProgress(JobInfo):
    issues: list[dict[str, str]] = Field(default_factory=list, description="paths skipped and why (first 20)")


class JobList(BaseModel):
    jobs: list[JobInfo]
    total: int


class CancelResult(JobInfo):
    cancelled: bool
    message: str


JobId = Annotated[str | int, Field(description='Job identifier returned from index, e.g. "123"')]


def own_job(app: AssayApp, job_id: int) -> dict:
    """Job ``job_id`` if it is the caller's to see: a job id is a handle, and a job under roots the caller may not
    reach reads as no job at all."""
    job = store_jobs.get_job(app.engine, job_id=job_id)
    if not app.roots.allows(job["root"]):
        raise NotFound(f"no job with id {job_id}; list-jobs shows the existing ones", field="jobId")
    return job


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "index", IDEMPOTENT_WRITE)
    async def index(
        root: Annotated[str, Field(description="File or directory path to index")],
        ctx: Context,
        async_: Annotated[bool, Field(validation_alias="async",
                                      description="Run asynchronously (return job ID immediately)")] = True,
        force: Annotated[bool, Field(description="Force re-indexing even if path was recently scanned")] = False,
        maxAge: Annotated[float, Field(ge=0, description="Maximum age in seconds before a scan is considered stale "
                                                         "(0 = always re-index)")] = 3600,
    ) -> IndexResponse:
        """Index a filesystem path and store metadata in the database. Skips indexing if the path was recently
        scanned (within maxAge seconds) unless force=true. Async by default: returns a jobId and statusUrl at once;
        follow it with job-progress. With async=false, waits and reports MCP progress."""
        resolved = app.roots.resolve(root, field="root")
        if async_:
            return IndexResponse(**index_path(app.runner, root=resolved, async_=True, force=force, max_age=maxAge))
        progress = McpProgress(ctx)

        def on_progress(p: IndexProgress) -> None:
            progress.update(p.percent, f"{p.files} files, {p.directories} directories")

        result = await anyio.to_thread.run_sync(
            lambda: index_path(app.runner, root=resolved, async_=False, force=force, max_age=maxAge,
                               on_progress=on_progress)
        )
        await progress.finish(f"{result.get('status')}: {result.get('files') or 0} files")
        return IndexResponse(**result)

    @tool(tools, "job-progress", READ_ONLY)
    def job_progress(jobId: JobId) -> JobProgress:
        """Retrieve status for an indexing job: status, progress (0-100), counts, and paths skipped."""
        job_id = store_jobs.parse_job_id(jobId)
        job = own_job(app, job_id)
        return JobProgress(**store_jobs.job_public(job), issues=store_jobs.job_issues(app.engine, job_id=job_id))

    @tool(tools, "list-jobs", READ_ONLY)
    def list_jobs(
        activeOnly: Annotated[bool, Field(description="Show only running/pending jobs")] = False,
        status: Annotated[Literal["pending", "running", "completed", "failed", "cancelled"] | None,
                          Field(description="Filter by status")] = None,
        minProgress: Annotated[float | None, Field(ge=0, le=100, description="Minimum progress (0-100)")] = None,
        maxProgress: Annotated[float | None, Field(ge=0, le=100, description="Maximum progress (0-100)")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Maximum jobs to return")] = 50,
    ) -> JobList:
        """List indexing jobs, newest first, with optional filtering."""
        check_range(minProgress, maxProgress, low_name="minProgress", high_name="maxProgress")
        rows, total = store_jobs.list_jobs(app.engine, active_only=activeOnly, status=status,
                                           min_progress=minProgress, max_progress=maxProgress, limit=limit)
        if current_limit() is not None:  # a user limited to some roots sees the jobs under them
            kept = [r for r in rows if app.roots.allows(r["root"])]
            rows, total = kept, total - (len(rows) - len(kept))
        return JobList(jobs=[JobInfo(**store_jobs.job_public(r)) for r in rows], total=total)

    @tool(tools, "cancel-job", WRITES)
    def cancel_job(jobId: JobId) -> CancelResult:
        """Cancel a running or pending indexing job. The walk stops within one batch of entries; what it wrote is
        kept and browsable (the folders it had not finished are marked incomplete). A job that has already ended
        answers cancelled: false with its status."""
        job_id = store_jobs.parse_job_id(jobId)
        own_job(app, job_id)
        result = app.runner.cancel(job_id)
        return CancelResult(**store_jobs.job_public(result), cancelled=result["cancelled"], message=result["message"])

"""Classifier tools (reference 000, "Classifier Tools"): rerun-classifier, classifier-job-progress,
list-classifier-jobs. Thin wrappers over flows.classify.service; jobs are ``jobs`` rows of kind "classify"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field

from flows.classify import service as classify
from store import jobs as store_jobs
from mcp_server.tools.common import READ_ONLY, WRITES, McpProgress, StrList, ToolSet, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class ClassifierJob(BaseModel):
    """A classifier job: reference 000's snake_case fields (id, source_path, status, progress, created_at,
    completed_at) and the details index jobs also give."""

    model_config = ConfigDict(extra="allow")
    id: int
    jobId: str
    source_path: str
    sourcePath: str
    status: str
    progress: float = Field(description="0-100: files done of the files at the path")
    created_at: str | None
    completed_at: str | None
    started_at: str | None = None
    operations: list[str] = Field(description="thumbnail, timeline, metadata (metadata includes the content hash)")
    force: bool = True
    files: int = Field(description="files done so far (or in all, once finished)")
    errors: int = Field(description="files with at least one failed operation; issues says which and why")
    error: str | None = None
    currentPath: str | None = None
    durationMs: int | None = None
    flowRunId: str | None = None
    statusUrl: str


class ClassifierJobProgress(ClassifierJob):
    issues: list[dict[str, str]] = Field(default_factory=list,
                                         description="files that failed and why (first 20): {path, reason}")


class ClassifierJobList(BaseModel):
    jobs: list[ClassifierJob]
    total: int


JobId = Annotated[int | str, Field(description='Job ID returned by rerun-classifier, e.g. 123 or "123"')]


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "rerun-classifier", WRITES)
    async def rerun_classifier(
        sourcePath: Annotated[str, Field(description="Path to source file (or a directory: every indexed file "
                                                     "under it)")],
        ctx: Context,
        operations: Annotated[StrList | None, Field(
            description="Operations (thumbnail, timeline, metadata, hash, all, or the outcome names "
                        "generate_thumbnail, generate_timeline, extract_metadata); default all")] = None,
        async_: Annotated[bool, Field(validation_alias="async",
                                      description="Run asynchronously (return job ID immediately)")] = True,
    ) -> ClassifierJobProgress:
        """Regenerate metadata for a file: thumbnails, video timelines, extracted metadata and the content hash of
        an indexed file, or of every indexed file under a directory, redone even if done before. Async by default:
        returns the job (jobId, statusUrl) at once; follow it with classifier-job-progress. With async=false, waits
        and reports MCP progress. The path must be indexed first."""
        resolved = app.roots.resolve(sourcePath, field="sourcePath")
        ops = classify.check_operations(operations)
        if async_:
            return ClassifierJobProgress(**classify.classify_path(app.runner, path=resolved, operations=ops))
        progress = McpProgress(ctx)

        def on_progress(p: dict) -> None:
            progress.update(p["percent"], f"{p['files']} of {p['total']} files, {p['errors']} with errors")

        result = await anyio.to_thread.run_sync(
            lambda: classify.classify_path(app.runner, path=resolved, operations=ops, async_=False,
                                           on_progress=on_progress))
        await progress.finish(f"{result['status']}: {result['files']} files")
        return ClassifierJobProgress(**result)

    @tool(tools, "classifier-job-progress", READ_ONLY)
    def classifier_job_progress(jobId: JobId) -> ClassifierJobProgress:
        """Check classifier job progress: status, progress (0-100), files done, and the files that failed."""
        job_id = store_jobs.parse_job_id(jobId)
        job = classify.get_classify_job(app.engine, job_id)
        return ClassifierJobProgress(**classify.job_public(job, app.engine, issues=True))

    @tool(tools, "list-classifier-jobs", READ_ONLY)
    def list_classifier_jobs(
        status: Annotated[Literal["pending", "running", "completed", "failed", "cancelled"] | None,
                          Field(description="Filter by status (pending, running, completed, failed, cancelled)")]
        = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="Maximum jobs to return")] = 50,
    ) -> ClassifierJobList:
        """List all classifier jobs with optional filtering, newest first."""
        rows, total = store_jobs.list_jobs(app.engine, status=status, limit=limit, kind=classify.KIND)
        return ClassifierJobList(jobs=[ClassifierJob(**classify.job_public(r, app.engine)) for r in rows],
                                 total=total)

"""The operator's tools of reference 004 (group "admin"; every one needs the ``admin`` permission, which the guard
checks: mcp_server/guard/placement.py): server introspection (get_server_info, get_memory_stats,
list_active_sessions, get_recent_requests, get_recent_errors, get_config), background jobs (list_jobs,
get_job_history, trigger_job, enable_job, disable_job) and upkeep (check_integrity, reload_search_index,
clear_cache). The user tools and query_sql are groups of their own (users, sql).

Thin wrappers: the server's state is read by mcp_server/tools/admin_state.py, the jobs are flows.plans.operator_jobs,
the upkeep mcp_server/tools/admin_upkeep.py over the capabilities' own operator modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from flows.plans.operator_jobs import FORMS, OperatorJobs
from mcp_server.tools import admin_state, admin_upkeep
from mcp_server.tools.admin_models import (ClearResult, ConfigResult, ErrorList, IntegrityReport, JobAction,
                                           JobHistory, JobList, MemoryStats, ReloadResult, RequestList, ServerInfo,
                                           SessionList)
from mcp_server.tools.common import DESTRUCTIVE, IDEMPOTENT_WRITE, READ_ONLY, WRITES, ToolSet, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

JobId = Annotated[str, Field(description=f"The job: {FORMS}; list_jobs lists them")]


def register(tools: ToolSet, app: AssayApp) -> None:
    jobs = OperatorJobs(app.plans, app.sources)

    # --- server introspection ---------------------------------------------------------------------------------

    @tool(tools, "get_server_info", READ_ONLY)
    def get_server_info() -> ServerInfo:
        """Server version, uptime, process, transport and address, how callers authenticate, the store (password
        hidden), data dir, roots, tool groups, Prefect's API, and sessions and requests since start."""
        return ServerInfo.model_validate(admin_state.server_info(app))

    @tool(tools, "get_memory_stats", READ_ONLY)
    def get_memory_stats() -> MemoryStats:
        """Process memory (RSS, VMS, threads), the store's connection pool, disk used by the store, the artifact
        cache, the text and vector indexes and the model exports; the indexes' state (documents pending after a
        rebuild, collections loaded); sessions, requests and log records kept, the audit writer's queue."""
        return MemoryStats.model_validate(admin_state.memory_stats(app))

    @tool(tools, "list_active_sessions", READ_ONLY)
    def list_active_sessions() -> SessionList:
        """The MCP sessions that have called this server: user, client, how it authenticated, first and last seen,
        requests and errors; active when seen within the last 30 minutes."""
        return SessionList.model_validate(admin_state.sessions(app))

    @tool(tools, "get_recent_requests", READ_ONLY)
    def get_recent_requests(
        limit: Annotated[int, Field(ge=1, le=1000, description="Maximum requests to return (1-1000)")] = 50,
        user: Annotated[str | None, Field(description="Only this user's requests")] = None,
    ) -> RequestList:
        """The latest tool calls and resource reads, newest first: time, user, session, outcome (ok, error, denied,
        rate_limited), error code and duration. The server keeps the last 1000; the audit log keeps them all."""
        return RequestList.model_validate(admin_state.recent_requests(app, limit=limit, user=user))

    @tool(tools, "get_recent_errors", READ_ONLY)
    def get_recent_errors(
        limit: Annotated[int, Field(ge=1, le=1000, description="Maximum errors to return (1-1000)")] = 50,
    ) -> ErrorList:
        """Recent errors, newest first, from three places: calls that did not end ok, log records at WARNING and
        above, and the audit writer's failures (its database unavailable)."""
        return ErrorList.model_validate(admin_state.recent_errors(app, limit=limit))

    @tool(tools, "get_config", READ_ONLY)
    def get_config() -> ConfigResult:
        """The server's effective settings by section, as the config file names them, with secrets hidden
        (passwords in URLs, any setting naming a secret, token or password), and what they imply (the store's
        URL, the roots in effect, the audit database)."""
        return ConfigResult.model_validate(admin_state.config(app))

    # --- background jobs --------------------------------------------------------------------------------------

    @tool(tools, "list_jobs", READ_ONLY)
    def list_jobs() -> JobList:
        """All background jobs with their status: every plan (plan:<name>: oneshot or continuous, active or paused,
        its last execution), every source (source:<name>: live or manual, running or stopped, its last scan) and
        the runs in flight (job:<id>: index, classify and plan runs with their progress)."""
        found = jobs.list_jobs()
        return JobList.model_validate({"jobs": found, "total": len(found)})

    @tool(tools, "get_job_history", READ_ONLY)
    def get_job_history(
        job_id: JobId,
        limit: Annotated[int, Field(ge=1, le=1000, description="Maximum runs to return (1-1000)")] = 20,
    ) -> JobHistory:
        """A job's runs, newest first: a plan's executions (status, times, entries processed / matched, outcomes
        applied, error), a source's scan jobs, or one run itself."""
        return JobHistory.model_validate(jobs.history(job_id, limit=limit))

    @tool(tools, "trigger_job", WRITES)
    def trigger_job(job_id: JobId) -> JobAction:
        """Run a job now, in the background: a plan is executed (its execution id; get_job_history or
        jobs://{job_id}/output follow it), a source is started (a manual source's scan job, a live source's
        watching). A paused plan is refused until enable_job."""
        return JobAction.model_validate(jobs.trigger(job_id))

    @tool(tools, "enable_job", IDEMPOTENT_WRITE)
    def enable_job(job_id: JobId) -> JobAction:
        """Enable a job: a plan becomes active (it runs, and a continuous plan watches again); a source starts with
        the server again, and a live one starts watching now."""
        return JobAction.model_validate(jobs.set_enabled(job_id, True))

    @tool(tools, "disable_job", IDEMPOTENT_WRITE)
    def disable_job(job_id: JobId) -> JobAction:
        """Disable a job: a plan is paused (it no longer runs or watches; an execution in flight finishes); a
        source no longer starts with the server and is stopped now (a manual source's scan is cancelled)."""
        return JobAction.model_validate(jobs.set_enabled(job_id, False))

    # --- upkeep -----------------------------------------------------------------------------------------------

    @tool(tools, "check_integrity", DESTRUCTIVE)
    def check_integrity(
        fix: Annotated[bool, Field(description="Repair what can be repaired safely: remove orphan cache files, "
                                               "drop artifact rows whose file is gone (made again on demand), "
                                               "rebuild an index that does not match the store")] = False,
    ) -> IntegrityReport:
        """Verify the store against the disk and the index files: the store's own checks (as db-diagnose), the
        artifact cache (files no row points at, rows whose file is gone), the text index against the store's
        extracted text (documents missing or stale, segments failing their checksums) and each collection's vector
        index against the stored embeddings. fix=true repairs and says what it did; it never deletes a user's
        file."""
        return IntegrityReport.model_validate(admin_upkeep.check_integrity(app, fix=fix))

    @tool(tools, "reload_search_index", IDEMPOTENT_WRITE)
    def reload_search_index(
        index: Annotated[admin_upkeep.Index, Field(description="Which index: text (full-text), vector (semantic) "
                                                               "or all")] = "all",
    ) -> ReloadResult:
        """Rebuild the search indexes from the store (the store holds the extracted text and the embeddings; the
        indexes are built from them). Returns at once with what was started; the indexing goes on in the
        background and get_memory_stats follows it. Searches keep working meanwhile."""
        return ReloadResult.model_validate(admin_upkeep.reload_search_index(app, index))

    @tool(tools, "clear_cache", DESTRUCTIVE)
    def clear_cache(
        cache: Annotated[admin_upkeep.Cache, Field(
            description="thumbnails (the artifact cache: thumbnails, timelines, excerpts, files and rows), "
                        "text-index, vector-index (rebuilt from the store), models (ONNX / OpenVINO exports, "
                        "rebuilt when next needed) or memory (in-process caches)")],
    ) -> ClearResult:
        """Invalidate one cache and say what was freed (files, bytes). Everything cleared is made again from the
        store or the models when needed; no user file is touched."""
        return ClearResult.model_validate(admin_upkeep.clear_cache(app, cache))

"""synthesis://jobs resources: every job, the jobs in one status, and one job by id.

``synthesis://jobs`` and ``synthesis://jobs/{pending,running,completed,failed}`` (plus ``/cancelled``, a status of
ours the reference does not list) are static resources: the newest jobs first, at most 100, with the total; the
list-jobs tool filters further. ``synthesis://jobs/{id}`` is one job in job-progress's shape (the ``statusUrl`` the
index tool returns). An unknown id is resource-not-found; a malformed one says what an id looks like.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from sqlalchemy.engine import Engine

from mcp_server.resources.common import json_resource
from store import jobs as store_jobs
from store.errors import InvalidInput

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

JSON = "application/json"
BASE = "synthesis://jobs"
LIST_LIMIT = 100


_json = json_resource


def jobs_listing(engine: Engine, *, status: str | None = None, limit: int = LIST_LIMIT) -> dict[str, Any]:
    """The newest jobs (of every kind), optionally in one status, with the total that matched."""
    rows, total = store_jobs.list_jobs(engine, status=status, limit=limit, kind=None)
    jobs = [store_jobs.job_public(r) for r in rows]
    result: dict[str, Any] = {"status": status, "total": total, "hasMore": total > len(jobs), "jobs": jobs}
    if total > len(jobs):
        result["hint"] = (f"showing the newest {len(jobs)} of {total}; the list-jobs tool filters by status and "
                          "progress")
    return result


def job_detail(engine: Engine, *, job_id: str) -> dict[str, Any]:
    """One job as job-progress returns it (with the first paths it skipped)."""
    if job_id in store_jobs.STATUSES:  # not reachable through the static status URIs, kept for direct callers
        raise InvalidInput(f"{job_id!r} is a status; read {BASE}/{job_id} as a list", field="id")
    number = store_jobs.parse_job_id(job_id, field="id")
    job = store_jobs.get_job(engine, job_id=number)
    return {**store_jobs.job_public(job), "issues": store_jobs.job_issues(engine, job_id=number)}


def register(mcp: MCPServer, app: AssayApp) -> None:
    @mcp.resource(BASE, name="jobs", mime_type=JSON)
    @_json
    def all_jobs() -> dict[str, Any]:
        """All jobs, newest first (at most 100, with the total)."""
        return jobs_listing(app.engine)

    def status_resource(status: str) -> None:
        @mcp.resource(f"{BASE}/{status}", name=f"jobs-{status}", mime_type=JSON,
                      description=f"{status.capitalize()} jobs, newest first (at most {LIST_LIMIT}, with the total).")
        @_json
        def jobs_in_status() -> dict[str, Any]:
            return jobs_listing(app.engine, status=status)

    for status in store_jobs.STATUSES:
        status_resource(status)

    @mcp.resource(BASE + "/{id}", name="job", mime_type=JSON)
    @_json
    def one_job(id: str) -> dict[str, Any]:  # noqa: A002 - the reference names the template variable "id"
        """Job by id, as job-progress returns it: status, progress (0-100), counts, times, paths skipped."""
        return job_detail(app.engine, job_id=id)

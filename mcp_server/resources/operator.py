"""Reference 004's operator resources (each needs the ``admin`` permission: mcp_server/guard/placement.py):

- ``logs://recent``: the server's recent log records, newest first (the guard keeps the last 1000 at INFO and above);
- ``jobs://{job_id}/output``: the latest run of a job (``plan:<name>``, ``source:<name>``, ``job:<id>``, as list_jobs
  names them; ``plan%3Aname`` is the same URI): a plan's latest execution with its summary and outcome records
  (counts, the failed ones with their reason), a source's state with its latest scan and what it skipped, or a run
  with its issues;
- ``changelog://recent``: recent changes to plans, sets, sources and files, by whom: the audit log's successful calls
  of the tools that change, run or move things, with their arguments (secrets redacted when they were recorded).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp_types import Completion

from flows.plans.operator_jobs import OperatorJobs
from mcp_server.guard.placement import CHANGE, FILES, RUN, TOOL_PERMISSIONS
from mcp_server.resources.common import JSON, json_resource
from mcp_server.resources.completions import COMPLETERS, MAX_VALUES
from store import jobs as store_jobs
from store import plans as store_plans
from store import sources as store_sources
from store.audit import AuditUnavailable
from store.entries import iso

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

LOG_RECORDS = 200  # newest log records logs://recent shows
CHANGES = 100  # newest changes changelog://recent shows
SCANNED = 2000  # successful tool calls of the audit log it looks through for them
FLUSH_SECONDS = 2.0  # how long it waits for the audit writer to write the calls just made
JOB_OUTPUT = "jobs://{job_id}/output"
CHANGE_PERMISSIONS = (CHANGE, RUN, FILES)


def recent_logs(app: AssayApp, limit: int = LOG_RECORDS) -> dict[str, Any]:
    guard = app.guard
    if guard is None:
        return {"records": [], "total": 0, "kept": 0, "note": "this server has no guard, so no log is kept"}
    records = [{**r, "time": iso(r["time"])} for r in guard.log.recent(limit)]
    return {"records": records, "total": len(records), "kept": len(guard.log.records)}


def recent_changes(app: AssayApp, limit: int = CHANGES) -> dict[str, Any]:
    """The newest successful calls of tools placed in change, run or file_operations, from the audit log."""
    audit = app.guard.audit if app.guard is not None else None
    if audit is None:
        return {"changes": [], "total": 0,
                "note": "auditing is off (guard.audit: false), so changes are not recorded; turn it on to see them"}
    audit.flush(FLUSH_SECONDS)  # the calls just made, written (at most a short wait: never an error)
    try:
        rows = audit.recent(limit=SCANNED, kinds=["tool"], outcomes=["ok"])
    except AuditUnavailable as exc:
        return {"changes": [], "total": 0, "note": exc.message}
    changes = []
    for row in rows:
        permission = TOOL_PERMISSIONS.get(row["name"])
        if permission in CHANGE_PERMISSIONS:
            changes.append({"time": iso(row["time"]), "user": row["user"], "tool": row["name"], "kind": permission,
                            "arguments": row["arguments"], "session": row["session"], "client": row["client"]})
            if len(changes) == limit:
                break
    return {"changes": changes, "total": len(changes), "audit_url": audit.url,
            "note": f"the newest {limit} changes among the last {SCANNED} successful tool calls"}


def complete_job_id(app: AssayApp, value: str) -> Completion:
    """Job ids starting with ``value``: plans, sources and the runs in flight."""
    ids = [f"plan:{row['name']}" for row in store_plans.list_plans(app.engine)]
    ids += [f"source:{name}" for name in store_sources.source_names(app.engine)]
    rows, _ = store_jobs.list_jobs(app.engine, active_only=True, kind=None, limit=MAX_VALUES)
    ids += [f"job:{row['id']}" for row in rows]
    hits = [i for i in ids if i.startswith(value)]
    return Completion(values=hits[:MAX_VALUES], total=len(hits), has_more=len(hits) > MAX_VALUES)


COMPLETERS[(JOB_OUTPUT, "job_id")] = complete_job_id


def register(mcp: MCPServer, app: AssayApp) -> None:
    jobs = OperatorJobs(app.plans, app.sources)

    @mcp.resource("logs://recent", name="recent-logs", mime_type=JSON)
    @json_resource
    def logs() -> dict[str, Any]:
        """The server's recent log records, newest first (the last 200: time, level, logger, message)."""
        return recent_logs(app)

    @mcp.resource(JOB_OUTPUT, name="job-output", mime_type=JSON)
    @json_resource
    def job_output(job_id: str) -> dict[str, Any]:
        """The latest run of a job (plan:<name>, source:<name> or job:<id>, as list_jobs names them): a plan's
        latest execution with its outcome records and errors, a source's latest scan, a run with its issues."""
        return jobs.output(job_id)

    @mcp.resource("changelog://recent", name="changelog", mime_type=JSON)
    @json_resource
    def changelog() -> dict[str, Any]:
        """Recent changes to plans, sets, sources and files, newest first, by whom: the audit log's successful
        calls of tools that change, run or move things, with their arguments."""
        return recent_changes(app)

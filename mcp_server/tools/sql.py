"""The read-only SQL tool (reference 004's "Debug" group): ``query_sql`` over the store or the audit database.

The guarantee is store/readonly_sql.py's: each query runs on a connection of its own that cannot write (SQLite
opened read-only with ``query_only`` and an authorizer; PostgreSQL in a read-only transaction as a role that can only
SELECT, one statement through the extended protocol), within ``guard.sql_timeout`` seconds, at most 100 rows.
Refusals are tool errors under its codes: SQL_NOT_ALLOWED, SQL_ERROR, QUERY_TIMEOUT. The tool is synchronous, so
the SDK runs it in a worker thread and a slow query never holds the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy.engine import make_url

from mcp_server.tools.common import READ_ONLY, ToolSet, tool
from store.audit import AuditLog, default_audit_url
from store.errors import InvalidInput
from store.readonly_sql import run_readonly

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

MAX_ROWS = 100  # reference 004: "results capped at 100 rows - use LIMIT/OFFSET in your SQL for larger datasets"
AUDIT_FLUSH_SECONDS = 2.0  # how long a query of the audit database waits for the calls queued before it

Database = Literal["store", "audit"]


class SqlQueryResponse(BaseModel):
    db: Database
    columns: list[str]
    rows: list[list[Any]] = Field(description="At most 100 rows; bytes as base64 text, times as ISO text")
    row_count: int = Field(description="Rows returned")
    truncated: bool = Field(description="More rows matched than were returned")
    note: str | None = Field(None, description="How to see the rest when truncated")
    elapsed_ms: float
    guarantee: str = Field(description="How this connection was kept from writing")


def audit_of(app: AssayApp) -> AuditLog:
    """The server's audit log; InvalidInput when it keeps none."""
    audit = app.guard.audit if app.guard is not None else None
    if audit is None:
        raise InvalidInput("this server keeps no audit log (guard.audit is off, ASSAY_AUDIT=0): query db 'store', or "
                           "start the server with the audit log on", field="db")
    return audit


def audit_url(app: AssayApp, audit: AuditLog) -> str:
    """The URL of ``audit``'s database with its password: ``AuditLog.url`` hides it; the settings it was made
    from (mcp_server/guard/setup.py) have it."""
    settings = app.settings
    configured = settings.guard.audit_url or default_audit_url(settings.db_url, settings.data_dir)
    same = make_url(configured).render_as_string(hide_password=True) == audit.url
    return configured if same else audit.url


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "query_sql", READ_ONLY)
    def query_sql(
        db: Annotated[Database, Field(description="'store': the index (entries, sets, plans, jobs, ...); 'audit': "
                                                  "the audit log (table audit_events: every call and its caller)")],
        query: Annotated[str, Field(description="One read-only statement: SELECT, WITH ... SELECT, VALUES, TABLE "
                                                "(PostgreSQL), EXPLAIN without ANALYZE, or a read-only PRAGMA "
                                                "(SQLite, e.g. table_info(entries))")],
    ) -> SqlQueryResponse:
        """Run one read-only SQL statement on the store or the audit database, on a connection that cannot write.
        At most 100 rows are returned: page through more with LIMIT/OFFSET. Writes, ATTACH, PRAGMA changes,
        several statements and functions with side effects are refused; the query stops after the server's time
        limit (guard.sql_timeout). The audit log is written in the background: querying it first writes the calls
        made before this one."""
        if db == "audit":
            audit = audit_of(app)
            audit.flush(AUDIT_FLUSH_SECONDS)
            url = audit_url(app, audit)
        else:
            url = app.settings.db_url
        result = run_readonly(url, query, max_rows=MAX_ROWS, timeout=app.settings.guard.sql_timeout)
        note = None
        if result.truncated:
            note = (f"more rows matched; only the first {result.row_count} are returned: page through the rest with "
                    f"LIMIT/OFFSET in the query (e.g. ORDER BY ... LIMIT {MAX_ROWS} OFFSET {MAX_ROWS} for the second "
                    "page)")
        return SqlQueryResponse(db=db, columns=result.columns, rows=result.rows, row_count=result.row_count,
                                truncated=result.truncated, note=note, elapsed_ms=result.elapsed_ms,
                                guarantee=result.guarantee)

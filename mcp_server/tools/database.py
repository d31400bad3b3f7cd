"""Database tools: db-diagnose."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

from mcp_server.tools.common import READ_ONLY, tool
from store.diagnostics import diagnose


class DiagnoseResponse(BaseModel):
    database_path: str = Field(description="the SQLite file, or the store URL with its password masked")
    database_size: int | None = Field(description="bytes on disk (SQLite file + WAL, or pg_database_size)")
    integrity_check: str = Field(description='"ok", the problems found, or why the check was skipped')
    entry_count: int
    resource_set_count: int
    orphaned_entries: int = Field(description="entries whose parent is missing inside an indexed tree")
    stale_entries: int = Field(description="entries no index scan has seen for stale_after_seconds")
    stale_after_seconds: int
    backend: str
    journal_mode: str | None
    entries_by_kind: dict[str, int]
    source_count: int
    plan_count: int
    saved_query_count: int
    orphaned_records: dict[str, int] = Field(description="rows whose foreign key points at nothing, per table.column")
    schema_check: str
    skipped_checks: list[str] = Field(description="checks this backend does not support")
    healthy: bool
    warnings: list[str]


def register(mcp: MCPServer, app) -> None:
    @tool(mcp, "db-diagnose", READ_ONLY)
    def db_diagnose() -> DiagnoseResponse:
        """Run diagnostics on the database to check integrity and statistics: size, entry and set counts, orphaned
        and stale entries, dangling references, schema. Checks only SQLite supports are skipped (and named) on
        other backends."""
        return DiagnoseResponse.model_validate(diagnose(app.engine))

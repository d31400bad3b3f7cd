"""Database tools: db-diagnose."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from flows.classify.sweep import find_orphans, missing_files
from flows.core.capability import data_dir
from mcp_server.tools.common import READ_ONLY, ToolSet, tool
from store.diagnostics import artifact_cache_report, diagnose

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class ArtifactCache(BaseModel):
    orphan_files: int = Field(description="files in <data dir>/cache no artifact row points at (the sweep removes "
                                          "them)")
    orphan_bytes: int
    missing_files: int = Field(description="artifact rows whose cache file is gone")
    orphan_samples: list[str] = Field(description="cache paths of orphan files (first 20)")
    missing_samples: list[dict] = Field(description="{artifactId, entryId, cachePath} of rows whose file is gone "
                                                    "(first 20)")


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
    counter_mismatches: dict[str, int] = Field(
        default_factory=dict, description="stored counters that differ from the rows they count, per counter (folder "
                                          "sizes, chunk counts, chunks without a vector, document line counts)")
    unfinished_documents: int = Field(
        default=0, description="text segments without their document row: an extraction in progress or cut short")
    schema_check: str
    skipped_checks: list[str] = Field(description="checks this backend does not support")
    artifact_cache: ArtifactCache | None = Field(default=None, description="the classifier's artifact cache")
    healthy: bool
    warnings: list[str]


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "db-diagnose", READ_ONLY)
    def db_diagnose() -> DiagnoseResponse:
        """Run diagnostics on the database to check integrity and statistics: size, entry and set counts, orphaned
        and stale entries, dangling references, schema. Checks only SQLite supports are skipped (and named) on
        other backends. Also the artifact cache: files no artifact points at, artifacts whose file is gone."""
        return DiagnoseResponse.model_validate(diagnose(app.engine, artifact_cache=cache_report(app.engine)))


def cache_report(engine) -> dict:
    """Orphan files in the classifier's cache and artifact rows whose file is missing (nothing is removed)."""
    root = data_dir()
    count = size = 0
    samples: list[str] = []
    for rel, entry in find_orphans(engine, root):
        count += 1
        try:
            size += entry.stat(follow_symlinks=False).st_size
        except OSError:
            pass
        if len(samples) < 20:
            samples.append(rel)
    missing, missing_samples = missing_files(engine, root, limit=20)
    return artifact_cache_report(orphan_files=count, orphan_bytes=size, missing_files=missing,
                                 orphan_samples=samples, missing_samples=missing_samples)

"""Columns added to tables after a store may already exist, and the hook that adds them to an older store."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, MetaData, Table, event, insert, inspect, update
from sqlmodel import SQLModel

from store.models.columns import inserted_id

# Columns added after a store may already exist: create_all makes new tables but never adds a column, so each
# missing one is added with ALTER TABLE right after create_all (nullable, no default: instant on SQLite and
# PostgreSQL). A data dir made by an older version keeps working.
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("entries", "scan_error", "TEXT"),
    ("resource_maps", "source_hash", "TEXT"),
    ("resource_maps", "title", "TEXT"),
    ("resource_maps", "strategy", "TEXT"),
    ("resource_maps", "stale", "INTEGER"),
    ("resource_maps", "metadata_json", "TEXT"),
    ("resource_maps", "updated_at", "DOUBLE PRECISION"),
    ("plan_executions", "run_id", "INTEGER"),
    ("jobs", "runs_on", "TEXT"),
    ("jobs", "heartbeat_at", "DOUBLE PRECISION"),
)

# Schema a store made by an older version has and this one no longer uses, dropped at start: the FTS5 trigram index
# of document segments (and its delete trigger) that the text engine (store.textindex) replaced.
RETIRED_SQLITE: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS document_segments_ad",
    "DROP TABLE IF EXISTS document_fts",
)

_RUN_STATUS = {"running": "failed", "success": "completed", "partial": "completed", "error": "failed"}


@event.listens_for(SQLModel.metadata, "after_create")
def _add_missing_columns(metadata: MetaData, connection: Connection, **_kw: Any) -> None:
    insp = inspect(connection)
    tables = set(insp.get_table_names())
    for table, column, sql_type in ADDED_COLUMNS:
        if table in tables and column not in {c["name"] for c in insp.get_columns(table)}:
            connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")
    if connection.dialect.name == "sqlite" and "document_fts" in tables:
        for statement in RETIRED_SQLITE:
            connection.exec_driver_sql(statement)
    if "plan_executions" in tables and "jobs" in tables:
        backfill_plan_runs(connection)


def backfill_plan_runs(connection: Connection) -> int:
    """Give every plan execution of an older store its row in the runs table (kind "plan"), so the store's history
    is one table of runs; returns how many it made. Runs once: later executions are made with their run."""
    rows = connection.exec_driver_sql(
        "SELECT id, plan_name, status, error_message, flow_run_id, started_at, completed_at, duration_ms "
        "FROM plan_executions WHERE run_id IS NULL ORDER BY id").fetchall()
    for execution_id, name, status, message, flow_run_id, started, completed, duration in rows:
        run_status = "cancelled" if status == "error" and (message or "").startswith("cancelled") \
            else _RUN_STATUS.get(status, "failed")
        run_id = inserted_id(connection.execute(
            insert(_jobs()).values(
                kind="plan", root=name, status=run_status, progress=100.0 if run_status == "completed" else 0.0,
                files=0, directories=0, total_size=0, removed=0, error_count=0, error_message=message,
                params_json=json.dumps({"execution_id": execution_id}), cancel_requested=False,
                flow_run_id=flow_run_id, created_at=started, started_at=started, completed_at=completed,
                duration_ms=duration)))
        executions = SQLModel.metadata.tables["plan_executions"]
        connection.execute(update(executions).where(executions.c.id == execution_id).values(run_id=run_id))
    return len(rows)


def _jobs() -> Table:
    return SQLModel.metadata.tables["jobs"]

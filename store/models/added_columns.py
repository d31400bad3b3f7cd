"""Columns added to tables after a store may already exist, and the hook that adds them to an older store."""

from __future__ import annotations

from sqlalchemy import event, inspect
from sqlmodel import SQLModel

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
)


@event.listens_for(SQLModel.metadata, "after_create")
def _add_missing_columns(metadata, connection, **_kw) -> None:
    insp = inspect(connection)
    tables = set(insp.get_table_names())
    for table, column, sql_type in ADDED_COLUMNS:
        if table in tables and column not in {c["name"] for c in insp.get_columns(table)}:
            connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")

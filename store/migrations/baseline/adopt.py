"""What revision 0001 does besides making tables: it adopts a store made before migrations existed.

Such a store was made by ``create_all`` of its release and patched at each start (columns added with ALTER TABLE,
old full-text tables dropped, plan executions given their runs). Revision 0001 finishes that once, whatever release
made the store: the tables it lacks made, the columns and indexes it lacks added, what later releases retired
dropped, the triggers made as the baseline has them, the plan executions given their runs. On an empty database
the same steps make the whole baseline schema.
"""

from __future__ import annotations

import json
import logging

import sqlalchemy as sa
from alembic import op
from sqlalchemy.engine import Connection

from store.errors import StoreVersionError
from store.migrations.baseline.tables import SCHEMA
from store.migrations.baseline.triggers import POSTGRES_RETIRED, POSTGRES_TRIGGERS, SQLITE_RETIRED, SQLITE_TRIGGERS
from store.models.columns import inserted_id

log = logging.getLogger(__name__)

_RUN_STATUS = {"running": "failed", "success": "completed", "partial": "completed", "error": "failed"}


def retire(connection: Connection) -> None:
    """Drop what earlier releases made and the baseline no longer has (each statement a no-op when it is gone)."""
    statements = {"sqlite": SQLITE_RETIRED, "postgresql": POSTGRES_RETIRED}
    for statement in statements.get(connection.dialect.name, ()):
        connection.exec_driver_sql(statement)


def make_tables(connection: Connection) -> None:
    """Every table of the baseline: made when missing (with its indexes), completed when a release before made it."""
    existing = set(sa.inspect(connection).get_table_names())
    for table in SCHEMA.sorted_tables:
        if table.name in existing:
            _complete(connection, table)
        else:
            table.create(connection)


def _complete(connection: Connection, table: sa.Table) -> None:
    """Add to a table an earlier release made the columns and indexes it was made without.

    Every column added to an existing table was nullable without a default (so a store made before kept working),
    and is added so. PostgreSQL stores got ``jobs.runs_on`` as TEXT from the old ad-hoc list; the model's VARCHAR
    it becomes. A unique index over rows that already repeat a value is left out, as the release that made the
    store did (a warning says so)."""
    insp = sa.inspect(connection)
    columns = {c["name"]: c for c in insp.get_columns(table.name)}
    for column in table.columns:
        found = columns.get(column.name)
        if found is None:
            if not column.nullable:
                raise StoreVersionError(
                    f"the store's table {table.name} lacks the column {column.name}, which no release added to an "
                    f"existing table: this store was not made by assay, or was changed by hand")
            op.add_column(table.name, sa.Column(column.name, column.type, nullable=True))
        elif (connection.dialect.name == "postgresql" and isinstance(found["type"], sa.Text)
              and type(column.type) is sa.String):
            op.alter_column(table.name, column.name, type_=column.type, existing_nullable=column.nullable)
    indexes = {i["name"] for i in insp.get_indexes(table.name)}
    for index in table.indexes:
        if index.name in indexes:
            continue
        if index.unique and _repeats(connection, table, index):
            log.warning("the store's %s has rows that repeat a value of %s: the unique index %s is left out",
                        table.name, ", ".join(c.name for c in index.columns), index.name)
            continue
        index.create(connection)


def _repeats(connection: Connection, table: sa.Table, index: sa.Index) -> bool:
    """Whether rows of ``table`` repeat a value of the index's columns (NULLs never repeat)."""
    columns = list(index.columns)
    query = (sa.select(sa.literal(1)).select_from(table).where(*(c.is_not(None) for c in columns))
             .group_by(*columns).having(sa.func.count() > 1).limit(1))
    return connection.execute(query).first() is not None


def make_triggers(connection: Connection) -> None:
    """The baseline's triggers (SQLite: any of the same name an earlier release made is replaced)."""
    if connection.dialect.name == "sqlite":
        for name, statement in SQLITE_TRIGGERS.items():
            connection.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
            connection.exec_driver_sql(statement)
    elif connection.dialect.name == "postgresql":
        for statement in POSTGRES_TRIGGERS:
            connection.exec_driver_sql(statement)


def backfill_plan_runs(connection: Connection) -> int:
    """Give every plan execution of an older store its row in the runs table (kind "plan"), so the store's history
    is one table of runs; returns how many it made. Later executions are made with their run."""
    executions, jobs = SCHEMA.tables["plan_executions"], SCHEMA.tables["jobs"]
    rows = connection.execute(
        sa.select(executions.c.id, executions.c.plan_name, executions.c.status, executions.c.error_message,
                  executions.c.flow_run_id, executions.c.started_at, executions.c.completed_at,
                  executions.c.duration_ms)
        .where(executions.c.run_id.is_(None)).order_by(executions.c.id)).all()
    for execution_id, name, status, message, flow_run_id, started, completed, duration in rows:
        run_status = "cancelled" if status == "error" and (message or "").startswith("cancelled") \
            else _RUN_STATUS.get(status, "failed")
        run_id = inserted_id(connection.execute(
            sa.insert(jobs).values(
                kind="plan", root=name, status=run_status, progress=100.0 if run_status == "completed" else 0.0,
                files=0, directories=0, total_size=0, removed=0, error_count=0, error_message=message,
                params_json=json.dumps({"execution_id": execution_id}), cancel_requested=False,
                flow_run_id=flow_run_id, created_at=started, started_at=started, completed_at=completed,
                duration_ms=duration)))
        connection.execute(sa.update(executions).where(executions.c.id == execution_id).values(run_id=run_id))
    return len(rows)

"""file journal: the table file_operations, one row per file operation, and the moves an older assay left in flight

Revision ID: 0002_file_journal
Revises: 0001_baseline
Create Date: 2027-01-10

Makes ``file_operations`` (store/models/file_operations.py; frozen here, column by column, so a later change of the
model needs its own revision). Before it, rename-files and move-files wrote the item they had in flight on their run
(jobs, kind ``move``, ``params_json["in_flight"]``); an item a killed process left there becomes a journal row in
the state it had (intent, or copying for a copy across filesystems), which the next start settles like any other
(flows/fileops/recovery.py), and the run's item is crossed out, so that path is read once, here, and never again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from store.models.columns import inserted_id

revision: str = "0002_file_journal"
down_revision: str | Sequence[str] | None = "0001_baseline"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = sa.MetaData()
FILE_OPERATIONS = sa.Table(
    "file_operations", SCHEMA,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("call_id", sa.String(), nullable=False),
    sa.Column("origin", sa.String(), nullable=False),
    sa.Column("tool", sa.String(), nullable=True),
    sa.Column("execution_id", sa.Integer(), nullable=True),
    sa.Column("caller", sa.String(), nullable=True),
    sa.Column("op", sa.String(), nullable=False),
    sa.Column("src", sa.Text(), nullable=False),
    sa.Column("dst", sa.Text(), nullable=True),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("entry_id", sa.Integer(), nullable=True),
    sa.Column("size", sa.BigInteger(), nullable=True),
    sa.Column("mtime", sa.Float(), nullable=True),
    sa.Column("content_hash", sa.String(), nullable=True),
    sa.Column("state", sa.String(), nullable=False),
    sa.Column("made_json", sa.String(), nullable=False),
    sa.Column("error", sa.Text(), nullable=True),
    sa.Column("created_at", sa.Float(), nullable=False),
    sa.Column("finished_at", sa.Float(), nullable=True),
    sa.Column("undone_at", sa.Float(), nullable=True),
    sa.Column("undo_of", sa.Integer(), nullable=True),
    sa.Index("ix_file_operations_call_id", "call_id"),
    sa.Index("ix_file_operations_execution_id", "execution_id"),
    sa.Index("ix_file_operations_src", "src"),
    sa.Index("ix_file_operations_dst", "dst"),
    sa.Index("ix_file_operations_state", "state"),
    sa.Index("ix_file_operations_undo_of", "undo_of"),
)

# the two tables the old move runs are read from, as revision 0001 left them (only the columns used here)
_JOBS = sa.table("jobs", sa.column("id", sa.Integer()), sa.column("kind", sa.String()),
                 sa.column("params_json", sa.String()), sa.column("created_at", sa.Float()),
                 sa.column("error_message", sa.String()))
_ENTRIES = sa.table("entries", sa.column("path", sa.Text()), sa.column("kind", sa.String()))


def upgrade() -> None:
    connection = op.get_bind()
    FILE_OPERATIONS.create(connection, checkfirst=True)  # a store made from today's models without a revision has it
    adopt_move_runs(connection)


def adopt_move_runs(connection: sa.Connection) -> int:
    """Each item an older assay's move run had in flight, as a journal row in the state it had; the run's item is
    crossed out (its message says where it went). Returns how many."""
    runs = connection.execute(sa.select(_JOBS.c.id, _JOBS.c.params_json, _JOBS.c.created_at).where(
        _JOBS.c.kind == "move", _JOBS.c.params_json.like('%"in_flight": {%'))).all()
    adopted = 0
    for run_id, raw, created_at in runs:
        params = json.loads(raw or "{}")
        item = params.get("in_flight")
        if not isinstance(item, dict) or not item.get("from") or not item.get("to"):
            continue
        kind = connection.execute(sa.select(_ENTRIES.c.kind).where(_ENTRIES.c.path == item["from"])).scalar()
        op_id = inserted_id(connection.execute(sa.insert(FILE_OPERATIONS).values(
            call_id=f"run-{run_id}", origin="tool", tool=params.get("tool"), op=item.get("mode") or "move",
            src=item["from"], dst=item["to"], kind="directory" if kind == "directory" else "file",
            state="copying" if item.get("copying") else "intent", made_json=json.dumps(list(item.get("made") or [])),
            created_at=created_at or time.time())))
        connection.execute(sa.update(_JOBS).where(_JOBS.c.id == run_id).values(
            params_json=json.dumps({**params, "in_flight": None}),
            error_message=f"its item in flight became file operation {op_id}, settled at the next start"))
        adopted += 1
    return adopted


def downgrade() -> None:
    op.drop_table("file_operations")

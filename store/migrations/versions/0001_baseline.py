"""baseline: the schema of the landed release before migrations (cf6e01d), and a store made before them adopted

Revision ID: 0001_baseline
Revises:
Create Date: 2026-12-01

On an empty database: every table, index, constraint and trigger of that release (store.migrations.baseline, frozen).
On a store made before migrations (no alembic_version): what its release lacked is added and what later releases
retired is dropped — the FTS5 tables and triggers, PostgreSQL's tsvector column and pg_trgm index, the classifier's
job table — and its plan executions get their runs. This replaces the patches every start applied before
(ADDED_COLUMNS and the after_create listeners that dropped the old full-text tables).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from store.migrations.baseline import adopt

revision: str = "0001_baseline"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    connection = op.get_bind()
    adopt.retire(connection)  # first: the old full-text triggers would fire on the writes below
    adopt.make_tables(connection)
    adopt.make_triggers(connection)
    adopt.backfill_plan_runs(connection)


def downgrade() -> None:
    raise NotImplementedError("below the baseline there is no schema to go back to: a store is taken back to an "
                              "earlier state by restoring a backup (assay db restore)")

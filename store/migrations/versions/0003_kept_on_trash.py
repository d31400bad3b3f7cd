"""kept on trash: the table file_operation_kept, what a trashed file's entries held that cannot be made again

Revision ID: 0003_kept_on_trash
Revises: 0002_file_journal
Create Date: 2027-01-20

Makes ``file_operation_kept`` (store/models/file_operations.py ``KeptItem``; frozen here, column by column): the set
memberships and agent-supplied maps of a trashed file or folder, kept with its trash operation so undo puts them back
(store/kept.py). Files trashed before this revision keep nothing: their undo restores the files and the index only.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_kept_on_trash"
down_revision: str | Sequence[str] | None = "0002_file_journal"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = sa.MetaData()
sa.Table("file_operations", SCHEMA, sa.Column("id", sa.Integer(), primary_key=True))  # the key referenced, only
FILE_OPERATION_KEPT = sa.Table(
    "file_operation_kept", SCHEMA,
    sa.Column("id", sa.Integer(), primary_key=True),
    sa.Column("operation_id", sa.Integer(), sa.ForeignKey("file_operations.id", ondelete="CASCADE"), nullable=False),
    sa.Column("rel", sa.Text(), nullable=False),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("ref_id", sa.Integer(), nullable=True),
    sa.Column("name", sa.Text(), nullable=False),
    sa.Column("at", sa.Float(), nullable=True),
    sa.Column("payload_json", sa.Text(), nullable=True),
    sa.Index("ix_file_operation_kept_operation_kind", "operation_id", "kind"),
)


def upgrade() -> None:
    FILE_OPERATION_KEPT.create(op.get_bind(), checkfirst=True)  # a store made from today's models has it


def downgrade() -> None:
    op.drop_table("file_operation_kept")

"""The journal of file operations: one row per file a tool call or a plan execution moved, copied, renamed, trashed,
deleted or restored, written before the disk changes (store/file_journal.py), and what the store held for a trashed
file that cannot be made again, kept for its undo (store/kept.py)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Text
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class FileOperation(TableModel, table=True):
    """One operation on one file or folder: where it was (``src``) and went (``dst``), what it was (size, mtime and
    content hash before the change, so an undo can tell a file changed since), who asked (a tool call or a plan
    execution, and the guarded server's user) and how far it got (``state``).

    No foreign keys: the journal outlives the entries, executions and files it names (an undo needs it most when
    they are gone)."""

    __tablename__ = "file_operations"

    id: int | None = Field(default=None, primary_key=True)
    call_id: str = Field(index=True)  # one per tool call, "execution-<id>" for a plan execution
    origin: str  # tool | plan
    tool: str | None = None  # move-files, rename-files, delete-files, undo, ...
    execution_id: int | None = Field(default=None, index=True)
    caller: str | None = None  # the guarded server's user
    op: str  # move | copy | rename | trash | delete | restore
    src: str = Field(sa_column=Column(Text, nullable=False, index=True))
    dst: str | None = Field(default=None, sa_column=Column(Text, nullable=True, index=True))
    kind: str = "file"  # file | directory
    entry_id: int | None = None
    size: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    mtime: float | None = None
    content_hash: str | None = None  # "xxh128:<32 hex>" of the bytes before the operation; directories: null
    state: str = Field(default="intent", index=True)  # intent | copying | done | failed | undone
    made_json: str = "[]"  # the folders created for dst
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: float = Field(default_factory=now)
    finished_at: float | None = None
    undone_at: float | None = None
    undo_of: int | None = Field(default=None, index=True)  # the operation this one reverses


class KeptItem(TableModel, table=True):
    """One thing the store held for a trashed file or folder that nothing can make again: a set membership (given by
    a person or an agent) or a citation map an agent supplied. Kept with the trash operation, by the path relative
    to the trashed one, so the undo that brings the files back puts it on the entries they get then (store/kept.py).

    A table of its own, not a JSON column of the journal: a folder's thousands of memberships are copied here by
    one INSERT ... SELECT and put back by one more, and file-history's reads of the journal never carry them."""

    __tablename__ = "file_operation_kept"
    __table_args__ = (Index("ix_file_operation_kept_operation_kind", "operation_id", "kind"),)

    id: int | None = Field(default=None, primary_key=True)
    operation_id: int = Field(sa_column=cascade_fk("file_operations.id", index=False))  # the trash operation
    rel: str = Field(sa_column=Column(Text, nullable=False))  # "" the trashed path itself, else "/sub/file"
    kind: str  # membership | map
    ref_id: int | None = None  # a membership's set id (no foreign key: the set may be deleted meanwhile)
    name: str = Field(sa_column=Column(Text, nullable=False))  # the set's name | the map's resource id
    at: float | None = None  # when the membership was added | the map made
    payload_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # a map's fields, nodes

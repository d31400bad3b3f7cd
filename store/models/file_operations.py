"""The journal of file operations: one row per file a tool call or a plan execution moved, copied, renamed, trashed,
deleted or restored, written before the disk changes (store/file_journal.py)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Text
from sqlmodel import Field

from store.models.columns import TableModel, now


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

"""The filesystem entries the indexer sees."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Text, text
from sqlmodel import Field

from store.models.columns import TableModel, now


class Entry(TableModel, table=True):
    """One file, directory or symlink seen by the indexer. ``path`` is absolute and canonical (no ``..``)."""

    __tablename__ = "entries"
    __table_args__ = (
        Index("ix_entries_parent_name", "parent", "name"),
        # partial: most entries have no hash yet, and the indexer's inserts should not pay for indexing NULLs
        Index("ix_entries_hash", "hash", sqlite_where=text("hash IS NOT NULL"),
              postgresql_where=text("hash IS NOT NULL")),
    )

    id: int | None = Field(default=None, primary_key=True)
    path: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    parent: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    name: str = Field(sa_column=Column(Text, nullable=False))
    extension: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))  # ".jpg", lower case
    kind: str = Field(default="file", max_length=16)  # file | directory | symlink | other
    size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))  # dirs: sum of subtree
    mtime: float = Field(default=0.0, sa_column=Column(Float, nullable=False, default=0.0))
    ctime: float = Field(default=0.0, sa_column=Column(Float, nullable=False, default=0.0))
    depth: int = 0  # number of path components below "/"
    inode: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    media_type: str | None = Field(default=None, index=True)  # image | video | audio | document | text | other
    mime: str | None = None
    hash: str | None = Field(default=None)  # content hash, filled by classifiers
    scan_id: int | None = None  # the index job that last wrote this entry (unchanged entries are not rewritten)
    indexed_at: float = Field(default_factory=now, sa_column=Column(Float, nullable=False))
    # why a directory's listing is not complete: "unreadable: Permission denied", "incomplete: index job 7 was
    # cancelled ...", "not scanned: ..."; None for an entry scanned completely (added by migration 1)
    scan_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))

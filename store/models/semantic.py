"""The semantic index: collections, chunks, vectors, labels (flows/semantic), and the chunks' keyword index."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (BigInteger, Column, Connection, ForeignKey, Index, Integer, LargeBinary, MetaData, Text, event,
                        inspect)
from sqlmodel import Field, SQLModel

from store.models.columns import TableModel, cascade_fk, now


class Collection(TableModel, table=True):
    """A named semantic index: the chunks and vectors of the entries embedded into it, with the model and backend
    that made them (a collection never mixes models: a different one is refused), the chunking, and ``version``,
    bumped by every change to its chunks (store.semantic writes; a trigger on chunk deletion), which the hnswlib file
    beside the database records so a reader knows when it is behind."""

    __tablename__ = "collections"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    model: str  # the model's name as configured, e.g. all-MiniLM-L6-v2
    backend: str = "torch"  # torch | onnx | onnx-int8 | openvino
    dim: int
    chunk_size: int = 1000
    overlap: int = 200
    version: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    folders_json: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))  # index_files roots
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class CollectionEntry(TableModel, table=True):
    """One entry's state in one collection: the work key it was embedded with (file size + mtime + model + backend +
    chunking: equal means nothing to redo), how many chunks, or why it failed."""

    __tablename__ = "collection_entries"

    collection_id: int = Field(sa_column=Column(Integer, ForeignKey("collections.id", ondelete="CASCADE"),
                                                primary_key=True))
    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True,
                                           index=True))
    work_key: str
    status: str = "ok"  # ok | empty (no text) | error
    error: str | None = None
    chunk_count: int = 0
    updated_at: float = Field(default_factory=now)


class Chunk(TableModel, table=True):
    """A passage of an entry's extracted text (``flows.semantic.chunking``): character offsets into the document's
    text (its pages' lines joined by newlines, as store.documents keeps them), the page and the 1-based line range it
    spans, so a hit can be cited. Keyword and hybrid search rank chunks from the text engine's index of those lines
    (flows.semantic.keywords), not from a full-text index of their own."""

    __tablename__ = "chunks"
    # AUTOINCREMENT on SQLite: a chunk id is never handed out again (SQLite would reuse the highest freed rowid), so
    # an hnswlib file that is behind can catch up by diffing ids alone: an id it holds always means the same vector
    __table_args__ = (Index("ix_chunks_collection_entry", "collection_id", "entry_id", "chunk_index"),
                      Index("ix_chunks_entry", "entry_id"), {"sqlite_autoincrement": True})

    id: int | None = Field(default=None, primary_key=True)
    collection_id: int = Field(sa_column=Column(Integer, ForeignKey("collections.id", ondelete="CASCADE"),
                                                nullable=False))
    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), nullable=False))
    chunk_index: int  # 0, 1, ... within the entry
    start: int  # character offsets into the extracted text
    end: int
    page: int | None = None  # 1-based page of the chunk's first character (paged formats)
    page_end: int | None = None  # the page of its last character
    line_start: int = 1  # 1-based lines of the document's text
    line_end: int = 1
    text: str = Field(sa_column=Column(Text, nullable=False))


class Embedding(TableModel, table=True):
    """The stored vector of a chunk (float32, little endian, L2-normalised); the hnswlib file beside the database is
    rebuilt from these if it is lost or behind."""

    __tablename__ = "embeddings"

    chunk_id: int = Field(sa_column=Column(Integer, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True))
    collection_id: int = Field(sa_column=cascade_fk("collections.id"))
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class EntryLabel(TableModel, table=True):
    """A zero-shot label score of an entry (the ``label`` outcome): every class scored is kept, so plan-explain can
    say why a file got a label or not; ``assigned`` when the score reached the outcome's threshold."""

    __tablename__ = "entry_labels"
    __table_args__ = (Index("ix_entry_labels_name", "name", "assigned"),)

    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True))
    name: str = Field(primary_key=True)
    score: float
    assigned: bool = False
    threshold: float = 0.0
    model: str = ""
    work_key: str = ""  # the entry's state + the label outcome's parameters + model: equal means nothing to redo
    updated_at: float = Field(default_factory=now)


# the collection's version goes up when chunks go (an entry deleted takes its chunks by cascade), so the hnswlib
# file learns it is behind
SQLITE_CHUNK_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS chunks_version_ad AFTER DELETE ON chunks BEGIN "
    "UPDATE collections SET version = version + 1 WHERE id = old.collection_id; END",
)
POSTGRES_CHUNK_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION assay_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "UPDATE collections SET version = version + 1 WHERE id IN (SELECT DISTINCT collection_id FROM gone); "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE TRIGGER chunks_ad AFTER DELETE ON chunks REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION assay_chunks_deleted()",
)


@event.listens_for(SQLModel.metadata, "after_create")
def _chunk_triggers(metadata: MetaData, connection: Connection, **_kw: Any) -> None:
    """The version bump when chunks go, made once ``create_all`` has made every table of a new store (a store's
    later changes to it are revisions in store/migrations: the baseline holds a frozen copy)."""
    if "chunks" not in inspect(connection).get_table_names():
        return
    statements = {"sqlite": SQLITE_CHUNK_TRIGGERS, "postgresql": POSTGRES_CHUNK_TRIGGERS}
    for statement in statements.get(connection.dialect.name, ()):
        connection.exec_driver_sql(statement)

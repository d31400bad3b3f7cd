"""Extracted text (documents and their segments) and its full-text index (flows/documents)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, ForeignKey, Index, Integer, MetaData, Text, event, inspect
from sqlmodel import Field, SQLModel

from store.models.columns import TableModel, now

log = logging.getLogger(__name__)


class Document(TableModel, table=True):
    """What text extraction made of one entry: its format, size in pages / lines / characters, table of contents,
    metadata, or why it could not be read. ``work_key`` (size, mtime, extractor version, options) says whether it is
    current: an entry whose key differs is extracted again."""

    __tablename__ = "documents"

    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True))
    format: str  # pdf | epub | xps | fb2 | mobi | cbz | markdown | text | code | html | docx | image | unknown
    status: str = "ok"  # ok | error
    error_code: str | None = None  # UNSUPPORTED_FORMAT | FILTER_FAILED | METADATA_EXTRACTION_FAILED | ...
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # the reason, for a person
    pages: int = 0  # 1 for formats without pages
    lines: int = 0
    chars: int = 0
    ocr_pages: int = 0  # pages read with OCR
    no_text_pages: int = 0  # pages without a text layer that OCR could not read (no tesseract, or it failed)
    encoding: str | None = None  # text formats: the encoding detected
    toc_json: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))
    meta_json: str = Field(default="{}", sa_column=Column(Text, nullable=False, default="{}"))
    source_size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))  # the file when
    source_mtime: float = 0.0  # extracted: an entry whose size or mtime differs is stale (searched as pending)
    work_key: str  # source size + mtime + ExtractOptions.key(): equal means nothing to redo
    elapsed: float = 0.0  # seconds the extraction took
    extracted_at: float = Field(default_factory=now)


class DocumentSegment(TableModel, table=True):
    """A run of whole lines of one page of a document's extracted text (at most ~32k characters), in order.

    The document's lines are its pages' lines in page order, numbered from 1; ``line_start`` is the number of the
    segment's first line, so a match's line number is ``line_start`` + its index in ``text.split("\n")``. The text
    engine (store.textindex) indexes the lines; ``folded`` is no longer written (PostgreSQL stores made before the
    engine kept ``fold(text)`` there for a pg_trgm index)."""

    __tablename__ = "document_segments"
    __table_args__ = (Index("ix_document_segments_entry_seq", "entry_id", "seq", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), nullable=False))
    seq: int  # 0, 1, ... within the document
    page: int = 1  # 1-based page the lines are on (1 for formats without pages)
    line_start: int = 1
    line_count: int = 1
    ocr: bool = False  # the page's text came from OCR
    text: str = Field(sa_column=Column(Text, nullable=False))
    folded: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # unused (see above)


class DocumentChange(TableModel, table=True):
    """The change log the text engine (store.textindex) follows: a row each time an entry's documents row is
    written, replaced or deleted, or the entry holding one moves, appended by triggers in the same transaction. The
    engine keeps the last ``seq`` it applied and reads only the rows after it, so any process that writes documents
    (a server, ``assay index``, a worker on another machine) is seen by every server's index."""

    __tablename__ = "document_changes"

    seq: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    entry_id: int = Field(sa_column=Column(Integer, nullable=False))


SQLITE_CHANGE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS documents_changed_ai AFTER INSERT ON documents BEGIN "
    "INSERT INTO document_changes(entry_id) VALUES (new.entry_id); END",
    "CREATE TRIGGER IF NOT EXISTS documents_changed_au AFTER UPDATE ON documents BEGIN "
    "INSERT INTO document_changes(entry_id) VALUES (new.entry_id); END",
    "CREATE TRIGGER IF NOT EXISTS documents_changed_ad AFTER DELETE ON documents BEGIN "
    "INSERT INTO document_changes(entry_id) VALUES (old.entry_id); END",
    "CREATE TRIGGER IF NOT EXISTS entries_moved_au AFTER UPDATE OF path ON entries "
    "WHEN new.path IS NOT old.path AND EXISTS (SELECT 1 FROM documents WHERE entry_id = new.id) BEGIN "
    "INSERT INTO document_changes(entry_id) VALUES (new.id); END",
)

POSTGRES_CHANGE_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION assay_document_changed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF TG_OP = 'DELETE' THEN INSERT INTO document_changes(entry_id) VALUES (OLD.entry_id); RETURN OLD; END IF; "
    "INSERT INTO document_changes(entry_id) VALUES (NEW.entry_id); RETURN NEW; END $$",
    "CREATE OR REPLACE TRIGGER documents_changed AFTER INSERT OR UPDATE OR DELETE ON documents FOR EACH ROW "
    "EXECUTE FUNCTION assay_document_changed()",
    "CREATE OR REPLACE FUNCTION assay_entry_moved() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "IF NEW.path IS DISTINCT FROM OLD.path AND EXISTS (SELECT 1 FROM documents WHERE entry_id = NEW.id) THEN "
    "INSERT INTO document_changes(entry_id) VALUES (NEW.id); END IF; RETURN NEW; END $$",
    "CREATE OR REPLACE TRIGGER entries_moved AFTER UPDATE OF path ON entries FOR EACH ROW "
    "EXECUTE FUNCTION assay_entry_moved()",
)

@event.listens_for(SQLModel.metadata, "after_create")
def _change_triggers(metadata: MetaData, connection: Connection, **_kw: Any) -> None:
    """The triggers that fill the change log, made once ``create_all`` has made every table of a new store (a store's
    later changes to them are revisions in store/migrations: the baseline holds a frozen copy)."""
    if "document_changes" not in inspect(connection).get_table_names():
        return
    statements = {"sqlite": SQLITE_CHANGE_TRIGGERS, "postgresql": POSTGRES_CHANGE_TRIGGERS}
    for statement in statements.get(connection.dialect.name, ()):
        connection.exec_driver_sql(statement)

"""Extracted text (documents and their segments) and its full-text index (flows/documents)."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, ForeignKey, Index, Integer, Table, Text, event
from sqlmodel import Field

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
    segment's first line, so a match's line number is ``line_start`` + its index in ``text.split("\n")``. On SQLite
    the contentless FTS5 table ``document_fts`` (trigram tokenizer over ``fold(text)``, rowid = ``id``) gets each
    segment from store.documents as it is written and loses it through a DELETE trigger; on PostgreSQL ``folded``
    holds ``fold(text)`` under a pg_trgm GIN index (see :func:`_document_index`)."""

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
    folded: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # PostgreSQL only: fold(text)


SQLITE_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS document_fts USING fts5(text, content='', "
    "tokenize='trigram case_sensitive 1')",
    # rows are added by store.documents with the segments (a trigger per row cost a quarter of the write time);
    # removed by this trigger, so deleting an entry (ON DELETE CASCADE) takes its text out of the index too
    "CREATE TRIGGER IF NOT EXISTS document_segments_ad AFTER DELETE ON document_segments BEGIN "
    "INSERT INTO document_fts(document_fts, rowid, text) VALUES ('delete', old.id, assay_fold(old.text)); END",
)


@event.listens_for(DocumentSegment.__table__, "after_create")
def _document_index(table: Table, connection: Connection, **_kw: Any) -> None:
    """The full-text index of the segments. SQLite: a contentless FTS5 trigram table (substring matching, as the
    line check does; it stores no second copy of the text), filled by the writer, emptied by a trigger that calls
    ``assay_fold`` (registered on every connection by store.engine). PostgreSQL: a pg_trgm GIN index over
    ``folded``; where the extension cannot be created the searches still work, by scanning."""
    if connection.dialect.name == "sqlite":
        for statement in SQLITE_FTS:
            connection.exec_driver_sql(statement)
    elif connection.dialect.name == "postgresql":
        try:
            with connection.begin_nested():
                connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                connection.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_document_segments_trgm ON "
                                           "document_segments USING gin (folded gin_trgm_ops)")
        except Exception as exc:  # no pg_trgm here (a managed server without it): searches scan instead
            log.warning("no trigram index for document search (%s); searches will scan", exc)

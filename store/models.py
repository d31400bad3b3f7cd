"""Every table of the store, for all of DESIGN.md: later issues fill the tables they need, they do not reshape them.

Conventions: times are unix seconds (float, UTC); JSON documents are stored as text (portable across SQLite and
PostgreSQL); bulk paths (indexing, membership, chunks) write through ``Model.__table__`` with set-based SQL, never
one ORM object per row.
"""

from __future__ import annotations

import time

from sqlalchemy import (BigInteger, Column, Float, ForeignKey, Index, Integer, LargeBinary, Text, UniqueConstraint, event,
                        inspect, text)
from sqlmodel import Field, SQLModel

from store.fold import fold  # noqa: F401  (re-exported: the folding the FTS triggers use)


def now() -> float:
    return time.time()


def _fk(target: str, *, index: bool = True, nullable: bool = False) -> Column:
    return Column(Integer, ForeignKey(target, ondelete="CASCADE"), index=index, nullable=nullable)


# --- filesystem entries -------------------------------------------------------------------------------------------


class Entry(SQLModel, table=True):
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


# Columns added after a store may already exist: create_all makes new tables but never adds a column, so each
# missing one is added with ALTER TABLE right after create_all (nullable, no default: instant on SQLite and
# PostgreSQL). A data dir made by an older version keeps working.
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("entries", "scan_error", "TEXT"),
    ("resource_maps", "source_hash", "TEXT"),
    ("resource_maps", "title", "TEXT"),
    ("resource_maps", "strategy", "TEXT"),
    ("resource_maps", "stale", "INTEGER"),
    ("resource_maps", "metadata_json", "TEXT"),
    ("resource_maps", "updated_at", "DOUBLE PRECISION"),
)


@event.listens_for(SQLModel.metadata, "after_create")
def _add_missing_columns(metadata, connection, **_kw) -> None:
    insp = inspect(connection)
    tables = set(insp.get_table_names())
    for table, column, sql_type in ADDED_COLUMNS:
        if table in tables and column not in {c["name"] for c in insp.get_columns(table)}:
            connection.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")


# --- resource sets: a DAG of named sets of entries -----------------------------------------------------------------


class ResourceSet(SQLModel, table=True):
    __tablename__ = "resource_sets"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    description: str | None = None
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class SetEdge(SQLModel, table=True):
    """parent -> child edge; the graph is kept acyclic by store.sets.add_child."""

    __tablename__ = "set_edges"

    parent_id: int = Field(sa_column=Column(Integer, ForeignKey("resource_sets.id", ondelete="CASCADE"), primary_key=True))
    child_id: int = Field(
        sa_column=Column(Integer, ForeignKey("resource_sets.id", ondelete="CASCADE"), primary_key=True, index=True)
    )
    created_at: float = Field(default_factory=now)


class SetMember(SQLModel, table=True):
    __tablename__ = "set_members"

    set_id: int = Field(sa_column=Column(Integer, ForeignKey("resource_sets.id", ondelete="CASCADE"), primary_key=True))
    entry_id: int = Field(
        sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True, index=True)
    )
    added_at: float = Field(default_factory=now)


# --- saved queries, jobs, preferences ------------------------------------------------------------------------------


class SavedQuery(SQLModel, table=True):
    __tablename__ = "saved_queries"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    description: str | None = None
    query_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    last_executed_at: float | None = None
    execution_count: int = 0


class Job(SQLModel, table=True):
    """A unit of long work (indexing now; classifier, embedding and map jobs later) with its progress."""

    __tablename__ = "jobs"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(default="index", index=True)  # index | classify | embed | map
    root: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(default="pending", index=True)  # pending | running | completed | failed | cancelled
    progress: float = 0.0  # 0..100
    files: int = 0
    directories: int = 0
    total_size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    removed: int = 0
    error_count: int = 0
    error_message: str | None = None
    current_path: str | None = None
    params_json: str = "{}"
    cancel_requested: bool = False
    flow_run_id: str | None = None
    created_at: float = Field(default_factory=now)
    started_at: float | None = None
    completed_at: float | None = None
    duration_ms: int | None = None


class JobIssue(SQLModel, table=True):
    """Something a job skipped and recorded: an unreadable directory, a file that vanished mid-walk, ..."""

    __tablename__ = "job_issues"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(sa_column=_fk("jobs.id"))
    path: str = Field(sa_column=Column(Text, nullable=False))
    reason: str
    created_at: float = Field(default_factory=now)


class Preference(SQLModel, table=True):
    __tablename__ = "preferences"

    key: str = Field(primary_key=True)
    value_json: str
    updated_at: float = Field(default_factory=now)


# --- sources and plans (filled by the plans issue) -----------------------------------------------------------------


class Source(SQLModel, table=True):
    __tablename__ = "sources"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    type: str  # live | manual | filesystem.index | filesystem.watch | selection_set | query
    path: str | None = None
    enabled: bool = True
    config_json: str = "{}"
    status: str = "stopped"  # stopped | running | error
    entries_indexed: int = 0
    total_scans: int = 0
    total_scan_ms: int = 0
    last_scan_at: float | None = None
    last_error: str | None = None
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class Plan(SQLModel, table=True):
    __tablename__ = "plans"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    description: str | None = None
    mode: str = "oneshot"  # oneshot | continuous
    status: str = "active"  # active | paused | disabled
    definition_json: str = Field(sa_column=Column(Text, nullable=False))  # the canonical plan model
    origin_path: str | None = None  # the plan file it was loaded from, if any
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class PlanExecution(SQLModel, table=True):
    __tablename__ = "plan_executions"

    id: int | None = Field(default=None, primary_key=True)
    plan_id: int = Field(sa_column=_fk("plans.id"))
    plan_name: str
    status: str = "running"  # running | success | partial | error
    entries_processed: int = 0
    entries_matched: int = 0
    outcomes_applied: int = 0
    error_message: str | None = None
    flow_run_id: str | None = None
    trigger: str = "manual"  # manual | watch | startup | cli
    summary_json: str = "{}"  # per source, rule and outcome: counts, errors, task runs
    started_at: float = Field(default_factory=now)
    completed_at: float | None = None
    duration_ms: int | None = None


class OutcomeRecord(SQLModel, table=True):
    """One outcome applied to one entry; ``work_key`` makes re-runs on unchanged files do no repeated work."""

    __tablename__ = "outcome_records"
    __table_args__ = (UniqueConstraint("work_key", name="uq_outcome_work_key"),)

    id: int | None = Field(default=None, primary_key=True)
    execution_id: int | None = Field(default=None, sa_column=_fk("plan_executions.id", nullable=True))
    entry_id: int = Field(sa_column=_fk("entries.id"))
    rule: str
    outcome_type: str
    work_key: str  # hash of entry identity + size + mtime + outcome parameters + model
    status: str = "applied"  # applied | error
    detail: str | None = None
    created_at: float = Field(default_factory=now)


# --- classifier artifacts and metadata (filled by the classifier issue) --------------------------------------------


class Artifact(SQLModel, table=True):
    """Generated metadata for an entry: a thumbnail, a timeline frame, extracted fields (width, pages, exif.*...)."""

    __tablename__ = "artifacts"
    __table_args__ = (Index("ix_artifacts_entry_type", "entry_id", "type"),)

    id: int | None = Field(default=None, primary_key=True)
    entry_id: int = Field(sa_column=_fk("entries.id", index=False))
    type: str  # thumbnail | video-timeline | metadata | page | clip
    mime_type: str | None = None
    cache_path: str | None = None  # relative to the content-addressed cache under the data dir
    source_hash: str | None = None  # identity of the source when made, to notice staleness
    value_json: str = "{}"
    created_at: float = Field(default_factory=now)


class MetadataValue(SQLModel, table=True):
    """One extracted field per row (``width``, ``duration``, ``exif.Model``), so conditions can push down to SQL."""

    __tablename__ = "metadata_values"
    __table_args__ = (Index("ix_metadata_key_num", "key", "num_value"), Index("ix_metadata_key_text", "key", "text_value"))

    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True))
    key: str = Field(primary_key=True)
    num_value: float | None = None
    text_value: str | None = None


# --- extracted text and its full-text index (filled by the documents issue, flows/documents) ------------------------


class Document(SQLModel, table=True):
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


class DocumentSegment(SQLModel, table=True):
    """A run of whole lines of one page of a document's extracted text (at most ~32k characters), in order.

    The document's lines are its pages' lines in page order, numbered from 1; ``line_start`` is the number of the
    segment's first line, so a match's line number is ``line_start`` + its index in ``text.split("\n")``. On SQLite
    the contentless FTS5 table ``document_fts`` (trigram tokenizer over ``fold(text)``, rowid = ``id``) gets each
    segment from store.documents as it is written and loses it through a DELETE trigger; on PostgreSQL ``folded`` holds ``fold(text)`` under a pg_trgm GIN index (see
    :func:`_document_index`)."""

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
def _document_index(table, connection, **_kw) -> None:
    """The full-text index of the segments. SQLite: a contentless FTS5 trigram table (substring matching, as the
    line check does; it stores no second copy of the text), filled by the writer, emptied by a trigger that calls
    ``assay_fold`` (registered on
    every connection by store.engine). PostgreSQL: a pg_trgm GIN index over ``folded``; where the extension cannot
    be created the searches still work, by scanning."""
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
            import logging

            logging.getLogger(__name__).warning("no trigram index for document search (%s); searches will scan",
                                                exc)


# --- the semantic index: collections, chunks, vectors, labels (flows/semantic) ------------------------------------


class Collection(SQLModel, table=True):
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


class CollectionEntry(SQLModel, table=True):
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


class Chunk(SQLModel, table=True):
    """A passage of an entry's extracted text (``flows.semantic.chunking``): character offsets into the document's
    text (its pages' lines joined by newlines, as store.documents keeps them), the page and the 1-based line range it
    spans, so a hit can be cited. SQLite keeps a full-text index of ``text`` in ``chunk_fts`` (FTS5, porter
    stemming, BM25; rowid = id) for keyword and hybrid search; PostgreSQL a tsvector column ``tsv`` under GIN."""

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


class Embedding(SQLModel, table=True):
    """The stored vector of a chunk (float32, little endian, L2-normalised); the hnswlib file beside the database is
    rebuilt from these if it is lost or behind."""

    __tablename__ = "embeddings"

    chunk_id: int = Field(sa_column=Column(Integer, ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True))
    collection_id: int = Field(sa_column=_fk("collections.id"))
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class EntryLabel(SQLModel, table=True):
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


SQLITE_CHUNK_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunk_fts USING fts5(text, content='chunks', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN "
    "INSERT INTO chunk_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunk_fts(chunk_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "UPDATE collections SET version = version + 1 WHERE id = old.collection_id; END",
)
POSTGRES_CHUNK_FTS = (
    "ALTER TABLE chunks ADD COLUMN IF NOT EXISTS tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX IF NOT EXISTS ix_chunks_tsv ON chunks USING gin (tsv)",
    "CREATE OR REPLACE FUNCTION assay_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "UPDATE collections SET version = version + 1 WHERE id IN (SELECT DISTINCT collection_id FROM gone); "
    "RETURN NULL; END $$",
    "DROP TRIGGER IF EXISTS chunks_ad ON chunks",
    "CREATE TRIGGER chunks_ad AFTER DELETE ON chunks REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION assay_chunks_deleted()",
)


@event.listens_for(Chunk.__table__, "after_create")
def _chunk_index(table, connection, **_kw) -> None:
    """The keyword index of the chunks (SQLite: external-content FTS5 kept by triggers; PostgreSQL: a generated
    tsvector under GIN), and the version bump when chunks go (an entry deleted takes its chunks by cascade, so the
    hnswlib file learns it is behind)."""
    statements = {"sqlite": SQLITE_CHUNK_FTS, "postgresql": POSTGRES_CHUNK_FTS}.get(connection.dialect.name, ())
    for statement in statements:
        connection.exec_driver_sql(statement)


# --- citation maps (flows/citations) -------------------------------------------------------------------------------


class ResourceMapRow(SQLModel, table=True):
    """A citable resource: one file inside the roots under a readable id (``lecture_01``), with its map when one was
    built or supplied. A row without a map (``origin`` "none") only reserves the id, e.g. for a search hit's address.
    ``source_*`` is what the file was when the map (or the id) was made; a file that changed since is noticed by
    comparing them (size and mtime first, the content hash when those differ)."""

    __tablename__ = "resource_maps"
    # one resource per file (NULLs allowed: a resource whose entry is gone); flows.citations.ids reserves under a
    # lock, the index makes it a rule of the store (a store made before this index keeps working without it)
    __table_args__ = (Index("uq_resource_maps_entry", "entry_id", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    resource_id: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    entry_id: int | None = Field(default=None, sa_column=_fk("entries.id", index=False, nullable=True))
    kind: str  # modality: document | video | audio | image | text
    origin: str  # none (id only) | outline | headings | chapters | scenes | silences | windows | whole | agent
    source_size: int | None = None  # what the file was when the map was made, to notice changes
    source_mtime: float | None = None
    created_at: float = Field(default_factory=now)
    # added by the citation issue (ADDED_COLUMNS: nullable, so a store made before keeps working)
    source_hash: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # "xxh128:<hex>"
    title: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    strategy: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # what was asked: auto, ...
    stale: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))  # 1: agent map, source changed
    metadata_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # facts: pages, duration
    updated_at: float | None = Field(default=None, sa_column=Column(Float, nullable=True))


class MapNodeRow(SQLModel, table=True):
    """One node of a map; ``ordinal`` is its place in a pre-order walk of the tree (parents before children,
    siblings in order), so one ordered query rebuilds the tree."""

    __tablename__ = "map_nodes"
    __table_args__ = (UniqueConstraint("map_id", "node_id", name="uq_map_node"),
                      Index("ix_map_nodes_parent", "map_id", "parent_node_id"))

    id: int | None = Field(default=None, primary_key=True)
    map_id: int = Field(sa_column=_fk("resource_maps.id"))
    node_id: str
    parent_node_id: str | None = None
    ordinal: int = 0
    title: str | None = None
    kind: str = "section"
    location_json: str = "{}"  # reference 003's location: {"modality": "document", "pages": [3, 5]} ...
    summary: str | None = None

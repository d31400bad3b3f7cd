"""A store made before migrations by a release before the text engine: its full-text tables and their triggers (over
document segments and over chunks), PostgreSQL's tsvector column and pg_trgm index, and the classifier's old job
table go when revision 0001 adopts it, and the deletes that fired those triggers work after."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import inspect, text

from store.engine import make_engine

OLD_SQLITE = (
    "CREATE VIRTUAL TABLE document_fts USING fts5(text, content='', tokenize='trigram case_sensitive 1')",
    "CREATE TRIGGER document_segments_ad AFTER DELETE ON document_segments BEGIN "
    "INSERT INTO document_fts(document_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE VIRTUAL TABLE chunk_fts USING fts5(text, content='chunks', content_rowid='id')",
    "CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN INSERT INTO chunk_fts(rowid, text) VALUES (new.id, "
    "new.text); END",
    "CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunk_fts(chunk_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TABLE classifier_jobs (id INTEGER NOT NULL, source_path TEXT NOT NULL, PRIMARY KEY (id))",
)

# the trigram index was GIN over gin_trgm_ops (pg_trgm); a plain index of that name stands for it here
OLD_POSTGRES = (
    "ALTER TABLE chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX ix_chunks_tsv ON chunks USING gin (tsv)",
    "CREATE INDEX ix_document_segments_trgm ON document_segments (folded)",
    "CREATE TABLE classifier_jobs (id SERIAL PRIMARY KEY, source_path TEXT NOT NULL)",
)


def test_an_older_sqlite_store_loses_its_full_text_tables_and_keeps_working(tmp_path):
    db = tmp_path / "assay.db"
    make_engine(f"sqlite:///{db}").dispose()
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE alembic_version")  # made before migrations
    conn.execute("DROP TRIGGER IF EXISTS chunks_version_ad")
    for statement in OLD_SQLITE:
        conn.execute(statement)
    conn.commit()
    conn.close()
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as c:
            names = set(c.execute(text("SELECT name FROM sqlite_master")).scalars())
        assert not {"document_fts", "chunk_fts", "document_segments_ad", "chunks_ai", "chunks_ad",
                    "classifier_jobs"} & names
        assert {"chunks_version_ad", "documents_changed_ai", "documents_changed_ad"} <= names
        with engine.begin() as c:  # the deletes the old triggers answered to run without them
            c.execute(text("DELETE FROM document_segments"))
            c.execute(text("DELETE FROM chunks"))
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_an_older_postgresql_store_loses_its_full_text_column_and_index(pg_database):
    engine = make_engine(pg_database)
    with engine.begin() as c:
        c.execute(text("DROP TABLE alembic_version"))
        for statement in OLD_POSTGRES:
            c.execute(text(statement))
    engine.dispose()
    engine = make_engine(pg_database)
    try:
        insp = inspect(engine)
        assert "tsv" not in {col["name"] for col in insp.get_columns("chunks")}
        assert "ix_document_segments_trgm" not in {i["name"] for i in insp.get_indexes("document_segments")}
        assert "classifier_jobs" not in insp.get_table_names()
    finally:
        engine.dispose()

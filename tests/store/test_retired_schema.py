"""A SQLite store made before the text engine: its full-text tables and their triggers (over document segments and
over chunks) go when it is opened, and deletes that fired them work after."""

from __future__ import annotations

import sqlite3

from sqlalchemy import text

from store.engine import make_engine

OLD = (
    "CREATE VIRTUAL TABLE document_fts USING fts5(text, content='', tokenize='trigram case_sensitive 1')",
    "CREATE TRIGGER document_segments_ad AFTER DELETE ON document_segments BEGIN "
    "INSERT INTO document_fts(document_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE VIRTUAL TABLE chunk_fts USING fts5(text, content='chunks', content_rowid='id')",
    "CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN INSERT INTO chunk_fts(rowid, text) VALUES (new.id, "
    "new.text); END",
    "CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunk_fts(chunk_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
)


def test_an_older_store_loses_its_full_text_tables_and_keeps_working(tmp_path):
    db = tmp_path / "assay.db"
    make_engine(f"sqlite:///{db}").dispose()
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER IF EXISTS chunks_version_ad")
    for statement in OLD:
        conn.execute(statement)
    conn.commit()
    conn.close()
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as c:
            names = set(c.execute(text("SELECT name FROM sqlite_master")).scalars())
        assert not {"document_fts", "chunk_fts", "document_segments_ad", "chunks_ai", "chunks_ad"} & names
        assert {"chunks_version_ad", "documents_changed_ai", "documents_changed_ad"} <= names
        with engine.begin() as c:  # the deletes the old triggers answered to run without them
            c.execute(text("DELETE FROM document_segments"))
            c.execute(text("DELETE FROM chunks"))
    finally:
        engine.dispose()

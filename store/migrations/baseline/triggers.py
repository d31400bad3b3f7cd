"""The store's triggers as the baseline revision made them, and what the releases before it left behind, frozen.

Copies, not imports, of the statements store.models.documents and store.models.semantic run when ``create_all``
makes a new store: those may change with the models (then in a new revision); these stay what revision 0001 made.
"""

from __future__ import annotations

# The change log the text engine follows (store.models.documents), and the collection's version bump when chunks go
# (store.models.semantic). SQLite: dropped and made again, so a store made before has exactly these bodies.
SQLITE_TRIGGERS: dict[str, str] = {
    "documents_changed_ai": "CREATE TRIGGER documents_changed_ai AFTER INSERT ON documents BEGIN "
                            "INSERT INTO document_changes(entry_id) VALUES (new.entry_id); END",
    "documents_changed_au": "CREATE TRIGGER documents_changed_au AFTER UPDATE ON documents BEGIN "
                            "INSERT INTO document_changes(entry_id) VALUES (new.entry_id); END",
    "documents_changed_ad": "CREATE TRIGGER documents_changed_ad AFTER DELETE ON documents BEGIN "
                            "INSERT INTO document_changes(entry_id) VALUES (old.entry_id); END",
    "entries_moved_au": "CREATE TRIGGER entries_moved_au AFTER UPDATE OF path ON entries "
                        "WHEN new.path IS NOT old.path AND EXISTS (SELECT 1 FROM documents WHERE entry_id = new.id) "
                        "BEGIN INSERT INTO document_changes(entry_id) VALUES (new.id); END",
    "chunks_version_ad": "CREATE TRIGGER chunks_version_ad AFTER DELETE ON chunks BEGIN "
                         "UPDATE collections SET version = version + 1 WHERE id = old.collection_id; END",
}

POSTGRES_TRIGGERS: tuple[str, ...] = (
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
    "CREATE OR REPLACE FUNCTION assay_chunks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "UPDATE collections SET version = version + 1 WHERE id IN (SELECT DISTINCT collection_id FROM gone); "
    "RETURN NULL; END $$",
    "CREATE OR REPLACE TRIGGER chunks_ad AFTER DELETE ON chunks REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION assay_chunks_deleted()",
)

# What earlier releases made and this schema no longer has, dropped first (their triggers would fire on the
# baseline's own writes): the FTS5 trigram index of document segments and the FTS5 index of chunks with their
# triggers (the text engine, store.textindex, replaced both; on SQLite "chunks_ad" was the FTS5 one, the version
# bump is chunks_version_ad), and the classifier's job table (its runs are runs, in jobs, since a84d246).
SQLITE_RETIRED: tuple[str, ...] = (
    "DROP TRIGGER IF EXISTS document_segments_ai",
    "DROP TRIGGER IF EXISTS document_segments_ad",
    "DROP TABLE IF EXISTS document_fts",
    "DROP TRIGGER IF EXISTS chunks_ai",
    "DROP TRIGGER IF EXISTS chunks_ad",
    "DROP TABLE IF EXISTS chunk_fts",
    "DROP TABLE IF EXISTS classifier_jobs",
)

# PostgreSQL's: the pg_trgm index over document_segments.folded (the extension stays: others may use it), the chunks'
# generated tsvector column (its GIN index goes with it), the classifier's job table.
POSTGRES_RETIRED: tuple[str, ...] = (
    "DROP INDEX IF EXISTS ix_document_segments_trgm",
    "ALTER TABLE IF EXISTS chunks DROP COLUMN IF EXISTS tsv",
    "DROP TABLE IF EXISTS classifier_jobs",
)

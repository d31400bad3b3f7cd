"""db-diagnose as plain functions: counts, orphans, stale entries, integrity, on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import time

import pytest
from sqlalchemy import delete, insert, select, text, update

from flows.index.indexer import index_tree
from store import diagnostics
from store.engine import make_engine
from store.entries import T
from store.models import (Chunk, Collection, CollectionEntry, Document, DocumentSegment, Embedding, ResourceSet,
                          SetMember)


@pytest.fixture
def indexed(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    return tree


def test_reference_fields_on_a_fresh_indexed_sqlite_store(engine, indexed, data_dir):
    with engine.begin() as conn:
        conn.execute(insert(ResourceSet.__table__).values(name="photos"))
    report = diagnostics.diagnose(engine)
    assert report["database_path"] == str(data_dir / "assay.db")
    assert report["database_size"] >= os.path.getsize(data_dir / "assay.db") > 0
    assert report["integrity_check"] == "ok"
    assert report["entry_count"] == 19 and report["resource_set_count"] == 1
    assert report["orphaned_entries"] == 0 and report["stale_entries"] == 0
    assert report["entries_by_kind"] == {"file": 10, "directory": 9}
    assert report["backend"] == "sqlite" and report["journal_mode"] == "wal"
    assert report["schema_check"] == "ok" and report["orphaned_records"] == {}
    assert report["healthy"] is True and report["warnings"] == [] and report["skipped_checks"] == []


def test_a_hole_in_an_indexed_tree_is_an_orphan_but_the_top_of_a_tree_is_not(engine, indexed):
    assert diagnostics.orphaned_entries(engine) == 0  # the indexed root's parent is not stored, by design
    with engine.begin() as conn:
        conn.execute(delete(T).where(T.c.path == str(indexed / "docs" / "deep" / "a")))  # leaves a/b and a/b/c.txt
    assert diagnostics.orphaned_entries(engine) == 1
    report = diagnostics.diagnose(engine)
    assert report["orphaned_entries"] == 1 and report["healthy"] is False and "re-index" in report["warnings"][0]


def test_stale_entries_are_those_no_scan_has_seen_for_a_week(engine, indexed):
    old = time.time() - diagnostics.STALE_AFTER_SECONDS - 60
    with engine.begin() as conn:
        conn.execute(update(T).where(T.c.extension == ".jpg").values(indexed_at=old))
    assert diagnostics.stale_entries(engine) == 3
    assert diagnostics.stale_entries(engine, older_than=10 * diagnostics.STALE_AFTER_SECONDS) == 0


def test_entries_a_recent_complete_scan_found_unchanged_are_not_stale(engine, tree):
    from flows.index.flow import run_index_job
    from store import jobs

    run_index_job(engine, job_id=jobs.create_job(engine, root=str(tree)), root=str(tree))
    old = time.time() - diagnostics.STALE_AFTER_SECONDS - 60
    with engine.begin() as conn:  # written a week ago; the re-scan below leaves unchanged rows as they are
        conn.execute(update(T).values(indexed_at=old))
        conn.execute(update(jobs.J).values(completed_at=old))
    assert diagnostics.stale_entries(engine) == 19
    rescan = run_index_job(engine, job_id=jobs.create_job(engine, root=str(tree / "Photos")), root=str(tree / "Photos"))
    assert rescan["status"] == "completed"
    assert diagnostics.stale_entries(engine) == 19 - 6  # Photos, vacation, three photos and a note: seen now


def test_dangling_foreign_keys_are_counted_per_column(engine, indexed):
    with engine.begin() as conn:
        conn.execute(text("PRAGMA foreign_keys=OFF"))
        set_id = conn.execute(insert(ResourceSet.__table__).values(name="s")).inserted_primary_key[0]
        conn.execute(insert(SetMember.__table__).values(set_id=set_id, entry_id=999999))
    assert diagnostics.orphaned_records(engine) == {"set_members.entry_id": 1}


def test_a_folder_size_apart_from_its_children_is_a_counter_mismatch_with_a_warning(engine, indexed):
    assert diagnostics.counter_mismatches(engine) == {}
    with engine.begin() as conn:  # a child's size written without its folder's: what a torn write would leave
        conn.execute(update(T).where(T.c.path == str(indexed / "Photos" / "photo.jpg")).values(size=1))
    assert diagnostics.counter_mismatches(engine) == {"entries.size": 1}
    report = diagnostics.diagnose(engine)
    assert report["counter_mismatches"] == {"entries.size": 1} and report["healthy"] is False
    assert any("not the sum of their children's" in w for w in report["warnings"])


def test_chunk_counts_vectors_and_document_lines_are_checked_against_their_rows(engine, indexed):
    K, CE = Chunk.__table__, CollectionEntry.__table__
    D, S = Document.__table__, DocumentSegment.__table__
    with engine.begin() as conn:
        ids = list(conn.execute(text("SELECT id FROM entries WHERE kind = 'file' ORDER BY id LIMIT 3")).scalars())
        cid = conn.execute(insert(Collection.__table__).values(name="c", model="m", dim=2)).inserted_primary_key[0]
        for n, entry in enumerate(ids[:2]):  # the first counts its one chunk; the second claims two
            conn.execute(insert(CE).values(collection_id=cid, entry_id=entry, work_key="k", chunk_count=n + 1))
            chunk = conn.execute(insert(K).values(collection_id=cid, entry_id=entry, chunk_index=0, start=0, end=1,
                                                  text="x")).inserted_primary_key[0]
            if n == 0:  # the second chunk has no vector
                conn.execute(insert(Embedding.__table__).values(chunk_id=chunk, collection_id=cid, vector=b"\0" * 8))
        conn.execute(insert(D).values(entry_id=ids[0], format="text", work_key="k", lines=3))
        conn.execute(insert(S), [{"entry_id": ids[0], "seq": 0, "line_count": 2, "text": "a\nb"},
                                 {"entry_id": ids[2], "seq": 0, "line_count": 1, "text": "half of a document"}])
    assert diagnostics.counter_mismatches(engine) == {
        "collection_entries.chunk_count": 1, "chunks.embedding": 1, "documents.lines": 1}
    assert diagnostics.unfinished_documents(engine) == 1  # segments without their documents row
    report = diagnostics.diagnose(engine)
    assert report["unfinished_documents"] == 1 and len(report["warnings"]) == 3 and not report["healthy"]
    with engine.begin() as conn:
        conn.execute(update(CE).where(CE.c.chunk_count == 2).values(chunk_count=1))
        conn.execute(update(D).values(lines=2))
        conn.execute(delete(S).where(S.c.entry_id == ids[2]))
        conn.execute(delete(K).where(~K.c.id.in_(select(Embedding.__table__.c.chunk_id))))
        conn.execute(delete(CE).where(CE.c.entry_id == ids[1]))
    assert diagnostics.counter_mismatches(engine) == {} and diagnostics.unfinished_documents(engine) == 0


def test_missing_table_is_reported_by_the_schema_check(engine):
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE saved_queries"))
    assert diagnostics.schema_problems(engine) == ["missing table saved_queries"]


def test_in_memory_sqlite_reports_its_page_size():
    eng = make_engine("sqlite:///:memory:")
    try:
        assert diagnostics.database_size(eng) > 0
        assert diagnostics.database_location(eng) == ":memory:"
    finally:
        eng.dispose()


def test_a_server_url_is_shown_with_its_password_masked():
    from sqlalchemy import create_engine

    eng = create_engine("postgresql+psycopg://assay:hunter2@db.example/assay")  # never connects
    assert diagnostics.database_location(eng) == "postgresql+psycopg://assay:***@db.example/assay"
    assert diagnostics.masked_url(eng) == "postgresql+psycopg://assay:***@db.example/assay"


# --- PostgreSQL -----------------------------------------------------------------------------------------------------


@pytest.mark.postgres
def test_diagnose_on_postgresql_skips_sqlite_only_checks_and_masks_the_password(pg_url, tree):
    eng = make_engine(pg_url)
    try:
        index_tree(eng, str(tree), scan_id=1)
        report = diagnostics.diagnose(eng)
        assert report["backend"] == "postgresql"
        assert report["integrity_check"].startswith("skipped") and "SQLite-only" in report["integrity_check"]
        assert report["skipped_checks"] == ["integrity_check", "journal_mode"] and report["journal_mode"] is None
        assert "secret" not in report["database_path"] and "***" in report["database_path"]
        assert report["database_size"] > 0
        assert report["entry_count"] == 19 and report["orphaned_entries"] == 0 and report["schema_check"] == "ok"
        assert report["healthy"] is True
    finally:
        from sqlmodel import SQLModel

        SQLModel.metadata.drop_all(eng)
        eng.dispose()


def test_a_store_made_before_scan_error_existed_gains_the_column_and_keeps_its_entries(tmp_path, tree):
    from flows.index.indexer import index_tree
    from store.diagnostics import diagnose
    from store.engine import make_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    index_tree(engine, str(tree), scan_id=1)
    with engine.begin() as conn:  # the store as an older version left it (made before migrations too)
        conn.exec_driver_sql("DROP TABLE alembic_version")
        conn.exec_driver_sql("DROP INDEX IF EXISTS ix_entries_scan_error")
        conn.exec_driver_sql("ALTER TABLE entries DROP COLUMN scan_error")
    engine.dispose()
    reopened = make_engine(url)
    report = diagnose(reopened)
    assert report["schema_check"] == "ok" and report["healthy"] and report["entry_count"] == 19
    assert index_tree(reopened, str(tree), scan_id=2).written == 0  # the old rows compare as unchanged
    reopened.dispose()


def test_artifact_cache_orphans_and_missing_files_are_reported_with_warnings(engine, indexed, data_dir,
                                                                             monkeypatch):
    from mcp_server.tools.database import cache_report
    from store import cache
    from store.models import Artifact

    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)
    kept = cache.put(data_dir, b"thumbnail")
    orphan = cache.put(data_dir, b"left behind")
    with engine.begin() as conn:
        entry = conn.execute(text("SELECT id FROM entries WHERE kind = 'file' LIMIT 1")).scalar_one()
        conn.execute(insert(Artifact.__table__), [
            {"entry_id": entry, "type": "thumbnail", "cache_path": kept, "value_json": "{}"},
            {"entry_id": entry, "type": "video-timeline", "cache_path": "cache/00/00/" + "0" * 32 + ".jpg",
             "value_json": "{}"}])
    report = diagnostics.diagnose(engine, artifact_cache=cache_report(engine))
    assert report["artifact_cache"]["orphan_files"] == 1 and report["artifact_cache"]["orphan_samples"] == [orphan]
    assert report["artifact_cache"]["orphan_bytes"] == len(b"left behind")
    assert report["artifact_cache"]["missing_files"] == 1
    assert report["artifact_cache"]["missing_samples"][0]["cachePath"].startswith("cache/00/00/")
    assert report["healthy"] is False
    assert any("belong to no artifact" in w for w in report["warnings"])
    assert any("point at a cache file that is gone" in w for w in report["warnings"])
    assert "artifact_cache" not in diagnostics.diagnose(engine)  # without the figures, no such section

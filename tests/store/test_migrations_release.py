"""A store made by the landed release before migrations (cf6e01d) opens with today's code, on both backends: built
from that release's schema and rows (fixtures/store-cf6e01d.*.sql, made by fixtures/make_store_cf6e01d.py in a
worktree of it), it is upgraded (a SQLite file copied beside itself first), keeps every row, reports a sound store
in db-diagnose, has today's schema, and takes writes that its triggers follow. The release before that
(store-9cbe7cf.db, before the runs table held plan executions) is upgraded to today's schema too."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from store import diagnostics, migrate, queries, semantic
from store import documents as store_documents
from store import jobs as store_jobs
from store import plans as store_plans
from store import users as store_users
from store.engine import make_engine

FIXTURES = Path(__file__).parent / "fixtures"
HOME = "/tmp/assay-release-cf6e01d/home"  # the tree the release indexed (its paths are in the rows)
TEXT = "Dice and squares\nEach player rolls two dice.\nThe highest total moves first."
ROWS = {"entries": 7, "resource_sets": 4, "set_members": 7, "set_edges": 1, "plans": 1, "plan_executions": 3,
        "outcome_batches": 2, "job_issues": 1, "documents": 1, "document_segments": 1, "collections": 1,
        "chunks": 2, "embeddings": 2, "entry_labels": 1, "metadata_values": 2, "artifacts": 1, "resource_maps": 1,
        "map_nodes": 2, "saved_queries": 1, "sources": 1, "preferences": 2, "users": 1, "api_tokens": 1}


def sqlite_release_store(tmp_path: Path) -> str:
    db = tmp_path / "assay.db"
    conn = sqlite3.connect(db)
    try:
        conn.executescript((FIXTURES / "store-cf6e01d.sqlite.sql").read_text())
    finally:
        conn.close()
    return f"sqlite:///{db}"


def postgres_release_store(url: str) -> str:
    """The release's pg_dump run into the empty database at ``url`` (its own connection: the dump empties the
    search_path of the session it runs in)."""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute((FIXTURES / "store-cf6e01d.postgres.sql").read_text())
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def release_url(request, tmp_path):
    if request.param == "sqlite":
        return sqlite_release_store(tmp_path)
    return postgres_release_store(request.getfixturevalue("pg_database"))


def differences(engine: Engine) -> list:
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)


def test_a_store_of_the_release_before_migrations_opens_upgraded_with_every_row(release_url):
    engine = make_engine(release_url)
    try:
        assert migrate.current(engine) == migrate.head() and differences(engine) == []
        with engine.connect() as conn:
            counts = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in ROWS}
            ids = dict(conn.execute(text("SELECT path, id FROM entries")).all())
        assert counts == ROWS
        report = diagnostics.diagnose(engine)
        assert report["healthy"], report["warnings"]
        assert report["integrity_check"] == "ok" or report["integrity_check"].startswith("skipped")
        assert report["schema_check"] == "ok" and report["entry_count"] == 7

        executions, total = store_plans.list_executions(engine, plan_name="notes", limit=10)
        assert total == 3
        runs = [store_jobs.get_job(engine, job_id=store_plans.run_of_execution(engine, execution_id=e["execution_id"]))
                for e in executions]
        assert sorted(r["status"] for r in runs) == ["cancelled", "completed", "completed"]
        rules = ids[f"{HOME}/games/rules.txt"]
        assert [t for _, t, _ in store_documents.read_pages(engine, rules)] == [TEXT]
        collection = semantic.get_collection(engine, "default")
        assert collection is not None and semantic.vector_count(engine, collection["id"]) == 2
        assert [(u["name"], u["tokens"]) for u in store_users.list_users(engine)] == [("ana", 1)]
        assert queries.get_query(engine, name="texts")["name"] == "texts"

        with engine.connect() as conn:  # the triggers the upgrade made follow today's writes
            changes = conn.execute(text("SELECT count(*) FROM document_changes")).scalar()
        store_documents.delete_documents(engine, [rules])
        with engine.begin() as conn:
            version = conn.execute(text("SELECT version FROM collections")).scalar()
            conn.execute(text("DELETE FROM chunks"))
            assert conn.execute(text("SELECT version FROM collections")).scalar() > version
            assert conn.execute(text("SELECT count(*) FROM document_changes")).scalar() == changes + 1
    finally:
        engine.dispose()
    if release_url.startswith("sqlite"):
        db = Path(release_url.removeprefix("sqlite:///"))
        (copy,) = db.parent.glob("assay.db.before-unversioned-*.bak")
        with sqlite3.connect(copy) as old:
            assert old.execute("SELECT count(*) FROM entries").fetchone() == (7,)
            assert not old.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchall()


def test_the_release_before_the_runs_table_is_upgraded_to_todays_schema(tmp_path):
    db = tmp_path / "assay.db"
    shutil.copy(FIXTURES / "store-9cbe7cf.db", db)
    engine = make_engine(f"sqlite:///{db}")
    try:
        assert migrate.current(engine) == migrate.head() and differences(engine) == []
        report = diagnostics.diagnose(engine)
        assert report["healthy"] and report["integrity_check"] == "ok", report["warnings"]
    finally:
        engine.dispose()

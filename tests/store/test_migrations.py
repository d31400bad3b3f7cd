"""The store's schema under migrations (store.migrate, store/migrations), on both backends.

The guard: an empty database upgraded through the revisions has the models' schema (alembic's compare_metadata
finds no difference) and the triggers of a store made from the models, so a model changed without a revision fails
here. Then how a store is opened: a new one made and stamped, an up-to-date one read with one SELECT, one made by a
newer assay refused and left as it is, a store made before migrations upgraded after a copy of it is taken, two
openers at once migrating once, a failing revision leaving nothing behind.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from contextlib import ExitStack
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from store import migrate
from store.engine import make_engine
from store.errors import StoreVersionError
from store.migrations.baseline import adopt
from tests.conftest import BACKENDS, fresh_pg_database


@pytest.fixture(scope="module", params=BACKENDS)
def url(request, tmp_path_factory):
    """A factory of empty databases of one backend: each call, the URL of a new one (dropped at the end)."""
    if request.param == "sqlite":
        base = tmp_path_factory.mktemp("migrations")
        counter = iter(range(1000))
        yield lambda: f"sqlite:///{base / f'store-{next(counter)}.db'}"
        return
    pg_url = request.getfixturevalue("pg_url")
    with ExitStack() as stack:
        yield lambda: stack.enter_context(fresh_pg_database(pg_url, "assay_mig"))


@pytest.fixture(scope="module")
def migrated(url):
    """An empty database upgraded through every revision (not the fast path)."""
    engine = make_engine(url(), statement_timeout=None, prepare_schema=False)
    report = migrate.upgrade(engine)
    assert (report.from_revision, report.to_revision, report.action) == (None, migrate.head(), "upgraded")
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def created(url):
    """A store made by opening an empty database: the models' create_all, stamped at the head."""
    engine = make_engine(url())
    yield engine
    engine.dispose()


def differences(engine: Engine) -> list:
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)


def triggers(engine: Engine) -> set[tuple[str, ...]]:
    """The store's triggers: (name, table) and, on SQLite, their SQL."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.execute(text("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'"))
        else:
            rows = conn.execute(text("SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"))
        return {tuple(row) for row in rows}


def test_the_revisions_make_the_models_schema(migrated):
    assert differences(migrated) == []
    assert migrate.current(migrated) == migrate.head()


def test_the_revisions_make_the_triggers_a_new_store_has(migrated, created):
    assert triggers(migrated) == triggers(created)
    assert {t[1] for t in triggers(created)} == {"documents", "entries", "chunks"}


def test_a_new_store_is_made_at_the_head_revision(created):
    assert differences(created) == [] and migrate.current(created) == migrate.head()


def test_on_sqlite_the_revisions_write_the_very_statements_of_a_new_store(migrated, created):
    if migrated.dialect.name != "sqlite":
        pytest.skip("SQLite keeps each object's CREATE statement")
    query = text("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name != 'alembic_version' "
                 "AND tbl_name != 'alembic_version'")
    with migrated.connect() as a, created.connect() as b:
        assert set(a.execute(query)) == set(b.execute(query))


def test_opening_an_up_to_date_store_reads_only_its_revision(created):
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        make_engine(created.url.render_as_string(hide_password=False)).dispose()
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert statements == ["SELECT version_num FROM alembic_version"]


def test_a_store_of_a_newer_assay_is_refused_and_left_as_it_is(url):
    where = url()
    engine = make_engine(where)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0999_from_the_future'"))
        conn.execute(text("INSERT INTO preferences (key, value_json, updated_at) VALUES ('default_sort', "
                          "'\"size\"', 0)"))
    before = schema_of(engine)
    engine.dispose()
    with pytest.raises(StoreVersionError) as refused:
        make_engine(where)
    message = str(refused.value)
    assert refused.value.code == "STORE_VERSION"
    assert "0999_from_the_future" in message and migrate.head() in message and "restore" in message
    engine = make_engine(where, prepare_schema=False)
    try:
        assert schema_of(engine) == before and migrate.current(engine) == "0999_from_the_future"
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM preferences")).scalar() == 1
        with pytest.raises(StoreVersionError):
            migrate.upgrade(engine)
    finally:
        engine.dispose()


def schema_of(engine: Engine) -> dict[str, list[str]]:
    insp = inspect(engine)
    return {t: sorted(c["name"] for c in insp.get_columns(t)) for t in insp.get_table_names()}


def test_a_store_made_before_migrations_is_upgraded_after_a_copy_of_it_is_taken(url, caplog):
    where = url()
    engine = make_engine(where)
    with engine.begin() as conn:  # as the release before migrations left it: no version, an old table, no column
        conn.execute(text("DROP TABLE alembic_version"))
        conn.execute(text("CREATE TABLE classifier_jobs (id INTEGER PRIMARY KEY, source_path TEXT NOT NULL)"))
        conn.execute(text("DROP INDEX ix_outcome_batches_status"))
        conn.execute(text("ALTER TABLE jobs DROP COLUMN heartbeat_at"))
        conn.execute(text("INSERT INTO plans (name, mode, status, definition_json, created_at, updated_at) "
                          "VALUES ('p', 'manual', 'active', '{}', 0, 0)"))
        conn.execute(text("INSERT INTO plan_executions (plan_id, plan_name, status, entries_processed, "
                          "entries_matched, outcomes_applied, \"trigger\", summary_json, started_at) "
                          "VALUES (1, 'p', 'success', 3, 2, 2, 'manual', '{}', 10)"))
    engine.dispose()
    with caplog.at_level(logging.WARNING, logger="store.migrate"):
        engine = make_engine(where)
    try:
        assert differences(engine) == [] and migrate.current(engine) == migrate.head()
        assert "classifier_jobs" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            run = conn.execute(text("SELECT j.kind, j.status FROM plan_executions e JOIN jobs j ON j.id = e.run_id"))
            assert run.all() == [("plan", "completed")]
        copies = list(Path(engine.url.database).parent.glob(f"{Path(engine.url.database).name}.before-*"))
    finally:
        engine.dispose()
    if engine.dialect.name != "sqlite":
        assert "a copy of it" not in caplog.text
        return
    (copy,) = copies
    assert copy.name.startswith(Path(where.removeprefix("sqlite:///")).name + ".before-unversioned-")
    assert copy.name.endswith("Z.bak") and str(copy) in caplog.text
    with sqlite3.connect(copy) as old:  # the store as it was
        tables = {r[0] for r in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "classifier_jobs" in tables and "alembic_version" not in tables


def test_two_openers_at_once_make_the_store_once(url):
    where = url()
    barrier = threading.Barrier(2)
    reports: list[migrate.MigrationReport] = []
    errors: list[Exception] = []

    def open_it() -> None:
        engine = make_engine(where, prepare_schema=False)
        try:
            barrier.wait()
            reports.append(migrate.prepare(engine))
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=open_it) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(r.action for r in reports) == ["created", "current"]


def test_a_revision_that_fails_leaves_the_database_as_it_was(url, monkeypatch):
    where = url()
    engine = make_engine(where, statement_timeout=None, prepare_schema=False)

    def fail(_connection) -> int:
        raise RuntimeError("a revision failing after its tables were made")

    monkeypatch.setattr(adopt, "backfill_plan_runs", fail)
    try:
        with pytest.raises(RuntimeError, match="failing after"):
            migrate.upgrade(engine)
        assert inspect(engine).get_table_names() == [] and migrate.current(engine) is None
    finally:
        engine.dispose()


def test_history_lists_the_revisions_newest_first_ending_at_the_baseline():
    revisions = migrate.history()
    assert revisions[0].revision == migrate.head() and revisions[0].is_head
    assert revisions[-1].revision == "0001_baseline" and revisions[-1].down_revision is None
    assert all(r.message for r in revisions)

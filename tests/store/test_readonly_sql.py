"""query_sql's engine: one reading statement on a read-only connection of its own, on both stores.

Every attack that broke other servers' read-only SQL tools (``COMMIT; <write>``, a comment before the keyword, a
driver falling back to a protocol that runs several statements, ...) is refused, and leaves the store as it was:
through :func:`run_readonly`, and through the connection layer alone with the lexical check bypassed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sqlite3
import tempfile
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine, make_url

from store.engine import make_engine
from store.errors import InvalidInput, QueryTimeout
from store.readonly_sql import (READER_ROLE, SqlRefused, ensure_reader_role, execute_readonly, json_ready,
                                run_readonly)
from store.readonly_sql_check import check_query
from tests.conftest import BACKENDS, backend_engine

ROWS = 250
FRUITS = ("apple", "Avocado", "banana")  # LIKE 'a%' matches one name in three, case-sensitively on both stores


@dataclass
class Store:
    backend: str
    engine: Engine
    url: str
    outside: Path  # where attacks try to write files: writable by the database server, so only the guard stops them

    def snapshot(self) -> tuple[object, ...]:
        """The rows of samples (count and checksum), the tables, the sequence, and every file an attack could
        make (the SQLite store's directory, the attack directory)."""
        with self.engine.connect() as conn:
            rows = conn.execute(text("SELECT id, name, score FROM samples ORDER BY id")).all()
            if self.backend == "postgresql":
                extra = tuple(conn.execute(text("SELECT last_value, is_called FROM sample_ids")).one())
            else:
                extra = (conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
                         conn.exec_driver_sql("PRAGMA user_version").scalar())
        tables = tuple(sorted(inspect(self.engine).get_table_names()))
        files = tuple(sorted(p.name for p in self.outside.iterdir()))
        if self.backend == "sqlite":
            files += tuple(sorted(p.name for p in Path(self.engine.url.database or "").parent.iterdir()))
        return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest(), tables, extra, files


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    outside = Path(tempfile.mkdtemp(prefix="assay-sql-attacks-"))
    outside.chmod(0o777)  # the PostgreSQL server runs as another user: it could write here if nothing stopped it
    with backend_engine(request, tmp_path_factory, "readonly_sql") as engine:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE samples (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL)"))
            conn.execute(text("INSERT INTO samples (id, name, score) VALUES (:id, :name, :score)"),
                         [{"id": i, "name": f"{FRUITS[i % 3]}-{i}", "score": i / 4} for i in range(1, ROWS + 1)])
            if request.param == "postgresql":
                conn.execute(text("CREATE SEQUENCE sample_ids"))
                conn.execute(text("SELECT nextval('sample_ids')"))
        yield Store(request.param, engine, engine.url.render_as_string(hide_password=False), outside)
    shutil.rmtree(outside, ignore_errors=True)


def postgres_only(store: Store) -> None:
    if store.backend != "postgresql":
        pytest.skip("PostgreSQL only")


# --- reading -----------------------------------------------------------------------------------------------------

def test_a_select_returns_its_columns_and_rows_and_says_how_read_only_was_guaranteed(store):
    result = run_readonly(store.url, "SELECT id, name, score FROM samples WHERE id <= 3 ORDER BY id")
    assert result.columns == ["id", "name", "score"]
    assert result.rows == [[1, "Avocado-1", 0.25], [2, "banana-2", 0.5], [3, "apple-3", 0.75]]
    assert (result.row_count, result.truncated, result.note) == (3, False, "")
    assert result.elapsed_ms >= 0
    assert ("mode=ro" in result.guarantee) if store.backend == "sqlite" else ("READ ONLY" in result.guarantee)


def test_more_rows_than_the_cap_are_truncated_and_limit_offset_pages_through_them(store):
    result = run_readonly(store.url, "SELECT id FROM samples ORDER BY id")
    assert (result.row_count, len(result.rows), result.truncated) == (100, 100, True)
    assert "LIMIT/OFFSET" in result.note and result.rows[-1] == [100]
    pages = [run_readonly(store.url, f"SELECT id FROM samples ORDER BY id LIMIT 100 OFFSET {offset}")
             for offset in (0, 100, 200)]
    assert [(p.row_count, p.truncated) for p in pages] == [(100, False), (100, False), (50, False)]
    assert [row[0] for p in pages for row in p.rows] == list(range(1, ROWS + 1))
    assert run_readonly(store.url, "SELECT id FROM samples", max_rows=5).rows == [[1], [2], [3], [4], [5]]


def test_a_percent_sign_in_the_query_is_text_not_a_placeholder(store):
    result = run_readonly(store.url, "SELECT count(*) AS n FROM samples WHERE name LIKE 'a%'")
    assert result.rows == [[ROWS // 3]]  # apple only: LIKE is case-sensitive on both stores


def test_an_empty_result_still_names_its_columns(store):
    result = run_readonly(store.url, "SELECT id, name FROM samples WHERE id < 0")
    assert (result.columns, result.rows, result.truncated) == (["id", "name"], [], False)


@pytest.mark.parametrize("query", [
    "VALUES (1, 'x')",
    "WITH big AS (SELECT id FROM samples WHERE id > 248) SELECT id FROM big ORDER BY id",
    "SELECT 1 UNION ALL SELECT 2 ORDER BY 1",
    "-- a leading comment\n/* and another */ SELECT 1;",
])
def test_every_accepted_form_of_a_read_runs(store, query):
    assert run_readonly(store.url, query).row_count >= 1


def test_explain_without_analyze_runs(store):
    result = run_readonly(store.url, "EXPLAIN SELECT * FROM samples WHERE id = 1")
    assert result.row_count >= 1 and result.columns


def test_sqlite_reads_its_informational_pragmas(store):
    if store.backend != "sqlite":
        pytest.skip("SQLite only")
    columns = run_readonly(store.url, "PRAGMA table_info(samples)")
    assert [row[1] for row in columns.rows] == ["id", "name", "score"]
    assert run_readonly(store.url, "PRAGMA user_version").rows == [[0]]


def test_postgresql_reads_as_the_reader_role_in_a_read_only_transaction(store):
    postgres_only(store)
    result = run_readonly(store.url, "SELECT current_user, current_setting('transaction_read_only')")
    assert result.rows == [[READER_ROLE, "on"]]
    assert READER_ROLE in result.guarantee and "extended protocol" in result.guarantee


def test_values_come_back_ready_for_json(store):
    query = ("SELECT x'00ff' AS b, 1.5 AS f" if store.backend == "sqlite" else
             "SELECT '\\x00ff'::bytea AS b, 1.5::numeric AS f, 0.1::numeric AS d, DATE '2024-02-29' AS day, "
             "TIMESTAMP '2024-02-29 12:30:00' AS at, ARRAY[1, 2] AS a, '{\"k\": [1]}'::jsonb AS j")
    row = run_readonly(store.url, query).rows[0]
    assert row[:2] == [base64.b64encode(b"\x00\xff").decode(), 1.5]
    if store.backend == "postgresql":
        assert row[2:] == [0.1, "2024-02-29", "2024-02-29T12:30:00", [1, 2], {"k": [1]}]
    json.dumps(row)


@pytest.mark.parametrize(("value", "expected"), [
    (b"\x01\x02", "AQI="), (memoryview(b"\x01\x02"), "AQI="), (datetime(2024, 1, 2, 3, 4), "2024-01-02T03:04:00"),
    (date(2024, 1, 2), "2024-01-02"), (Decimal("2.5"), 2.5), (Decimal("0.1"), 0.1),
    (Decimal("123456789012345678901234567890"), "123456789012345678901234567890"),
    (Decimal("0.10000000000000000001"), "0.10000000000000000001"), (Decimal("NaN"), "NaN"),
    (float("inf"), "inf"), (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    ([b"\x01", None], ["AQ==", None]),
])
def test_json_ready_turns_each_kind_of_value_into_json(value, expected):
    assert json_ready(value) == expected


# --- refusals and database errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "   \n\t", "-- only a comment", "/* only */ ;"])
def test_an_empty_query_is_refused_clearly(store, query):
    with pytest.raises(SqlRefused) as caught:
        run_readonly(store.url, query)
    assert caught.value.code == "SQL_NOT_ALLOWED" and "SELECT" in caught.value.message


def test_a_query_the_database_rejects_is_an_sql_error_with_its_own_message(store):
    with pytest.raises(SqlRefused) as caught:
        run_readonly(store.url, "SELECT * FROM no_such_table")
    assert caught.value.code == "SQL_ERROR" and "no_such_table" in caught.value.message
    with pytest.raises(SqlRefused) as caught:
        run_readonly(store.url, "SELECT FROM WHERE")
    assert caught.value.code == "SQL_ERROR"


def test_limits_must_make_sense(store):
    with pytest.raises(InvalidInput):
        run_readonly(store.url, "SELECT 1", max_rows=0)
    with pytest.raises(InvalidInput):
        run_readonly(store.url, "SELECT 1", timeout=0)
    with pytest.raises(InvalidInput, match="SQLite and PostgreSQL"):
        run_readonly("mysql://db.example/assay", "SELECT 1")


def test_a_sqlite_store_whose_path_needs_escaping_in_a_uri_opens(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'a b#c' / 'assay.db'}")
    try:
        result = run_readonly(engine.url.render_as_string(hide_password=False), "SELECT count(*) FROM entries")
        assert result.rows == [[0]]
    finally:
        engine.dispose()


# (id, query with {out} for the attack directory); each is refused by run_readonly as SQL_NOT_ALLOWED on both stores
ATTACKS = [
    ("commit-then-write", "COMMIT; DELETE FROM samples"),
    ("select-then-write", "SELECT 1; DELETE FROM samples"),
    ("block-comment-first", "/* x */ DELETE FROM samples"),
    ("line-comment-first", "-- x\nDELETE FROM samples"),
    ("delete", "DELETE FROM samples"),
    ("insert", "INSERT INTO samples (id, name) VALUES (9999, 'x')"),
    ("update", "UPDATE samples SET score = 0"),
    ("drop", "DROP TABLE samples"),
    ("data-modifying-with", "WITH d AS (DELETE FROM samples RETURNING *) SELECT * FROM d"),
    ("explain-analyze", "EXPLAIN ANALYZE DELETE FROM samples"),
    ("select-into", "SELECT * INTO copied FROM samples"),
    ("for-update", "SELECT * FROM samples FOR UPDATE"),
    ("attach", "ATTACH DATABASE '{out}/x.db' AS x"),
    ("pragma-query-only", "PRAGMA query_only=0"),
    ("pragma-journal-mode", "PRAGMA journal_mode=DELETE"),
    ("pragma-user-version", "PRAGMA user_version=7"),
    ("load-extension", "SELECT load_extension('{out}/x')"),
    ("copy-to-file", "COPY samples TO '{out}/copy.txt'"),
    ("copy-to-program", "COPY (SELECT 1) TO PROGRAM 'touch {out}/touched'"),
    ("set-config", "SELECT set_config('default_transaction_read_only', 'off', false)"),
    ("set-config-role", "SELECT set_config('role', 'postgres', true)"),
    ("query-run-from-a-string", "SELECT query_to_xml('SELECT set_config(''role'', ''postgres'', true)', true, "
                                "false, '')"),
    ("advisory-lock", "SELECT pg_advisory_lock(1)"),
    ("read-server-file", "SELECT pg_read_file('/etc/passwd')"),
    ("lo-import", "SELECT lo_import('/etc/passwd')"),
    ("set-role", "SET ROLE postgres"),
    ("reset-role", "RESET ROLE"),
    ("begin", "BEGIN"),
    ("vacuum", "VACUUM"),
    ("create-temp-table", "CREATE TEMP TABLE x(a int)"),
    ("nextval", "SELECT nextval('sample_ids')"),
]
# what the connection layer alone lets run on PostgreSQL: session state that dies with the connection (tested below)
HARMLESS_ON_THE_CONNECTION = {"set-config", "set-config-role", "advisory-lock", "query-run-from-a-string"}


@pytest.mark.parametrize(("name", "query"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_every_attack_is_refused_and_leaves_the_store_unchanged(store, name, query):
    before = store.snapshot()
    with pytest.raises(SqlRefused) as caught:
        run_readonly(store.url, query.format(out=store.outside))
    assert caught.value.code == "SQL_NOT_ALLOWED", caught.value.message
    assert "SELECT" in caught.value.message  # says what is accepted
    assert store.snapshot() == before


@pytest.mark.parametrize(("name", "query"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_the_connection_alone_refuses_every_write_with_the_check_bypassed(store, name, query):
    before = store.snapshot()
    if store.backend == "postgresql" and name in HARMLESS_ON_THE_CONNECTION:
        execute_readonly(store.url, query.format(out=store.outside))
    else:
        with pytest.raises(SqlRefused):
            execute_readonly(store.url, query.format(out=store.outside))
    assert store.snapshot() == before


@pytest.mark.parametrize("query", ["SELECT 1; DELETE FROM samples", "SELECT 1; COMMIT; DELETE FROM samples",
                                   "EXPLAIN SELECT 1; DELETE FROM samples"])
def test_postgresql_itself_rejects_several_statements_sent_through_the_extended_protocol(store, query):
    postgres_only(store)
    before = store.snapshot()
    with pytest.raises(SqlRefused) as caught:
        execute_readonly(store.url, query)
    assert "cannot insert multiple commands into a prepared statement" in caught.value.message
    assert store.snapshot() == before


def test_nothing_a_query_changes_in_its_session_outlives_it(store):
    postgres_only(store)
    execute_readonly(store.url, "SELECT pg_advisory_lock(42), set_config('search_path', 'nowhere', false)")
    assert run_readonly(store.url, "SELECT current_setting('search_path')").rows != [["nowhere"]]
    with store.engine.connect() as conn:  # the lock went with the connection that took it
        assert conn.execute(text("SELECT pg_try_advisory_lock(42)")).scalar() is True
        conn.execute(text("SELECT pg_advisory_unlock(42)"))


@pytest.mark.parametrize("query", [
    "SELECT 'DELETE FROM samples; DROP TABLE samples' AS s",
    "SELECT 1 AS one /* ; DELETE FROM samples; */",
    "SELECT 1 AS one -- ; DELETE FROM samples",
    "SELECT \"name\" FROM samples WHERE name = 'x; COMMIT; DELETE FROM samples' -- set_config",
])
def test_a_write_inside_a_string_or_a_comment_is_just_text(store, query):
    before = store.snapshot()
    run_readonly(store.url, query)
    assert store.snapshot() == before


@pytest.mark.parametrize("query", [
    "SELECT $$DELETE FROM samples$$ AS s",
    "SELECT $body$ '; DELETE FROM samples; $body$ AS s",
    "SELECT E'\\'; DELETE FROM samples; --' AS s",
    "SELECT 1 /* nested /* DELETE */ still a comment; DELETE */ AS one",
])
def test_postgresql_strings_and_nested_comments_are_read_as_the_server_reads_them(store, query):
    postgres_only(store)
    before = store.snapshot()
    assert run_readonly(store.url, query).row_count == 1
    assert store.snapshot() == before


@pytest.mark.parametrize(("query", "dialect", "refused"), [
    ("SELECT pg_catalog.set_config('role', 'postgres', true)", "postgresql", "set_config"),
    ('SELECT "set_config"(\'role\', \'postgres\', true)', "postgresql", "set_config"),
    ('SELECT U&"\\0073et_config"(\'role\', \'postgres\', true)', "postgresql", "Unicode-escaped"),
    ("SELECT 1 -- x\rDELETE FROM samples", "postgresql", "DELETE"),  # a carriage return ends a comment there
    ("EXPLAIN (FORMAT JSON, ANALYZE) SELECT 1", "postgresql", "ANALYZE"),
    ("SELECT * FROM samples FOR KEY SHARE", "postgresql", "FOR SHARE"),
    ("EXPLAIN CREATE TABLE x AS SELECT 1", "postgresql", "EXPLAIN CREATE"),
    ("PRAGMA main.query_only(0)", "sqlite", "query_only"),
    ("SELECT 1 /* unclosed", "postgresql", "never closed"),
])
def test_the_check_sees_what_would_slip_past_a_naive_reading(query, dialect, refused):
    with pytest.raises(SqlRefused, match=refused):
        check_query(query, dialect)


def test_the_check_names_the_accepted_statements(store):
    assert check_query("WITH x AS (SELECT 1) SELECT * FROM x", "postgresql") == "with"
    assert check_query("/* c */ ((SELECT 1))", "sqlite") == "select"
    assert check_query('SELECT "delete" FROM t', "postgresql") == "select"  # a quoted name is a name
    assert check_query("EXPLAIN QUERY PLAN SELECT 1", "sqlite") == "explain"


# --- time limit and concurrency -----------------------------------------------------------------------------------

def test_a_query_past_its_time_limit_is_stopped(store):
    query = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
             if store.backend == "sqlite" else "SELECT pg_sleep(5)")
    with pytest.raises(QueryTimeout) as caught:
        run_readonly(store.url, query, timeout=0.5)
    assert "0.5 s" in caught.value.message
    assert run_readonly(store.url, "SELECT count(*) FROM samples").rows == [[ROWS]]


def test_sqlite_reads_while_another_connection_writes(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    url = engine.url.render_as_string(hide_password=False)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY)"))
        conn.execute(text("INSERT INTO notes (id) VALUES (1), (2)"))
    writer = sqlite3.connect(tmp_path / "assay.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO notes (id) VALUES (3)")
        assert run_readonly(url, "SELECT count(*) FROM notes").rows == [[2]]  # the committed rows, at once
        writer.execute("COMMIT")
        assert run_readonly(url, "SELECT count(*) FROM notes").rows == [[3]]
    finally:
        writer.close()
        engine.dispose()


# --- the reader role ----------------------------------------------------------------------------------------------

def test_a_table_the_role_cannot_read_is_granted_again_and_the_query_retried(store):
    postgres_only(store)
    with store.engine.begin() as conn:
        conn.execute(text(f"REVOKE SELECT ON samples FROM {READER_ROLE}"))
    assert run_readonly(store.url, "SELECT count(*) FROM samples").rows == [[ROWS]]


def test_a_user_that_may_not_create_roles_reads_in_a_read_only_transaction_alone(store):
    postgres_only(store)
    user = f"limited_{uuid.uuid4().hex[:8]}"
    with store.engine.begin() as conn:
        conn.execute(text(f"CREATE ROLE {user} LOGIN"))
        conn.execute(text(f"GRANT SELECT, DELETE ON samples TO {user}"))
    url = make_url(store.url).set(username=user, password=None).render_as_string(hide_password=False)
    try:
        assert ensure_reader_role(url) is False and ensure_reader_role(store.url) is True
        result = run_readonly(url, "SELECT current_user, count(*) FROM samples")
        assert result.rows == [[user, ROWS]]
        assert f"store's own user {user}" in result.guarantee
        before = store.snapshot()
        with pytest.raises(SqlRefused) as caught:  # it may delete, but not in this transaction
            execute_readonly(url, "EXPLAIN ANALYZE DELETE FROM samples")
        assert caught.value.code == "SQL_NOT_ALLOWED" and "read-only transaction" in caught.value.message
        assert store.snapshot() == before
    finally:
        admin = create_engine(store.url)
        with admin.begin() as conn:
            conn.execute(text(f"DROP OWNED BY {user}"))
            conn.execute(text(f"DROP ROLE {user}"))
        admin.dispose()

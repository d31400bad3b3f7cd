"""The store's engine: a time limit on every statement (SQLite and PostgreSQL) and RE2 behind SQLite's REGEXP."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from store.engine import make_engine, statement_timeout_from_env
from store.errors import InvalidInput, QueryTimeout

# A statement that runs for minutes: counts to a billion. Without a time limit the test fails (nothing is raised).
ENDLESS = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 1000000000) SELECT count(*) FROM r"


def test_sqlite_statement_over_the_time_limit_is_stopped_with_query_timeout(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}", statement_timeout=0.5)
    with engine.connect() as conn:
        with pytest.raises(QueryTimeout) as caught:
            conn.execute(text(ENDLESS)).scalar()
        assert caught.value.code == "QUERY_TIMEOUT" and "ASSAY_STATEMENT_TIMEOUT" in caught.value.message
        conn.rollback()
        # the connection stays usable, and the next statement gets a fresh deadline
        assert conn.execute(text("SELECT count(*) FROM entries")).scalar() == 0
    engine.dispose()


def test_time_limit_comes_from_the_environment_and_zero_turns_it_off():
    assert statement_timeout_from_env({}) == 30.0
    assert statement_timeout_from_env({"ASSAY_STATEMENT_TIMEOUT": "2.5"}) == 2.5
    assert statement_timeout_from_env({"ASSAY_STATEMENT_TIMEOUT": "0"}) is None
    with pytest.raises(InvalidInput, match="number of seconds"):
        statement_timeout_from_env({"ASSAY_STATEMENT_TIMEOUT": "soon"})


def test_sqlite_regexp_is_re2(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT :v REGEXP '^(a+)+$'"), {"v": "a" * 34 + "!"}).scalar() == 0
        assert conn.execute(text(r"SELECT 'x\ny' REGEXP '^x$'")).scalar() == 0  # no multi-line mode, as in Python
        assert conn.execute(text("SELECT NULL REGEXP 'a'")).scalar() is None
        with pytest.raises(Exception, match="user-defined function raised exception"):
            conn.execute(text(r"SELECT 'aa' REGEXP '(a)\1'")).scalar()  # a backreference: RE2 has none
    engine.dispose()


@pytest.mark.postgres
def test_postgresql_statement_over_the_time_limit_is_stopped_with_query_timeout(pg_database):
    engine = make_engine(pg_database, statement_timeout=0.5)
    with engine.connect() as conn:
        with pytest.raises(QueryTimeout):
            conn.execute(text("SELECT pg_sleep(30)")).scalar()
        conn.rollback()
        assert conn.execute(text("SELECT 1")).scalar() == 1
    engine.dispose()

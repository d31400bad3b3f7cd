"""dsl.sql.to_sql's translation: fields SQL cannot test are refused, values are bound parameters (never pasted into
the statement), and PostgreSQL compares metadata text by code point."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from dsl.sql import to_sql
from tests.dsl.sql_conditions import LABEL_LEAF, SIMILAR_LEAF, TEXT_LEAF, C, any_
from tests.dsl.sql_store import ENTRIES, StoreSqlContext


def test_to_sql_refuses_fields_sql_cannot_test():
    with pytest.raises(ValueError, match="similarity"):  # SQL only narrows it (its Superset)
        to_sql(SIMILAR_LEAF, StoreSqlContext("sqlite"))
    with pytest.raises(ValueError, match="label"):  # a context without field_clause cannot push labels
        to_sql(LABEL_LEAF, StoreSqlContext("sqlite"))
    with pytest.raises(ValueError):  # a content leaf alone is not decidable in SQL (its Superset is)
        to_sql(TEXT_LEAF, StoreSqlContext("sqlite"))


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_values_are_bound_parameters_never_pasted_into_sql(dialect):
    evil = "x'; DROP TABLE entries; --"
    cond = any_(C("name", "=", evil), C("path", "contains", evil), C("name", "glob", evil + "*"),
                C("exif.Model", "=", evil), C("title", "matches", "drop"), C("name", "in", [evil, "y"]))
    ctx = StoreSqlContext(dialect.name)
    compiled = select(ENTRIES.c.id).where(to_sql(cond, ctx)).compile(dialect=dialect)
    sql = str(compiled)
    assert "DROP" not in sql and "drop" not in sql
    assert evil in compiled.params.values()


def test_postgresql_orders_metadata_text_by_code_point():
    ctx = StoreSqlContext("postgresql")
    sql = str(select(ENTRIES.c.id).where(to_sql(C("exif.Model", ">", "C"), ctx)).compile(dialect=postgresql.dialect()))
    assert 'COLLATE "C"' in sql

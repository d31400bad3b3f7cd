"""The store side of condition-field tests: a corpus of entries in one backend (SQLite, or a throw-away
PostgreSQL database) with the plan engine's two condition contexts over it, so a capability's fields (the
classifier's metadata, extracted text) are checked in SQL and in Python alike."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterable, Iterator

from sqlalchemy import select

from dsl.sql import split
from flows.core.conditions import EvalStore, SqlStore
from store.engine import make_engine
from store.entries import T
from tests.conftest import fresh_pg_database

NOW = 1718452800.0  # 2024-06-15T12:00:00Z: relative times in the corpora are measured from here
BACKENDS = ["sqlite", "postgresql"]  # module-scoped fixtures parametrise over these (postgresql: marked)


class ConditionStore:
    """The corpus in one backend, with the plan engine's two condition contexts over it."""

    def __init__(self, engine, root: Path) -> None:
        self.engine, self.root = engine, root
        self.sql = SqlStore(engine, now=NOW)
        self.py = EvalStore(engine, now=NOW)
        with engine.connect() as conn:
            self.rows = [dict(r) for r in conn.execute(select(T)).mappings()]

    def sql_names(self, cond) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.execute(select(T.c.name).where(self.sql.clause(cond))).scalars())

    def python_names(self, cond) -> set[str]:
        return {r["name"] for r in self.rows if self.py.evaluate(cond, r)}

    def names(self, cond) -> set[str]:
        """The entries ``cond`` selects, after checking SQL and Python agree."""
        found = self.sql_names(cond)
        assert self.python_names(cond) == found, cond
        return found

    def split_names(self, cond) -> set[str]:
        """What the plan engine selects: the SQL part, then the residual in Python over the rows it gives."""
        push, residual = split(cond)
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(select(T).where(self.sql.clause(push))).mappings()]
        return {r["name"] for r in rows if self.py.evaluate(residual, r)}


@contextlib.contextmanager
def condition_store(request, tmp_path_factory, *, backend: str, files: Iterable[str],
                    fill: Callable[[object, Path], object], prefix: str) -> Iterator[ConditionStore]:
    """A fresh store of ``backend`` whose corpus ``fill(engine, root)`` writes, beside a folder holding ``files``
    (one byte each, so paths exist on disk); the PostgreSQL database is dropped afterwards."""
    root = tmp_path_factory.mktemp(prefix)
    for name in files:
        (root / name).write_bytes(b"x")
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            url = "sqlite:///" + str(tmp_path_factory.mktemp("db") / "assay.db")
        else:
            url = stack.enter_context(fresh_pg_database(request.getfixturevalue("pg_url"), prefix))
        engine = make_engine(url)
        try:
            fill(engine, root)
            yield ConditionStore(engine, root)
        finally:
            engine.dispose()

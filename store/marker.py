"""A cheap answer to "has anything been written to the store since I last asked?", for caches of figures that are
costly to count (how many documents in a scope wait for extraction) and cheap to compare.

``change_marker(engine)`` returns a value that differs after any commit by any connection or process:

- SQLite: ``PRAGMA data_version`` on a connection of the marker's own (it changes when another connection commits;
  this one never writes), read in microseconds without touching the database file's pages;
- PostgreSQL: the server's current WAL position (``pg_current_wal_lsn()``), which moves with every write;
- anything else, or when the question cannot be asked: a fresh object, so a cache never trusts what it holds.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from store.engine import database_file

_lock = threading.Lock()
_sqlite: dict[str, sqlite3.Connection] = {}


def change_marker(engine: Engine) -> Any:
    db = database_file(engine)
    if db is not None:
        key = str(db)
        with _lock:
            conn = _sqlite.get(key)
            if conn is None:
                conn = _sqlite[key] = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
            try:
                return ("sqlite", conn.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error:
                _sqlite.pop(key, None).close()  # type: ignore[union-attr]
                return object()
    if engine.dialect.name == "postgresql":
        try:
            with engine.connect() as pg:
                return ("postgresql", str(pg.execute(text("SELECT pg_current_wal_lsn()")).scalar()))
        except Exception:  # no right to ask (a managed server): nothing is cached
            return object()
    return object()

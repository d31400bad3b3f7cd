"""Engine set-up: SQLite in WAL mode by default, any SQLAlchemy URL (PostgreSQL) otherwise."""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine

from store import models  # noqa: F401  (registers every table on SQLModel.metadata)

log = logging.getLogger(__name__)

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA temp_store=MEMORY")
    cur.execute("PRAGMA case_sensitive_like=ON")  # LIKE as in PostgreSQL; case-insensitive tests lower() both sides
    cur.execute("PRAGMA cache_size=-65536")
    cur.close()


def make_engine(url: str) -> Engine:
    """A new engine for ``url`` with the schema created; prefer :func:`get_engine`, which shares one per URL."""
    if url.startswith("sqlite"):
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, pool_pre_ping=True)
    SQLModel.metadata.create_all(engine)
    log.debug("store ready at %s", engine.url.render_as_string(hide_password=True))
    return engine


def get_engine(url: str) -> Engine:
    """The process-wide engine for ``url`` (flows look engines up by URL, since engines do not serialise)."""
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = make_engine(url)
        return engine


def dispose_engines() -> None:
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def database_file(engine: Engine) -> Path | None:
    if engine.url.get_backend_name() == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        return Path(engine.url.database)
    return None


def is_sqlite(engine: Engine) -> bool:
    return engine.url.get_backend_name() == "sqlite"

"""Engine set-up: SQLite in WAL mode by default, any SQLAlchemy URL (PostgreSQL) otherwise.

Every statement runs under a time limit (``ASSAY_STATEMENT_TIMEOUT`` seconds, default 30; 0 turns it off), so no
query a caller shapes can hold the store for long: SQLite checks a per-statement deadline from a progress handler
while the statement computes its first row (its sorting, counting and filtering); PostgreSQL gets
``statement_timeout``. A statement stopped this way raises :class:`~store.errors.QueryTimeout` (QUERY_TIMEOUT).
The indexer's and the plan engine's bulk writes go through the driver's ``executemany`` in short batches, outside
the limit. SQLite's ``REGEXP`` is RE2 (:mod:`dsl.regex`), not Python's ``re``: linear time, no backtracking.

An engine opens its store through :func:`store.migrate.prepare` (an empty database made at the newest schema
revision, an older store upgraded, a newer one refused), before the time limit applies: a migration may run long.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, ExceptionContext
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session, create_engine

from dsl.regex import sqlite_regexp
from store import models  # noqa: F401  (registers every table on SQLModel.metadata)
from store.errors import InvalidInput, NoSpace, QueryTimeout
from store.migrate import prepare

log = logging.getLogger(__name__)

STATEMENT_TIMEOUT_ENV = "ASSAY_STATEMENT_TIMEOUT"
DEFAULT_STATEMENT_TIMEOUT = 30.0  # seconds: far above any single statement of an index or plan run
_PROGRESS_STEPS = 20_000  # SQLite virtual-machine steps between two deadline checks (well under a millisecond)
_DEADLINE = "assay_deadline"  # key of the per-connection deadline holder in the pool record's info

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def statement_timeout_from_env(env: dict[str, str] | None = None) -> float | None:
    """The statement time limit in seconds from ``ASSAY_STATEMENT_TIMEOUT`` (default 30; 0 means none)."""
    raw = (os.environ if env is None else env).get(STATEMENT_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_STATEMENT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(f"{STATEMENT_TIMEOUT_ENV} must be a number of seconds (0 for no limit), got {raw!r}",
                           field=STATEMENT_TIMEOUT_ENV) from None
    if value < 0:
        raise InvalidInput(f"{STATEMENT_TIMEOUT_ENV} must be 0 or more seconds, got {raw!r}",
                           field=STATEMENT_TIMEOUT_ENV)
    return value or None


def _timeout_message(seconds: float) -> str:
    return (f"the query ran longer than the statement time limit ({seconds:g} s) and was stopped; narrow it "
            f"(a set, a path prefix, fewer or simpler patterns) or raise {STATEMENT_TIMEOUT_ENV}")


def register_functions(dbapi_conn: sqlite3.Connection) -> None:
    """The SQL functions every SQLite connection to a store needs: ``regexp`` (RE2 in place of the Python
    re.search SQLAlchemy registers: a pattern cannot backtrack for ever holding the GIL) and ``assay_fold`` (the
    documents' full-text index triggers call it; see store.models.fold)."""
    dbapi_conn.create_function("regexp", 2, sqlite_regexp, deterministic=True)
    dbapi_conn.create_function("assay_fold", 1, models.fold, deterministic=True)


def _sqlite_pragmas(dbapi_conn: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
    register_functions(dbapi_conn)
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA temp_store=MEMORY")
    cur.execute("PRAGMA case_sensitive_like=ON")  # LIKE as in PostgreSQL; case-insensitive tests lower() both sides
    cur.execute("PRAGMA cache_size=-65536")
    cur.close()


def _sqlite_deadlines(dbapi_conn: sqlite3.Connection, record: ConnectionPoolEntry) -> None:
    """The progress handler that stops a statement once its deadline (set by :func:`_sqlite_time_limit`) passed;
    on every connection from the start, so the ones opened while the schema is prepared get it too."""
    holder = record.info[_DEADLINE] = [None]
    dbapi_conn.set_progress_handler(
        lambda: 1 if holder[0] is not None and time.monotonic() > holder[0] else 0, _PROGRESS_STEPS)


def _sqlite_time_limit(engine: Engine, seconds: float) -> None:
    """A deadline per statement, checked by the progress handler of :func:`_sqlite_deadlines`: SQLite stops the
    statement ("interrupted") once the deadline has passed, and the error is raised again as QueryTimeout."""

    def before(conn: Connection, _cursor: Any, _statement: str, _params: Any, _context: Any, executemany: bool) -> None:
        holder = conn.info.get(_DEADLINE)
        if holder is not None:
            holder[0] = None if executemany else time.monotonic() + seconds

    def after(conn: Connection, *_args: Any) -> None:
        holder = conn.info.get(_DEADLINE)
        if holder is not None:
            holder[0] = None

    def on_error(context: ExceptionContext) -> None:
        holder = context.connection.info.get(_DEADLINE) if context.connection is not None else None
        expired = holder is not None and holder[0] is not None and time.monotonic() > holder[0]
        if holder is not None:
            holder[0] = None
        if expired and "interrupted" in str(context.original_exception):
            raise QueryTimeout(_timeout_message(seconds)) from context.original_exception

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    event.listen(engine, "handle_error", on_error)


def _postgres_time_limit(engine: Engine, seconds: float) -> None:
    def on_error(context: ExceptionContext) -> None:
        if getattr(context.original_exception, "sqlstate", None) == "57014":  # query_canceled: statement_timeout
            raise QueryTimeout(_timeout_message(seconds)) from context.original_exception

    event.listen(engine, "handle_error", on_error)


def _no_space(context: ExceptionContext) -> None:
    """A full disk under the store (SQLite's SQLITE_FULL, PostgreSQL's disk_full 53100) raised as NoSpace, so every
    caller reports NO_SPACE, not a driver's message; the transaction was rolled back, nothing half-written kept."""
    original = context.original_exception
    full = getattr(original, "sqlstate", None) == "53100" or (
        isinstance(original, sqlite3.Error) and "database or disk is full" in str(original))
    if full:
        raise NoSpace("the disk holding the store is full: the last write was rolled back, nothing is lost; free "
                      "space (or move the data dir) and run the work again") from original


def make_engine(url: str, *, statement_timeout: float | None | Literal["env"] = "env",
                prepare_schema: bool = True) -> Engine:
    """A new engine for ``url`` with the store's schema made, checked or upgraded (:func:`store.migrate.prepare`:
    a store made by a newer assay raises StoreVersionError); prefer :func:`get_engine`, which shares one per URL.

    ``statement_timeout``: seconds a statement may run (None: no limit; by default ``ASSAY_STATEMENT_TIMEOUT``),
    from once the schema is ready (a migration may run long). ``prepare_schema=False``: the engine alone, the schema
    neither made nor checked (`assay db` inspects and upgrades through it)."""
    seconds = statement_timeout_from_env() if isinstance(statement_timeout, str) else statement_timeout  # "env"
    sqlite = url.startswith("sqlite")
    if sqlite:
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        if seconds:
            event.listen(engine, "connect", _sqlite_deadlines)
    else:
        connect_args = {}
        if seconds and url.startswith("postgresql"):
            connect_args["options"] = f"-c statement_timeout={int(seconds * 1000)}"
        engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    event.listen(engine, "handle_error", _no_space)
    if prepare_schema:
        try:
            prepare(engine)
        except BaseException:
            engine.dispose()
            raise
    if seconds and sqlite:
        _sqlite_time_limit(engine, seconds)
    elif seconds and url.startswith("postgresql"):
        _postgres_time_limit(engine, seconds)
    log.debug("store ready at %s", engine.url.render_as_string(hide_password=True))
    return engine


def get_engine(url: str, *, statement_timeout: float | None | Literal["env"] = "env") -> Engine:
    """The process-wide engine for ``url`` (flows look engines up by URL, since engines do not serialise).

    ``statement_timeout`` is used when the engine is made (see :func:`make_engine`): a serving process passes its
    setting (``database.statement_timeout``); flows and runs in subprocesses, which look the engine up by URL alone,
    get ``ASSAY_STATEMENT_TIMEOUT`` (which the serving process exports when it was set)."""
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _engines[url] = make_engine(url, statement_timeout=statement_timeout)
        return engine


def store_url(engine: Engine) -> str:
    """The URL ``engine`` was made from, password included (flows find their engine by it: never shown)."""
    return engine.url.render_as_string(hide_password=False)


def share_engine(url: str, engine: Engine) -> Engine:
    """Make ``engine`` the one :func:`get_engine` gives for ``url`` (unless one is already set: that one)."""
    with _lock:
        return _engines.setdefault(url, engine)


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

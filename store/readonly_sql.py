"""Read-only SQL on the store, for reference 004's ``query_sql`` tool: one statement, at most ``max_rows`` rows, a
time limit, and no way to write.

Defence in layers. :func:`store.readonly_sql_check.check_query` refuses, with a clear message, what is not one
reading statement. The real guarantee is the connection, opened for this one query and closed after it (never
pooled, so nothing a query changes in its session outlives it):

- SQLite: opened read-only (``mode=ro``), ``PRAGMA query_only=ON``, and an authorizer that permits only reading,
  functions without side effects and informational PRAGMAs (no ATTACH, no transaction, no write, no schema change;
  extensions stay disabled). A progress handler stops the statement at its deadline. The store is in WAL mode, so a
  read goes on while the server writes.
- PostgreSQL: a new connection; one READ ONLY transaction, rolled back afterwards, with ``statement_timeout``, run as
  the NOLOGIN role :data:`READER_ROLE` that may only SELECT the public schema's tables (:func:`ensure_reader_role`).
  The query goes alone through the extended protocol, whose Parse message the server refuses when it holds several
  statements; a query opens a cursor (``DECLARE ... CURSOR FOR``, which the server accepts only for SELECT or VALUES)
  and at most ``max_rows + 1`` rows are fetched from it; EXPLAIN is streamed row by row instead.
"""

from __future__ import annotations

import base64
import math
import sqlite3
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from datetime import date, datetime
from datetime import time as time_of_day
from decimal import Decimal
from typing import Any, cast
from urllib.parse import quote

from sqlalchemy.engine import make_url

from store.engine import register_functions
from store.errors import InvalidInput, QueryTimeout
from store.readonly_sql_check import Dialect, accepted, check_query, function_denied, leading_keyword, pragma_allowed
from store.readonly_sql_check import SqlRefused as SqlRefused  # the tool's error, re-exported

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg import sql as pg_sql
except ImportError:  # pragma: no cover - the "postgres" extra is not installed: SQLite stores only
    psycopg = None  # type: ignore[assignment]

READER_ROLE = "assay_sql_reader"
DEFAULT_MAX_ROWS = 100
DEFAULT_TIMEOUT = 10.0  # seconds
_PROGRESS_STEPS = 1000  # SQLite virtual-machine steps between two deadline checks
_CURSOR = "assay_query_sql"

# SQLite authorizer actions a read needs; every other action (and a denied function or PRAGMA) is refused
_SQLITE_READS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_SQLITE_ACTIONS = {getattr(sqlite3, f"SQLITE_{name}"): name.replace("_", " ") for name in (
    "CREATE_INDEX", "CREATE_TABLE", "CREATE_TEMP_INDEX", "CREATE_TEMP_TABLE", "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW", "CREATE_TRIGGER", "CREATE_VIEW", "DELETE", "DROP_INDEX", "DROP_TABLE", "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE", "DROP_TEMP_TRIGGER", "DROP_TEMP_VIEW", "DROP_TRIGGER", "DROP_VIEW", "INSERT", "PRAGMA",
    "READ", "SELECT", "TRANSACTION", "UPDATE", "ATTACH", "DETACH", "ALTER_TABLE", "REINDEX", "ANALYZE",
    "CREATE_VTABLE", "DROP_VTABLE", "FUNCTION", "SAVEPOINT", "RECURSIVE")}  # the authorizer's action codes
_SQLITE_READONLY = 8  # primary result codes: a write on a read-only database, a statement interrupted
_SQLITE_INTERRUPT = 9
_PG_REFUSALS = frozenset({"25006", "42501"})  # read_only_sql_transaction, insufficient_privilege
_PG_QUERY_CANCELED = "57014"
_cannot_set_up: set[str] = set()  # store URLs whose user may not create or take the reader role (tried once)


@dataclass
class SqlResult:
    """What a read-only query returned: its columns, its rows as JSON-ready values, whether more rows existed, and
    how read-only was guaranteed on its connection (shown to the caller)."""

    columns: list[str]
    rows: list[list[Any]]
    row_count: int  # rows returned (<= max_rows)
    truncated: bool  # more rows existed
    elapsed_ms: float
    guarantee: str

    @property
    def note(self) -> str:
        """What a caller should know about the rows: "" when they are all there."""
        if not self.truncated:
            return ""
        return (f"more rows exist: only the first {self.row_count} are returned; page through the rest with "
                "LIMIT/OFFSET (and an ORDER BY)")


def run_readonly(url: str, query: str, *, max_rows: int = DEFAULT_MAX_ROWS,
                 timeout: float = DEFAULT_TIMEOUT) -> SqlResult:
    """Run one reading statement on the store at ``url`` (a SQLAlchemy URL) on a read-only connection of its own;
    at most ``max_rows`` rows, at most ``timeout`` seconds.

    SqlRefused SQL_NOT_ALLOWED for what is refused (with what is accepted), SQL_ERROR with the database's message
    for a query it rejects; QueryTimeout when the time limit stops it."""
    check_query(query, dialect_of(url))
    return execute_readonly(url, query, max_rows=max_rows, timeout=timeout)


def execute_readonly(url: str, query: str, *, max_rows: int = DEFAULT_MAX_ROWS,
                     timeout: float = DEFAULT_TIMEOUT) -> SqlResult:
    """:func:`run_readonly` without the lexical check: the connection layer alone, which must hold by itself (the
    tests send it every attack). Callers use :func:`run_readonly`."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise InvalidInput(f"max_rows must be a whole number of rows, 1 or more; got {max_rows!r}", field="max_rows")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise InvalidInput(f"timeout must be a number of seconds above 0; got {timeout!r}", field="timeout")
    started = time.monotonic()
    run = _run_sqlite if dialect_of(url) == "sqlite" else _run_postgres
    columns, rows, guarantee = run(url, query, max_rows, float(timeout))
    return SqlResult(columns=columns, rows=[[json_ready(v) for v in row] for row in rows[:max_rows]],
                     row_count=min(len(rows), max_rows), truncated=len(rows) > max_rows,
                     elapsed_ms=round((time.monotonic() - started) * 1000, 1), guarantee=guarantee)


def dialect_of(url: str) -> Dialect:
    """The SQL dialect of a store URL; InvalidInput for a database query_sql does not support."""
    if url.startswith("sqlite"):
        return "sqlite"
    if url.startswith("postgresql"):
        return "postgresql"
    raise InvalidInput(f"query_sql runs on SQLite and PostgreSQL stores, not on {url.split(':', 1)[0]}", field="url")


def json_ready(value: Any) -> Any:
    """``value`` as JSON can carry it: bytes (and memoryview) as base64 text, dates and times as ISO text, a
    Decimal as a float when that is exact and as text otherwise, a float that is not finite as text, lists and
    dicts value by value, anything else not JSON-native as ``str()``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, memoryview):
        value = value.tobytes()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (datetime, date, time_of_day)):
        return value.isoformat()
    if isinstance(value, Decimal):
        exact = value.is_finite() and Decimal(repr(float(value))) == value
        return float(value) if exact else str(value)
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    return str(value)


def _timeout(seconds: float) -> QueryTimeout:
    return QueryTimeout(f"the query ran longer than query_sql's time limit ({seconds:g} s) and was stopped; "
                        "narrow it (a WHERE, a LIMIT) or ask for less")


# --- SQLite ------------------------------------------------------------------------------------------------------

def _sqlite_authorizer(denied: list[str]) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    """An authorizer that permits reading, functions not denied and read-only PRAGMAs; what it refuses is added to
    ``denied`` so the error can name it."""

    def authorize(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        if action in _SQLITE_READS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and not function_denied(arg2 or ""):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and pragma_allowed(arg1 or "", arg2):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            denied.append(f"the function {arg2}()")
        elif action == sqlite3.SQLITE_PRAGMA:
            denied.append(f"PRAGMA {arg1}" + ("" if arg2 is None else f" with the value {arg2!r}"))
        else:
            what = " ".join(str(a) for a in (arg1, arg2) if a)
            denied.append(f"{_SQLITE_ACTIONS.get(action, f'action {action}')}" + (f" ({what})" if what else ""))
        return sqlite3.SQLITE_DENY

    return authorize


def _sqlite_error(exc: Exception, denied: Sequence[str], timeout: float, deadline: float) -> Exception:
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    message = str(exc)
    if code == _SQLITE_INTERRUPT and time.monotonic() >= deadline:
        return _timeout(timeout)
    if denied:
        return SqlRefused("SQL_NOT_ALLOWED", f"the read-only connection refused {denied[0]}: {message}; query_sql "
                                             f"accepts {accepted('sqlite')}")
    if code == _SQLITE_READONLY or "one statement at a time" in message:  # Python's refusal of several
        return SqlRefused("SQL_NOT_ALLOWED", f"the read-only connection refused the query: {message}; query_sql "
                                             f"accepts {accepted('sqlite')}")
    return SqlRefused("SQL_ERROR", message)


def _run_sqlite(url: str, query: str, max_rows: int, timeout: float) -> tuple[list[str], list[Any], str]:
    path = make_url(url).database
    if not path or path == ":memory:":
        raise InvalidInput("query_sql needs a store in a file; an in-memory SQLite store cannot be opened again",
                           field="url")
    deadline = time.monotonic() + timeout
    denied: list[str] = []
    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, isolation_level=None, timeout=timeout)
    except sqlite3.Error as exc:
        raise SqlRefused("SQL_ERROR", f"could not open the store at {path} read-only: {exc}") from exc
    with closing(conn):
        try:
            conn.execute("PRAGMA query_only=ON")
            conn.execute("PRAGMA case_sensitive_like=ON")  # LIKE as the store's own connections (and PostgreSQL)
            register_functions(conn)  # REGEXP (RE2) as on the store's own connections
            conn.set_authorizer(_sqlite_authorizer(denied))
            conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, _PROGRESS_STEPS)
            cursor = conn.execute(query)
            columns = [d[0] for d in cursor.description or ()]
            rows = cursor.fetchmany(max_rows + 1) if cursor.description else []
        except (sqlite3.Error, sqlite3.Warning) as exc:
            raise _sqlite_error(exc, denied, timeout, deadline) from exc
    guarantee = ("SQLite: a connection of its own, opened read-only (mode=ro) with PRAGMA query_only=ON and an "
                 "authorizer that permits only reading, functions without side effects and informational PRAGMAs "
                 f"(extensions disabled); one statement; stopped after {timeout:g} s; closed afterwards")
    return columns, rows, guarantee


# --- PostgreSQL --------------------------------------------------------------------------------------------------

def _pg_connect(url: str, timeout: float) -> psycopg.Connection[Any]:
    """A new connection (autocommit until a query's transaction) to the store at ``url``."""
    if psycopg is None:  # pragma: no cover - depends on the installation
        raise InvalidInput("query_sql on a PostgreSQL store needs psycopg: pip install 'assay[postgres]'",
                           field="url")
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=max(2, math.ceil(timeout)),
                               client_encoding="UTF8", application_name="assay query_sql")
    except psycopg.Error as exc:
        raise SqlRefused("SQL_ERROR", f"could not connect to the store: {exc}") from exc


def _reader_role_usable(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT pg_has_role(current_user, oid, 'MEMBER') FROM pg_roles WHERE rolname = %s",
                       [READER_ROLE]).fetchone()
    return bool(row and row[0])


def _grant_reader(conn: psycopg.Connection[Any]) -> None:
    """SELECT on the public schema's tables, now and (for tables this user makes later) by default."""
    role = pg_sql.Identifier(READER_ROLE)
    conn.execute(pg_sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role))
    conn.execute(pg_sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(role))
    conn.execute(pg_sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(role))


def _set_up_reader_role(conn: psycopg.Connection[Any]) -> bool:
    """Create :data:`READER_ROLE` if missing, grant it SELECT here and grant it to the connecting user; whether the
    connection may now take that role (False when this user may not create or grant roles)."""
    role = pg_sql.Identifier(READER_ROLE)
    try:
        with conn.transaction():
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [READER_ROLE]).fetchone()
            if not exists:
                conn.execute(pg_sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
            _grant_reader(conn)
            if not _reader_role_usable(conn):
                conn.execute(pg_sql.SQL("GRANT {} TO CURRENT_USER").format(role))
    except (pg_errors.InsufficientPrivilege, pg_errors.InvalidGrantOperation, pg_errors.DuplicateObject,
            pg_errors.UniqueViolation):
        pass  # another connection made it meanwhile, or this user may not: run as the user, read-only
    return _reader_role_usable(conn)


def ensure_reader_role(url: str) -> bool:
    """Make sure the NOLOGIN role :data:`READER_ROLE` exists, may SELECT the public schema's tables of the store at
    ``url`` (also the ones made later by this user) and is granted to the URL's user; whether that user may take
    it (False when it may not create or grant roles: query_sql then relies on the read-only transaction alone)."""
    try:
        with _pg_connect(url, DEFAULT_TIMEOUT) as conn:
            usable = _set_up_reader_role(conn)
    except psycopg.Error as exc:
        raise _pg_error(exc, DEFAULT_TIMEOUT) from exc
    if usable:
        _cannot_set_up.discard(url)
    else:
        _cannot_set_up.add(url)
    return usable


def _reader(conn: psycopg.Connection[Any], url: str) -> bool:
    """Whether this query runs as the reader role: set it up on first use, and not again for a user that may not."""
    if _reader_role_usable(conn):
        return True
    if url in _cannot_set_up:
        return False
    usable = _set_up_reader_role(conn)
    if not usable:
        _cannot_set_up.add(url)
    return usable


def _pg_fetch(conn: psycopg.Connection[Any], query: str, max_rows: int, timeout: float,
              as_reader: bool) -> tuple[list[str], list[Any]]:
    """One read-only transaction, rolled back however it ends: the time limit, the reader role, the query."""
    conn.autocommit = False
    conn.read_only = True
    try:
        conn.execute("SELECT set_config('statement_timeout', %s, true), "
                     "set_config('standard_conforming_strings', 'on', true)", [f"{max(1, int(timeout * 1000))}ms"])
        if as_reader:
            conn.execute(pg_sql.SQL("SET LOCAL ROLE {}").format(pg_sql.Identifier(READER_ROLE)))
        text = query.encode()  # bytes (UTF-8, as connected), no parameters: a '%' is a '%', never a placeholder
        if leading_keyword(query, "postgresql") == "explain":
            # no cursor can hold EXPLAIN: stream its rows (the extended protocol too), stopping after max_rows + 1
            cursor, columns, rows = conn.cursor(), [], []
            with closing(cast(Generator[Any, None, None], cursor.stream(text))) as stream:
                for row in stream:  # closing the stream early cancels the rest on the server
                    rows.append(row)
                    columns = [d.name for d in cursor.description or ()]
                    if len(rows) > max_rows:
                        break
            return columns, rows
        with conn.cursor(name=_CURSOR) as server_cursor:
            server_cursor.execute(text)
            return [d.name for d in server_cursor.description or ()], server_cursor.fetchmany(max_rows + 1)
    finally:
        conn.rollback()
        conn.read_only = None
        conn.autocommit = True


def _run_postgres(url: str, query: str, max_rows: int, timeout: float) -> tuple[list[str], list[Any], str]:
    conn = _pg_connect(url, timeout)
    try:
        with conn:
            as_reader = _reader(conn, url)
            try:
                columns, rows = _pg_fetch(conn, query, max_rows, timeout, as_reader)
            except pg_errors.InsufficientPrivilege as refused:
                if not as_reader:
                    raise
                try:  # a table made after the role (by another user): grant again, and try once more
                    _grant_reader(conn)
                except psycopg.Error:
                    raise refused from None
                columns, rows = _pg_fetch(conn, query, max_rows, timeout, as_reader)
            user = conn.info.user
    except psycopg.Error as exc:
        raise _pg_error(exc, timeout) from exc
    who = (f"as the role {READER_ROLE}, which may only SELECT the public schema's tables" if as_reader else
           f"as the store's own user {user} (it may not create or take the role {READER_ROLE}, so the READ ONLY "
           "transaction alone keeps it from writing)")
    guarantee = (f"PostgreSQL: a connection of its own, in one READ ONLY transaction rolled back afterwards, {who}; "
                 "the query sent alone through the extended protocol (the server refuses several statements); "
                 f"statement_timeout {timeout:g} s; closed afterwards")
    return columns, rows, guarantee


def _pg_error(exc: psycopg.Error, timeout: float) -> Exception:
    state = exc.sqlstate
    # the server's own words, without its LINE context (which would show the cursor wrapped around the query)
    message = exc.diag.message_primary or str(exc).strip()
    if exc.diag.message_hint:
        message += f" (hint: {exc.diag.message_hint})"
    if state == _PG_QUERY_CANCELED:
        return _timeout(timeout)
    if state in _PG_REFUSALS:
        return SqlRefused("SQL_NOT_ALLOWED", f"the read-only connection refused the query: {message}; query_sql "
                                             f"accepts {accepted('postgresql')}")
    return SqlRefused("SQL_ERROR", message)

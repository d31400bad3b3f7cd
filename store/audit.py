"""The audit log of a guarded server: every tool call, resource read and authentication, in a database of its own.

Its own database (``audit.db`` beside a SQLite store by default, any SQLAlchemy URL otherwise; reference 004: "stored
in a separate database file to avoid bloating server.db"), with its own ``MetaData``: the store's schema never gets
an audit table, and a store on PostgreSQL can keep its audit log in a local SQLite file or the other way round.

Written off the request path: :meth:`AuditLog.record` appends to an in-memory queue and returns (it never blocks and
never raises); one daemon thread (:mod:`store.audit_writer`) writes the queue in batches, one transaction (one
executemany) per batch. When the database is unavailable (locked, gone, unreachable) the thread keeps the batch,
reports the failure (the server log, once per failure streak; :meth:`AuditLog.errors`; :meth:`AuditLog.stats`) and
retries with a backoff, so requests go on and nothing is lost while the queue has room; a database that comes back
gets the backlog. Only when the queue is full is the oldest queued record dropped (and counted). :meth:`AuditLog.close`
writes everything queued before it returns: a clean shutdown loses nothing. Rows older than the retention are pruned
at start and then hourly, in chunks, so no prune holds the database for long.
"""

from __future__ import annotations

import atexit
import json
import logging
import re
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (BigInteger, Column, Float, Integer, MetaData, String, Table, Text, create_engine, delete,
                        event, insert, select)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

from store.audit_writer import BatchWriter, describe
from store.errors import AssayError, InvalidInput, check_choice

log = logging.getLogger(__name__)

KINDS = ("tool", "resource", "auth", "list")  # tools/call, resources/read, authentication refused/accepted, listings
OUTCOMES = ("ok", "error", "denied", "rate_limited", "unauthenticated")

REDACTED = "[redacted]"
MAX_STRING = 2_000  # characters of a string argument kept
MAX_ITEMS = 100  # items of a list (or keys of an object) kept
MAX_DEPTH = 8  # levels of nesting kept; deeper containers are replaced by a note
# names of secrets, normalised as keys are (lower case, letters and digits only); a key containing one is redacted
SECRET_NAMES = ("password", "passwd", "passphrase", "secret", "token", "apikey", "authorization", "credential",
                "privatekey", "cookie", "clientsecret")
_NOT_ALNUM = re.compile(r"[^a-z0-9]")

PRUNE_EVERY = 3600.0  # seconds between two prunes by retention
PRUNE_RETRY = 300.0  # seconds before a prune that failed is tried again
PRUNE_CHUNK = 10_000  # rows deleted per transaction
MAX_RECENT = 10_000  # rows one recent() returns at most
_SQLITE_TIMEOUT = 5  # seconds a SQLite connection waits for a lock before the batch counts as failed
_PG_CONNECT_TIMEOUT = 5
_MAX_BIGINT = 2**63 - 1


class AuditUnavailable(AssayError):
    """The audit database could not be read (the operator tools' error; writing never raises)."""

    code = "AUDIT_UNAVAILABLE"


@dataclass(slots=True)
class AuditRecord:
    """One audited event, as the guard saw it. ``kind`` is one of :data:`KINDS`, ``outcome`` one of
    :data:`OUTCOMES`; ``name`` is the tool name, the resource URI, or for ``auth`` the reason ("expired", "no
    token", ...); ``arguments`` a JSON-able value (:meth:`AuditLog.record` redacts it)."""

    time: float  # unix seconds
    kind: str
    name: str
    outcome: str
    user: str | None = None
    session: str | None = None  # MCP session id (HTTP) or "stdio"
    client: str | None = None  # clientInfo "name/version", or the remote address of a refused authentication
    arguments: Any = None
    error_code: str | None = None
    duration_ms: float | None = None
    result_bytes: int | None = None

    def __post_init__(self) -> None:
        # a programming error of the caller, raised where the record is made, not swallowed by record()
        if self.kind not in KINDS:
            raise ValueError(f"audit kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"audit outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")


metadata = MetaData()  # the audit database's own: never SQLModel.metadata, so a store never gets these tables

audit_events = Table(
    "audit_events", metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False, index=True),
    Column("kind", String(16), nullable=False),
    Column("name", Text, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("user", Text, index=True),
    Column("session", Text),
    Column("client", Text),
    Column("arguments", Text),  # JSON (ASCII: a path's undecodable bytes, kept as surrogates, are escaped too)
    Column("error_code", Text),
    Column("duration_ms", Float),
    Column("result_bytes", BigInteger),
)

def default_audit_url(store_url: str, data_dir: str | Path) -> str:
    """Where the audit log goes unless configured: ``audit.db`` beside a SQLite store's file; for any other store
    (PostgreSQL, an in-memory SQLite) ``audit.db`` in the data dir."""
    url = make_url(store_url)
    database = url.database or ""
    if url.get_backend_name() == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
        return f"sqlite:///{Path(database).parent / 'audit.db'}"
    return f"sqlite:///{Path(data_dir) / 'audit.db'}"


def _names_secret(key: Any) -> bool:
    normalised = _NOT_ALNUM.sub("", str(key).lower())
    return any(name in normalised for name in SECRET_NAMES)


def redact(value: Any, *, _depth: int = 0) -> Any:
    """A copy of ``value`` fit for the audit log: the value of every key naming a secret (:data:`SECRET_NAMES`,
    case-insensitive, a substring of the key with its separators removed: ``api-key``, ``X-Auth-Token``,
    ``client_secret``) replaced by ``"[redacted]"`` at any depth; strings over :data:`MAX_STRING` characters and
    lists or objects over :data:`MAX_ITEMS` items cut, with a note of how much was left out; nesting deeper than
    :data:`MAX_DEPTH` replaced by a note. Values JSON cannot hold become their ``repr`` (cut likewise)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            return f"{value[:MAX_STRING]}…({len(value) - MAX_STRING} more characters)"
        return value
    if isinstance(value, dict):
        if _depth >= MAX_DEPTH:
            return f"…(an object of {len(value)} keys nested too deep)"
        out: dict[str, Any] = {}
        for i, (key, item) in enumerate(value.items()):
            if i == MAX_ITEMS:
                out["…"] = f"({len(value) - MAX_ITEMS} more keys)"
                break
            out[str(key)] = REDACTED if _names_secret(key) else redact(item, _depth=_depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        if _depth >= MAX_DEPTH:
            return f"…(a list of {len(value)} items nested too deep)"
        kept = [redact(item, _depth=_depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            kept.append(f"…({len(value) - MAX_ITEMS} more items)")
        return kept
    if isinstance(value, (bytes, bytearray)):
        return f"…({len(value)} bytes)"
    return redact(repr(value), _depth=_depth)


def _sqlite_pragmas(dbapi_conn: Any, _record: ConnectionPoolEntry) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _make_engine(url: str) -> Engine:
    """An engine of the audit database's own (not the store's get_engine: no store schema, no statement limit)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        memory = parsed.database in (None, "", ":memory:")
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": _SQLITE_TIMEOUT},
                               **({"poolclass": StaticPool} if memory else {}))  # one in-memory database, shared
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    connect_args = {"connect_timeout": _PG_CONNECT_TIMEOUT} if parsed.get_backend_name() == "postgresql" else {}
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args)


def _text(value: Any) -> str | None:
    """A text column's value every database takes: a string, cut to MAX_STRING characters, without NUL (PostgreSQL
    refuses it) or lone surrogates (no UTF-8 encoder takes them; a path's undecodable bytes)."""
    if value is None:
        return None
    text = str(value)
    if len(text) > MAX_STRING:
        text = f"{text[:MAX_STRING]}…({len(text) - MAX_STRING} more characters)"
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def _queued(rec: AuditRecord) -> AuditRecord:
    """The copy of ``rec`` that is queued: arguments redacted, every field of the type its column holds, so no
    value can make a batch fail (and hold the queue) for ever."""
    result_bytes = None if rec.result_bytes is None else min(int(rec.result_bytes), _MAX_BIGINT)
    return AuditRecord(float(rec.time), rec.kind, _text(rec.name) or "", rec.outcome, _text(rec.user),
                       _text(rec.session), _text(rec.client), redact(rec.arguments), _text(rec.error_code),
                       None if rec.duration_ms is None else float(rec.duration_ms), result_bytes)


def _row(rec: AuditRecord) -> dict[str, Any]:
    row = asdict(rec)
    if rec.arguments is not None:
        row["arguments"] = json.dumps(rec.arguments)  # redacted: nothing but JSON's own types
    return row


_open_logs: weakref.WeakSet[AuditLog] = weakref.WeakSet()


@atexit.register
def _close_open_logs() -> None:
    """A server that exits without closing its audit log still writes the queue (the daemon thread would not)."""
    for audit in list(_open_logs):
        audit.close(timeout=5.0)


class AuditLog:
    """The audit database and its writer. ``retention_days``: rows older than this are pruned (0 keeps them for
    ever); ``batch_size`` records per transaction at most; ``interval`` seconds the writer waits for a batch to
    fill; ``max_queue`` records held in memory at most (beyond it the oldest queued one is dropped)."""

    def __init__(self, url: str, *, retention_days: float = 90.0, batch_size: int = 500, interval: float = 0.2,
                 max_queue: int = 200_000) -> None:
        if retention_days < 0:
            raise InvalidInput(f"the audit retention must be 0 (keep for ever) or more days, got {retention_days}",
                               field="retention_days")
        if batch_size < 1 or max_queue < 1 or interval < 0:
            raise InvalidInput("the audit batch size and queue length must be positive and the interval not negative",
                               field="batch_size")
        self._engine = _make_engine(url)
        self._url = self._engine.url.render_as_string(hide_password=True)
        self.retention_days = retention_days
        self._schema_ready = False
        self._schema_lock = threading.Lock()  # the writer and a reader may both find the tables missing
        self._writer: BatchWriter[AuditRecord] = BatchWriter(
            self._write, name=self._url, batch_size=batch_size, interval=interval, max_queue=max_queue,
            housekeeping=self._scheduled_prune, grace=_SQLITE_TIMEOUT)

    @property
    def url(self) -> str:
        """The audit database's URL, its password hidden."""
        return self._url

    def record(self, rec: AuditRecord) -> None:
        """Queue ``rec`` (a copy: arguments redacted, fields as their columns hold them) for the writer. Never
        blocks and never raises: when the queue is full the oldest queued record is dropped; after close() the
        record itself is; both are counted in stats()["dropped"]."""
        try:
            queued = _queued(rec)
        except Exception as exc:  # not a record, a repr that fails: counted and reported, the request goes on
            self._writer.drop(f"an audit record could not be queued: {describe(exc)}")
            return
        self._writer.put(queued)

    def start(self) -> None:
        """Create the tables (a failure is reported, not raised: the writer tries again before its first batch)
        and start the writer thread, which prunes by retention now and then hourly. A second call does nothing."""
        try:
            self._ensure_schema()
        except Exception as exc:
            self._writer.report(f"creating the audit tables at {self._url}", exc)
        self._writer.start()
        _open_logs.add(self)

    def flush(self, timeout: float = 5.0) -> bool:
        """True once every record queued before the call is written (or dropped); False if ``timeout`` seconds
        passed first (the database unavailable, or the writer not started)."""
        return self._writer.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write everything queued (trying a failing database again until ``timeout`` seconds have passed; what
        is unwritten then is dropped and logged), stop the writer and dispose of the engine. Idempotent."""
        self._writer.close(timeout)
        _open_logs.discard(self)
        self._engine.dispose()

    def recent(self, *, limit: int = 50, kinds: Sequence[str] | None = None, user: str | None = None,
               outcomes: Sequence[str] | None = None, since: float | None = None) -> list[dict[str, Any]]:
        """The newest written records first (at most ``limit``, up to :data:`MAX_RECENT`), of the given kinds,
        user and outcomes, at or after ``since`` (unix seconds): each a dict of the record's fields and its ``id``,
        ``arguments`` decoded. Raises AuditUnavailable when the database cannot be read."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECENT:
            raise InvalidInput(f"limit must be a whole number from 1 to {MAX_RECENT}, got {limit!r}", field="limit")
        query = select(audit_events)
        if kinds is not None:
            query = query.where(audit_events.c.kind.in_(
                [check_choice(k, KINDS, field="kinds", what="audit kind") for k in kinds]))
        if outcomes is not None:
            query = query.where(audit_events.c.outcome.in_(
                [check_choice(o, OUTCOMES, field="outcomes", what="audit outcome") for o in outcomes]))
        if user is not None:
            query = query.where(audit_events.c.user == user)
        if since is not None:
            query = query.where(audit_events.c.time >= since)
        query = query.order_by(audit_events.c.time.desc(), audit_events.c.id.desc()).limit(limit)
        try:
            self._ensure_schema()
            with self._engine.connect() as conn:
                rows = [dict(r) for r in conn.execute(query).mappings()]
        except Exception as exc:
            raise AuditUnavailable(f"the audit log at {self._url} cannot be read: {describe(exc)}") from exc
        for row in rows:
            if row["arguments"] is not None:
                row["arguments"] = json.loads(row["arguments"])
        return rows

    def errors(self, limit: int = 50) -> list[dict[str, Any]]:
        """The writer's recent failures, newest first: ``{"time", "message"}`` (a failure repeated batch after
        batch appears once, with the time of its latest occurrence)."""
        return self._writer.errors(limit)

    def stats(self) -> dict[str, Any]:
        """For the operator: the URL (password hidden), records written, queued (not yet written), dropped;
        batches that failed; the retention; the last error (None when none)."""
        return {"url": self._url, **self._writer.counters(), "retention_days": self.retention_days}

    def prune(self, now: float | None = None) -> int:
        """Delete the rows older than the retention (``now`` in unix seconds, by default the current time), in
        chunks of :data:`PRUNE_CHUNK` rows, one transaction each; the number deleted. With a retention of 0 days
        nothing is deleted. Raises the database's error."""
        if not self.retention_days:
            return 0
        cutoff = (time.time() if now is None else now) - self.retention_days * 86_400
        self._ensure_schema()
        chunk = select(audit_events.c.id).where(audit_events.c.time < cutoff).limit(PRUNE_CHUNK)
        statement = delete(audit_events).where(audit_events.c.id.in_(chunk.scalar_subquery()))
        deleted = 0
        while True:
            with self._engine.begin() as conn:
                count = conn.execute(statement).rowcount
            deleted += count
            if count < PRUNE_CHUNK:
                return deleted

    def _ensure_schema(self) -> None:
        with self._schema_lock:
            if not self._schema_ready:
                metadata.create_all(self._engine)
                self._schema_ready = True

    def _write(self, batch: list[AuditRecord]) -> None:
        """One batch in one transaction (one executemany); the writer thread's ``write``."""
        rows = [_row(rec) for rec in batch]
        try:
            self._ensure_schema()
            with self._engine.begin() as conn:
                conn.execute(insert(audit_events), rows)
        except Exception:
            self._schema_ready = False  # a database recreated (or its table dropped) gets the table again
            raise

    def _scheduled_prune(self) -> float:
        """The writer's housekeeping: prune, and say when to prune next."""
        try:
            deleted = self.prune()
        except Exception as exc:
            self._writer.report(f"pruning the audit log at {self._url}", exc)
            return PRUNE_RETRY
        if deleted:
            log.info("audit log: pruned %d records older than %g days", deleted, self.retention_days)
        return PRUNE_EVERY

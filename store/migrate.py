"""The store's schema under Alembic migrations (store/migrations): made, checked or upgraded when an engine opens it.

:func:`prepare` runs in :func:`store.engine.make_engine` where ``create_all`` ran before:

- a store at the newest revision: nothing more than one SELECT of its revision (the revision scripts are read once
  per process);
- an empty database (none of the store's tables): the models' tables made with ``create_all`` and the store stamped
  with the newest revision, Alembic's recipe for a new database (nothing replayed; the test suite makes thousands);
- an older store, or one made before migrations (no ``alembic_version``): upgraded through the revisions. A SQLite
  file is first copied beside itself with SQLite's online backup API, ``<db>.before-<revision>-<UTC time>.bak``
  (``unversioned`` for a store made before migrations), its path logged at WARNING;
- a store at a revision this code does not know (a newer assay upgraded it): refused with
  :class:`~store.errors.StoreVersionError`, and left as it is.

Two processes opening one store at once do not both migrate: the revision is read again under the store's lock,
held until the work is committed — PostgreSQL: a transaction-level advisory lock; SQLite: ``BEGIN IMMEDIATE`` (its
write lock) on a connection without the driver's implicit transactions. Everything one call does is that one
transaction: a migration that fails leaves the store as it was. The statement time limit does not apply (PostgreSQL:
``SET LOCAL statement_timeout = 0``; SQLite: make_engine sets its limit after :func:`prepare`). On SQLite foreign keys
are off while the revisions run, as Alembic's batch mode needs (a rebuilt table's DROP would cascade), and checked
before the commit: a migration that leaves a row without its parent is rolled back.

:func:`upgrade`, :func:`current` and :func:`history` are the operator's (`assay db upgrade | current | history`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import MetaData, event, func, inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import SQLModel

from store import models  # noqa: F401  (registers every table on SQLModel.metadata)
from store.errors import Conflict, InvalidInput, StoreVersionError
from store.migrations import SCRIPT_LOCATION

log = logging.getLogger(__name__)
# Alembic says at INFO which implementation it uses and that it "will assume non-transactional DDL" (on SQLite: not
# so here, the whole upgrade is one transaction) each time a store's revision is read; this module logs what it did
logging.getLogger("alembic.runtime.migration").setLevel(logging.WARNING)

LOCK_KEY = 0x6173736179_4D4947  # the PostgreSQL advisory lock of a store's migrations ("assay" "MIG")

Action = Literal["current", "created", "upgraded"]


@dataclass(frozen=True)
class MigrationReport:
    """What opening (or upgrading) a store did: its revision before (None: none recorded, an empty database or a
    store made before migrations) and after; ``action`` current (nothing to do), created (an empty database made at
    the newest revision) or upgraded (revisions run); the SQLite copy taken before, if any."""

    from_revision: str | None
    to_revision: str
    action: Action
    backup: Path | None = None


@dataclass(frozen=True)
class Revision:
    """One revision of the store's schema, as `assay db history` lists it."""

    revision: str
    down_revision: str | None
    message: str
    is_head: bool


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration of the store, in code (no alembic.ini): the scripts in store/migrations, run by its
    env.py on ``connection``."""
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.attributes["connection"] = connection
    return config


@cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


@cache
def _known() -> tuple[str, ...]:
    """Every revision this code has, newest first."""
    return tuple(script.revision for script in _scripts().walk_revisions())


@cache
def head() -> str:
    """The newest revision: the one a store this code makes is at."""
    newest = _scripts().get_current_head()  # raises when the revisions have branched: they stay one line
    if newest is None:
        raise RuntimeError(f"no revision in {SCRIPT_LOCATION / 'versions'}")
    return newest


def history() -> list[Revision]:
    """Every revision, newest first."""
    newest = head()
    revisions = []
    for script in _scripts().walk_revisions():
        down = script.down_revision
        revisions.append(Revision(revision=script.revision, down_revision=down if isinstance(down, str) else None,
                                  message=(script.doc or "").strip(), is_head=script.revision == newest))
    return revisions


def current(engine: Engine) -> str | None:
    """The store's revision, known to this code or not; None when it records none (an empty database, or a store
    made before migrations)."""
    with engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    return ", ".join(heads) or None


def is_known(revision: str) -> bool:
    """Whether ``revision`` is one of this code's (a store at another was upgraded by a newer assay)."""
    return revision in _known()


def prepare(engine: Engine) -> MigrationReport:
    """Make, check or upgrade the store's schema as its state asks (see the module's docstring); what was done."""
    newest = head()
    recorded = _quick_revisions(engine)
    if recorded == (newest,):
        return MigrationReport(newest, newest, "current")
    if recorded:
        _refuse_unknown(engine, recorded)
    return _migrate(engine, newest, create_if_empty=True)


def upgrade(engine: Engine, revision: str = "head") -> MigrationReport:
    """Run the revisions up to ``revision`` (default the newest) on the store, through the migrations even on an
    empty database; a store at or past it is left as it is. Use an engine without a statement time limit
    (``make_engine(url, statement_timeout=None, prepare_schema=False)``): a revision may rewrite a large table."""
    target = head() if revision == "head" else revision
    if target not in _known():
        raise InvalidInput(f"no revision {revision!r}; known: {', '.join(_known())} (or head)", field="revision")
    return _migrate(engine, target, create_if_empty=False)


@event.listens_for(SQLModel.metadata, "after_drop")
def _forget_revision(metadata: MetaData, connection: Connection, **kw: Any) -> None:
    """A store whose tables were all dropped (``drop_all``: tests empty a shared database so) records no revision
    any more: the next open makes it afresh instead of trusting a version table that outlived its tables."""
    if {table.name for table in kw.get("tables", ())} >= set(metadata.tables):
        connection.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")


# --- the work, under the store's lock ------------------------------------------------------------------------------


def _quick_revisions(engine: Engine) -> tuple[str, ...] | None:
    """The revisions the store records, read with one SELECT; None when it has no version table (or it could not
    be read: the locked path reads it again and reports what is wrong)."""
    try:
        with engine.connect() as conn:
            return tuple(conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars())
    except DBAPIError:
        return None


def _revision(conn: Connection, engine: Engine) -> str | None:
    heads = MigrationContext.configure(conn).get_current_heads()
    _refuse_unknown(engine, heads)
    return heads[0] if heads else None


def _refuse_unknown(engine: Engine, recorded: tuple[str, ...]) -> None:
    unknown = [r for r in recorded if r not in _known()]
    if unknown or len(recorded) > 1:
        raise StoreVersionError(
            f"the store at {_where(engine)} is at schema revision {', '.join(recorded)}, which this assay does not "
            f"know: it knows {', '.join(reversed(_known()))} (newest {head()}). A newer assay upgraded it: run that "
            f"version (or a newer one), or restore a backup taken before that upgrade (assay db restore, or the "
            f"<store>.before-*.bak copy beside a SQLite store). The store was not changed.")


def _migrate(engine: Engine, target: str, *, create_if_empty: bool) -> MigrationReport:
    with _store_lock(engine) as conn:
        found = _revision(conn, engine)
        if found is not None and target in _ancestors(found):
            return MigrationReport(found, found, "current")
        ours = _has_store_tables(conn)
        if found is None and create_if_empty and not ours:
            SQLModel.metadata.create_all(conn)
            MigrationContext.configure(conn).stamp(_scripts(), target)
            log.info("store at %s made at schema revision %s", _where(engine), target)
            return MigrationReport(None, target, "created")
        backup = _backup(engine, found) if found is not None or ours else None
        broken = _foreign_key_problems(conn)
        command.upgrade(alembic_config(conn), target)
        if _foreign_key_problems(conn) - broken:
            raise Conflict(f"upgrading the store at {_where(engine)} to {target} left rows without their parent "
                           f"(PRAGMA foreign_key_check): rolled back, the store was not changed")
        log.info("store at %s upgraded from schema revision %s to %s", _where(engine), found or "(none)", target)
        return MigrationReport(found, target, "upgraded", backup)


@contextmanager
def _store_lock(engine: Engine) -> Iterator[Connection]:
    """A connection in one transaction holding the store's write lock (SQLite) or its migration lock (PostgreSQL),
    committed when the block ends, rolled back when it raises."""
    with engine.connect() as conn:
        if conn.dialect.name != "sqlite":
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
                    conn.execute(select(func.pg_advisory_xact_lock(LOCK_KEY)))
                yield conn
            return
        # pysqlite begins transactions itself, and only before DML: with its implicit transactions off (the
        # driver's autocommit), BEGIN IMMEDIATE takes the write lock now and every DDL statement runs inside
        conn.execution_options(isolation_level="AUTOCOMMIT")
        driver = conn.connection.driver_connection
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")  # only outside a transaction
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if driver is not None and driver.in_transaction:  # SQLite may have rolled back already (disk full)
                    conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")
        finally:
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")


def _ancestors(revision: str) -> set[str]:
    return {script.revision for script in _scripts().iterate_revisions(revision, "base")}


def _has_store_tables(conn: Connection) -> bool:
    return bool(set(inspect(conn).get_table_names()) & set(SQLModel.metadata.tables))


def _foreign_key_problems(conn: Connection) -> set[tuple[object, ...]]:
    if conn.dialect.name != "sqlite":
        return set()  # PostgreSQL's foreign keys stay enforced while the revisions run
    return {tuple(row) for row in conn.exec_driver_sql("PRAGMA foreign_key_check")}


def _backup(engine: Engine, revision: str | None) -> Path | None:
    """A copy of a SQLite file store as it is, beside it, before a revision changes it (None for other stores).

    Taken with SQLite's online backup API while this connection holds the write lock (nobody writes meanwhile),
    into a temporary name renamed into place once whole: a copy found under its name is complete."""
    database = engine.url.database
    if engine.url.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return None
    source = Path(database)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    copy = source.with_name(f"{source.name}.before-{revision or 'unversioned'}-{stamp}.bak")
    partial = copy.with_name(f".{copy.name}.partial")
    try:
        reader = sqlite3.connect(source, timeout=30)
        try:
            writer = sqlite3.connect(partial)
            try:
                reader.backup(writer)
                writer.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            finally:
                writer.close()
        finally:
            reader.close()
        os.replace(partial, copy)
    finally:
        partial.unlink(missing_ok=True)
    log.warning("store %s is at schema revision %s, this assay's is %s: upgrading it; a copy of it as it was is at "
                "%s", source, revision or "(none: made before migrations)", head(), copy)
    return copy


def _where(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)

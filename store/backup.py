"""Backups of the store and restoring one: SQLite through its online backup API, PostgreSQL through pg_dump /
pg_restore.

A SQLite copy (:func:`online_copy`) is read as of one snapshot while the server goes on writing (WAL mode), in steps
of a few pages; it is written under a temporary name beside its destination and renamed into place only once
complete and ``PRAGMA integrity_check`` says ok: nothing half-written is ever found at the destination.

:func:`restore` needs the server stopped (it probes ``<data dir>/assay.sock``, where a serving process answers). A
SQLite store being replaced is kept beside it, ``assay.db.replaced-<time>`` with its -wal/-shm and its index
directories; the search indexes' files (the capabilities' ``<database file>.<name>/`` directories, or
``<data dir>/<name>/<hash of the URL>/`` for PostgreSQL: flows.core.capability.store_files) go with it, so the next
server start or search rebuilds them from the restored store.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import shutil
import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL, Engine

from store.errors import Conflict, FileOperationError, InvalidInput, NoSpace

DEFAULT_PAGES_PER_STEP = 1024  # 4 MiB of 4 KiB pages: a step takes milliseconds, a writer waits no longer

Progress = Callable[[int, int], None]  # (pages copied, pages in all)


def online_copy(src: Path, dest: Path, *, pages_per_step: int = DEFAULT_PAGES_PER_STEP,
                progress: Progress | None = None) -> None:
    """Copy the SQLite database ``src`` to ``dest`` with SQLite's online backup API, ``pages_per_step`` pages at a
    time. A store in WAL mode (every store: store.engine sets it) is copied as of one snapshot, read in one
    transaction: its writers go on writing, never waiting for the copy. In rollback-journal mode a writer waits at
    most one step, and a write between steps restarts the copy, as SQLite does. ``progress(copied, total)`` is
    called after every step. The copy goes to a temporary file beside ``dest`` and replaces ``dest`` only when
    complete and its integrity check is ok; otherwise the temporary file is removed and the error raised
    (:class:`~store.errors.Conflict` for a failed check, :class:`~store.errors.NoSpace` for a full disk)."""
    src, dest = Path(src), Path(dest)
    if not src.is_file():
        raise FileNotFoundError(f"no SQLite store at {src}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        source = sqlite3.connect(src, timeout=30, isolation_level=None)
        try:
            if source.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                # one read transaction for the whole copy: every step reads the same snapshot, so writes between
                # steps do not restart it (a steady writer would otherwise restart it for ever), and in WAL mode a
                # reader never blocks a writer
                source.execute("BEGIN")
                source.execute("SELECT count(*) FROM sqlite_master").fetchone()
            target = sqlite3.connect(tmp)
            try:
                source.backup(target, pages=max(1, pages_per_step),
                              progress=None if progress is None else
                              lambda _status, remaining, total: progress(total - remaining, total))
                target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
                problems = [row[0] for row in target.execute("PRAGMA integrity_check")]
            finally:
                target.close()
        finally:
            source.close()
        if problems != ["ok"]:
            raise Conflict(f"the copy of {src} failed its integrity check ({'; '.join(problems[:5])}); "
                           f"nothing was written at {dest}")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    except sqlite3.Error as exc:
        if "database or disk is full" in str(exc):
            raise _no_space(dest) from exc
        raise
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise _no_space(dest) from exc
        raise
    finally:
        tmp.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (the directory entry reaches the disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def database_file(engine: Engine) -> Path | None:
    """The file of a SQLite store (None for any other). (store.engine's, repeated: store.migrate, which
    store.engine imports, copies a store with :func:`online_copy`, so this module imports nothing of the store's
    but its errors.)"""
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(url.database)
    return None


def _no_space(path: Path) -> NoSpace:
    return NoSpace(f"the disk holding {path} is full: nothing was written there; free space (or choose another "
                   f"place) and run it again")


# --- backup -----------------------------------------------------------------------------------------------------


def backup(engine: Engine, dest: Path, *, pages_per_step: int = DEFAULT_PAGES_PER_STEP,
           progress: Progress | None = None) -> dict[str, Any]:
    """Back up ``engine``'s store to ``dest`` (a directory: a file named for the store and the time in it), while a
    server may be using it: SQLite by :func:`online_copy`, PostgreSQL by ``pg_dump --format=custom --no-owner``.
    What was written: ``{backend, path, bytes, revision (the store's alembic revision, None before migrations),
    seconds}``."""
    started = time.monotonic()
    dest = Path(dest).expanduser().absolute()
    backend = engine.url.get_backend_name()
    db = database_file(engine)
    if db is not None:
        if not db.is_file():
            raise InvalidInput(f"there is no store at {db}: nothing to back up (is the data dir or --database-url "
                               f"the server's?)", field="database_url")
        if dest.is_dir():
            dest = dest / f"{db.stem}-{_stamp()}{db.suffix or '.db'}"
        if dest.exists() and dest.resolve() == db.resolve():
            raise InvalidInput(f"{dest} is the store itself: back it up to another file", field="path")
        online_copy(db, dest, pages_per_step=pages_per_step, progress=progress)
        revision = _sqlite_revision(dest)
    elif backend == "postgresql":
        if dest.is_dir():
            dest = dest / f"{engine.url.database or 'assay'}-{_stamp()}.dump"
        revision = _revision(engine)
        _pg_dump(engine.url, dest)
    else:
        raise InvalidInput(f"a {backend} store at {engine.url.render_as_string(hide_password=True)} cannot be backed "
                           f"up: only a SQLite file or a PostgreSQL database", field="database_url")
    return {"backend": backend, "path": str(dest), "bytes": dest.stat().st_size, "revision": revision,
            "seconds": round(time.monotonic() - started, 3)}


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def _pg_dump(url: URL, dest: Path) -> None:
    """``pg_dump`` of ``url``'s database to a temporary file beside ``dest``, renamed into place once it exited
    cleanly and ``pg_restore --list`` reads it whole."""
    dump, lister = pg_tool("pg_dump"), pg_tool("pg_restore")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    try:
        _run_pg([dump, "--format=custom", "--no-owner", f"--file={tmp}", f"--dbname={libpq_uri(url)}"], url,
                what=f"pg_dump of {url.render_as_string(hide_password=True)}", out=dest)
        _run_pg([lister, "--list", str(tmp)], url, what=f"checking the dump {dest}", out=dest)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)


# --- PostgreSQL's client tools -----------------------------------------------------------------------------------


def pg_tool(name: str) -> str:
    """The path of PostgreSQL client program ``name`` (pg_dump, pg_restore): on PATH, else the newest in Debian's
    ``/usr/lib/postgresql/<version>/bin``; FileOperationError naming the package to install when there is none."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(v) if (v := Path(p).parent.parent.name).isdigit() else 0)
    if candidates:
        return candidates[-1]
    raise FileOperationError(f"{name} is not installed: install PostgreSQL's client tools (apt-get install "
                             f"postgresql-client, of the server's major version or newer) or put {name} on PATH")


def libpq_uri(url: URL) -> str:
    """``url`` as libpq reads it (``postgresql://user@host:port/db?...``), without its password: the tools get
    that through ``PGPASSWORD``, never on a command line another user can read."""
    bare = URL.create("postgresql", username=url.username, host=url.host, port=url.port, database=url.database,
                      query=url.query)  # (URL.set keeps a password set to None)
    return bare.render_as_string(hide_password=False)


def _run_pg(argv: list[str], url: URL, *, what: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        message = done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
        if "No space left on device" in message:
            raise _no_space(out)
        raise FileOperationError(f"{what} failed: {message[-2000:]}")
    return done


# --- restore ----------------------------------------------------------------------------------------------------


SOCKET_NAME = "assay.sock"  # where a serving process answers (mcp_server.control_protocol.SOCKET_NAME)
REPLACED = "replaced-"  # assay.db.replaced-<time>: a store a restore replaced
RESTORING = "restoring"  # assay.db.restoring: the backup being copied in


def restore(src: Path, url: str, data_dir: Path) -> dict[str, Any]:
    """Put the backup ``src`` in place of the store at ``url`` (the server on ``data_dir`` stopped), and leave the
    search indexes to be rebuilt from it. SQLite: ``src`` must be an assay store passing its integrity check; the
    store it replaces is moved aside (``<db>.replaced-<time>``, with its -wal/-shm and its index directories).
    PostgreSQL: ``pg_restore --clean --if-exists --no-owner --single-transaction`` of a ``pg_dump`` archive, the
    store's index files removed. What was done: ``{backend, path, source, bytes, revision, replaced, indexes (the
    index directories moved aside or removed), seconds}``."""
    started = time.monotonic()
    src, data_dir = Path(src).expanduser().absolute(), Path(data_dir)
    if not src.is_file():
        raise InvalidInput(f"no backup file at {src}", field="path")
    refuse_running(data_dir)
    engine = create_engine(url)  # not connected here: its URL names the index files as the server's engine does
    try:
        db = database_file(engine)
        if db is not None:
            result = _restore_sqlite(src, db)
        elif engine.url.get_backend_name() == "postgresql":
            result = _restore_postgres(src, engine, data_dir)
        else:
            raise InvalidInput(f"cannot restore into {engine.url.render_as_string(hide_password=True)}: only a "
                               f"SQLite file or a PostgreSQL database", field="database_url")
    finally:
        engine.dispose()
    return {**result, "source": str(src), "seconds": round(time.monotonic() - started, 3)}


def refuse_running(data_dir: Path) -> None:
    """Conflict when a server answers on ``<data dir>/assay.sock`` (a socket left by a server that died refuses
    the connection: not running)."""
    path = Path(data_dir) / SOCKET_NAME
    if not path.exists():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(path))
    except OSError:
        return
    finally:
        probe.close()
    raise Conflict(f"a server is running on the data dir {data_dir} (it answers at {path}): stop it, then restore")


def _restore_sqlite(src: Path, db: Path) -> dict[str, Any]:
    with open(src, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        what = ("a pg_dump archive: restore it into a PostgreSQL store, with --database-url" if head[:5] == b"PGDMP"
                else "not a SQLite database file: give a file `assay db backup` wrote")
        raise InvalidInput(f"{src} is not a backup of a SQLite store ({what})", field="path")
    staging = db.with_name(f"{db.name}.{RESTORING}")
    try:
        try:
            online_copy(src, staging)
        except (Conflict, sqlite3.DatabaseError) as exc:
            raise InvalidInput(f"{src} is damaged, not restored: {getattr(exc, 'message', exc)}",
                               field="path") from exc
        if "entries" not in _sqlite_tables(staging):
            raise InvalidInput(f"{src} is a SQLite database but not an assay store (it has no entries table)",
                               field="path")
        revision = _sqlite_revision(staging)
        replaced, indexes = _move_aside(db)
        os.replace(staging, db)
        _fsync_dir(db.parent)
    finally:
        staging.unlink(missing_ok=True)
    return {"backend": "sqlite", "path": str(db), "bytes": db.stat().st_size, "revision": revision,
            "replaced": replaced, "indexes": indexes}


def _move_aside(db: Path) -> tuple[str | None, list[str]]:
    """Rename the store ``db`` (with its -wal, -shm, -journal) and its index directories (``<db>.<name>/``) to
    ``<db>.replaced-<time>``: together they still open as the store they were. The store's new name (None when
    there was none) and the index directories moved."""
    aside = db.with_name(f"{db.name}.{REPLACED}{_stamp()}")
    n = 1
    while glob.glob(glob.escape(str(aside)) + "*"):
        aside, n = db.with_name(f"{db.name}.{REPLACED}{_stamp()}-{n}"), n + 1
    replaced = str(aside) if db.exists() else None
    for suffix in ("", "-wal", "-shm", "-journal"):
        if db.with_name(db.name + suffix).exists():
            os.replace(db.with_name(db.name + suffix), aside.with_name(aside.name + suffix))
    indexes = []
    for path in sorted(db.parent.glob(glob.escape(db.name) + ".*")):
        name = path.name[len(db.name) + 1:]
        if path.is_dir() and not name.startswith(REPLACED) and name != RESTORING:
            os.replace(path, aside.with_name(f"{aside.name}.{name}"))
            indexes.append(str(path))
    return replaced, indexes


def _restore_postgres(src: Path, engine: Engine, data_dir: Path) -> dict[str, Any]:
    tool = pg_tool("pg_restore")
    listing = subprocess.run([tool, "--list", str(src)], capture_output=True, text=True, check=False)
    if listing.returncode != 0:
        raise InvalidInput(f"{src} is not a pg_dump archive (custom format, as `assay db backup` writes): "
                           f"{listing.stderr.strip()[-500:]}", field="path")
    if not any(line.split()[-3:-1] == ["public", "entries"] and " TABLE " in line
               for line in listing.stdout.splitlines()):
        raise InvalidInput(f"{src} is a pg_dump archive but not of an assay store (it has no entries table)",
                           field="path")
    url = engine.url
    _run_pg([tool, "--clean", "--if-exists", "--no-owner", "--single-transaction", f"--dbname={libpq_uri(url)}",
             str(src)], url, what=f"pg_restore into {url.render_as_string(hide_password=True)}", out=src)
    return {"backend": "postgresql", "path": url.render_as_string(hide_password=True), "bytes": src.stat().st_size,
            "revision": _revision(engine), "replaced": None, "indexes": _remove_store_files(engine, data_dir)}


def _remove_store_files(engine: Engine, data_dir: Path) -> list[str]:
    """Remove the capabilities' files of a PostgreSQL store, ``<data dir>/<name>/<12 hex digits of the URL's
    hash>/`` (the rule of flows.core.capability.store_files): its search indexes, rebuilt from the store."""
    key = hashlib.sha256(engine.url.render_as_string(hide_password=True).encode()).hexdigest()[:12]
    removed = []
    for path in sorted(data_dir.glob(f"*/{key}")) if data_dir.is_dir() else ():
        if path.is_dir():
            shutil.rmtree(path)
            removed.append(str(path))
    return removed


# --- what a store holds -------------------------------------------------------------------------------------------


def _sqlite_tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def _sqlite_revision(path: Path) -> str | None:
    if "alembic_version" not in _sqlite_tables(path):
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


def _revision(engine: Engine) -> str | None:
    """The alembic revision ``engine``'s store records (None: no ``alembic_version`` table, a store made before
    migrations)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        value = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if value is None else str(value)

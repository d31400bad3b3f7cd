"""Backups of the store and restoring them (store.backup): SQLite's online copy while another connection writes,
never a torn file at the destination, restore refusing what is not a healthy store or a store in use, the replaced
store kept aside with its index files and the text index rebuilt from the restored store; PostgreSQL through
pg_dump / pg_restore."""

from __future__ import annotations

import hashlib
import socket
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import make_url

from flows.documents.model import Extracted, Page
from flows.index.indexer import index_tree
from store import backup as store_backup
from store import documents as docs
from store.backup import backup, online_copy, restore
from store.engine import make_engine, sqlite_url
from store.entries import get_entry, make_row, upsert_entries
from store.errors import Conflict, FileOperationError, InvalidInput
from store.textindex import Leaf, Scope, TextIndex, search


def _wal_db(path: Path, rows: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO t (body) VALUES (?)", [("x" * 200,) for _ in range(rows)])
    conn.commit()
    conn.close()


def _count(path: Path, table: str = "t") -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        conn.close()


def _recorded_revision(engine) -> str | None:
    """The alembic revision the store records, read directly (None: none recorded)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _entry_paths(engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(text("SELECT path FROM entries")).scalars())


def _siblings(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- online_copy --------------------------------------------------------------------------------------------------


def test_online_copy_is_a_consistent_snapshot_while_another_connection_keeps_writing(tmp_path):
    src, dest = tmp_path / "live.db", tmp_path / "copy.db"
    _wal_db(src, 3000)
    committed, stop, errors = [0], threading.Event(), []

    def writer() -> None:
        conn = sqlite3.connect(src, timeout=30)
        try:
            while not stop.is_set():
                conn.execute("INSERT INTO t (body) VALUES ('y')")
                conn.commit()
                committed[0] += 1
        except sqlite3.Error as exc:  # pragma: no cover - the failure the test is about
            errors.append(exc)
        finally:
            conn.close()

    written_during_copy, steps = [], [(0, 0)]

    def progress(copied: int, total: int) -> None:
        # a copy restarted by the writes (what SQLite does between steps without a snapshot) would never end: fail
        assert copied > steps[-1][0] and total >= steps[-1][1], f"the copy restarted: {steps[-1]} -> {copied, total}"
        steps.append((copied, total))
        if not written_during_copy:  # after the first step: the writer must get commits through mid-copy
            before = committed[0]
            waited = threading.Event()
            for _ in range(200):
                if committed[0] >= before + 5:
                    break
                waited.wait(0.05)
            written_during_copy.append(committed[0] - before)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        online_copy(src, dest, pages_per_step=4, progress=progress)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert written_during_copy and written_during_copy[0] >= 5  # the copy never held the writer
    conn = sqlite3.connect(dest)
    count, top = conn.execute("SELECT count(*), max(id) FROM t").fetchone()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one self-contained file
    conn.close()
    assert count == top and 3000 <= count < _count(src)  # whole commits only, as of one moment mid-writing
    assert not [n for n in _siblings(tmp_path) if "partial" in n]


def test_a_copy_stopped_half_way_leaves_nothing_at_the_destination(tmp_path):
    src, dest = tmp_path / "live.db", tmp_path / "copy.db"
    _wal_db(src, 2000)
    dest.write_bytes(b"the previous backup")

    def crash(copied: int, total: int) -> None:
        assert copied < total
        raise OSError("the copy is interrupted")

    with pytest.raises(OSError, match="interrupted"):
        online_copy(src, dest, pages_per_step=2, progress=crash)
    assert dest.read_bytes() == b"the previous backup"
    assert not [n for n in _siblings(tmp_path) if "partial" in n]


def test_a_copy_failing_its_integrity_check_is_refused_and_not_put_in_place(tmp_path):
    src, dest = tmp_path / "damaged.db", tmp_path / "copy.db"
    conn = sqlite3.connect(src)
    conn.execute("CREATE TABLE t (x)")
    conn.execute("CREATE INDEX ix ON t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(2000)])
    conn.commit()
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'ix'").fetchone()[0]
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    data = bytearray(src.read_bytes())
    data[root * page - 200:root * page] = bytes(200)  # the end of the index's root page zeroed: rows lost from it
    src.write_bytes(bytes(data))
    with pytest.raises(Conflict, match="integrity check"):
        online_copy(src, dest)
    assert _siblings(tmp_path) == ["damaged.db"]


# --- backup and restore of a SQLite store ---------------------------------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path, tree):
    """A data dir whose store holds the indexed tree."""
    data = tmp_path / "data"
    engine = make_engine(sqlite_url(data / "assay.db"))
    index_tree(engine, str(tree), scan_id=1)
    engine.dispose()
    return data


def test_restore_replaces_the_store_and_keeps_the_replaced_one_aside_with_its_index_files(sqlite_store, tmp_path,
                                                                                          tree):
    url = sqlite_url(sqlite_store / "assay.db")
    engine = make_engine(url)
    kept = _entry_paths(engine)
    (tmp_path / "backups").mkdir()
    written = backup(engine, tmp_path / "backups")  # a directory: a file named for the store and the time
    assert Path(written["path"]).parent == tmp_path / "backups" and written["backend"] == "sqlite"
    assert written["bytes"] == Path(written["path"]).stat().st_size
    assert written["revision"] == _recorded_revision(engine)
    (tree / "later.txt").write_text("indexed after the backup")
    index_tree(engine, str(tree), scan_id=2)
    after = _entry_paths(engine)
    engine.dispose()
    (sqlite_store / "assay.db.textindex").mkdir()
    (sqlite_store / "assay.db.textindex" / "manifest.json").write_text("{}")
    (sqlite_store / "assay.db.vectors").mkdir()

    result = restore(Path(written["path"]), url, sqlite_store)

    aside = Path(result["replaced"])
    assert aside.name.startswith("assay.db.replaced-") and result["path"] == str(sqlite_store / "assay.db")
    assert result["revision"] == written["revision"]
    assert sorted(result["indexes"]) == [str(sqlite_store / "assay.db.textindex"),
                                         str(sqlite_store / "assay.db.vectors")]
    assert not (sqlite_store / "assay.db.textindex").exists() and not (sqlite_store / "assay.db.vectors").exists()
    assert (sqlite_store / f"{aside.name}.textindex" / "manifest.json").read_text() == "{}"
    restored = make_engine(url)
    assert _entry_paths(restored) == kept != after
    restored.dispose()
    replaced = make_engine(sqlite_url(aside))  # the replaced store still opens, as it was
    assert _entry_paths(replaced) == after
    replaced.dispose()
    assert not [n for n in _siblings(sqlite_store) if "restoring" in n or "partial" in n]


def test_restore_refuses_a_file_that_is_not_a_healthy_assay_store_and_leaves_the_store_alone(sqlite_store,
                                                                                            tmp_path):
    url = sqlite_url(sqlite_store / "assay.db")
    before = (sqlite_store / "assay.db").read_bytes()
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database at all")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    torn = tmp_path / "torn.db"
    torn.write_bytes(before[:len(before) // 3])
    dump = tmp_path / "assay.dump"
    dump.write_bytes(b"PGDMP\x01\x0e\x00" + b"\x00" * 64)  # pg_dump's custom format, given to a SQLite store
    for bad, says in ((notes, "not a SQLite database file: give a file `assay db backup` wrote"),
                      (other, "not an assay store"), (torn, "damaged"), (tmp_path / "missing.db", "no backup file"),
                      (dump, "a pg_dump archive: restore it into a PostgreSQL store, with --database-url")):
        with pytest.raises(InvalidInput, match=says):
            restore(bad, url, sqlite_store)
    assert (sqlite_store / "assay.db").read_bytes() == before
    assert not [n for n in _siblings(sqlite_store) if "replaced" in n or "restoring" in n]


def test_backing_up_a_store_that_is_not_there_says_so_and_makes_nothing(tmp_path):
    # the data dir mistyped: the operator is told there is no store there, not shown a traceback, and no empty
    # database is left behind by asking
    engine = make_engine(sqlite_url(tmp_path / "nothing-here" / "assay.db"), prepare_schema=False)
    try:
        with pytest.raises(InvalidInput, match="there is no store at .*nothing-here/assay.db: nothing to back up"):
            backup(engine, tmp_path / "backups")
    finally:
        engine.dispose()
    assert not (tmp_path / "nothing-here" / "assay.db").exists() and not (tmp_path / "backups").exists()


def test_restore_is_refused_while_a_server_answers_on_the_data_dir_but_not_for_a_dead_socket(sqlite_store,
                                                                                             tmp_path):
    url = sqlite_url(sqlite_store / "assay.db")
    engine = make_engine(url)
    copy = backup(engine, tmp_path / "b.db")
    engine.dispose()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sqlite_store / "assay.sock"))
    listener.listen(1)
    try:
        with pytest.raises(Conflict, match="server is running"):
            restore(Path(copy["path"]), url, sqlite_store)
    finally:
        listener.close()  # the socket file stays: what a server that died leaves
    assert (sqlite_store / "assay.sock").exists()
    assert restore(Path(copy["path"]), url, sqlite_store)["replaced"]


def _add_document(engine, path: str, body: str) -> None:
    row = make_row(path, kind="file", size=1, mtime=1.0, ctime=1.0, inode=None, scan_id=None, indexed_at=0.0)
    with engine.begin() as conn:
        upsert_entries(conn, [row])
        entry = get_entry(conn, path=path)
    assert entry is not None
    extracted = Extracted(path=path, format="text", pages=[Page(1, body)], total_pages=1)
    docs.write_extracted_many(engine, [docs.DocumentWrite(entry["id"], 1, 1.0, "k", extracted)])


def _text_hits(index: TextIndex, needle: str) -> list[str]:
    result = search(index.sync(), Leaf(needle), lambda line: needle in line, scope=Scope(), limit=100)
    return sorted(h.path for h in result.hits)


def test_the_text_index_is_rebuilt_from_the_restored_store(tmp_path):
    data = tmp_path / "data"
    url = sqlite_url(data / "assay.db")
    engine = make_engine(url)
    _add_document(engine, "/docs/kept.txt", "a zeppelin over the harbour")
    index = TextIndex(data / "assay.db.textindex", engine)
    assert _text_hits(index, "zeppelin") == ["/docs/kept.txt"]
    copy = backup(engine, tmp_path / "b.db")
    _add_document(engine, "/docs/later.txt", "a zeppelin written after the backup")
    assert _text_hits(index, "zeppelin") == ["/docs/kept.txt", "/docs/later.txt"]
    index.close()
    engine.dispose()

    restore(Path(copy["path"]), url, data)

    engine = make_engine(url)
    index = TextIndex(data / "assay.db.textindex", engine)  # where the server opens it: no files, built again
    try:
        assert _text_hits(index, "zeppelin") == ["/docs/kept.txt"]
    finally:
        index.close()
        engine.dispose()


# --- PostgreSQL ---------------------------------------------------------------------------------------------------


def test_a_missing_pg_dump_names_the_package_to_install(monkeypatch):
    monkeypatch.setattr(store_backup.shutil, "which", lambda name: None)
    monkeypatch.setattr(store_backup.glob, "glob", lambda pattern: [])
    with pytest.raises(FileOperationError, match="postgresql-client"):
        store_backup.pg_tool("pg_dump")


@pytest.mark.postgres
def test_postgresql_round_trip_through_pg_dump_and_pg_restore(pg_database, tmp_path, tree, monkeypatch):
    calls: list[list[str]] = []
    real_run = subprocess.run

    def spy(argv, *args, **kwargs):
        calls.append(list(argv))
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(store_backup.subprocess, "run", spy)
    engine = make_engine(pg_database)
    index_tree(engine, str(tree), scan_id=1)
    kept = _entry_paths(engine)
    written = backup(engine, tmp_path / "store.dump")
    assert written["backend"] == "postgresql" and written["bytes"] == (tmp_path / "store.dump").stat().st_size > 0
    assert written["revision"] == _recorded_revision(engine)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM entries WHERE kind = 'file'"))
    assert _entry_paths(engine) != kept
    engine.dispose()
    data = tmp_path / "data"
    # where flows.core.capability.store_files keeps a PostgreSQL store's index files
    key = hashlib.sha256(make_url(pg_database).render_as_string(hide_password=True).encode()).hexdigest()[:12]
    for name in ("vectors", "textindex"):
        (data / name / key).mkdir(parents=True)
    (data / "vectors" / "another-store").mkdir()

    result = restore(tmp_path / "store.dump", pg_database, data)

    engine = make_engine(pg_database)
    assert _entry_paths(engine) == kept
    engine.dispose()
    assert sorted(result["indexes"]) == [str(data / "textindex" / key), str(data / "vectors" / key)]
    assert result["revision"] == written["revision"] and "secret" not in result["path"]
    assert _siblings(data / "vectors") == ["another-store"]
    assert [c[0].rsplit("/", 1)[-1] for c in calls] == ["pg_dump", "pg_restore", "pg_restore", "pg_restore"]
    assert not any("secret" in word for c in calls for word in c)  # the password went through PGPASSWORD
    with pytest.raises(InvalidInput, match="not a pg_dump archive"):
        restore(tree / "docs" / "readme.md", pg_database, data)

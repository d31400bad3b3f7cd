"""The store on a full disk (store/engine.py's NoSpace, store/textindex's files), on a real small filesystem: a write
that does not fit raises NoSpace (NO_SPACE) on SQLite (SQLITE_FULL) and PostgreSQL (53100, a tablespace on the small
disk), is rolled back whole, leaves a store that passes db-diagnose and still reads and writes, and succeeds as it
was once space is freed. The text index catching up on a full disk says so, keeps its last good state and catches
up once space is freed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, func, insert, select, text

from flows.documents.model import Extracted, Page
from flows.media.common import is_full_disk
from store import documents as docs
from store.diagnostics import diagnose
from store.engine import make_engine
from store.entries import get_entry, make_row, upsert_entries
from store.errors import NoSpace
from store.textindex import Leaf, Scope, TextIndex, search
from tests.small_disk import SmallDisk, small_disk

ROWS = 200  # rows of a write that does not fit: 200 x 4 KB
FILL = Table("filler_rows", MetaData(), Column("id", Integer, primary_key=True), Column("body", String))


def _rows(n: int, tag: str) -> list[dict[str, object]]:
    return [{"body": tag + os.urandom(2000).hex()} for _ in range(n)]


def _count(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(FILL)).scalar_one()


@pytest.fixture(scope="module")
def disk(tmp_path_factory) -> Iterator[SmallDisk]:
    with small_disk(tmp_path_factory.mktemp("store") / "disk", 4096) as mounted:
        yield mounted


def test_a_sqlite_write_that_does_not_fit_is_no_space_and_the_store_stays_sound(disk):
    engine = make_engine(f"sqlite:///{disk.path / 'assay.db'}")
    try:
        FILL.create(engine)
        with engine.begin() as conn:
            conn.execute(insert(FILL), _rows(10, "kept"))
        disk.fill(256 * 1024)
        with pytest.raises(NoSpace, match="the disk holding the store is full") as raised:
            with engine.begin() as conn:
                conn.execute(insert(FILL), _rows(ROWS, "big"))
        assert raised.value.code == "NO_SPACE"
        assert _count(engine) == 10  # the whole transaction rolled back; what was committed before is there
        report = diagnose(engine)
        assert report["integrity_check"] == "ok" and report["healthy"], report["warnings"]
        with engine.begin() as conn:  # a small write still fits in the space the failed one gave back
            conn.execute(insert(FILL), _rows(1, "small"))

        disk.unfill()
        with engine.begin() as conn:
            conn.execute(insert(FILL), _rows(ROWS, "big"))  # the same write, once space is freed
        assert _count(engine) == 10 + 1 + ROWS
    finally:
        engine.dispose()
        disk.unfill()
        for name in os.listdir(disk.path):
            os.unlink(disk.path / name)


@pytest.fixture
def server_reachable() -> Iterator[Path]:
    """A folder the PostgreSQL server's user can reach (pytest's temporary folders are private to root)."""
    base = Path(tempfile.mkdtemp(prefix="assay-tablespace-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.postgres
def test_a_postgresql_write_that_does_not_fit_its_tablespace_is_no_space(pg_database, server_reachable):
    engine = make_engine(pg_database)
    with small_disk(server_reachable / "tablespace", 1024) as small:
        shutil.chown(small.path, "postgres", "postgres")  # the server writes there as its own user
        place = Table("placed_rows", MetaData(), Column("id", Integer, primary_key=True), Column("body", String))
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f"CREATE TABLESPACE small_disk LOCATION '{small.path}'"))
        try:
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE placed_rows (id serial PRIMARY KEY, body text) "
                                  "TABLESPACE small_disk"))
            with pytest.raises(NoSpace, match="the disk holding the store is full"):
                with engine.begin() as conn:  # incompressible text: 2 MB that TOAST cannot shrink
                    conn.execute(insert(place), [{"body": os.urandom(4000).hex()} for _ in range(256)])
            with engine.connect() as conn:
                assert conn.execute(select(func.count()).select_from(place)).scalar_one() == 0
            assert diagnose(engine)["healthy"]
        finally:
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(text("DROP TABLE IF EXISTS placed_rows"))
                conn.execute(text("DROP TABLESPACE IF EXISTS small_disk"))
            engine.dispose()


def _documents(engine, count: int) -> dict[str, int]:
    """``count`` one-page documents of different words each, in the store."""
    paths = [f"/library/doc{i:03d}.txt" for i in range(count)]
    rows = [make_row(p, kind="file", size=1, mtime=1.0, ctime=1.0, inode=None, scan_id=None, indexed_at=0.0)
            for p in paths]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
        found = {p: get_entry(conn, path=p) for p in paths}
    ids = {p: row["id"] for p, row in found.items() if row is not None}
    for i, path in enumerate(paths):
        page = "\n".join(f"needle{i} line {n} " + os.urandom(40).hex() for n in range(200))
        ex = Extracted(path=path, format="text", pages=[Page(1, page)], total_pages=1)
        docs.write_extracted_many(engine, [docs.DocumentWrite(ids[path], 1, 1.0, "k", ex)])
    return ids


@pytest.fixture
def text_index(disk: SmallDisk, tmp_path) -> Iterator[tuple[TextIndex, object]]:
    """A text index on the small disk over a store elsewhere (only the index's disk fills), two documents indexed."""
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    index = TextIndex(disk.path / "text-index", engine)
    try:
        _documents(engine, 2)
        index.sync()  # a good state on disk
        yield index, engine
    finally:
        index.close()
        engine.dispose()
        disk.unfill()
        shutil.rmtree(disk.path / "text-index", ignore_errors=True)


def _sync_on_a_full_disk(disk: SmallDisk, index: TextIndex, engine) -> BaseException:
    _documents(engine, 60)
    disk.fill(8 * 1024)
    with pytest.raises(Exception) as raised:
        index.sync()
    return raised.value


def test_the_text_index_on_a_full_disk_says_so_and_catches_up_once_space_is_freed(disk, text_index):
    index, engine = text_index
    failure = _sync_on_a_full_disk(disk, index, engine)
    assert is_full_disk(failure), failure  # the full disk, not a corrupt index, is what it says
    disk.unfill()
    snap = index.sync()
    hits = search(snap, Leaf("needle59"), lambda line: "needle59" in line, scope=Scope(), limit=1000)
    assert hits.total == 200 and snap.queued == frozenset()


def test_the_text_index_on_a_full_disk_is_no_space_naming_its_folder_and_leaves_no_half_written_file(disk,
                                                                                                     text_index):
    index, engine = text_index
    failure = _sync_on_a_full_disk(disk, index, engine)
    assert isinstance(failure, NoSpace), failure
    assert f"the disk holding the text index at {disk.path / 'text-index'} is full" in failure.message
    assert [name for name in os.listdir(disk.path / "text-index") if name.endswith(".tmp")] == []

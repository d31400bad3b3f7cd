"""The index's writer process (store/sqlite_writer.py) and a full disk: SQLITE_FULL (or ENOSPC) ends the child with
NO_SPACE_STATUS and a ``NO_SPACE: `` line naming the store, the batch it was writing rolled back and the ones before
it kept; any other database error stays exit status 1 with the driver's words."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from store.sqlite_writer import HEADER, NO_SPACE_STATUS, is_full, write_frame
from tests.small_disk import SmallDisk, small_disk

REPO = Path(__file__).resolve().parents[2]
BATCH = 50  # rows of 4 KB: 200 KB a batch
SETUP = {"sql": "INSERT INTO t (body) VALUES (?)", "delete": "DELETE FROM t WHERE ? = ? AND ? = ?",
         "delete_below": "DELETE FROM t WHERE ? = ?", "pragmas": ["synchronous=NORMAL", "busy_timeout=30000"]}


@pytest.fixture(scope="module")
def disk(tmp_path_factory) -> Iterator[SmallDisk]:
    with small_disk(tmp_path_factory.mktemp("writer") / "disk", 2048) as mounted:
        yield mounted


def run_child(database: Path, setup: dict, batches: int) -> subprocess.CompletedProcess[bytes]:
    """``python -m store.sqlite_writer database`` fed ``setup`` and up to ``batches`` batches; stops feeding when the
    child has gone (its pipe broke) and returns how it ended."""
    proc = subprocess.Popen([sys.executable, "-m", "store.sqlite_writer", str(database)], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        write_frame(proc.stdin, setup)
        for _ in range(batches):
            write_frame(proc.stdin, ([(os.urandom(2000).hex(),) for _ in range(BATCH)], []))
            proc.stdin.flush()
        proc.stdin.write(HEADER.pack(0))
    except BrokenPipeError:
        pass
    finally:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
    out, err = proc.stdout.read(), proc.stderr.read()  # a line each at most: neither pipe fills
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def make_store(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")


def test_a_full_disk_ends_the_child_with_no_space_keeping_the_batches_before(disk):
    database = disk.path / "full.db"
    make_store(database)
    try:
        disk.fill(600 * 1024)  # room for a couple of batches, not for twenty
        done = run_child(database, SETUP, batches=20)
        assert done.returncode == NO_SPACE_STATUS, done.stderr
        said = done.stderr.decode()
        assert said.startswith(f"NO_SPACE: the disk holding the store ({database}) is full"), said
        disk.unfill()
        with sqlite3.connect(database) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            kept = conn.execute("SELECT count(*) FROM t").fetchone()[0]
        assert 0 < kept < 20 * BATCH and kept % BATCH == 0  # whole batches: the one that did not fit rolled back
    finally:
        disk.unfill()
        for name in os.listdir(disk.path):
            os.unlink(disk.path / name)


def test_any_other_database_error_is_exit_status_1_with_the_drivers_words(tmp_path):
    database = tmp_path / "other.db"
    make_store(database)
    done = run_child(database, {**SETUP, "sql": "INSERT INTO missing (body) VALUES (?)"}, batches=1)
    assert done.returncode == 1
    assert done.stderr.decode().startswith("OperationalError: no such table: missing"), done.stderr


def _rollback_after(first: BaseException) -> BaseException:
    """The error a failed ROLLBACK raises while ``first`` is handled (what a transaction SQLite ended itself gives)."""
    second = sqlite3.OperationalError("cannot rollback - no transaction is active")
    second.__context__ = first
    return second


@pytest.mark.parametrize("exc, full", [
    (sqlite3.OperationalError("database or disk is full"), True),
    (OSError(errno.ENOSPC, "No space left on device"), True),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
    (_rollback_after(sqlite3.OperationalError("database or disk is full")), True),
    (sqlite3.OperationalError("database is locked"), False),
    (OSError(errno.EIO, "Input/output error"), False),
    (_rollback_after(ValueError("bad row")), False),
], ids=["SQLITE_FULL", "ENOSPC", "EDQUOT", "after-a-full-write", "locked", "EIO", "after-another-error"])
def test_is_full_knows_a_full_disk_from_other_errors(exc, full):
    assert is_full(exc) is full

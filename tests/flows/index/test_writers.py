"""The index walk's writer process (flows/index/writers.py) reports how its child ended: a full disk under the store
is NoSpace (NO_SPACE) naming the store, with the batches before it committed; any other failure of the child stays a
RuntimeError carrying its words."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Iterator

import pytest

from flows.index.writers import ProcessWriter
from store.engine import make_engine
from store.errors import NoSpace
from tests.small_disk import SmallDisk, small_disk

BATCH = 200  # entries of ~1 KB of path each: ~400 KB a batch with the path index


def batch(k: int) -> tuple[list, list]:
    """A batch of compact rows (store/sqlite_writer.py's expand_rows order) under /big/k<k>, nothing to delete."""
    rows = []
    for i in range(BATCH):
        name = f"{k:03d}-{i:04d}-" + os.urandom(400).hex()
        rows.append((f"/big/k{k}/{name}", f"/big/k{k}", name, "file", 1, 1.0, 1.0, None, None))
    return rows, []


@pytest.fixture
def disk(tmp_path) -> Iterator[SmallDisk]:
    with small_disk(tmp_path / "disk", 4096) as mounted:
        yield mounted


def test_the_writer_process_on_a_full_disk_raises_no_space_and_keeps_what_it_committed(disk):
    database = disk.path / "assay.db"
    make_engine(f"sqlite:///{database}").dispose()  # the store's schema, then the disk nearly full
    disk.fill(1200 * 1024)
    writer = ProcessWriter(str(database), scan_id=1, now=1.0)
    with pytest.raises(NoSpace) as raised:
        for k in range(30):
            writer.put(batch(k))
        writer.close()
    assert raised.value.code == "NO_SPACE"
    assert raised.value.message.startswith(f"the disk holding the store ({database}) is full"), raised.value.message
    disk.unfill()
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        kept = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert 0 < kept < 30 * BATCH and kept % BATCH == 0  # whole batches: the one that did not fit rolled back


def test_any_other_failure_of_the_writer_process_is_a_runtime_error_with_its_words(tmp_path: Path):
    database = tmp_path / "not-a-store.db"
    sqlite3.connect(database).close()  # a database without the entries table
    writer = ProcessWriter(str(database), scan_id=1, now=1.0)
    with pytest.raises(RuntimeError, match="the index writer process failed: OperationalError: no such table"):
        writer.put(batch(0))
        writer.close()

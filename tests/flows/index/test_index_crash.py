"""A walk killed after any batch leaves the store consistent: every committed batch is checked, inside its own
transaction, for entries without their parent and folders whose size is not the sum of their children's; and a walk
whose writer dies after its k-th batch (what SIGKILL leaves) is checked as it stands, then finished by the next walk
without rewriting what it had written."""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from sqlalchemy import select

import flows.index.writers as writers_mod
from flows.index.indexer import index_tree
from store import entries
from tests.flows.index.checks import assert_store_consistent
from tests.flows.index.test_index_states import make_wide_tree


def problems(conn, top: str) -> list[str]:
    """What is inconsistent under ``top`` as ``conn`` sees it (inside a batch's transaction, before its commit)."""
    T = entries.T
    rows = conn.execute(select(T.c.path, T.c.parent, T.c.kind, T.c.size)).all()
    paths = {r.path for r in rows}
    sums: dict[str, int] = defaultdict(int)
    found = []
    for r in rows:
        sums[r.parent] += r.size
        if r.path != top and r.path.startswith(top) and r.parent not in paths:
            found.append(f"{r.path} without its parent")
    found += [f"{r.path}: size {r.size} != {sums[r.path]}" for r in rows
              if r.kind == "directory" and r.size != sums[r.path]]
    return found


@pytest.fixture
def checked_batches(monkeypatch):
    """Every batch the thread writer applies is checked before it commits; returns the list of what was wrong."""
    monkeypatch.setenv("ASSAY_INDEX_WRITER", "thread")
    seen: list[list[str]] = []
    real = writers_mod._apply
    top: list[str] = []

    def apply(conn, frame, **kw):
        removed = real(conn, frame, **kw)
        seen.append(problems(conn, top[0]))
        return removed

    monkeypatch.setattr(writers_mod, "_apply", apply)
    return seen, top


def change_tree(root: Path) -> None:
    """Files grown and removed, a new folder with files, a folder replaced by a file and a file by a folder."""
    for d in range(3):
        (root / f"d{d}" / "s0" / "5.txt").write_bytes(b"y" * 500)
    (root / "d1" / "s1" / "7.txt").unlink()
    shutil.rmtree(root / "d2" / "s2")
    (root / "d2" / "s2").write_bytes(b"now a file")
    (root / "d3" / "s0" / "9.txt").unlink()
    (root / "d3" / "s0" / "9.txt").mkdir()
    (root / "d3" / "s0" / "9.txt" / "inner.txt").write_bytes(b"z" * 30)
    new = root / "d4" / "new" / "deeper"
    new.mkdir(parents=True)
    for i in range(150):
        (new / f"n{i}.txt").write_bytes(b"n" * i)


def test_every_batch_of_a_first_index_and_a_reindex_leaves_the_store_consistent(engine, tmp_path, checked_batches):
    seen, top = checked_batches
    holder = tmp_path / "holder"
    root = make_wide_tree(holder / "wide")
    top.append(str(holder))
    index_tree(engine, str(holder), scan_id=1, batch_size=50)  # the folder above is stored: its size follows
    first = len(seen)
    assert first > 10 and not [p for p in seen if p], [p for p in seen if p][:3]
    change_tree(root)
    index_tree(engine, str(root), scan_id=2, batch_size=50)
    assert len(seen) > first + 3 and not [p for p in seen if p], [p for p in seen if p][:3]
    assert_store_consistent(engine, str(holder))


class WriterDied(BaseException):
    """What the writer meets in place of its (k+1)-th batch: the process is gone."""


def kill_after(monkeypatch, batches: int) -> None:
    """The thread writer commits ``batches`` batches, then dies: nothing after is written, the walk ends."""
    monkeypatch.setenv("ASSAY_INDEX_WRITER", "thread")
    real = writers_mod._apply
    done = [0]

    def apply(conn, frame, **kw):
        if done[0] >= batches:
            raise WriterDied()
        done[0] += 1
        return real(conn, frame, **kw)

    monkeypatch.setattr(writers_mod, "_apply", apply)


@pytest.mark.parametrize("batches", [1, 3, 6])
@pytest.mark.parametrize("reindex", [False, True], ids=["first", "reindex"])
def test_a_walk_killed_after_any_batch_leaves_folders_marked_and_the_next_walk_finishes_it(
        engine, tmp_path, monkeypatch, batches, reindex):
    root = make_wide_tree(tmp_path / "wide")
    if reindex:
        index_tree(engine, str(root), scan_id=1, batch_size=50)
        change_tree(root)
    kill_after(monkeypatch, batches)
    with pytest.raises(WriterDied):
        index_tree(engine, str(root), scan_id=2, batch_size=20)
    monkeypatch.undo()
    rows = assert_store_consistent(engine, str(root))
    left = {r["path"] for r in rows if r["scan_id"] == 2 and r["kind"] == "file"}
    unfinished = [r["path"] for r in rows if (r["scan_error"] or "").startswith("incomplete: index job 2")]
    assert left, "the killed walk wrote no file"
    if not reindex:  # a first walk writes the root before anything under it, and never finished it
        assert str(root) in unfinished

    index_tree(engine, str(root), scan_id=3, batch_size=50)
    after = assert_store_consistent(engine, str(root))
    on_disk = {str(Path(d) / n) for d, ds, fs in os.walk(root) for n in ds + fs} | {str(root)}
    assert {r["path"] for r in after} == on_disk
    assert not [r for r in after if r["scan_error"]]
    kept = {r["path"] for r in after if r["scan_id"] == 2 and r["kind"] == "file"}
    assert kept == left  # the files the killed walk wrote were not written again

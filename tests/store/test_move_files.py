"""store.entries.move_files: plain files' paths rewritten for a whole batch, ids kept; with ``sizes``, the folders
above each old and new place get the moved file's size by delta (no folder summed again), and every folder's size
still equals the sum of its children's, on SQLite and PostgreSQL: also when a row is left at a new place, a file
moves twice in one batch, or one file takes the place another left."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select

from store.entries import T, make_row, move_files, upsert_entries
from tests.conftest import BACKENDS, backend_engine


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "assay_move_files") as eng:
        yield eng


@pytest.fixture
def top(engine) -> str:
    """A stored folder of the test's own with folders a, b, c/d and files a/x.txt (10 bytes), a/y.txt (20)."""
    root = f"/move-files-{uuid.uuid4().hex[:8]}"
    rows = [make_row(p, kind="directory", size=0, mtime=0.0, ctime=0.0, inode=None, scan_id=None, indexed_at=0.0)
            for p in (root, f"{root}/a", f"{root}/b", f"{root}/c", f"{root}/c/d")]
    rows += [make_row(f"{root}/a/{name}", kind="file", size=size, mtime=0.0, ctime=0.0, inode=None, scan_id=None,
                      indexed_at=0.0) for name, size in (("x.txt", 10), ("y.txt", 20))]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
    refresh(engine, root)
    return root


def refresh(engine, root: str) -> None:
    """Folder sizes summed from scratch, deepest first (what the deltas must keep equal)."""
    with engine.begin() as conn:
        rows = conn.execute(select(T.c.path, T.c.kind, T.c.size).where(T.c.path.startswith(root))).all()
        sizes = {p: s for p, k, s in rows if k == "file"}
        for folder in sorted((p for p, k, _ in rows if k == "directory"), key=lambda p: -p.count("/")):
            sizes[folder] = sum(s for p, s in sizes.items() if p.rpartition("/")[0] == folder)
            conn.execute(T.update().where(T.c.path == folder).values(size=sizes[folder]))


def state(engine, root: str) -> dict[str, tuple[int, int]]:
    with engine.connect() as conn:
        return {p: (i, s) for p, i, s in conn.execute(select(T.c.path, T.c.id, T.c.size)
                                                       .where(T.c.path.startswith(root)))}


def assert_sizes_are_sums(found: dict[str, tuple[int, int]], root: str) -> None:
    for folder in (p for p in found if p == root or not p.endswith(".txt")):
        children = sum(s for p, (_, s) in found.items() if p.rpartition("/")[0] == folder)
        assert found[folder][1] == children, f"{folder}: {found[folder][1]} != its children's {children}"


def test_moved_files_keep_their_ids_and_the_folders_above_both_places_follow(engine, top):
    before = state(engine, top)
    with engine.begin() as conn:
        move_files(conn, [(f"{top}/a/x.txt", f"{top}/b/x.txt"), (f"{top}/a/y.txt", f"{top}/c/d/y2.txt")], sizes=True)
    after = state(engine, top)
    assert after[f"{top}/b/x.txt"][0] == before[f"{top}/a/x.txt"][0]
    assert after[f"{top}/c/d/y2.txt"][0] == before[f"{top}/a/y.txt"][0]
    assert (after[f"{top}/a"][1], after[f"{top}/b"][1], after[f"{top}/c"][1], after[top][1]) == (0, 10, 20, 30)
    assert_sizes_are_sums(after, top)


def test_a_row_left_at_a_new_place_is_dropped_and_its_size_taken_off(engine, top):
    stale = make_row(f"{top}/b/x.txt", kind="file", size=500, mtime=0.0, ctime=0.0, inode=None, scan_id=None,
                     indexed_at=0.0)
    with engine.begin() as conn:
        upsert_entries(conn, [stale])
    refresh(engine, top)
    with engine.begin() as conn:
        move_files(conn, [(f"{top}/a/x.txt", f"{top}/b/x.txt")], sizes=True)
    after = state(engine, top)
    assert (after[f"{top}/b/x.txt"][1], after[f"{top}/b"][1], after[top][1]) == (10, 10, 30)
    assert_sizes_are_sums(after, top)


def test_a_file_moved_twice_in_a_batch_and_one_taking_the_place_another_left(engine, top):
    before = state(engine, top)
    with engine.begin() as conn:
        move_files(conn, [(f"{top}/a/x.txt", f"{top}/b/x.txt"), (f"{top}/b/x.txt", f"{top}/c/x.txt"),
                          (f"{top}/a/y.txt", f"{top}/a/x.txt")], sizes=True)
    after = state(engine, top)
    assert after[f"{top}/c/x.txt"][0] == before[f"{top}/a/x.txt"][0]
    assert after[f"{top}/a/x.txt"][0] == before[f"{top}/a/y.txt"][0]  # not dropped as a row left at a new place
    assert f"{top}/b/x.txt" not in after and f"{top}/a/y.txt" not in after
    assert (after[f"{top}/a"][1], after[f"{top}/b"][1], after[f"{top}/c"][1], after[top][1]) == (20, 0, 10, 30)
    assert_sizes_are_sums(after, top)


def test_without_sizes_the_folders_are_left_to_the_caller(engine, top):
    with engine.begin() as conn:
        move_files(conn, [(f"{top}/a/x.txt", f"{top}/b/x.txt")])
    after = state(engine, top)
    assert (after[f"{top}/a"][1], after[f"{top}/b"][1]) == (30, 0)

"""Indexing in every state: maxAge after new folders and stopped scans, re-index of an unchanged tree, cancellation,
and a walk checked against an independent listing of a tree full of awkward entries."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from flows.index.flow import run_index_job
from flows.index.indexer import index_tree
from flows.index.service import index_path
from flows.core.runner import JobRunner
from store import entries, jobs
from tests.flows.index.checks import assert_store_consistent, stored_under, vanishing_mid_walk


@pytest.fixture
def runner(engine):
    r = JobRunner(engine, str(engine.url), use_prefect=False)
    yield r
    r.shutdown()


def make_wide_tree(root: Path, dirs: int = 8, subdirs: int = 3, files: int = 60) -> Path:
    for d in range(dirs):
        for s in range(subdirs):
            folder = root / f"d{d}" / f"s{s}"
            folder.mkdir(parents=True)
            for f in range(files):
                (folder / f"{f}.txt").write_bytes(b"x" * f)
    return root


def cancel_after(engine, root: str, *, files: int, batch_size: int = 100) -> dict:
    """Run a real index job and cancel it through its event once ``files`` files were walked."""
    event = threading.Event()
    job_id = jobs.create_job(engine, root=root)

    def on_progress(p):
        if p.files >= files:
            event.set()

    return run_index_job(engine, job_id=job_id, root=root, cancel_event=event, on_progress=on_progress,
                         batch_size=batch_size)


# --- maxAge --------------------------------------------------------------------------------------------------------


def test_a_folder_created_after_its_parents_scan_is_indexed_without_force(runner, tree):
    assert index_path(runner, root=str(tree), async_=False)["status"] == "completed"
    (tree / "later" / "inner").mkdir(parents=True)
    (tree / "later" / "inner" / "new.txt").write_text("new")
    result = index_path(runner, root=str(tree / "later"), async_=False)
    assert result["skipped"] is False and result["files"] == 1 and result["directories"] == 2
    assert index_path(runner, root=str(tree / "later"), async_=False)["skipped"] is True  # now it was scanned


def test_a_subfolder_of_a_complete_recent_scan_is_skipped(runner, tree):
    index_path(runner, root=str(tree), async_=False)
    skipped = index_path(runner, root=str(tree / "Photos" / "vacation"), async_=False)
    assert skipped["skipped"] is True and "Use force=true" in skipped["skipReason"]


def test_a_folder_whose_last_scan_was_cancelled_is_indexed_again(runner, engine, tmp_path):
    root = make_wide_tree(tmp_path / "wide")
    assert index_path(runner, root=str(root), async_=False)["status"] == "completed"
    (root / "d0" / "s0" / "0.txt").write_text("changed")
    job = cancel_after(engine, str(root / "d0"), files=0, batch_size=20)
    assert job["status"] == "cancelled"
    again = index_path(runner, root=str(root / "d0"), async_=False)
    assert again["skipped"] is False and again["status"] == "completed"
    above = index_path(runner, root=str(root), async_=False)
    assert above["skipped"] is False  # a scan inside it stopped after the last complete scan of it


def test_a_folder_left_incomplete_by_a_cancelled_first_scan_is_not_skipped(runner, engine, tmp_path):
    root = make_wide_tree(tmp_path / "wide")
    assert cancel_after(engine, str(root), files=300)["status"] == "cancelled"
    incomplete = [r["path"] for r in stored_under(engine, str(root)) if r["scan_error"]]
    assert str(root) in incomplete
    for path in incomplete:
        assert jobs.fresh_scan_of(engine, path=path, max_age=3600) is None
    assert index_path(runner, root=incomplete[-1], async_=False)["skipped"] is False


# --- cancellation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("files", [1, 250, 1000])
def test_a_cancelled_first_scan_leaves_every_folder_navigable_with_sizes_that_add_up(engine, tmp_path, files):
    root = make_wide_tree(tmp_path / "wide")
    job = cancel_after(engine, str(root), files=files)
    assert job["status"] == "cancelled"
    rows = assert_store_consistent(engine, str(root))
    assert job["files"] == sum(r["kind"] == "file" for r in rows) < 1440
    assert job["directories"] == sum(r["kind"] == "directory" for r in rows)
    assert job["total_size"] == sum(r["size"] for r in rows if r["kind"] == "file")
    reasons = {r["scan_error"].split(":")[0] for r in rows if r["scan_error"]}
    assert "incomplete" in reasons


def test_a_cancelled_rescan_keeps_sizes_consistent_with_what_is_stored(engine, tmp_path):
    root = make_wide_tree(tmp_path / "wide")
    index_tree(engine, str(root), scan_id=1)
    for d in range(8):  # every folder changes: a file grows, one goes, one comes
        (root / f"d{d}" / "s1" / "5.txt").write_bytes(b"y" * 500)
        (root / f"d{d}" / "s2" / "7.txt").unlink()
        (root / f"d{d}" / "s0" / "new.bin").write_bytes(b"z" * 33)
    job = cancel_after(engine, str(root), files=700)
    assert job["status"] == "cancelled"
    assert_store_consistent(engine, str(root))
    index_tree(engine, str(root), scan_id=job["id"] + 1)
    rows = assert_store_consistent(engine, str(root))
    assert sum(r["kind"] == "file" for r in rows) == 1440
    assert next(r for r in rows if r["path"] == str(root))["size"] == sum(range(60)) * 24 + 8 * (500 - 5 - 7 + 33)


def test_progress_never_goes_down_and_ends_at_100_on_a_first_scan_and_a_rescan(engine, tmp_path):
    root = make_wide_tree(tmp_path / "wide", dirs=4)
    for scan in (1, 2):
        seen: list[float] = []
        index_tree(engine, str(root), scan_id=scan, batch_size=50, progress=lambda p: seen.append(p.percent))  # noqa: B023
        assert len(seen) > 5 and seen == sorted(seen) and seen[-1] == 100.0
        assert max(seen[:-1]) <= 99.0


# --- re-indexing an unchanged tree ---------------------------------------------------------------------------------


def count_writes(engine) -> None:
    """Triggers counting every insert, update and delete on entries: what a re-index really wrote."""
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE entry_writes (n INTEGER NOT NULL)")
        conn.exec_driver_sql("INSERT INTO entry_writes VALUES (0)")
        for op in ("INSERT", "UPDATE", "DELETE"):
            conn.exec_driver_sql(f"CREATE TRIGGER count_{op.lower()} AFTER {op} ON entries "
                                 "BEGIN UPDATE entry_writes SET n = n + 1; END")


def writes(engine) -> int:
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT n FROM entry_writes").scalar_one()


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_reindex_of_an_unchanged_tree_writes_no_rows(engine, tmp_path, monkeypatch, writer):
    if writer == "thread":
        monkeypatch.setenv("ASSAY_INDEX_WRITER", "thread")
    root = make_wide_tree(tmp_path / "wide")
    first = index_tree(engine, str(root), scan_id=1, batch_size=100)
    count_writes(engine)
    again = index_tree(engine, str(root), scan_id=2, batch_size=100)
    assert writes(engine) == 0 and again.written == 0 and again.removed == 0
    assert (again.files, again.directories, again.total_size) == (first.files, first.directories, first.total_size)

    target = root / "d3" / "s1" / "9.txt"
    target.write_bytes(b"longer than before")
    third = index_tree(engine, str(root), scan_id=3, batch_size=100)
    # the file, its folder and the two above it (their sizes changed); nothing else
    assert third.written == 4 and writes(engine) == 4
    with engine.connect() as conn:
        rewritten = {r[0] for r in conn.execute(entries.T.select().with_only_columns(entries.T.c.path)
                                                .where(entries.T.c.scan_id == 3))}
    assert rewritten == {str(target), str(target.parent), str(root / "d3"), str(root)}


# --- the walk against an independent listing ----------------------------------------------------------------------


def awkward_tree(root: Path) -> Path:
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "dir" / "sub" / "a.txt").write_text("aaaa")
    (root / "dir" / ".hidden").write_text("h")
    (root / ".hidden-dir").mkdir()
    (root / ".hidden-dir" / "x.md").write_text("xx")
    (root / "file.jpg").write_bytes(b"j" * 300)
    os.symlink(root / "file.jpg", root / "link-to-file")
    os.symlink(root / "dir", root / "link-to-dir")
    os.symlink(root / "nowhere", root / "dangling")
    os.symlink(root, root / "dir" / "loop")
    os.mkfifo(root / "fifo")
    try:
        with open(os.path.join(os.fsencode(root), b"bad\xff.txt"), "wb") as fh:
            fh.write(b"b")
    except OSError:
        pass
    for i in range(30):
        (root / "dir" / f"vanish{i}.txt").write_text("v")
    return root


def oracle(root: Path) -> dict[str, tuple]:
    """path -> (kind, size) by os.walk and lstat, links not followed, names that are not UTF-8 left out."""
    out = {}
    kinds = {0o040000: "directory", 0o100000: "file", 0o120000: "symlink"}

    def add(path: str) -> None:
        st = os.lstat(path)
        kind = kinds.get(st.st_mode & 0o170000, "other")
        out[path] = (kind, st.st_size if kind == "file" else 0)

    add(str(root))
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                continue
            add(path)
    for path, (kind, _) in list(out.items()):  # directory sizes: the sum of the files below
        if kind == "directory":
            out[path] = (kind, sum(s for p, (k, s) in out.items() if k == "file" and p.startswith(path + "/")))
    return out


def test_the_walk_stores_exactly_what_an_independent_listing_sees(engine, tmp_path):
    root = awkward_tree(tmp_path / "awkward")
    victims = {str(root / "dir" / f"vanish{i}.txt") for i in range(0, 30, 3)}
    with vanishing_mid_walk(victims):  # files deleted between the listing and their stat
        result = index_tree(engine, str(root), scan_id=1)
    stored = {r["path"]: (r["kind"], r["size"]) for r in stored_under(engine, str(root))}
    assert stored == oracle(root)
    reasons = sorted({reason for _, reason in result.issues})
    assert "vanished during the walk" in reasons
    assert sum(reason == "vanished during the walk" for _, reason in result.issues) == 10
    assert stored[str(root / "dangling")] == ("symlink", 0) and stored[str(root / "fifo")] == ("other", 0)
    assert str(root / "link-to-dir" / "sub") not in stored  # links are recorded, not followed

    (root / "dir" / "sub" / "a.txt").unlink()
    (root / "dir" / "sub" / "b.txt").write_text("bb")
    index_tree(engine, str(root), scan_id=2)
    stored = {r["path"]: (r["kind"], r["size"]) for r in stored_under(engine, str(root))}
    assert stored == oracle(root)
    assert_store_consistent(engine, str(root))


def test_following_links_indexes_their_targets_once_and_reports_the_loop(engine, tmp_path):
    root = awkward_tree(tmp_path / "awkward")
    result = index_tree(engine, str(root), scan_id=1, follow_symlinks=True)
    stored = {r["path"]: r["kind"] for r in stored_under(engine, str(root))}
    assert stored[str(root / "link-to-file")] == "file"
    assert any("symlink loop" in reason for _, reason in result.issues)
    assert any(reason == "broken symlink" for _, reason in result.issues)
    assert stored[str(root / "dangling")] == "symlink"

"""The streaming indexer, called directly (no MCP, no Prefect)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import func, select

import flows.index.indexer as indexer_mod
import flows.index.writers as writers_mod
from flows.index.flow import run_index_job
from flows.index.indexer import Cancelled, index_tree
from store import entries, jobs
from store.errors import NoSpace
from tests.flows.index.checks import vanishing_mid_walk


def entry(engine, path) -> dict | None:
    row = entries.get_entry(engine, path=str(path))
    return dict(row) if row else None


def test_counts_kinds_and_directory_sizes_aggregate_bottom_up(engine, tree):
    result = index_tree(engine, str(tree), scan_id=1)
    assert (result.files, result.directories) == (10, 9)
    assert result.total_size == 3000 + 2000 + 5000 + 10 + 40000 + 8000 + 1500 + 120 + 7 + 1
    assert entry(engine, tree)["size"] == result.total_size
    assert entry(engine, tree / "Photos")["size"] == 10010
    assert entry(engine, tree / "Photos" / "vacation")["size"] == 5000
    assert entry(engine, tree / "docs" / "deep")["size"] == 7
    assert entry(engine, tree / "empty")["size"] == 0
    beach = entry(engine, tree / "Photos" / "vacation" / "beach.jpg")
    assert beach["kind"] == "file" and beach["extension"] == ".jpg" and beach["media_type"] == "image"
    assert beach["parent"] == str(tree / "Photos" / "vacation")
    assert entry(engine, tree / ".hidden")["extension"] == ""


def test_reindex_keeps_ids_removes_vanished_entries_and_adds_new_ones(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    kept_id = entry(engine, tree / "Photos" / "photo.jpg")["id"]
    (tree / "Videos" / "movie.mp4").unlink()
    (tree / "docs" / "deep" / "a" / "b" / "c.txt").unlink()
    (tree / "docs" / "deep" / "a" / "b").rmdir()
    (tree / "new.txt").write_text("hello")
    result = index_tree(engine, str(tree), scan_id=2)
    assert result.removed == 3  # movie.mp4, c.txt and the directory b
    assert entry(engine, tree / "Videos" / "movie.mp4") is None
    assert entry(engine, tree / "docs" / "deep" / "a" / "b") is None
    assert entry(engine, tree / "new.txt")["size"] == 5
    assert entry(engine, tree / "Photos" / "photo.jpg")["id"] == kept_id
    assert entry(engine, tree / "Videos")["size"] == 8000


def test_sweep_of_a_subfolder_leaves_siblings_with_similar_names_alone(engine, tmp_path):
    for name in ("a", "a_b", "a%b", "a-b", "ab"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.txt").write_text("x")
    index_tree(engine, str(tmp_path), scan_id=1)
    (tmp_path / "a" / "f.txt").unlink()
    result = index_tree(engine, str(tmp_path / "a"), scan_id=2)
    assert result.removed == 1
    for name in ("a_b", "a%b", "a-b", "ab"):
        assert entry(engine, tmp_path / name / "f.txt") is not None


def test_indexing_a_subfolder_refreshes_the_sizes_of_its_ancestors(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    (tree / "Photos" / "vacation" / "more.jpg").write_bytes(b"y" * 1000)
    index_tree(engine, str(tree / "Photos" / "vacation"), scan_id=2)
    assert entry(engine, tree / "Photos" / "vacation")["size"] == 6000
    assert entry(engine, tree / "Photos")["size"] == 11010
    assert entry(engine, tree)["size"] == 59638 + 1000


def test_a_single_file_can_be_indexed(engine, tree):
    result = index_tree(engine, str(tree / "docs" / "readme.md"), scan_id=1)
    assert result.files == 1
    assert entry(engine, tree / "docs" / "readme.md")["media_type"] == "text"


def test_unreadable_directory_is_recorded_skipped_and_its_known_contents_kept(engine, tree, monkeypatch):
    index_tree(engine, str(tree), scan_id=1)
    locked = str(tree / "Photos" / "vacation")
    real_scandir = os.scandir

    def scandir(path):
        if str(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    # root bypasses file permissions, so the unreadable directory is simulated at the os.scandir seam
    monkeypatch.setattr(indexer_mod.os, "scandir", scandir)
    result = index_tree(engine, str(tree), scan_id=2)
    assert (locked, "unreadable: Permission denied") in result.issues
    assert entry(engine, tree / "Photos" / "vacation" / "beach.jpg") is not None  # not swept: contents unknown
    assert result.files == 8


def test_file_vanishing_mid_walk_is_recorded_and_skipped(engine, tree):
    victim = tree / "docs" / "readme.md"
    with vanishing_mid_walk({str(victim)}):
        result = index_tree(engine, str(tree), scan_id=1)
    assert (str(victim), "vanished during the walk") in result.issues
    assert entry(engine, victim) is None
    assert result.files == 9


def test_symlinks_are_recorded_not_followed_unless_asked(engine, tree, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    os.symlink(outside, tree / "link-out")
    os.symlink(tree / "Photos", tree / "Photos" / "loop")
    result = index_tree(engine, str(tree), scan_id=1)
    assert entry(engine, tree / "link-out")["kind"] == "symlink"
    assert entry(engine, tree / "link-out" / "secret.txt") is None
    assert result.files == 10
    followed = index_tree(engine, str(tree), scan_id=2, follow_symlinks=True)
    assert entry(engine, tree / "link-out" / "secret.txt") is not None
    assert any("symlink loop" in reason for _, reason in followed.issues)


def test_cancel_stops_the_walk_keeps_what_it_wrote_and_marks_the_folder_it_was_in(engine, tmp_path):
    root = tmp_path / "big"
    for d in range(20):
        (root / f"d{d:02}").mkdir(parents=True)
        for f in range(50):
            (root / f"d{d:02}" / f"{f}.txt").write_text("x")
    calls = {"n": 0}

    def should_cancel():
        calls["n"] += 1
        return calls["n"] >= 3

    with pytest.raises(Cancelled) as stopped:
        index_tree(engine, str(root), scan_id=1, batch_size=100, should_cancel=should_cancel)
    done = stopped.value.result
    with engine.connect() as conn:
        rows = conn.execute(entries.T.select().where(entries.subtree_clause(str(root)))).mappings().all()
    assert 200 <= len(rows) < 1021
    assert sum(r["kind"] == "file" for r in rows) == done.files
    assert sum(r["kind"] == "directory" for r in rows) == done.directories
    top = next(r for r in rows if r["path"] == str(root))
    assert top["scan_error"].startswith("incomplete: index job 1 was cancelled")
    assert top["size"] == sum(r["size"] for r in rows if r["parent"] == str(root))


def test_progress_moves_and_ends_at_100(engine, tree):
    seen: list[float] = []
    index_tree(engine, str(tree), scan_id=1, batch_size=3, progress=lambda p: seen.append(p.percent))
    assert seen == sorted(seen) or max(seen[:-1]) <= 99
    assert len(seen) > 3 and seen[-1] == 100.0


def test_index_job_records_status_counts_and_issues(engine, tree):
    job_id = jobs.create_job(engine, root=str(tree))
    job = run_index_job(engine, job_id=job_id, root=str(tree))
    assert job["status"] == "completed" and job["progress"] == 100.0
    assert (job["files"], job["directories"]) == (10, 9)
    assert job["started_at"] is not None and job["duration_ms"] is not None


def test_index_job_cancelled_through_its_event_ends_cancelled(engine, tmp_path):
    import threading

    root = tmp_path / "t"
    for d in range(10):
        (root / str(d)).mkdir(parents=True)
        for f in range(100):
            (root / str(d) / str(f)).write_text("x")
    event = threading.Event()
    job_id = jobs.create_job(engine, root=str(root))
    job = run_index_job(engine, job_id=job_id, root=str(root), cancel_event=event, batch_size=50,
                        on_progress=lambda p: event.set())
    assert job["status"] == "cancelled"
    assert "what the walk wrote was kept" in job["error_message"]
    assert job["files"] == entries.count_subtree(engine, root=str(root)) - job["directories"]


def test_an_index_job_a_full_disk_stopped_says_no_space_and_counts_only_the_files_it_wrote(engine, tmp_path,
                                                                                          monkeypatch):
    monkeypatch.setenv("ASSAY_INDEX_WRITER", "thread")
    root = tmp_path / "t"
    for d in range(10):
        (root / str(d)).mkdir(parents=True)
        for f in range(100):
            (root / str(d) / f"{f}.txt").write_text("x")
    real, applied = writers_mod._apply, []

    def apply(conn, frame, **kw):  # the third batch finds the disk full
        if len(applied) == 2:
            raise NoSpace("the disk holding the store is full: the last write was rolled back")
        applied.append(frame)
        return real(conn, frame, **kw)

    monkeypatch.setattr(writers_mod, "_apply", apply)
    job_id = jobs.create_job(engine, root=str(root))
    with pytest.raises(NoSpace):
        run_index_job(engine, job_id=job_id, root=str(root), batch_size=50)
    job = jobs.get_job(engine, job_id=job_id)
    assert job["status"] == "failed"
    assert job["error_message"] == "NO_SPACE: the disk holding the store is full: the last write was rolled back"
    written = sum(1 for rows, _ in applied for row in rows if row[3] == "file")
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(entries.T).where(entries.T.c.kind == "file")).scalar()
    assert 0 < job["files"] == written == stored < 1000  # not the files the walk listed beyond what it wrote


def test_cancelling_a_pending_job_means_it_never_runs(engine, tree):
    job_id = jobs.create_job(engine, root=str(tree))
    jobs.request_cancel(engine, job_id=job_id)
    job = run_index_job(engine, job_id=job_id, root=str(tree))
    assert job["status"] == "cancelled"
    assert entries.count_entries(engine) == 0


def test_paths_are_stored_canonical(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    assert all(Path(r["path"]).is_absolute() and ".." not in r["path"]
               for r in entries.list_children(engine, path=str(tree), limit=100)[0])


@pytest.mark.parametrize("writer", ["process", "thread"])
def test_trees_bigger_than_a_batch_are_written_by_the_writer_process_or_thread(engine, tmp_path, monkeypatch, writer):
    if writer == "thread":
        monkeypatch.setenv("ASSAY_INDEX_WRITER", "thread")
    root = tmp_path / "t"
    for d in range(5):
        (root / f"d{d}").mkdir(parents=True)
        for f in range(40):
            (root / f"d{d}" / f"{f}.jpg").write_bytes(b"x" * f)
    result = index_tree(engine, str(root), scan_id=1, batch_size=16)
    assert (result.files, result.directories) == (200, 6)
    assert entries.count_subtree(engine, root=str(root)) == 206
    assert entry(engine, root / "d3")["size"] == sum(range(40))
    assert entry(engine, root / "d3" / "7.jpg")["media_type"] == "image"
    (root / "d4" / "0.jpg").unlink()
    again = index_tree(engine, str(root), scan_id=2, batch_size=16)
    assert again.removed == 1 and entries.count_subtree(engine, root=str(root)) == 205


def test_a_failing_writer_process_fails_the_scan_with_its_error(engine, tmp_path, monkeypatch):
    from store import entries as store_entries

    monkeypatch.setattr(store_entries, "SQLITE_UPSERT", "INSERT INTO no_such_table VALUES (?)")
    root = tmp_path / "t"
    root.mkdir()
    for f in range(50):
        (root / f"{f}.txt").write_text("x")
    with pytest.raises(RuntimeError, match="no_such_table"):
        index_tree(engine, str(root), scan_id=1, batch_size=10)
    assert entries.count_subtree(engine, root=str(root)) == 0


def test_names_that_are_not_utf8_are_recorded_and_skipped(engine, tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    (root / "fine.txt").write_text("x")
    try:
        with open(os.path.join(os.fsencode(root), b"bad\xff.txt"), "wb") as fh:
            fh.write(b"x")
    except OSError:
        pytest.skip("this filesystem refuses non-UTF-8 names")
    result = index_tree(engine, str(root), scan_id=1)
    assert result.files == 1
    assert [reason for _, reason in result.issues] == ["name is not valid UTF-8; skipped (rename it to index it)"]
    assert "bad\\xff.txt" in result.issues[0][0]


def test_trash_folders_are_not_indexed_and_one_indexed_before_leaves_the_store(engine, tmp_path):
    tmp_path = tmp_path / "root"  # the store's file lives in tmp_path
    (tmp_path / "docs").mkdir(parents=True)
    (tmp_path / "docs" / "a.txt").write_text("kept")
    (tmp_path / "trash").mkdir()  # a folder a person named trash: indexed
    (tmp_path / "trash" / "b.txt").write_text("kept too")
    volume = tmp_path / ".Trash-1000"
    for folder in (volume / "files", volume / "info", tmp_path / "Trash" / "files", tmp_path / "Trash" / "info"):
        folder.mkdir(parents=True)
    (volume / "files" / "gone.txt").write_text("trashed")
    (tmp_path / "Trash" / "files" / "old.txt").write_text("trashed")
    result = index_tree(engine, str(tmp_path), scan_id=1)
    assert result.files == 2 and entry(engine, tmp_path)["size"] == len("kept") + len("kept too")
    assert entry(engine, volume) is None and entry(engine, tmp_path / "Trash") is None
    assert entry(engine, tmp_path / "trash" / "b.txt") is not None

    (tmp_path / "Trash" / "info").rmdir()  # no longer a trash: indexed now ...
    index_tree(engine, str(tmp_path), scan_id=2)
    assert entry(engine, tmp_path / "Trash" / "files" / "old.txt") is not None
    (tmp_path / "Trash" / "info").mkdir()  # ... and a trash again: it leaves the store
    index_tree(engine, str(tmp_path), scan_id=3)
    assert entry(engine, tmp_path / "Trash") is None and entry(engine, tmp_path / "Trash" / "files" / "old.txt") is None
    assert entry(engine, tmp_path)["size"] == len("kept") + len("kept too")


def test_assays_own_folders_are_not_indexed_and_ones_indexed_before_leave_the_store(engine, data_dir, tmp_path,
                                                                                   monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("kept")
    shared = tmp_path / "shared-cache"  # cluster.cache_dir, outside the data dir
    (shared / "ab").mkdir(parents=True)
    (shared / "ab" / "thumb.jpg").write_bytes(b"t" * 10)
    (data_dir / "cache" / "cd").mkdir(parents=True)
    (data_dir / "cache" / "cd" / "thumb.jpg").write_bytes(b"t" * 10)
    monkeypatch.setattr("flows.core.capability._data_dir", tmp_path / "elsewhere")
    index_tree(engine, str(tmp_path), scan_id=1)  # before: the data dir (with the store in it) is a folder like any
    assert entry(engine, data_dir / "assay.db") is not None and entry(engine, shared / "ab" / "thumb.jpg") is not None

    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(shared))
    result = index_tree(engine, str(tmp_path), scan_id=2)
    assert entry(engine, data_dir) is None and entry(engine, shared) is None
    with engine.connect() as conn:
        stored = [r[0] for r in conn.execute(select(entries.T.c.path))]
    assert sorted(stored) == sorted([str(tmp_path), str(tmp_path / "docs"), str(tmp_path / "docs" / "a.txt")])
    assert result.files == 1 and entry(engine, tmp_path)["size"] == len("kept")

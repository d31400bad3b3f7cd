"""The move journal: a rename or move cut short between the disk and the store (a process killed) is finished or
undone at the next start, by what the disk shows; a call that ends normally leaves nothing in flight."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sqlalchemy import select

import flows.fileops.operations as operations
from flows.fileops.journal import MoveJournal, interrupted
from flows.fileops.recovery import recover_moves
from flows.index.indexer import index_tree
from store import jobs
from tests.flows.fileops.test_operations import add_to_set, members, row
from tests.flows.index.checks import assert_store_consistent


class Killed(BaseException):
    """The process dies here: nothing after it runs (not even the call's end)."""


@pytest.fixture
def indexed(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    return tree


def move_runs(engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(jobs.J).where(jobs.J.c.kind == "move")).mappings()]


def test_a_call_that_ends_leaves_a_completed_move_run_with_nothing_in_flight(engine, roots, indexed):
    res = operations.move_files(engine, roots, moves=[
        {"from": str(indexed / "docs" / "readme.md"), "to": str(indexed / "new" / "readme.md")},
        {"from": str(indexed / "nope.txt"), "to": str(indexed / "x.txt")}])
    assert res["successCount"] == 1
    [run] = move_runs(engine)
    assert run["status"] == "completed" and run["files"] == 1
    assert json.loads(run["params_json"]) == {"tool": "move-files", "in_flight": None}
    assert operations.move_files(engine, roots, moves=[{"from": str(indexed / "empty"), "to": str(indexed / "e2")}],
                                 dry_run=True)["successCount"] == 1
    assert len(move_runs(engine)) == 1  # a dry run changes nothing, and writes nothing down


def test_a_move_killed_after_the_disk_changed_is_finished_in_the_store_at_the_next_start(engine, roots, indexed,
                                                                                       monkeypatch):
    old, new = indexed / "Photos" / "vacation", indexed / "Trips" / "2024" / "vacation"
    add_to_set(engine, "trip", old / "beach.jpg")
    beach = row(engine, old / "beach.jpg")["id"]

    def killed(*args, **kwargs):
        raise Killed()

    monkeypatch.setattr(operations, "sync_move", killed)
    with pytest.raises(Killed):
        operations.move_files(engine, roots, moves=[{"from": str(old), "to": str(new)}])
    monkeypatch.undo()
    assert new.is_dir() and not old.exists() and row(engine, old / "beach.jpg") is not None  # disk and store apart
    with engine.begin() as conn:  # the server's start-up reaper runs first
        conn.execute(jobs.J.update().where(jobs.J.c.status == "running").values(status="failed"))
    assert [intent["from"] for _, intent in interrupted(engine)] == [str(old)]

    [message] = recover_moves(engine)
    assert "the store follows" in message
    assert row(engine, old / "beach.jpg") is None and row(engine, new / "beach.jpg")["id"] == beach
    assert members(engine, "trip") == {str(new / "beach.jpg")}
    assert row(engine, indexed / "Trips")["kind"] == "directory"  # the folders made for it are stored too
    assert_store_consistent(engine, str(indexed))
    assert interrupted(engine) == [] and recover_moves(engine) == []
    assert move_runs(engine)[0]["error_message"] == message


def test_a_move_killed_before_the_disk_changed_is_undone(engine, roots, indexed):
    src, dst = indexed / "docs" / "readme.md", indexed / "a" / "b" / "readme.md"
    journal = MoveJournal(engine, "move-files")
    journal.begin(src=str(src), dst=str(dst), made=[str(indexed / "a"), str(indexed / "a" / "b")], mode="move")
    (indexed / "a" / "b").mkdir(parents=True)  # the folders were made, then the process died
    jobs.reap_orphans(engine)
    [message] = recover_moves(engine)
    assert "nothing was moved" in message
    assert src.exists() and not (indexed / "a").exists() and row(engine, src) is not None
    assert_store_consistent(engine, str(indexed))


def test_a_copy_across_filesystems_cut_short_in_removing_its_source_is_completed(engine, roots, indexed):
    src, dst = indexed / "Videos", indexed / "Archive" / "Videos"
    journal = MoveJournal(engine, "move-files")
    journal.begin(src=str(src), dst=str(dst), made=[str(indexed / "Archive")], mode="move")
    journal.copying()
    (indexed / "Archive").mkdir()
    (indexed / "Archive" / ".Videos.assay-partial-1234").mkdir()
    for name in os.listdir(src):  # the copy, renamed into place; then one source file of two was removed
        (indexed / "Archive" / ".Videos.assay-partial-1234" / name).write_bytes((src / name).read_bytes())
    (indexed / "Archive" / ".Videos.assay-partial-1234").rename(dst)
    (src / "movie.mp4").unlink()
    jobs.reap_orphans(engine)
    [message] = recover_moves(engine)
    assert "the source is removed" in message
    assert not src.exists() and sorted(p.name for p in dst.iterdir()) == ["clip.mov", "movie.mp4"]
    assert row(engine, dst / "movie.mp4")["size"] == 40000 and row(engine, src) is None
    assert_store_consistent(engine, str(indexed))


def test_a_partial_copy_left_beside_the_target_is_removed_and_the_source_stays(engine, roots, indexed):
    src, dst = indexed / "Videos" / "clip.mov", indexed / "Other" / "clip.mov"
    (indexed / "Other").mkdir()
    partial = indexed / "Other" / ".clip.mov.assay-partial-abcd"
    partial.write_bytes(b"half")
    journal = MoveJournal(engine, "move-files")
    journal.begin(src=str(src), dst=str(dst), made=[], mode="move")
    journal.copying()
    jobs.reap_orphans(engine)
    recover_moves(engine)
    assert not partial.exists() and src.exists() and (indexed / "Other").is_dir()


def test_a_disk_changed_since_is_left_as_found(engine, roots, indexed):
    src, dst = indexed / "docs" / "readme.md", indexed / "docs" / "moved.md"
    journal = MoveJournal(engine, "rename-files")
    journal.begin(src=str(src), dst=str(dst), made=[], mode="rename")
    Path(dst).write_text("someone else's")
    jobs.reap_orphans(engine)
    [message] = recover_moves(engine)
    assert "left as found" in message and src.exists() and dst.exists() and row(engine, src) is not None


def test_a_store_that_cannot_follow_stops_the_call_and_keeps_the_item_for_the_next_start(engine, roots, indexed,
                                                                                         monkeypatch):
    real = operations.sync_move
    calls = []

    def failing(*args, **kwargs):
        calls.append(kwargs["src"])
        raise RuntimeError("disk full")

    monkeypatch.setattr(operations, "sync_move", failing)
    a, b = indexed / "docs" / "readme.md", indexed / "Photos" / "notes.txt"
    res = operations.move_files(engine, roots, moves=[{"from": str(a), "to": str(indexed / "a.md")},
                                                      {"from": str(b), "to": str(indexed / "b.txt")}])
    assert [r["status"] for r in res["results"]] == ["error", "error"] and calls == [str(a)]
    assert "the store could not follow" in res["results"][1]["error"] and b.exists()
    assert move_runs(engine)[0]["status"] == "failed"
    monkeypatch.setattr(operations, "sync_move", real)
    assert "the store follows" in recover_moves(engine)[0]
    assert row(engine, indexed / "a.md") is not None and row(engine, a) is None

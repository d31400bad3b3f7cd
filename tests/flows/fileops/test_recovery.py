"""Recovery at start: a file operation cut short between the journal and the disk (a process killed) is finished or
rolled back at the next start, by what the disk shows, on the journal's table; one of a live plan run is left alone."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, insert

import flows.fileops.operations as operations
from flows.fileops import destinations, placing, trash, trashing
from flows.fileops import disk as diskops
from flows.fileops.journal import before
from flows.fileops.recovery import recover_moves
from flows.fileops.undo import undo
from flows.index.indexer import index_tree
from flows.media.hashing import hash_file
from store import file_journal, jobs, kept
from store.file_journal import Origin
from store.models import Plan, PlanExecution
from tests.conftest import backend_engine
from tests.flows.fileops.test_operations import add_to_set, members, row
from tests.flows.index.checks import assert_store_consistent

TOOL = Origin.for_tool("move-files")


class Killed(BaseException):
    """The process dies here: nothing after it runs (not even the call's end)."""


@pytest.fixture
def indexed(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    return tree


def written(engine, op: str, src: Path, dst: Path | None, *, made: Sequence[Path] = (), copying: bool = False,
            origin: Origin = TOOL) -> int:
    """An operation written down as the call does before the disk changes (then the process died)."""
    op_id = file_journal.begin(engine, origin, op=op, src=str(src), dst=str(dst) if dst else None,
                               made=[str(m) for m in made], **before(engine, str(src)).columns())
    if copying:
        file_journal.copying(engine, op_id)
    return op_id


def state(engine, op_id: int) -> tuple[str, str | None]:
    found = file_journal.get(engine, op_id)
    assert found is not None
    return found["state"], found["error"]


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
    [flying] = file_journal.in_flight(engine)
    assert (flying["src"], flying["kind"], flying["made"]) == (str(old), "directory",
                                                              [str(indexed / "Trips"), str(indexed / "Trips/2024")])

    [message] = recover_moves(engine)
    assert "the store follows" in message
    assert row(engine, old / "beach.jpg") is None and row(engine, new / "beach.jpg")["id"] == beach
    assert members(engine, "trip") == {str(new / "beach.jpg")}
    assert row(engine, indexed / "Trips")["kind"] == "directory"  # the folders made for it are stored too
    assert_store_consistent(engine, str(indexed))
    assert file_journal.in_flight(engine) == [] and recover_moves(engine) == []
    assert state(engine, flying["id"]) == ("done", message)


def test_a_move_killed_before_the_disk_changed_is_rolled_back(engine, roots, indexed):
    src, dst = indexed / "docs" / "readme.md", indexed / "a" / "b" / "readme.md"
    op_id = written(engine, "move", src, dst, made=[indexed / "a", indexed / "a" / "b"])
    (indexed / "a" / "b").mkdir(parents=True)  # the folders were made, then the process died
    [message] = recover_moves(engine)
    assert "nothing was moved" in message and state(engine, op_id) == ("failed", message)
    assert src.exists() and not (indexed / "a").exists() and row(engine, src) is not None
    assert_store_consistent(engine, str(indexed))


def test_a_copy_across_filesystems_cut_short_in_removing_its_source_is_completed(engine, roots, indexed):
    src, dst = indexed / "Videos", indexed / "Archive" / "Videos"
    op_id = written(engine, "move", src, dst, made=[indexed / "Archive"], copying=True)
    (indexed / "Archive").mkdir()
    (indexed / "Archive" / ".Videos.assay-partial-1234").mkdir()
    for name in os.listdir(src):  # the copy, renamed into place; then one source file of two was removed
        (indexed / "Archive" / ".Videos.assay-partial-1234" / name).write_bytes((src / name).read_bytes())
    (indexed / "Archive" / ".Videos.assay-partial-1234").rename(dst)
    (src / "movie.mp4").unlink()
    [message] = recover_moves(engine)
    assert "the source is removed" in message and state(engine, op_id)[0] == "done"
    assert not src.exists() and sorted(p.name for p in dst.iterdir()) == ["clip.mov", "movie.mp4"]
    assert row(engine, dst / "movie.mp4")["size"] == 40000 and row(engine, src) is None
    assert_store_consistent(engine, str(indexed))


def test_a_partial_copy_left_beside_the_target_is_removed_and_the_source_stays(engine, roots, indexed):
    src, dst = indexed / "Videos" / "clip.mov", indexed / "Other" / "clip.mov"
    (indexed / "Other").mkdir()
    partial = indexed / "Other" / ".clip.mov.assay-partial-abcd"
    partial.write_bytes(b"half")
    op_id = written(engine, "move", src, dst, copying=True)
    recover_moves(engine)
    assert not partial.exists() and src.exists() and (indexed / "Other").is_dir()
    assert state(engine, op_id)[0] == "failed"


def test_a_disk_changed_since_is_left_as_found(engine, roots, indexed):
    src, dst = indexed / "docs" / "readme.md", indexed / "docs" / "moved.md"
    op_id = written(engine, "rename", src, dst)
    Path(dst).write_text("someone else's")
    [message] = recover_moves(engine)
    assert "left as found" in message and src.exists() and dst.exists() and row(engine, src) is not None
    assert state(engine, op_id) == ("failed", message)


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
    assert [r["src"] for r in file_journal.of_call(engine, res["callId"])] == [str(a)]  # b was never begun
    monkeypatch.setattr(operations, "sync_move", real)
    assert "the store follows" in recover_moves(engine)[0]
    assert row(engine, indexed / "a.md") is not None and row(engine, a) is None


def test_deletes_trashes_and_copies_in_flight_are_settled_by_what_the_disk_shows(engine, roots, indexed, tmp_path):
    gone, kept = indexed / "docs" / "readme.md", indexed / "Photos" / "notes.txt"
    folder = indexed / "docs" / "deep"
    trashed, trash = indexed / "Videos" / "clip.mov", tmp_path / "Trash" / "files" / "clip.mov"
    copied, copy = indexed / "Photos" / "photo.jpg", indexed / "Backup" / "photo.jpg"
    uncopied = indexed / "Photos" / "vacation" / "beach.jpg"
    ids = {"gone": written(engine, "delete", gone, None), "kept": written(engine, "delete", kept, None),
           "folder": written(engine, "delete", folder, None),
           "trashed": written(engine, "trash", trashed, trash),
           "copied": written(engine, "copy", copied, copy, made=[indexed / "Backup"]),
           "uncopied": written(engine, "copy", uncopied, indexed / "Backup2" / "beach.jpg",
                               made=[indexed / "Backup2"])}
    gone.unlink()  # the delete happened, the store did not follow
    (folder / "a" / "b" / "c.txt").unlink()  # a folder's delete cut short
    trash.parent.mkdir(parents=True)
    trashed.rename(trash)
    copy.parent.mkdir()
    copy.write_bytes(copied.read_bytes())
    (indexed / "Backup2").mkdir()
    recover_moves(engine)
    states = {name: state(engine, op_id)[0] for name, op_id in ids.items()}
    assert states == {"gone": "done", "kept": "failed", "folder": "failed", "trashed": "done", "copied": "done",
                      "uncopied": "failed"}
    assert row(engine, gone) is None and row(engine, kept) is not None and row(engine, trashed) is None
    assert row(engine, folder / "a" / "b" / "c.txt") is None and row(engine, folder / "a") is not None
    assert row(engine, copy)["size"] == 5000 and row(engine, copied) is not None
    assert not (indexed / "Backup2").exists() and uncopied.exists()
    assert "it was not deleted" in state(engine, ids["kept"])[1]
    assert_store_consistent(engine, str(indexed))


def test_a_copy_whose_target_is_not_the_bytes_written_down_is_left_as_found(engine, roots, indexed):
    src, dst = indexed / "docs" / "readme.md", indexed / "docs" / "copy.md"
    op_id = written(engine, "copy", src, dst)
    dst.write_bytes(b"y" * 120)  # the same size, other bytes
    [message] = recover_moves(engine)
    assert "not the copy written down" in message and state(engine, op_id)[0] == "failed" and dst.exists()
    assert file_journal.get(engine, op_id)["content_hash"] == hash_file(str(src))


def test_an_operation_of_a_plan_run_still_alive_is_left_to_it(engine, roots, indexed):
    with engine.begin() as conn:
        plan = conn.execute(insert(Plan.__table__).values(name="p", definition_json="{}")).inserted_primary_key[0]
    run = jobs.create_job(engine, root=str(indexed), kind="plan")
    jobs.mark_running(engine, job_id=run)
    with engine.begin() as conn:
        execution = conn.execute(insert(PlanExecution.__table__).values(
            plan_id=plan, plan_name="p", run_id=run)).inserted_primary_key[0]
    src, dst = indexed / "docs" / "readme.md", indexed / "docs" / "moved.md"
    op_id = written(engine, "rename", src, dst, origin=Origin.for_execution(execution))
    assert recover_moves(engine) == [] and state(engine, op_id)[0] == "intent"  # a pool's worker holds the run
    jobs.finish_job(engine, job_id=run, status="failed")  # the worker died and its run was given up
    assert "nothing was moved" in recover_moves(engine)[0] and state(engine, op_id)[0] == "failed"


def test_a_plan_batch_cut_short_has_the_folders_its_files_are_in_indexed_though_its_rows_name_none(engine, roots,
                                                                                                 indexed):
    """A plan writes a whole batch's intents before it makes any folder (flows/fileops/placing.py), so no row names
    the dated folders the batch made: the files moved into them, and a folder made for a file whose rename never
    came, are in the store after the recovery, as on disk (without them the moved entries were orphans)."""
    sorted_ = indexed / "sorted"
    moves = {indexed / "docs" / "readme.md": sorted_ / "2020-01" / "readme.md",
             indexed / "Photos" / "notes.txt": sorted_ / "2020-01" / "notes.txt",
             indexed / "Photos" / "photo.jpg": sorted_ / "2020-02" / "photo.jpg"}
    ids = file_journal.begin_many(engine, Origin.for_tool("move outcome"), [
        {"op": "move", "src": str(src), "dst": str(dst), **before(engine, str(src)).columns()}
        for src, dst in moves.items()])
    entry = {src: row(engine, src)["id"] for src in moves}
    for src, dst in moves.items():  # the batch's folders made, two of its files renamed, then the process died
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.parent.name == "2020-01":
            src.rename(dst)
    messages = recover_moves(engine)
    assert [state(engine, op_id)[0] for op_id in ids] == ["done", "done", "failed"], messages
    for src, dst in moves.items():
        placed = dst if dst.parent.name == "2020-01" else src
        assert row(engine, placed)["id"] == entry[src]
    assert {row(engine, d)["kind"] for d in (sorted_, sorted_ / "2020-01", sorted_ / "2020-02")} == {"directory"}
    assert_store_consistent(engine, str(indexed))


# --- a plan's batch cut short -----------------------------------------------------------------------------------------


def stored(engine, path: Path) -> dict[str, Any]:
    """The store's row of ``path`` (it must have one)."""
    found = row(engine, path)
    assert found is not None, f"{path} is not in the store"
    return found


def entry_id(engine, path: Path) -> int:
    return int(stored(engine, path)["id"])


def planned_batch(engine, indexed: Path) -> list[destinations.Planned]:
    """Four files to place as a plan's batch does: two into Sorted/a, one into Sorted/b, one into Sorted/c."""
    moves = [("docs/readme.md", "Sorted/a"), ("Photos/notes.txt", "Sorted/a"), ("Photos/photo.jpg", "Sorted/b"),
             ("Videos/clip.mov", "Sorted/c")]
    return [destinations.Planned(entry_id(engine, indexed / src), str(indexed / src), "move",
                                 dst=str(indexed / folder / Path(src).name)) for src, folder in moves]


@pytest.fixture(scope="module", params=[pytest.param("postgresql", marks=pytest.mark.postgres)])
def pg_engine(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "assay_recovery") as eng:
        yield eng


def test_a_plan_batch_cut_short_in_its_renames_is_settled_with_the_folders_it_made(engine, indexed, monkeypatch):
    cut_in_its_renames(engine, indexed, monkeypatch)


def test_a_plan_batch_cut_short_is_settled_on_postgresql_too(pg_engine, tree, monkeypatch):
    index_tree(pg_engine, str(tree), scan_id=1)
    cut_in_its_renames(pg_engine, tree, monkeypatch)


def cut_in_its_renames(engine, indexed: Path, monkeypatch) -> None:
    """The real executor's batch of four, the process dying at its third rename; the next start settles it."""
    batch = planned_batch(engine, indexed)
    add_to_set(engine, "notes", indexed / "Photos" / "notes.txt")
    ids = {p.src: p.entry_id for p in batch}
    real = diskops.rename_noreplace
    renamed: list[str] = []

    def dies_at_the_third(src: str, dst: str) -> None:
        if len(renamed) == 2:
            raise Killed()  # the folder Sorted/b is made, the file is not moved: the process dies
        real(src, dst)
        renamed.append(src)

    monkeypatch.setattr(diskops, "rename_noreplace", dies_at_the_third)
    with pytest.raises(Killed):
        placing.place(engine, batch, origin=Origin.for_tool("move outcome"))
    monkeypatch.undo()
    flying = file_journal.in_flight(engine)
    assert len(flying) == 4 and all(f["made"] == [] for f in flying)  # the batch's folders are not written down
    assert (indexed / "Sorted" / "b").is_dir() and row(engine, indexed / "Sorted") is None

    messages = recover_moves(engine)
    assert ["the store follows" in m for m in messages] == [True, True, False, False]
    assert all("nothing was moved" in m for m in messages[2:])
    for p in batch[:2]:
        assert entry_id(engine, Path(str(p.dst))) == ids[p.src] and row(engine, p.src) is None
    for p in batch[2:]:
        assert Path(p.src).exists() and entry_id(engine, Path(p.src)) == ids[p.src]
    assert members(engine, "notes") == {batch[1].dst}
    for folder in ("Sorted", "Sorted/a", "Sorted/b"):  # on disk, so in the store: Sorted/b stays, empty
        assert stored(engine, indexed / folder)["kind"] == "directory"
    assert not (indexed / "Sorted" / "c").exists()
    assert stored(engine, indexed / "Sorted" / "a")["size"] == 130
    assert_store_consistent(engine, str(indexed))
    assert [state(engine, f["id"])[0] for f in flying] == ["done", "done", "failed", "failed"]


def test_a_plan_batch_cut_short_before_its_store_step_is_settled_in_one_transaction(engine, indexed, monkeypatch):
    batch = planned_batch(engine, indexed)
    monkeypatch.setattr(placing, "_follow", lambda *a, **k: (_ for _ in ()).throw(Killed()))
    with pytest.raises(Killed):
        placing.place(engine, batch, origin=Origin.for_tool("move outcome"))
    monkeypatch.undo()
    commits = []

    def counted(conn) -> None:
        commits.append(conn)

    event.listen(engine, "commit", counted)
    try:
        messages = recover_moves(engine)
    finally:
        event.remove(engine, "commit", counted)
    assert len(messages) == 4 and all("the store follows" in m for m in messages)
    assert len(commits) == 1
    assert all(row(engine, p.dst)["id"] == p.entry_id for p in batch)
    assert_store_consistent(engine, str(indexed))


# --- a trash cut short ------------------------------------------------------------------------------------------------


@pytest.fixture
def trash_home(tmp_path, monkeypatch) -> Path:
    """A home of the test's own, whose trash the tree's files go to."""
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "trash-home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    (tmp_path / "trash-home").mkdir()
    return tmp_path / "trash-home" / ".local" / "share" / "Trash"


def trash_killed_after_the_move(engine, monkeypatch, path: Path) -> Origin:
    """trash_one of ``path``, the process dying once the file is in the trash, before the store and the journal
    hear where it went."""
    origin = Origin.for_tool("delete-files")
    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(trashing, "delete_subtree", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        trashing.trash_one(engine, origin, str(path))
    return origin


def test_a_trash_cut_short_after_the_file_went_is_found_in_the_trash_and_undo_restores_it(
        engine, roots, indexed, trash_home, monkeypatch):
    movie = indexed / "Videos" / "movie.mp4"
    add_to_set(engine, "films", movie)
    entry = row(engine, movie)["id"]
    origin = trash_killed_after_the_move(engine, monkeypatch, movie)
    [flying] = file_journal.in_flight(engine)
    assert flying["dst"] is None and not movie.exists()

    [message] = recover_moves(engine)
    settled = file_journal.get(engine, flying["id"])
    assert settled["state"] == "done" and settled["dst"] == str(trash_home / "files" / "movie.mp4")
    assert "in the trash as" in message and row(engine, movie) is None
    done = undo(engine, roots, origin=Origin.for_tool("undo"), call_id=origin.call_id)
    assert (done["undone"], done["refused"]) == (1, 0)
    assert movie.stat().st_size == 40000 and row(engine, movie)["id"] != entry  # indexed again: a new entry
    assert members(engine, "films") == {str(movie)}  # what was kept when it was trashed came back
    assert_store_consistent(engine, str(indexed))


def test_the_trash_entry_found_is_not_one_another_operation_put_there(engine, roots, indexed, trash_home,
                                                                         monkeypatch):
    notes = indexed / "Photos" / "notes.txt"
    first, _ = trashing.trash_one(engine, Origin.for_tool("delete-files"), str(notes))  # done: its row says where
    notes.write_bytes(b"the second notes")
    index_tree(engine, str(indexed), scan_id=2)
    trash_killed_after_the_move(engine, monkeypatch, notes)
    [message] = recover_moves(engine)
    [flying] = [op for op in file_journal.history(engine, path=str(notes)) if op["error"] == message]
    assert flying["dst"] != first.path and Path(flying["dst"]).read_bytes() == b"the second notes"


def test_a_trash_cut_short_before_the_file_moved_was_not_trashed_and_keeps_nothing(engine, indexed, trash_home,
                                                                                   monkeypatch):
    clip = indexed / "Videos" / "clip.mov"
    add_to_set(engine, "clips", clip)
    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(trash, "rename_noreplace", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        trashing.trash_one(engine, Origin.for_tool("delete-files"), str(clip))  # its info file made, then death
    [flying] = file_journal.in_flight(engine)
    [message] = recover_moves(engine)
    assert "it was not trashed" in message and state(engine, flying["id"]) == ("failed", message)
    assert clip.exists() and row(engine, clip) is not None and members(engine, "clips") == {str(clip)}
    with engine.connect() as conn:
        assert kept.counts(conn, flying["id"]) == {"memberships": 0, "maps": 0}
    assert trash.entries(str(trash_home)) == []  # its info file alone is no entry


def test_an_undo_cut_short_after_the_files_went_back_marks_what_it_reversed_undone(engine, roots, indexed,
                                                                                    monkeypatch):
    """kill -9 in an undo's batch, after its files went back and before its store step: the recovery follows the
    disk and marks the operations reversed undone, as the undo would have (file-history does not call a move put
    back still done; a second undo says undone already, not that the file is gone)."""
    batch = planned_batch(engine, indexed)
    origin = Origin.for_tool("move outcome")
    placing.place(engine, batch, origin=origin)
    moves = file_journal.of_call(engine, origin.call_id)

    def killed(*args, **kwargs):
        raise Killed()

    monkeypatch.setattr("flows.fileops.undo._follow_back", killed)
    with pytest.raises(Killed):
        undo(engine, roots, origin=Origin.for_tool("undo"), call_id=origin.call_id)
    monkeypatch.undo()
    flying = file_journal.in_flight(engine)
    assert sorted(f["undo_of"] for f in flying) == sorted(m["id"] for m in moves)
    assert all(Path(p.src).exists() and row(engine, p.dst) is not None for p in batch)  # disk back, store not

    recover_moves(engine)
    assert [state(engine, f["id"])[0] for f in flying] == ["done"] * len(batch)
    assert [state(engine, m["id"])[0] for m in moves] == ["undone"] * len(batch)
    assert all(entry_id(engine, Path(p.src)) == p.entry_id and row(engine, p.dst) is None for p in batch)
    assert_store_consistent(engine, str(indexed))
    again = undo(engine, roots, origin=Origin.for_tool("undo"), call_id=origin.call_id)
    assert {r["reason"] for r in again["results"]} == {"undone already"}


def test_an_undo_of_a_trash_cut_short_after_the_file_came_back_indexes_it_with_its_memberships(
        engine, roots, indexed, trash_home, monkeypatch):
    """kill -9 in an undo of a trash, after the file came back from the trash and before the undo's store step: the
    recovery indexes it and puts back the set memberships kept when it was trashed; the trash is marked undone."""
    movie = indexed / "Videos" / "movie.mp4"
    add_to_set(engine, "films", movie)
    origin = Origin.for_tool("delete-files")
    trashing.trash_one(engine, origin, str(movie))
    [trashed] = file_journal.of_call(engine, origin.call_id)
    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(kept, "restore", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        undo(engine, roots, origin=Origin.for_tool("undo"), call_id=origin.call_id)
    [flying] = file_journal.in_flight(engine)
    assert flying["op"] == "restore" and movie.exists() and row(engine, movie) is None  # back on disk, not stored

    [message] = recover_moves(engine)
    assert "the store follows" in message and state(engine, flying["id"])[0] == "done"
    assert state(engine, trashed["id"])[0] == "undone"
    assert row(engine, movie) is not None and members(engine, "films") == {str(movie)}
    assert_store_consistent(engine, str(indexed))

"""rename-files, move-files and delete-files journal every item that changes the disk (store.file_journal): written
down with what the file was (entry, size, mtime, content hash) before the change, done in the store's transaction,
failed when the disk is as it was; under the call's origin, whose call id the answer carries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import update

import flows.fileops.operations as operations
from flows.fileops.journal import before, before_many
from flows.index.indexer import index_tree
from flows.media.hashing import hash_file
from store import file_journal
from store.entries import T
from store.file_journal import Origin
from tests.flows.fileops.test_operations import row


@pytest.fixture
def indexed(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    return tree


def ops(engine, call_id: str) -> list[dict]:
    return file_journal.of_call(engine, call_id)


def test_each_moved_or_renamed_item_is_journalled_with_what_it_was(engine, roots, indexed):
    readme, photos = indexed / "docs" / "readme.md", indexed / "Photos"
    readme_hash, entry = hash_file(str(readme)), row(engine, readme)
    res = operations.move_files(engine, roots, moves=[
        {"from": str(readme), "to": str(indexed / "new" / "readme.md")},
        {"from": str(indexed / "nope.txt"), "to": str(indexed / "x.txt")},  # refused: never reaches the disk
        {"from": str(photos), "to": str(indexed / "Pictures")}])
    assert res["successCount"] == 2 and len(res["callId"]) == 32
    moved, folder = ops(engine, res["callId"])
    assert {k: moved[k] for k in ("origin", "tool", "caller", "op", "src", "dst", "kind", "entry_id", "size",
                                  "mtime", "content_hash", "state", "made", "error")} == {
        "origin": "tool", "tool": "move-files", "caller": None, "op": "move", "src": str(readme),
        "dst": str(indexed / "new" / "readme.md"), "kind": "file", "entry_id": entry["id"], "size": 120,
        "mtime": entry["mtime"], "content_hash": readme_hash, "state": "done", "made": [str(indexed / "new")],
        "error": None}
    assert (folder["kind"], folder["content_hash"], folder["state"]) == ("directory", None, "done")
    assert folder["size"] == 10010 and folder["entry_id"] == row(engine, indexed / "Pictures")["id"]

    res = operations.rename_files(engine, roots, renames=[{"from": str(indexed / "Pictures"), "to": "Photos"}],
                                  origin=Origin.for_execution(12))
    assert res["callId"] == "execution-12"
    [renamed] = file_journal.history(engine, execution_id=12)
    assert (renamed["op"], renamed["origin"], renamed["tool"], renamed["dst"]) == ("rename", "plan", None,
                                                                                  str(photos))
    assert file_journal.in_flight(engine) == []


def test_a_dry_run_journals_nothing_and_has_no_call_id(engine, roots, indexed):
    res = operations.move_files(engine, roots, moves=[{"from": str(indexed / "empty"), "to": str(indexed / "e2")}],
                                dry_run=True)
    assert res["successCount"] == 1 and res["callId"] is None
    res = operations.delete_files(engine, roots, paths=[str(indexed / "docs")], dry_run=True, force=True)
    assert res["callId"] is None and file_journal.history(engine) == []


def test_an_item_that_fails_on_the_disk_is_journalled_failed_and_the_disk_is_as_it_was(engine, roots, indexed,
                                                                                      monkeypatch):
    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(operations.diskops, "rename_noreplace", refuse)
    src = indexed / "docs" / "readme.md"
    res = operations.move_files(engine, roots, moves=[{"from": str(src), "to": str(indexed / "a" / "b.md")}])
    [failed] = ops(engine, res["callId"])
    assert failed["state"] == "failed" and "Permission denied" in failed["error"]
    assert src.exists() and not (indexed / "a").exists() and row(engine, src) is not None


def test_deleted_items_are_journalled_before_they_go_with_their_hash(engine, roots, indexed, monkeypatch):
    temp, deep = indexed / "docs" / "readme.md", indexed / "docs" / "deep"
    temp_hash = hash_file(str(temp))
    res = operations.delete_files(engine, roots, paths=[str(temp), str(deep), str(indexed / "nope")], force=True,
                                  permanent=True, origin=Origin.for_tool("delete-files", "ed"))
    assert res["successCount"] == 2
    file_row, folder_row = ops(engine, res["callId"])
    assert (file_row["op"], file_row["src"], file_row["dst"], file_row["kind"], file_row["content_hash"],
            file_row["size"], file_row["state"], file_row["caller"]) == (
        "delete", str(temp), None, "file", temp_hash, 120, "done", "ed")
    assert (folder_row["kind"], folder_row["content_hash"], folder_row["state"]) == ("directory", None, "done")

    def refuse(path):
        raise PermissionError(1, "Operation not permitted", path)

    monkeypatch.setattr(os, "unlink", refuse)
    notes = indexed / "Photos" / "notes.txt"
    res = operations.delete_files(engine, roots, paths=[str(notes)], permanent=True)
    [failed] = ops(engine, res["callId"])
    assert failed["state"] == "failed" and "Operation not permitted" in failed["error"] and notes.exists()


def test_the_hash_written_down_is_the_stored_one_while_the_file_is_unchanged(engine, indexed):
    photo, notes = indexed / "Photos" / "photo.jpg", indexed / "Photos" / "notes.txt"
    known = "xxh128:" + "ab" * 16  # what a classifier stored; reading it back proves the file was not read
    with engine.begin() as conn:
        conn.execute(update(T).where(T.c.path.in_([str(photo), str(notes)])).values(hash=known))
    os.utime(notes, (1, 1))  # changed since it was hashed: read again
    found = before_many(engine, [str(photo), str(notes), str(indexed / "gone"), str(indexed / "Photos")])
    assert found[str(photo)].content_hash == known
    assert found[str(notes)].content_hash == hash_file(str(notes)) != known
    assert str(indexed / "gone") not in found and found[str(indexed / "Photos")].content_hash is None
    link = indexed / "link"
    link.symlink_to(photo)
    assert before(engine, str(link)).columns() == {**before(engine, str(link)).columns(), "kind": "file",
                                                   "content_hash": None, "entry_id": None}


def test_a_delete_goes_to_the_trash_journalled_with_where_it_went(engine, roots, indexed):
    notes = indexed / "Photos" / "notes.txt"
    res = operations.delete_files(engine, roots, paths=[str(notes)])
    [item] = res["results"]
    assert item["status"] == "success" and not notes.exists() and Path(item["trashedTo"]).exists()
    [row] = ops(engine, res["callId"])
    assert (row["op"], row["src"], row["dst"], row["state"]) == ("trash", str(notes), item["trashedTo"], "done")

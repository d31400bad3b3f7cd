"""rename / move / delete as plain functions on real files, with the store kept in step."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from sqlalchemy import insert

import flows.fileops.disk as diskops
from flows.fileops.operations import delete_files, move_files, rename_files
from flows.index.indexer import index_tree
from store import entries
from store.errors import InvalidInput
from store.models import ResourceSet, SetMember


@pytest.fixture
def indexed(engine, tree):
    index_tree(engine, str(tree), scan_id=1)
    return tree


def row(engine, path) -> dict | None:
    found = entries.get_entry(engine, path=str(path))
    return dict(found) if found else None


def add_to_set(engine, name: str, *paths: Path) -> None:
    with engine.begin() as conn:
        set_id = conn.execute(insert(ResourceSet.__table__).values(name=name)).inserted_primary_key[0]
        for p in paths:
            conn.execute(insert(SetMember.__table__).values(set_id=set_id, entry_id=row(engine, p)["id"]))


def members(engine, name: str) -> set[str]:
    from sqlalchemy import select

    from store.entries import T
    m, s = SetMember.__table__, ResourceSet.__table__
    with engine.connect() as conn:
        return set(conn.execute(select(T.c.path).join(m, m.c.entry_id == T.c.id).join(s, s.c.id == m.c.set_id)
                                .where(s.c.name == name)).scalars())


# --- rename ---------------------------------------------------------------------------------------------------------


def test_rename_file_moves_its_entry_and_keeps_set_membership(engine, roots, indexed):
    old, new = indexed / "docs" / "readme.md", indexed / "docs" / "README.txt"
    add_to_set(engine, "docs", old)
    entry_id = row(engine, old)["id"]
    res = rename_files(engine, roots, renames=[{"from": str(old), "to": str(new)}])
    assert res["successCount"] == 1 and res["errorCount"] == 0 and res["dryRun"] is False
    item = res["results"][0]
    assert item == {**item, "status": "success", "from": str(old), "to": str(new), "kind": "file",
                    "indexedEntries": 1, "membershipsKept": 1}
    assert not old.exists() and new.read_bytes() == b"x" * 120
    moved = row(engine, new)
    assert moved["id"] == entry_id and moved["name"] == "README.txt" and moved["extension"] == ".txt"
    assert row(engine, old) is None
    assert members(engine, "docs") == {str(new)}


def test_rename_accepts_a_bare_new_name_in_the_same_folder(engine, roots, indexed):
    res = rename_files(engine, roots, renames={"from": str(indexed / "Videos" / "clip.mov"), "to": "clip2.mov"})
    assert res["results"][0]["to"] == str(indexed / "Videos" / "clip2.mov")
    assert (indexed / "Videos" / "clip2.mov").exists()


def test_rename_directory_rewrites_the_whole_subtree_keeping_ids(engine, roots, indexed):
    beach = indexed / "Photos" / "vacation" / "beach.jpg"
    add_to_set(engine, "beach", beach)
    beach_id = row(engine, beach)["id"]
    res = rename_files(engine, roots, renames=[{"from": str(indexed / "Photos" / "vacation"),
                                                "to": str(indexed / "Photos" / "holiday")}])
    assert res["results"][0]["indexedEntries"] == 3 and res["results"][0]["membershipsKept"] == 1
    moved = row(engine, indexed / "Photos" / "holiday" / "beach.jpg")
    assert moved["id"] == beach_id and moved["parent"] == str(indexed / "Photos" / "holiday")
    assert row(engine, indexed / "Photos" / "holiday")["size"] == 5000
    assert row(engine, indexed / "Photos")["size"] == 10010
    assert members(engine, "beach") == {str(indexed / "Photos" / "holiday" / "beach.jpg")}


def test_rename_refuses_to_overwrite_and_says_there_is_no_overwrite_option(engine, roots, indexed):
    src, dst = indexed / "Photos" / "photo.jpg", indexed / "Photos" / "notes.txt"
    res = rename_files(engine, roots, renames=[{"from": str(src), "to": str(dst)}])
    item = res["results"][0]
    assert item["status"] == "error" and item["errorCode"] == "CONFLICT"
    assert "already exists" in item["error"] and "no overwrite option" in item["error"]
    assert src.read_bytes() == b"x" * 5000 and dst.read_bytes() == b"x" * 10
    assert row(engine, src) is not None and row(engine, dst)["size"] == 10


def test_rename_does_not_create_folders(engine, roots, indexed):
    res = rename_files(engine, roots, renames=[{"from": str(indexed / ".hidden"),
                                                "to": str(indexed / "nowhere" / ".hidden")}])
    assert res["results"][0]["status"] == "error" and "does not create folders" in res["results"][0]["error"]
    assert (indexed / ".hidden").exists()


def test_rename_across_filesystems_is_refused_pointing_to_move(engine, roots, indexed, monkeypatch):
    def cross_device(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(diskops, "rename_noreplace", cross_device)
    res = rename_files(engine, roots, renames=[{"from": str(indexed / ".hidden"), "to": str(indexed / ".h2")}])
    assert "use move-files" in res["results"][0]["error"]
    assert (indexed / ".hidden").exists()


# --- move -----------------------------------------------------------------------------------------------------------


def test_move_file_to_another_folder_refreshes_both_ancestor_sizes(engine, roots, indexed):
    src, dst = indexed / "Videos" / "movie.mp4", indexed / "docs" / "movie.mp4"
    add_to_set(engine, "videos", src)
    res = move_files(engine, roots, moves=[{"from": str(src), "to": str(dst)}])
    assert res["results"][0]["status"] == "success" and res["results"][0]["membershipsKept"] == 1
    assert row(engine, indexed / "Videos")["size"] == 8000
    assert row(engine, indexed / "docs")["size"] == 1500 + 120 + 7 + 40000
    assert row(engine, dst)["parent"] == str(indexed / "docs")
    assert members(engine, "videos") == {str(dst)}


def test_move_into_an_existing_folder_keeps_the_name(engine, roots, indexed):
    res = move_files(engine, roots,
                     moves=[{"from": str(indexed / "Photos" / "photo.jpg"), "to": str(indexed / "docs")}])
    assert res["results"][0]["to"] == str(indexed / "docs" / "photo.jpg")
    assert (indexed / "docs" / "photo.jpg").exists() and row(engine, indexed / "docs" / "photo.jpg")


def test_move_creates_missing_folders_and_records_them_in_the_index(engine, roots, indexed):
    dst = indexed / "Archive" / "2024" / "report.pdf"
    res = move_files(engine, roots, moves=[{"from": str(indexed / "docs" / "report_2024.pdf"), "to": str(dst)}])
    item = res["results"][0]
    assert item["status"] == "success"
    assert item["createdDirectories"] == [str(indexed / "Archive"), str(indexed / "Archive" / "2024")]
    assert dst.exists()
    assert row(engine, indexed / "Archive")["size"] == 1500 and row(engine, indexed / "Archive")["kind"] == "directory"
    assert row(engine, dst)["parent"] == str(indexed / "Archive" / "2024")


def test_move_directory_into_itself_is_refused(engine, roots, indexed):
    res = move_files(engine, roots, moves=[{"from": str(indexed / "docs"), "to": str(indexed / "docs" / "deep" / "x")}])
    assert res["results"][0]["status"] == "error" and "into itself" in res["results"][0]["error"]
    assert (indexed / "docs" / "readme.md").exists()


def test_move_across_filesystems_copies_then_removes_the_source(engine, roots, indexed, monkeypatch):
    real_rename = diskops.rename_noreplace
    renamed: list[str] = []

    def cross_device(src, dst):
        if ".assay-partial-" in os.fspath(src):
            renamed.append(os.path.basename(src))
            return real_rename(src, dst)  # the final rename beside the target stays on one filesystem
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(diskops, "rename_noreplace", cross_device)
    src, dst = indexed / "docs" / "deep", indexed / "Videos" / "deep"
    res = move_files(engine, roots, moves=[{"from": str(src), "to": str(dst)}])
    assert res["results"][0]["status"] == "success"
    assert not src.exists() and (dst / "a" / "b" / "c.txt").read_bytes() == b"x" * 7
    assert len(renamed) == 1 and not [p for p in (indexed / "Videos").iterdir() if "partial" in p.name]
    assert row(engine, dst / "a" / "b" / "c.txt") is not None


def test_failed_cross_filesystem_copy_leaves_the_source_and_no_partial_copy(engine, roots, indexed, monkeypatch):
    def cross_device(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    def disk_full(src, dst, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(diskops, "rename_noreplace", cross_device)
    monkeypatch.setattr(diskops.shutil, "copy2", disk_full)
    src = indexed / "Videos" / "movie.mp4"
    res = move_files(engine, roots, moves=[{"from": str(src), "to": str(indexed / "docs" / "movie.mp4")}])
    item = res["results"][0]
    assert item["status"] == "error" and "No space left" in item["error"] and "source is untouched" in item["error"]
    assert src.read_bytes() == b"x" * 40000
    assert sorted(p.name for p in (indexed / "docs").iterdir()) == ["deep", "readme.md", "report_2024.pdf"]
    assert row(engine, src) is not None


def test_the_final_rename_never_replaces_a_target_that_appeared_meanwhile(tmp_path):
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    with pytest.raises(FileExistsError):
        diskops.rename_noreplace(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (tmp_path / "b").read_text() == "b" and (tmp_path / "a").exists()


def test_folders_made_for_a_failed_move_are_removed_again(engine, roots, indexed, monkeypatch):
    def refuse(src, dst):
        raise PermissionError(errno.EACCES, "Permission denied", src)

    monkeypatch.setattr(diskops, "rename_noreplace", refuse)
    res = move_files(engine, roots, moves=[{"from": str(indexed / ".hidden"), "to": str(indexed / "n1" / "n2" / "h")}])
    assert res["results"][0]["status"] == "error" and "Permission denied" in res["results"][0]["error"]
    assert not (indexed / "n1").exists() and (indexed / ".hidden").exists()


def test_target_outside_the_roots_is_refused_naming_path_and_roots(engine, roots, indexed, tmp_path):
    outside = tmp_path / "elsewhere.txt"
    res = move_files(engine, roots, moves=[{"from": str(indexed / ".hidden"), "to": str(outside)}])
    item = res["results"][0]
    assert item["errorCode"] == "PATH_TRAVERSAL_DETECTED"
    assert str(outside) in item["error"] and str(indexed) in item["error"]
    assert (indexed / ".hidden").exists() and not outside.exists()


def test_dotdot_in_a_target_cannot_escape_the_roots(engine, roots, indexed):
    res = move_files(engine, roots, moves=[{"from": str(indexed / ".hidden"), "to": f"{indexed}/../../x"}])
    assert res["results"][0]["errorCode"] == "PATH_TRAVERSAL_DETECTED"


def test_a_root_itself_is_never_moved_or_deleted(engine, roots, indexed):
    res = move_files(engine, roots, moves=[{"from": str(indexed), "to": str(indexed / "x")}])
    assert "configured root" in res["results"][0]["error"]
    res = delete_files(engine, roots, paths=[str(indexed)], force=True)
    assert "configured root" in res["results"][0]["error"] and indexed.exists()


def test_each_item_reports_its_own_result(engine, roots, indexed):
    res = move_files(engine, roots, moves=[
        {"from": str(indexed / "missing.txt"), "to": str(indexed / "m.txt")},
        {"from": str(indexed / ".hidden"), "to": str(indexed / "docs" / ".hidden")},
    ])
    assert [r["status"] for r in res["results"]] == ["error", "success"]
    assert res["results"][0]["errorCode"] == "NOT_FOUND" and "does not exist" in res["results"][0]["error"]
    assert res["successCount"] == 1 and res["errorCount"] == 1


def test_unindexed_file_moved_into_an_indexed_folder_is_added(engine, roots, indexed):
    (indexed / "new.txt").write_text("hello")
    res = move_files(engine, roots, moves=[{"from": str(indexed / "new.txt"), "to": str(indexed / "docs" / "new.txt")}])
    assert res["results"][0]["indexed"] is True
    assert row(engine, indexed / "docs" / "new.txt")["size"] == 5


@pytest.mark.parametrize("bad", [[], [{"from": "/a"}], [{"from": "/a", "to": "/b", "overwrite": True}], "x"])
def test_malformed_operations_are_rejected_before_anything_happens(engine, roots, indexed, bad):
    with pytest.raises(InvalidInput) as err:
        move_files(engine, roots, moves=bad)
    assert "moves" in str(err.value) and "from" in str(err.value)


# --- dry run --------------------------------------------------------------------------------------------------------


def test_dry_run_changes_nothing_and_previews_chained_items(engine, roots, indexed):
    a, b, c = indexed / "docs" / "readme.md", indexed / "docs" / "b.md", indexed / "docs" / "c.md"
    before = row(engine, a)
    res = rename_files(engine, roots, dry_run=True, renames=[{"from": str(a), "to": str(b)},
                                                            {"from": str(b), "to": str(c)},
                                                            {"from": str(a), "to": str(c)}])
    assert res["dryRun"] is True
    assert [r["status"] for r in res["results"]] == ["preview", "preview", "error"]
    assert res["results"][1]["indexedEntries"] == 1  # b would be the stored readme.md
    assert "does not exist" in res["results"][2]["error"]
    assert a.exists() and not b.exists() and not c.exists()
    assert row(engine, a) == before


def test_dry_run_move_reports_folders_it_would_create_without_creating_them(engine, roots, indexed):
    dst = indexed / "new" / "place" / "clip.mov"
    res = move_files(engine, roots, dry_run=True,
                     moves=[{"from": str(indexed / "Videos" / "clip.mov"), "to": str(dst)}])
    assert res["results"][0]["status"] == "preview"
    assert res["results"][0]["createdDirectories"] == [str(indexed / "new"), str(indexed / "new" / "place")]
    assert not (indexed / "new").exists()


def test_dry_run_delete_counts_what_would_go_and_keeps_it(engine, roots, indexed):
    res = delete_files(engine, roots, paths=[str(indexed / "Photos")], force=True, dry_run=True)
    assert res["results"][0] == {**res["results"][0], "status": "preview", "kind": "directory", "indexedEntries": 6}
    assert (indexed / "Photos" / "photo.jpg").exists() and row(engine, indexed / "Photos") is not None


# --- delete ---------------------------------------------------------------------------------------------------------


def test_delete_file_removes_it_and_its_entry_and_refreshes_sizes(engine, roots, indexed):
    res = delete_files(engine, roots, paths=str(indexed / "Videos" / "clip.mov"))
    assert res["results"][0]["status"] == "success" and res["results"][0]["indexedEntries"] == 1
    assert not (indexed / "Videos" / "clip.mov").exists()
    assert row(engine, indexed / "Videos" / "clip.mov") is None
    assert row(engine, indexed / "Videos")["size"] == 40000


def test_non_empty_directory_needs_force(engine, roots, indexed):
    res = delete_files(engine, roots, paths=[str(indexed / "docs")])
    item = res["results"][0]
    assert item["status"] == "error" and "force" in item["error"] and (indexed / "docs").exists()
    res = delete_files(engine, roots, paths=[str(indexed / "docs")], force=True, permanent=True)
    assert res["results"][0]["status"] == "success" and res["results"][0]["indexedEntries"] == 7
    assert not (indexed / "docs").exists() and entries.count_subtree(engine, root=str(indexed / "docs")) == 0


def test_empty_directory_is_deleted_without_force(engine, roots, indexed):
    res = delete_files(engine, roots, paths=[str(indexed / "empty")])
    assert res["results"][0]["status"] == "success" and not (indexed / "empty").exists()


def test_delete_removes_a_symlink_not_its_target(engine, roots, indexed):
    link = indexed / "link"
    link.symlink_to(indexed / "Photos")
    res = delete_files(engine, roots, paths=[str(link)])
    assert res["results"][0]["kind"] == "symlink" and res["results"][0]["status"] == "success"
    assert not link.is_symlink() and (indexed / "Photos" / "photo.jpg").exists()


def test_deleting_a_missing_path_drops_its_stale_entries(engine, roots, indexed):
    (indexed / "Photos" / "notes.txt").unlink()
    res = delete_files(engine, roots, paths=[str(indexed / "Photos" / "notes.txt")])
    assert res["results"][0]["status"] == "error" and "stale index entries" in res["results"][0]["error"]
    assert row(engine, indexed / "Photos" / "notes.txt") is None


def test_partly_failed_delete_keeps_the_store_in_step_with_what_is_left(engine, roots, indexed, monkeypatch):
    real_unlink = os.unlink

    def refuse_c_txt(path, *args, **kwargs):
        if os.path.basename(os.fspath(path)) == "c.txt":
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_unlink(path, *args, **kwargs)

    (indexed / "docs" / "deep" / "a" / "b" / "d.txt").write_bytes(b"12345")
    index_tree(engine, str(indexed), scan_id=2)
    assert row(engine, indexed / "docs" / "deep" / "a" / "b")["size"] == 12
    monkeypatch.setattr(os, "unlink", refuse_c_txt)
    res = delete_files(engine, roots, paths=[str(indexed / "docs")], force=True, permanent=True)
    item = res["results"][0]
    assert item["status"] == "error" and "partly deleted" in item["error"] and "Permission denied" in item["error"]
    kept = indexed / "docs" / "deep" / "a" / "b" / "c.txt"
    assert kept.exists() and row(engine, kept) is not None
    assert row(engine, indexed / "docs" / "readme.md") is None and row(engine, kept.parent / "d.txt") is None
    assert [row(engine, p)["size"] for p in (kept.parent, kept.parent.parent, indexed / "docs")] == [7, 7, 7]
    assert row(engine, indexed)["size"] == 3000 + 2000 + 5000 + 10 + 40000 + 8000 + 7 + 1

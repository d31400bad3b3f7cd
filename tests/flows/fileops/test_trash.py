"""The freedesktop.org trash on real files: the home trash, a volume's own trash on a tmpfs the test mounts, and assay's
trash under the data dir when the volume has none that can be written."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import flows.fileops.disk as disk_mod
import flows.fileops.trash as trash_mod
from flows.fileops.trash import (Trashed, entries, expired, home_trash, move_to_trash, purge, restore,
                                 trash_for)
from store.errors import FileOperationError, InvalidInput, NotFound

UID = os.getuid()


@pytest.fixture(autouse=True)
def no_xdg(monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)


@pytest.fixture
def where(tmp_path) -> dict[str, str]:
    """A home and a data dir of the test's own (the home trash is under the home)."""
    (tmp_path / "home").mkdir()
    return {"home": str(tmp_path / "home"), "data_dir": str(tmp_path / "data")}


@pytest.fixture
def files(tmp_path) -> Path:
    (tmp_path / "files").mkdir()
    return tmp_path / "files"


def info_text(t: Trashed) -> str:
    return Path(t.info).read_text(encoding="utf-8")


def recorded_path(t: Trashed) -> str:
    return re.search(r"^Path=(.*)$", info_text(t), re.M).group(1)


@contextmanager
def mounted(path: Path, *options: str) -> Iterator[Path]:
    """A small tmpfs at ``path`` for the block (skipped, saying why, where mounting is refused)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=4m", "mode=0755", *options)), "none",
                           str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a second volume (a tmpfs) cannot be mounted here, mounting needs root: "
                    f"{done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def volume(tmp_path) -> Iterator[Path]:
    with mounted(tmp_path / "volume") as path:
        yield path


# the home trash


def test_a_file_goes_to_the_home_trash_by_rename_and_comes_back(where, files):
    f = files / "report.txt"
    f.write_text("quarterly")
    inode = f.stat().st_ino
    before = int(time.time())
    t = move_to_trash(str(f), **where)
    home = os.path.join(where["home"], ".local", "share", "Trash")
    assert t.trash == home == trash_for(str(files / "other"), **where)
    assert (t.original, t.path, t.info, t.kind) == (
        str(f), os.path.join(home, "files", "report.txt"), os.path.join(home, "info", "report.txt.trashinfo"), "file")
    assert before <= t.deleted_at <= time.time() and not f.exists()
    assert os.stat(t.path).st_ino == inode  # renamed, not copied
    assert entries(home) == [t]

    assert restore(t) == str(f)
    assert f.read_text() == "quarterly" and f.stat().st_ino == inode
    assert not os.path.exists(t.info) and entries(home) == []


def test_a_directory_goes_to_the_home_trash_and_comes_back_whole(where, files):
    (files / "album" / "2019").mkdir(parents=True)
    (files / "album" / "2019" / "a.jpg").write_bytes(b"jpeg")
    (files / "album" / "notes.md").write_text("notes")
    os.symlink("notes.md", files / "album" / "link")
    t = move_to_trash(str(files / "album"), **where)
    assert t.kind == "directory" and not (files / "album").exists()
    assert entries(t.trash)[0].kind == "directory"
    restore(t)
    assert (files / "album" / "2019" / "a.jpg").read_bytes() == b"jpeg"
    assert os.readlink(files / "album" / "link") == "notes.md"


def test_a_name_the_trash_holds_already_gets_a_number(where, files):
    made = []
    for folder in ("a", "b", "c"):
        (files / folder).mkdir()
        (files / folder / "scan.pdf").write_text(folder)
        made.append(move_to_trash(str(files / folder / "scan.pdf"), **where))
    assert [os.path.basename(t.path) for t in made] == ["scan.pdf", "scan.pdf.2", "scan.pdf.3"]
    assert [os.path.basename(t.info) for t in made] == ["scan.pdf.trashinfo", "scan.pdf.2.trashinfo",
                                                        "scan.pdf.3.trashinfo"]
    assert {t.original for t in entries(made[0].trash)} == {str(files / d / "scan.pdf") for d in "abc"}
    assert Path(made[1].path).read_text() == "b"


def test_the_info_file_follows_the_spec_with_a_percent_encoded_path(where, files):
    f = files / "50% off — café.txt"
    f.write_text("x")
    t = move_to_trash(str(f), **where)
    lines = info_text(t).splitlines()
    assert lines[0] == "[Trash Info]"
    assert lines[1] == "Path=" + str(files).replace(" ", "%20") + "/50%25%20off%20%E2%80%94%20caf%C3%A9.txt"
    assert re.fullmatch(r"DeletionDate=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", lines[2])
    assert lines[2] == "DeletionDate=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t.deleted_at))
    assert entries(t.trash)[0].original == str(f)


def test_a_long_name_is_cut_to_fit_its_info_file_in_a_path_component(where, files):
    f = files / ("é" * 127)  # 254 bytes: with ".trashinfo" the info file's name would be too long
    f.write_text("x")
    t = move_to_trash(str(f), **where)
    assert len(os.fsencode(os.path.basename(t.info))) <= 255
    assert entries(t.trash)[0].original == str(f)
    assert restore(t) == str(f) and f.read_text() == "x"


def test_xdg_data_home_is_the_home_trash_of_this_process_own_home_only(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert home_trash(str(tmp_path / "me")) == str(tmp_path / "xdg" / "Trash")
    assert home_trash(str(tmp_path / "other")) == str(tmp_path / "other" / ".local" / "share" / "Trash")


# restoring


def test_restore_is_refused_while_the_place_is_taken_and_goes_elsewhere_with_to(where, files):
    f = files / "draft.txt"
    f.write_text("old")
    t = move_to_trash(str(f), **where)
    f.write_text("new")
    with pytest.raises(FileOperationError, match=re.escape(str(f))) as caught:
        restore(t)
    assert "taken" in caught.value.message and f.read_text() == "new" and entries(t.trash) == [t]

    elsewhere = files / "kept" / "deep" / "draft (old).txt"
    assert restore(t, to=str(elsewhere)) == str(elsewhere)
    assert elsewhere.read_text() == "old" and entries(t.trash) == []


def test_restore_makes_the_missing_folders_of_the_original_place(where, files):
    (files / "a" / "b").mkdir(parents=True)
    (files / "a" / "b" / "c.txt").write_text("c")
    t = move_to_trash(str(files / "a" / "b" / "c.txt"), **where)
    (files / "a" / "b").rmdir()
    (files / "a").rmdir()
    assert restore(t) == str(files / "a" / "b" / "c.txt") and (files / "a" / "b" / "c.txt").read_text() == "c"


@pytest.mark.parametrize("by", ["files", "info"])
def test_restore_and_purge_take_the_path_of_the_file_or_of_its_info(where, files, by):
    for name in ("one", "two"):
        (files / name).write_text(name)
    one, two = (move_to_trash(str(files / n), **where) for n in ("one", "two"))
    assert restore(one.path if by == "files" else one.info) == str(files / "one")
    assert purge(two.path if by == "files" else two.info) == 3
    assert entries(one.trash) == [] and not os.path.lexists(two.path)


def test_restoring_what_the_trash_no_longer_holds_is_not_found(where, files):
    (files / "gone").write_text("x")
    t = move_to_trash(str(files / "gone"), **where)
    purge(t)
    with pytest.raises(NotFound):
        restore(t)
    with pytest.raises(NotFound):
        restore(t.info)


# deleting for good, retention, listing


def test_purge_deletes_for_good_and_says_how_many_bytes_it_freed(where, files):
    (files / "big.bin").write_bytes(b"\0" * 5000)
    (files / "tree" / "ro").mkdir(parents=True)
    (files / "tree" / "a").write_bytes(b"a" * 100)
    (files / "tree" / "ro" / "b").write_bytes(b"b" * 20)
    os.symlink("a", files / "tree" / "l")
    os.chmod(files / "tree" / "ro", 0o500)  # a read-only folder inside is deleted too
    big, tree = move_to_trash(str(files / "big.bin"), **where), move_to_trash(str(files / "tree"), **where)
    assert purge(big) == 5000
    assert purge(tree) == 100 + 20 + 1
    assert entries(big.trash) == [] and os.listdir(os.path.join(big.trash, "files")) == []
    assert os.listdir(os.path.join(big.trash, "info")) == []


@pytest.mark.parametrize("outside", ["a folder", "a folder named files", "a forged entry"])
def test_purge_never_deletes_a_path_outside_a_trash(where, tmp_path, outside):
    folder = tmp_path / ("files" if outside == "a folder named files" else "docs")
    folder.mkdir(exist_ok=True)
    victim = folder / "precious.txt"
    victim.write_text("keep")
    if outside == "a forged entry":
        (folder / "x").write_text("x")
        t = move_to_trash(str(folder / "x"), **where)
        forged = Trashed(original=t.original, path=str(victim), info=t.info, trash=t.trash, deleted_at=0.0,
                         kind="file")
        with pytest.raises(InvalidInput):
            purge(forged)
    else:
        with pytest.raises(NotFound if outside == "a folder named files" else InvalidInput):
            purge(str(victim))
    assert victim.read_text() == "keep"


def test_expired_lists_what_was_deleted_longer_ago_than_the_retention(where, files):
    (files / "new").write_text("n")
    fresh = move_to_trash(str(files / "new"), **where)
    (files / "old").write_text("o")
    old = move_to_trash(str(files / "old"), **where)
    Path(old.info).write_text(info_text(old).replace(
        re.search(r"DeletionDate=(.*)", info_text(old)).group(1), "2020-01-02T03:04:05"))
    listed = {t.path: t for t in entries(fresh.trash)}
    assert listed[old.path].deleted_at == time.mktime((2020, 1, 2, 3, 4, 5, 0, 0, -1))
    assert [t.path for t in expired(fresh.trash, older_than_days=30)] == [old.path]
    assert [t.path for t in expired(fresh.trash, older_than_days=30, now=fresh.deleted_at + 31 * 86400)] == [
        old.path, fresh.path]
    assert expired(fresh.trash, older_than_days=30, now=fresh.deleted_at + 29 * 86400) == [listed[old.path]]
    with pytest.raises(InvalidInput):
        expired(fresh.trash, older_than_days=-1)


def test_entries_skip_broken_info_files(where, files):
    (files / "good").write_text("g")
    good = move_to_trash(str(files / "good"), **where)
    info, kept = Path(good.trash, "info"), Path(good.trash, "files")
    broken = {
        "no-header": "Path=/x\nDeletionDate=2020-01-01T00:00:00\n",
        "no-path": "[Trash Info]\nDeletionDate=2020-01-01T00:00:00\n",
        "bad-date": "[Trash Info]\nPath=/x\nDeletionDate=yesterday\n",
        "relative-in-home": "[Trash Info]\nPath=x\nDeletionDate=2020-01-01T00:00:00\n",
        "file-gone": "[Trash Info]\nPath=/x\nDeletionDate=2020-01-01T00:00:00\n",
    }
    for name, text in broken.items():
        (info / f"{name}.trashinfo").write_text(text)
        if name != "file-gone":
            (kept / name).write_text("?")
    (kept / "no-info").write_text("?")
    assert entries(good.trash) == [good]
    assert entries(str(files / "not-a-trash")) == []


# refusals


def test_what_is_missing_or_holds_the_trash_or_is_in_it_is_refused(where, files):
    with pytest.raises(FileOperationError, match="nothing-here"):
        move_to_trash(str(files / "nothing-here"), **where)
    with pytest.raises(FileOperationError, match="holds the trash"):
        move_to_trash(where["home"], **where)
    (files / "a").write_text("a")
    t = move_to_trash(str(files / "a"), **where)
    with pytest.raises(FileOperationError, match="already in the trash"):
        move_to_trash(t.path, **where)
    assert os.path.exists(where["home"]) and entries(t.trash) == [t]


def test_a_failed_move_leaves_the_file_and_no_info_file(where, files, monkeypatch):
    (files / "stays").write_text("s")

    def refuse(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(trash_mod, "rename_noreplace", refuse)
    with pytest.raises(FileOperationError, match="Permission denied") as caught:
        move_to_trash(str(files / "stays"), **where)
    assert str(files / "stays") in caught.value.message and (files / "stays").read_text() == "s"
    trash = home_trash(where["home"])
    assert os.listdir(os.path.join(trash, "info")) == os.listdir(os.path.join(trash, "files")) == []


# other volumes


@pytest.mark.parametrize("shared", [None, "sticky", "not sticky"])
def test_a_file_on_another_volume_goes_to_that_volume_trash_by_rename(where, volume, shared):
    if shared:
        (volume / ".Trash").mkdir(mode=0o1777 if shared == "sticky" else 0o777)
        os.chmod(volume / ".Trash", 0o1777 if shared == "sticky" else 0o777)
    (volume / "photos").mkdir()
    f = volume / "photos" / "IMG 1.jpg"
    f.write_bytes(b"jpeg")
    inode, dev = f.stat().st_ino, f.stat().st_dev
    t = move_to_trash(str(f), **where)
    expected = volume / ".Trash" / str(UID) if shared == "sticky" else volume / f".Trash-{UID}"
    assert t.trash == str(expected)
    assert os.stat(t.path).st_ino == inode and os.stat(t.path).st_dev == dev  # one rename on the volume
    assert stat_mode(expected) == 0o700
    assert recorded_path(t) == "photos/IMG%201.jpg"  # relative to the volume's top dir
    assert entries(t.trash) == [t] and entries(t.trash)[0].original == str(f)
    assert not os.path.exists(home_trash(where["home"]))
    assert restore(t.path) == str(f) and f.stat().st_ino == inode


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


@pytest.mark.parametrize("blocker", ["a file", "a symlink"])
def test_a_volume_without_a_usable_trash_sends_the_file_to_the_data_dir_by_a_checked_copy(where, volume, blocker,
                                                                                        tmp_path):
    if blocker == "a file":
        (volume / f".Trash-{UID}").write_text("not a folder")
    else:
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", volume / f".Trash-{UID}")
    (volume / "clip").mkdir()
    (volume / "clip" / "video.mp4").write_bytes(os.urandom(300_000))
    (volume / "clip" / "sub.srt").write_text("1\n00:00 --> 00:01\nhi\n")
    payload = {p.name: p.read_bytes() for p in (volume / "clip").iterdir()}
    t = move_to_trash(str(volume / "clip"), **where)
    own = os.path.join(where["data_dir"], "trash")
    assert t.trash == own == trash_for(str(volume / "anything"), **where)
    assert not (volume / "clip").exists()
    assert {p.name: p.read_bytes() for p in Path(t.path).iterdir()} == payload
    assert recorded_path(t) == str(volume / "clip")  # absolute in assay's own trash
    if blocker == "a symlink":
        assert os.listdir(tmp_path / "elsewhere") == []  # nothing written through a trash someone else planted
    else:
        assert (volume / f".Trash-{UID}").read_text() == "not a folder"
    assert restore(t) == str(volume / "clip")  # back across filesystems
    assert {p.name: p.read_bytes() for p in (volume / "clip").iterdir()} == payload
    assert entries(own) == [] and os.listdir(os.path.join(own, "files")) == []


def test_a_read_only_top_dir_sends_the_file_to_the_data_dir(where, tmp_path):
    with mounted(tmp_path / "ro") as top:
        (top / "inbox").mkdir()
        inbox = top / "inbox"
        # the inbox stays writable on its own mount of the same volume (same st_dev), the top dir becomes read-only
        if subprocess.run(["mount", "--bind", str(inbox), str(inbox)], capture_output=True).returncode != 0:
            pytest.skip("a bind mount cannot be made here")
        try:
            if subprocess.run(["mount", "-o", "remount,bind,ro", str(top)], capture_output=True).returncode != 0:
                pytest.skip("the top dir cannot be remounted read-only here")
            (inbox / "setup.exe").write_bytes(b"MZ" * 1000)
            assert os.stat(inbox).st_dev == os.stat(top).st_dev
            t = move_to_trash(str(inbox / "setup.exe"), **where)
            assert t.trash == os.path.join(where["data_dir"], "trash") and not (inbox / "setup.exe").exists()
            assert Path(t.path).read_bytes() == b"MZ" * 1000
        finally:
            subprocess.run(["umount", str(inbox)], capture_output=True)


def test_a_copy_that_does_not_match_its_source_is_not_kept(where, volume, monkeypatch):
    (volume / f".Trash-{UID}").write_text("no trash on this volume")
    f = volume / "ledger.db"
    f.write_bytes(b"rows" * 100)
    monkeypatch.setattr(disk_mod, "hash_of", lambda path, size: "xxh128:" + path)  # every copy reads differently
    with pytest.raises(FileOperationError, match="gave a copy that differs") as caught:
        move_to_trash(str(f), **where)
    assert str(f) in caught.value.message and f.read_bytes() == b"rows" * 100
    own = os.path.join(where["data_dir"], "trash")
    assert os.listdir(os.path.join(own, "files")) == os.listdir(os.path.join(own, "info")) == []


def test_a_symlink_goes_to_the_trash_as_itself_and_its_target_stays(where, files):
    (files / "real").mkdir()
    (files / "real" / "keep.txt").write_text("k")
    os.symlink(files / "real", files / "shortcut")
    t = move_to_trash(str(files / "shortcut"), **where)
    assert t.kind == "file" and os.path.islink(t.path) and (files / "real" / "keep.txt").read_text() == "k"
    assert purge(t) == len(str(files / "real")) and (files / "real" / "keep.txt").exists()

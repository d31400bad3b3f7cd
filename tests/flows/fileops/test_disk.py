"""Cross-filesystem moves check the copy before the source goes: a copy that differs (size or content) is removed
and the source kept. A small file's hash (read without hash_file's 1 MiB buffer) is hash_file's; folders already
there are not made again, and a file in a folder's place is an error."""

from __future__ import annotations

import os
import shutil

import pytest

from flows.fileops import disk
from flows.media.hashing import hash_file
from store.errors import FileOperationError


def test_a_verified_copy_replaces_the_source(tmp_path):
    src, dst = tmp_path / "a.bin", tmp_path / "b.bin"
    src.write_bytes(b"x" * 5000)
    assert disk.copy_then_remove(str(src), str(dst)) is None
    assert dst.read_bytes() == b"x" * 5000 and not src.exists()


@pytest.mark.parametrize("corrupt, why", [(b"y" * 5000, "content hash"), (b"x" * 10, "size 10 instead of 5000")])
def test_a_copy_that_differs_is_removed_and_the_source_kept(tmp_path, monkeypatch, corrupt, why):
    src, dst = tmp_path / "a.bin", tmp_path / "b.bin"
    src.write_bytes(b"x" * 5000)

    def bad_copy(a, b):
        shutil.copyfile(a, b)
        with open(b, "wb") as fh:
            fh.write(corrupt)

    monkeypatch.setattr(disk.shutil, "copy2", bad_copy)
    with pytest.raises(FileOperationError, match=why):
        disk.copy_then_remove(str(src), str(dst))
    assert src.read_bytes() == b"x" * 5000 and not dst.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]  # no partial copy left


def test_a_folder_copy_is_checked_file_by_file(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("hello")
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    assert disk._differs(str(src), str(copy)) is None
    (copy / "sub" / "f.txt").write_text("hellO")
    assert disk._differs(str(src), str(copy)) == "sub/f.txt: content hash"


@pytest.mark.parametrize("size", [0, 1, 4096, disk.SMALL - 1, disk.SMALL, disk.SMALL + 1, 3 * disk.SMALL + 7])
def test_hash_of_is_hash_file_at_every_size(tmp_path, size):
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(size))
    assert disk.hash_of(str(f), size) == hash_file(str(f))


def test_make_parents_returns_only_the_folders_it_made(tmp_path):
    made = disk.make_parents(str(tmp_path / "a" / "b"))
    assert made == [str(tmp_path / "a"), str(tmp_path / "a" / "b")]
    assert disk.make_parents(str(tmp_path / "a" / "b")) == []
    (tmp_path / "a" / "file").write_text("x")
    with pytest.raises(FileOperationError, match="cannot be made"):
        disk.make_parents(str(tmp_path / "a" / "file"))

"""Cross-filesystem moves check the copy before the source goes: a copy that differs (size or content) is removed
and the source kept."""

from __future__ import annotations

import shutil

import pytest

from flows.fileops import disk
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

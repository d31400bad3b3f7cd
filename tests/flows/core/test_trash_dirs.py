"""Which folders are trashes: volume trashes by name, a home or assay trash by its files/ and info/."""

from __future__ import annotations

from flows.core.trash_dirs import is_trash_dir, is_volume_trash, under_trash


def test_volume_trashes_are_known_by_name_and_others_by_their_files_and_info(tmp_path):
    assert is_volume_trash(".Trash-0") and is_volume_trash(".Trash-1000") and is_volume_trash(".Trash")
    assert not is_volume_trash(".Trash-old") and not is_volume_trash("Trash-0") and not is_volume_trash(".Trashy")
    home = tmp_path / "share" / "Trash"
    (home / "files").mkdir(parents=True)
    assert not is_trash_dir(str(home), "Trash")  # no info/: a folder a person named Trash
    (home / "info").mkdir()
    assert is_trash_dir(str(home), "Trash")
    (tmp_path / "trash").mkdir()
    assert not is_trash_dir(str(tmp_path / "trash"), "trash")


def test_a_path_under_a_trash_below_the_root_is_in_the_trash(tmp_path):
    root = str(tmp_path)
    assert under_trash(root, [".Trash-0", "files", "a.txt"]) and under_trash(root, [".Trash-0"])
    assert not under_trash(root, ["docs", "a.txt"]) and not under_trash(root, ["Trash", "files", "a.txt"])
    (tmp_path / "Trash" / "files").mkdir(parents=True)
    (tmp_path / "Trash" / "info").mkdir()
    assert under_trash(root, ["Trash", "files", "a.txt"])

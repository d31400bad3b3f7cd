"""assay's own folders: the data dir and a cache dir elsewhere, known by identity to the walk and by path, spelled
from a watched root, to a watcher."""

from __future__ import annotations

import os

import pytest

from flows.core.own_dirs import below, in_own_dir, own_dir_ids, own_dirs


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".assay" / "cache").mkdir(parents=True)
    monkeypatch.setattr("flows.core.capability._data_dir", home / ".assay")
    monkeypatch.delenv("ASSAY_CACHE_DIR", raising=False)
    return home


def test_the_data_dir_holds_the_cache_unless_the_cache_dir_is_set_elsewhere(home, monkeypatch):
    assert own_dirs() == [str(home / ".assay")]
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(home / "shared"))
    assert own_dirs() == [str(home / ".assay"), str(home / "shared")]
    st = os.stat(home / ".assay")
    assert own_dir_ids() == {(st.st_dev, st.st_ino)}  # the shared cache does not exist yet
    (home / "shared").mkdir()
    assert len(own_dir_ids()) == 2


def test_the_own_folders_below_a_root_are_spelled_from_it_and_cover_what_they_hold(home, tmp_path):
    (tmp_path / "link").symlink_to(home)
    for root in (home, tmp_path / "link"):
        prefixes = below(str(root))
        assert prefixes == (f"{root}/.assay/",)
        assert in_own_dir(str(root / ".assay"), prefixes) and in_own_dir(str(root / ".assay" / "assay.db"), prefixes)
        assert not in_own_dir(str(root / ".assay-old" / "a"), prefixes) and not in_own_dir(str(root), prefixes)
    assert below(str(home / ".assay")) == () and below(str(home / ".assay" / "cache")) == ()  # a root that is one
    assert below(str(tmp_path / "elsewhere")) == () and not in_own_dir(str(home / ".assay"), ())

"""The run settings a flow finds its store and roots by, when its parameters are all it got."""

from __future__ import annotations

import os
from pathlib import Path

from flows.core.settings import RunSettings, export_for_runs, run_settings


def test_defaults_are_the_data_dir_store_and_the_home_directory(monkeypatch) -> None:
    for name in ("ASSAY_DATA_DIR", "ASSAY_DATABASE_URL", "ASSAY_ROOTS"):
        monkeypatch.delenv(name, raising=False)
    settings = RunSettings()
    assert settings.store_url == f"sqlite:///{Path('~/.assay').expanduser() / 'assay.db'}"
    assert settings.effective_roots().paths == (os.path.realpath(Path.home()),)


def test_roots_are_split_on_the_path_separator(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("ASSAY_ROOTS", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    assert RunSettings().roots == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_a_serving_process_exports_its_store_and_roots_for_the_runs_it_starts(monkeypatch, tmp_path: Path) -> None:
    for name in ("ASSAY_DATA_DIR", "ASSAY_DATABASE_URL", "ASSAY_ROOTS"):
        monkeypatch.setenv(name, "")  # so the test's own values are undone afterwards
    export_for_runs(data_dir=tmp_path, store_url="sqlite:///x.db", roots=[str(tmp_path)])
    try:
        assert run_settings().store_url == "sqlite:///x.db"
        assert run_settings().effective_roots().paths == (os.path.realpath(tmp_path),)
    finally:
        run_settings.cache_clear()

"""TreeWatcher on a real folder with real watchfiles: settling, partial names, deletes, moves, catch-up, robustness.

Every wait polls the store with a timeout; nothing asserts how long anything took.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from flows.index.watch import PARTIAL_NAMES, ChangeSet, TreeWatcher
from store import sets as store_sets
from store.entries import get_entry
from store.models import SetMember
from tests.conftest import wait_for

TIMEOUT = 20.0



@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "watched"
    (root / "sub").mkdir(parents=True)
    (root / "keep.txt").write_text("kept")
    (root / "sub" / "photo.jpg").write_bytes(b"j" * 300)
    return root


@pytest.fixture
def changes() -> list[ChangeSet]:
    return []


@pytest.fixture
def watcher(engine, folder, changes):
    w = TreeWatcher(engine, [str(folder)], debounce_ms=200, on_change=changes.append, name="test")
    yield w
    w.stop()


def started(w: TreeWatcher) -> TreeWatcher:
    w.start()
    assert w.wait_caught_up(TIMEOUT), w.last_error
    return w


def entry(engine, path: Path):
    return get_entry(engine, path=str(path))


def members(engine, entry_id: int) -> int:
    with engine.connect() as conn:
        t = SetMember.__table__
        return conn.execute(select(func.count()).select_from(t).where(t.c.entry_id == entry_id)).scalar_one()


def test_start_catches_up_and_reports_a_full_rescan(engine, folder, watcher, changes):
    started(watcher)
    assert entry(engine, folder / "sub" / "photo.jpg")["media_type"] == "image"
    assert changes[0] == ChangeSet(entry_ids=[], removed_paths=[], full_rescan=True)
    assert watcher.running and watcher.counters.catch_ups == 1 and watcher.last_catch_up.job_ids


def test_created_file_appears_with_its_fields_once_settled(engine, folder, watcher, changes):
    started(watcher)
    new = folder / "sub" / "Report.PDF"
    new.write_bytes(b"p" * 1000)
    row = wait_for(lambda: entry(engine, new), what="the new file's entry")
    assert (row["parent"], row["name"], row["extension"], row["media_type"], row["kind"], row["size"]) == (
        str(folder / "sub"), "Report.PDF", ".pdf", "document", "file", 1000)
    assert entry(engine, folder / "sub")["size"] == 1300  # ancestor sizes refreshed
    assert entry(engine, folder)["size"] == 1304
    assert wait_for(lambda: [c for c in changes if row["id"] in c.entry_ids], what="a change set with the entry")


def test_a_file_still_being_written_is_indexed_only_after_it_settles(engine, folder, engine_watcher_slow):
    w = started(engine_watcher_slow)
    growing = folder / "download.bin"
    seen_while_writing = []

    def write() -> None:
        with open(growing, "wb") as f:
            for _ in range(30):
                f.write(b"d" * 100)
                f.flush()
                time.sleep(0.03)

    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        seen_while_writing.append(entry(engine, growing))
        time.sleep(0.02)
    writer.join()
    assert not any(seen_while_writing)
    row = wait_for(lambda: entry(engine, growing), what="the settled file")
    assert row["size"] == 3000 and w.running


@pytest.fixture
def engine_watcher_slow(engine, folder):
    w = TreeWatcher(engine, [str(folder)], debounce_ms=800, name="slow")
    yield w
    w.stop()


@pytest.mark.parametrize("partial", ["movie.mp4.part", "paper.pdf.crdownload", "x.tmp", "~$report.docx",
                                     ".~lock.sheet.ods#", ".notes.txt.swp"])
def test_partial_download_names_are_ignored_until_renamed(engine, folder, watcher, partial):
    started(watcher)
    part = folder / partial
    part.write_bytes(b"x" * 50)
    marker = folder / "marker.txt"  # written after the partial file: once it is indexed, the partial was seen too
    marker.write_text("m")
    wait_for(lambda: entry(engine, marker), what="the marker")
    assert entry(engine, part) is None
    final = folder / "final.pdf"
    part.rename(final)
    row = wait_for(lambda: entry(engine, final), what="the renamed file")
    assert row["media_type"] == "document" and row["size"] == 50


def test_the_partial_name_list_covers_the_usual_downloaders():
    assert {"*.part", "*.crdownload", "*.tmp"} <= set(PARTIAL_NAMES)


def test_exclude_globs_and_hidden_files_are_not_indexed(engine, folder):
    w = started(TreeWatcher(engine, [str(folder)], debounce_ms=200, include_hidden=False, exclude=["*.log"]))
    try:
        (folder / "app.log").write_text("log")
        (folder / ".secret").write_text("s")
        (folder / "marker.txt").write_text("m")
        wait_for(lambda: entry(engine, folder / "marker.txt"), what="the marker")
        assert entry(engine, folder / "app.log") is None and entry(engine, folder / ".secret") is None
    finally:
        w.stop()


def test_delete_removes_the_entry_its_subtree_and_its_memberships(engine, folder, watcher, changes):
    started(watcher)
    photo = entry(engine, folder / "sub" / "photo.jpg")
    store_sets.create_set(engine, name="photos")
    store_sets.modify_members(engine, name="photos", operation="add", paths=[photo["path"]])
    assert members(engine, photo["id"]) == 1
    (folder / "sub" / "photo.jpg").unlink()
    wait_for(lambda: entry(engine, folder / "sub" / "photo.jpg") is None, what="the entry to go")
    assert members(engine, photo["id"]) == 0
    assert entry(engine, folder / "sub")["size"] == 0
    assert wait_for(lambda: [c for c in changes if photo["path"] in c.removed_paths], what="a removal change set")
    (folder / "sub").rmdir()
    wait_for(lambda: entry(engine, folder / "sub") is None, what="the folder's entry to go")


def test_rename_keeps_the_entry_id_and_its_set_membership(engine, folder, watcher):
    started(watcher)
    photo = entry(engine, folder / "sub" / "photo.jpg")
    store_sets.create_set(engine, name="photos")
    store_sets.modify_members(engine, name="photos", operation="add", paths=[photo["path"]])
    moved = folder / "renamed.jpeg"
    (folder / "sub" / "photo.jpg").rename(moved)
    row = wait_for(lambda: entry(engine, moved), what="the moved entry")
    assert row["id"] == photo["id"] and row["parent"] == str(folder) and row["extension"] == ".jpeg"
    assert entry(engine, folder / "sub" / "photo.jpg") is None
    assert members(engine, photo["id"]) == 1
    wait_for(lambda: watcher.counters.entries_moved >= 1, what="the move counted")  # counted after the commit


def test_renaming_a_folder_keeps_the_ids_below_it(engine, folder, watcher):
    started(watcher)
    before = entry(engine, folder / "sub" / "photo.jpg")
    (folder / "sub").rename(folder / "pictures")
    row = wait_for(lambda: entry(engine, folder / "pictures" / "photo.jpg"), what="the moved child")
    assert row["id"] == before["id"] and row["parent"] == str(folder / "pictures")
    assert entry(engine, folder / "sub") is None


def test_a_folder_moved_in_from_outside_is_indexed_with_its_contents(engine, folder, watcher, tmp_path):
    started(watcher)
    outside = tmp_path / "outside" / "album"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "a.png").write_bytes(b"a" * 10)
    outside.rename(folder / "album")
    row = wait_for(lambda: entry(engine, folder / "album" / "deep" / "a.png"), what="the moved-in file")
    assert row["media_type"] == "image"
    assert wait_for(lambda: entry(engine, folder / "album")["size"] == 10, what="the folder size")


def test_stop_then_changes_then_start_catches_up(engine, folder, watcher, changes):
    started(watcher)
    assert watcher.stop() and not watcher.running
    (folder / "keep.txt").unlink()
    (folder / "while-away.md").write_text("# hello")
    started(watcher)
    assert entry(engine, folder / "keep.txt") is None
    assert entry(engine, folder / "while-away.md")["media_type"] == "text"
    assert [c.full_rescan for c in changes].count(True) == 2
    (folder / "after.txt").write_text("live again")
    wait_for(lambda: entry(engine, folder / "after.txt"), what="a file created after the restart")


def test_errors_in_on_change_do_not_kill_the_watcher(engine, folder):
    calls = []

    def explode(changes: ChangeSet) -> None:
        calls.append(changes)
        raise RuntimeError("boom")

    w = started(TreeWatcher(engine, [str(folder)], debounce_ms=200, on_change=explode))
    try:
        for name in ("one.txt", "two.txt"):
            (folder / name).write_text(name)
            wait_for(lambda: entry(engine, folder / name), what=name)  # noqa: B023 (waited for here)
        assert w.running and w.last_error is None and len(calls) >= 2
    finally:
        w.stop()


def test_a_missing_folder_stops_the_watcher_with_an_error(engine, tmp_path):
    w = TreeWatcher(engine, [str(tmp_path / "nope")], debounce_ms=100)
    w.start()
    wait_for(lambda: not w.running, what="the watcher to stop")
    assert w.last_error and "nope" in w.last_error
    assert not w.wait_caught_up(0.1)


def test_stop_is_prompt_and_restartable(engine, folder, watcher):
    started(watcher)
    assert watcher.stop(timeout=5)
    assert watcher.stop(timeout=5)  # stopping twice is harmless
    started(watcher)
    assert watcher.running


def test_wanted_filters_by_root_depth_hidden_and_globs(engine, folder):
    w = TreeWatcher(engine, [str(folder)], recursive=False, include_hidden=False, exclude=["cache"])
    assert w.wanted(str(folder / "a.txt"))
    assert not w.wanted(str(folder / "sub" / "a.txt"))  # not recursive
    assert not w.wanted(str(folder / ".hidden"))
    assert not w.wanted(str(folder / "cache"))
    assert not w.wanted(str(folder.parent / "elsewhere.txt"))
    assert not w.wanted(str(folder / "a.txt.part"))
    assert not w.wanted(str(folder / ".Trash-0"))  # what is trashed from a watched volume is not a new file
    assert not TreeWatcher(engine, [str(folder)]).wanted(str(folder / ".Trash-0" / "files" / "a.txt"))


class Recording(TreeWatcher):
    """A watcher that keeps every path watchfiles handed it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[str] = []

    def _record(self, changes) -> None:
        self.seen.extend(path for _, path in changes)
        super()._record(changes)


def test_a_watcher_on_a_folder_holding_the_data_dir_ignores_the_stores_own_writes(engine, data_dir, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)  # the store (engine) lives in it
    w = Recording(engine, [str(tmp_path)], debounce_ms=200, name="home")
    try:
        started(w)  # its catch-up wrote the store
        (data_dir / "cache" / "ab").mkdir(parents=True)
        (data_dir / "cache" / "ab" / "thumb.jpg").write_bytes(b"t" * 10)
        marker = tmp_path / "marker.txt"  # written after: once it is indexed, the writes before it were seen too
        marker.write_text("m")
        wait_for(lambda: entry(engine, marker), what="the marker")
        assert str(marker) in w.seen and not [p for p in w.seen if p.startswith(str(data_dir))]
        assert entry(engine, data_dir) is None and entry(engine, data_dir / "cache" / "ab" / "thumb.jpg") is None
    finally:
        w.stop()


def test_paths_in_the_data_dir_or_the_cache_dir_are_not_wanted_however_the_root_is_spelled(engine, tmp_path,
                                                                                           monkeypatch):
    home = tmp_path / "home"
    (home / ".assay").mkdir(parents=True)
    (home / "shared").mkdir()
    (tmp_path / "link").symlink_to(home)
    monkeypatch.setattr("flows.core.capability._data_dir", home / ".assay")
    monkeypatch.setenv("ASSAY_CACHE_DIR", str(home / "shared"))
    for root in (home, tmp_path / "link"):
        w = TreeWatcher(engine, [str(root)])
        assert not w.wanted(str(root / ".assay" / "assay.db")) and not w.wanted(str(root / ".assay"))
        assert not w.wanted(str(root / "shared" / "ab" / "cd.jpg"))
        assert w.wanted(str(root / ".assay-notes.txt")) and w.wanted(str(root / "sharedness" / "a.txt"))

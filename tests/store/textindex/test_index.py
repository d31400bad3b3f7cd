"""The text engine's index over a store (store.textindex.index), on SQLite and PostgreSQL: rebuilding from the
store, catching up with its change log (writes, replacements, deletions, moves), recovering from lost or damaged
files, a second index on the same directory reading behind the writer, budgeted catch-up, and merging."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from flows.documents.model import Extracted, Page
from store import documents as docs
from store.entries import get_entry, make_row, upsert_entries
from store.textindex import Leaf, Scope, Snapshot, TextIndex, search
from store.textindex.index import MANIFEST
from tests.conftest import BACKENDS, backend_engine, wait_for


@pytest.fixture(params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "textindex") as engine:
        yield engine


@pytest.fixture
def ix_dir(tmp_path: Path) -> Path:
    return tmp_path / "ix"


@pytest.fixture
def open_index(store, ix_dir):
    """Opens TextIndexes over the store (in ``ix_dir`` unless told), closed at the end."""
    opened: list[TextIndex] = []

    def open_(directory: Path | None = None) -> TextIndex:
        index = TextIndex(directory or ix_dir, store)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        index.close()


def add_entries(engine, *paths: str) -> dict[str, int]:
    rows = [make_row(p, kind="file", size=1, mtime=1.0, ctime=1.0, inode=None, scan_id=None, indexed_at=0.0)
            for p in paths]
    with engine.begin() as conn:
        upsert_entries(conn, rows)
        return {p: get_entry(conn, path=p)["id"] for p in paths}


def write(engine, entry_id: int, *pages: str, fmt: str = "text", ocr: tuple[int, ...] = (),
          segment_chars: int = 40) -> None:
    ex = Extracted(path="x", format=fmt, pages=[Page(n, t, ocr=n in ocr) for n, t in enumerate(pages, 1)],
                   total_pages=len(pages))
    docs.write_extracted_many(engine, [docs.DocumentWrite(entry_id, 1, 1.0, "k", ex)], segment_chars=segment_chars)


def add_documents(engine, documents: dict[str, str]) -> dict[str, int]:
    """Entries with one page of text each."""
    ids = add_entries(engine, *documents)
    for path, page in documents.items():
        write(engine, ids[path], page)
    return ids


EVERYWHERE = Scope()


def found(snap: Snapshot, needle: str, scope: Scope = EVERYWHERE) -> list[tuple[str, int, str]]:
    """(path, line, text) of every line holding ``needle``, sorted."""
    result = search(snap, Leaf(needle), lambda line: needle in line, scope=scope, limit=1000)
    assert result.total == len(result.hits)
    return sorted((h.path, h.line, h.text) for h in result.hits)


QUERIES = ("alpha", "beta", "e-mail", "line", "a", "-")


def live_segments(ix_dir: Path) -> set[str]:
    """The segments the manifest names (a replaced segment's file is deleted a while later)."""
    return {item["name"] for item in json.loads((ix_dir / MANIFEST).read_text())["segments"]}


def answers(snap: Snapshot) -> dict[str, list[tuple[str, int, str]]]:
    return {q: found(snap, q) for q in QUERIES}


def test_a_fresh_index_over_a_store_with_documents_rebuilds_and_finds_them(store, open_index, ix_dir):
    add_documents(store, {"/d/a.txt": "alpha beta\nan e-mail line", "/d/b.md": "Beta delta"})
    snap = open_index().snapshot()
    assert found(snap, "beta") == [("/d/a.txt", 1, "alpha beta"), ("/d/b.md", 1, "Beta delta")]
    assert found(snap, "e-mail") == [("/d/a.txt", 2, "an e-mail line")]
    assert snap.queued == frozenset() and len(snap.segments) == 1
    assert (ix_dir / MANIFEST).exists() and (ix_dir / snap.segments[0].name).exists()


def test_the_live_entries_are_the_stores_searchable_documents_once_caught_up(store, open_index):
    ids = add_documents(store, {"/d/a.txt": "alpha", "/d/b.txt": "beta", "/d/c.txt": "gamma"})
    index = open_index()
    index.sync()
    assert index.live_entries() == set(ids.values())
    write(store, ids["/d/a.txt"], "alpha again")  # replaced: its new version is the live one
    docs.delete_documents(store, [ids["/d/b.txt"]])
    index.sync()
    assert index.live_entries() == {ids["/d/a.txt"], ids["/d/c.txt"]}


def test_an_empty_store_gives_an_empty_index(open_index):
    snap = open_index().sync()
    assert snap.segments == () and snap.queued == frozenset() and found(snap, "a") == []


def test_hits_give_the_pages_and_ocr_the_store_holds(store, open_index):
    eid = add_entries(store, "/p/book.pdf")["/p/book.pdf"]
    write(store, eid, "cover page", "one\nchapter one begins", "scanned\nchapter two", fmt="pdf", ocr=(3,),
          segment_chars=8)
    hits = search(open_index().snapshot(), Leaf("chapter"), lambda line: "chapter" in line).hits
    assert [(h.line, h.text, h.page, h.ocr, h.format) for h in hits] == [
        (3, "chapter one begins", 2, False, "pdf"), (5, "chapter two", 3, True, "pdf")]


def test_a_document_written_after_a_sync_is_found_at_the_next_snapshot(store, open_index):
    add_documents(store, {"/d/a.txt": "alpha"})
    index = open_index()
    assert found(index.sync(), "gamma") == []
    add_documents(store, {"/d/new.txt": "gamma ray"})
    snap = index.snapshot()
    assert found(snap, "gamma") == [("/d/new.txt", 1, "gamma ray")] and snap.queued == frozenset()
    assert found(snap, "alpha") == [("/d/a.txt", 1, "alpha")]


def test_replacing_a_documents_text_tombstones_its_old_version(store, open_index):
    eid = add_documents(store, {"/d/a.txt": "old words\nkept"})["/d/a.txt"]
    index = open_index()
    first = index.sync().segments[0].name
    write(store, eid, "new words")
    snap = index.snapshot()
    assert found(snap, "old") == [] and found(snap, "kept") == []
    assert found(snap, "words") == [("/d/a.txt", 1, "new words")]
    assert snap.deleted[first] == frozenset({0}) and len(snap.segments) == 2


def test_deleting_a_document_or_its_entry_removes_it(store, open_index):
    ids = add_documents(store, {"/d/a.txt": "platypus a", "/d/b.txt": "platypus b", "/d/c.txt": "platypus c"})
    index = open_index()
    assert len(found(index.sync(), "platypus")) == 3
    docs.delete_documents(store, [ids["/d/a.txt"]])
    with store.begin() as conn:  # the cascade from entries to documents is logged as well
        conn.execute(text("DELETE FROM entries WHERE path = '/d/b.txt'"))
    snap = index.snapshot()
    assert found(snap, "platypus") == [("/d/c.txt", 1, "platypus c")] and snap.queued == frozenset()


def test_moving_an_entry_gives_its_lines_the_new_path(store, open_index):
    add_documents(store, {"/old/a.txt": "wombat"})
    index = open_index()
    index.sync()
    with store.begin() as conn:
        conn.execute(text("UPDATE entries SET path = '/new/a.txt' WHERE path = '/old/a.txt'"))
    snap = index.snapshot()
    assert found(snap, "wombat") == [("/new/a.txt", 1, "wombat")]
    assert found(snap, "wombat", Scope(under=("/old",))) == []
    assert found(snap, "wombat", Scope(under=("/new",))) == [("/new/a.txt", 1, "wombat")]


# --- lost or damaged files --------------------------------------------------------------------------------------


def _overwrite_segment_bytes(ix_dir: Path) -> None:
    seg = next(ix_dir.glob("seg-*.tx"))
    data = bytearray(seg.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = b"\xa5" * 16
    with open(seg, "r+b") as f:  # in place, as a failing disk would
        f.write(data)


DAMAGE = {
    "directory deleted": lambda d: shutil.rmtree(d),
    "segment bytes overwritten": _overwrite_segment_bytes,
    "segment truncated": lambda d: os.truncate(next(d.glob("seg-*.tx")), 50),
    "segment deleted": lambda d: next(d.glob("seg-*.tx")).unlink(),
    "manifest overwritten": lambda d: (d / MANIFEST).write_text("{not json"),
    "manifest of another format": lambda d: (d / MANIFEST).write_text(json.dumps({"format": 99})),
    "manifest deleted": lambda d: (d / MANIFEST).unlink(),
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_lost_or_damaged_files_are_rebuilt_from_the_store(store, open_index, ix_dir, damage):
    ids = add_documents(store, {"/d/a.txt": "alpha beta\nan e-mail line", "/d/b.txt": "beta - a\nline"})
    index = open_index()
    before = answers(index.sync())
    index.close()
    damage(ix_dir)
    write(store, ids["/d/b.txt"], "alpha again\nsecond line")  # the store moved on meanwhile
    expected = {**before, "alpha": [("/d/a.txt", 1, "alpha beta"), ("/d/b.txt", 1, "alpha again")],
                "beta": [("/d/a.txt", 1, "alpha beta")], "-": [("/d/a.txt", 2, "an e-mail line")],
                "line": [("/d/a.txt", 2, "an e-mail line"), ("/d/b.txt", 2, "second line")],
                "a": [("/d/a.txt", 1, "alpha beta"), ("/d/a.txt", 2, "an e-mail line"),
                      ("/d/b.txt", 1, "alpha again")]}
    snap = open_index().sync()
    assert answers(snap) == expected and snap.queued == frozenset()


def test_a_change_log_that_went_back_rebuilds_the_index(store, open_index):
    """A restored backup: the store's newest change is older than what the index applied."""
    add_documents(store, {"/d/a.txt": "alpha", "/d/b.txt": "beta"})
    index = open_index()
    old = {s.name for s in index.sync().segments}
    with store.begin() as conn:
        conn.execute(text("DELETE FROM documents WHERE entry_id IN (SELECT id FROM entries WHERE path = '/d/b.txt')"))
        conn.execute(text("DELETE FROM document_changes"))
    snap = index.snapshot()
    assert found(snap, "alpha") == [("/d/a.txt", 1, "alpha")] and found(snap, "beta") == []
    assert old.isdisjoint(s.name for s in snap.segments)


# --- a second index on the same directory -------------------------------------------------------------------


def test_a_second_index_in_the_process_cannot_take_the_writer_lock(open_index):
    writer, other = open_index(), open_index()
    assert writer.writer and writer.writer  # taken once, kept
    assert not other.writer and not other.merge()


def test_a_reader_reports_everything_searchable_as_queued_until_the_writer_has_indexed(store, open_index):
    ids = add_documents(store, {"/d/a.txt": "alpha", "/d/b.txt": "beta"})
    writer = open_index()
    assert writer.writer
    snap = open_index().snapshot()
    assert snap.queued == frozenset(ids.values()) and snap.segments == ()


def test_a_reader_sees_what_the_writer_wrote_and_queues_what_it_has_not_applied(store, open_index):
    ids = add_documents(store, {"/d/a.txt": "alpha one", "/d/b.txt": "beta"})
    writer = open_index()
    writer.sync()
    reader = open_index()
    assert not reader.writer
    assert found(reader.snapshot(), "alpha") == [("/d/a.txt", 1, "alpha one")]
    new = add_documents(store, {"/d/c.txt": "alpha three"})["/d/c.txt"]
    write(store, ids["/d/a.txt"], "alpha two")
    behind = reader.snapshot()  # behind another writer: the changes are queued, not searchable yet
    assert behind.queued == frozenset({ids["/d/a.txt"], new})
    assert ("/d/c.txt", 1, "alpha three") not in found(behind, "alpha")
    assert reader.snapshot(budget=None).queued == behind.queued  # a reader never indexes
    writer.sync()
    caught_up = reader.snapshot()
    assert caught_up.queued == frozenset()
    assert found(caught_up, "alpha") == [("/d/a.txt", 1, "alpha two"), ("/d/c.txt", 1, "alpha three")]
    assert found(caught_up, "beta") == [("/d/b.txt", 1, "beta")]


# --- catching up in steps, merging ----------------------------------------------------------------------------


def test_a_budgeted_snapshot_indexes_that_many_and_leaves_the_rest_queued(store, open_index):
    ids = add_documents(store, {f"/d/{n}.txt": f"kiwi {n}" for n in range(3)})
    index = open_index()
    assert index.snapshot(budget=0).queued == frozenset(ids.values())
    snap = index.snapshot(budget=1)
    first, *rest = sorted(ids.values())
    assert snap.queued == frozenset(rest)
    assert [path for path, _, _ in found(snap, "kiwi")] == [p for p, e in ids.items() if e == first]
    assert search(snap, Leaf("kiwi"), lambda line: "kiwi" in line).queued == frozenset(rest)
    snap = index.snapshot(budget=None)
    assert snap.queued == frozenset() and len(found(snap, "kiwi")) == 3


def _segments_by_rounds(store, index: TextIndex, rounds: int) -> None:
    """One segment per round, each larger than the one before: each round writes a document and syncs."""
    for n in range(rounds):
        add_documents(store, {f"/m/{n}.txt": f"alpha {n}\nline e-mail {n}\n" + "a - b\n" * n})
        index.sync()


def test_merge_merges_the_smallest_segments_above_max_segments_with_the_same_results(store, open_index, ix_dir):
    index = open_index()
    _segments_by_rounds(store, index, 4)
    snap = index.sync()
    before, names = answers(snap), [s.name for s in snap.segments]
    assert len(names) == 4
    assert index.merge(max_segments=2)
    snap = index.snapshot()
    assert len(snap.segments) == 2 and answers(snap) == before
    assert names[-1] in {s.name for s in snap.segments}  # the largest is left alone; the three others are one
    assert live_segments(ix_dir) == {s.name for s in snap.segments}
    assert not index.merge(max_segments=2)
    assert answers(open_index().snapshot()) == before  # a reader of the merged manifest


def test_merge_rewrites_a_segment_more_than_half_deleted(store, open_index, ix_dir):
    ids = add_documents(store, {"/h/a.txt": "alpha a", "/h/b.txt": "alpha b", "/h/c.txt": "beta c line"})
    index = open_index()
    first = index.sync().segments[0].name
    write(store, ids["/h/a.txt"], "gamma a")
    write(store, ids["/h/b.txt"], "gamma b")
    snap = index.sync()
    before = answers(snap)
    assert len(snap.deleted[first]) == 2
    assert index.merge()
    snap = index.snapshot()
    assert first not in {s.name for s in snap.segments} and first not in live_segments(ix_dir)
    assert all(not gone for gone in snap.deleted.values())
    assert answers(snap) == before and found(snap, "gamma") == [("/h/a.txt", 1, "gamma a"), ("/h/b.txt", 1, "gamma b")]
    assert not index.merge()


def test_a_started_index_catches_up_in_the_background(store, open_index):
    index = open_index()
    index.sync()
    index.start(interval=0.02)
    add_documents(store, {"/bg/a.txt": "kiwi"})
    assert wait_for(lambda: found(index.snapshot(budget=0), "kiwi"), what="the background catch-up") == [
        ("/bg/a.txt", 1, "kiwi")]


# --- readers and rebuilds after the files went away -------------------------------------------------------------


def test_reader_behind_the_writer_does_not_return_lines_of_entries_it_reports_queued(store, open_index):
    ids = add_documents(store, {"/d/a.txt": "alpha one", "/d/b.txt": "alpha gone"})
    writer = open_index()
    writer.sync()
    reader = open_index()
    write(store, ids["/d/a.txt"], "alpha two")
    docs.delete_documents(store, [ids["/d/b.txt"]])
    behind = reader.snapshot()
    assert behind.queued == frozenset(ids.values())
    assert found(writer.snapshot(budget=0), "alpha") == []  # the writer in the same state: both tombstoned
    assert found(behind, "alpha") == []  # actual: the old "alpha one" and the deleted "alpha gone"


def test_reader_does_not_keep_a_segment_whose_name_a_rebuild_reused(store, open_index, ix_dir):
    ids = add_documents(store, {"/d/a.txt": "apple old", "/d/b.txt": "apple two"})
    writer = open_index()
    writer.sync()
    reader = open_index()
    assert len(found(reader.snapshot(), "apple")) == 2
    writer.close()
    shutil.rmtree(ix_dir)  # or: (ix_dir / MANIFEST).write_text("{")
    write(store, ids["/d/a.txt"], "apple new")
    write(store, ids["/d/b.txt"], "banana")
    rebuilt = open_index().sync()
    assert found(rebuilt, "apple") == [("/d/a.txt", 1, "apple new")]
    snap = reader.snapshot()
    assert found(snap, "banana") == [("/d/b.txt", 1, "banana")]  # actual: []
    assert found(snap, "apple") == [("/d/a.txt", 1, "apple new")]  # actual: apple old, apple two


def test_reader_after_a_manifest_rebuild(store, open_index, ix_dir):
    ids = add_documents(store, {"/d/a.txt": "apple old"})
    writer = open_index()
    writer.sync()
    reader = open_index()
    assert len(found(reader.snapshot(), "apple")) == 1
    writer.close()
    (ix_dir / MANIFEST).write_text("{")
    write(store, ids["/d/a.txt"], "apple new")
    open_index().sync()
    assert found(reader.snapshot(), "apple") == [("/d/a.txt", 1, "apple new")]


def test_an_index_whose_directory_was_deleted_rebuilds_at_its_next_sync(store, open_index, ix_dir):
    add_documents(store, {"/d/a.txt": "alpha"})
    index = open_index()
    index.sync()
    shutil.rmtree(ix_dir)
    add_documents(store, {"/d/b.txt": "alpha b"})
    snap = index.sync()  # actual: FileNotFoundError .../ix/manifest.json.tmp
    assert found(snap, "alpha") == [("/d/a.txt", 1, "alpha"), ("/d/b.txt", 1, "alpha b")]


# --- the background thread's batching ----------------------------------------------------------------------------


def test_the_background_holds_what_it_reads_while_writers_are_busy_and_writes_one_segment(store, open_index):
    index = open_index()
    index.sync()
    ids = add_documents(store, {"/h/a.txt": "alpha one"})
    snap = index.sync(None, hold=True)  # read and held: still queued, not searchable, no segment yet
    assert snap.segments == () and snap.queued == {ids["/h/a.txt"]}
    more = add_documents(store, {"/h/b.txt": "alpha two"})
    snap = index.sync(None, hold=True)  # something new again: held with the first
    assert snap.segments == () and snap.queued == {ids["/h/a.txt"], more["/h/b.txt"]}
    snap = index.sync(None, hold=True)  # a round with nothing new: the writers paused, one segment written
    assert len(snap.segments) == 1 and snap.queued == frozenset()
    assert [p for p, _, _ in found(snap, "alpha")] == ["/h/a.txt", "/h/b.txt"]


def test_a_search_or_a_close_writes_what_the_background_holds(store, open_index):
    index = open_index()
    index.sync()
    add_documents(store, {"/hc/a.txt": "gamma one"})
    index.sync(None, hold=True)
    assert found(index.sync(0), "gamma") == []  # a sync that indexes nothing leaves it held
    assert [p for p, _, _ in found(index.snapshot(), "gamma")] == ["/hc/a.txt"]  # a search writes what is held
    add_documents(store, {"/hc/b.txt": "gamma two"})
    index.sync(None, hold=True)
    index.close()
    assert [p for p, _, _ in found(open_index().sync(0), "gamma")] == ["/hc/a.txt", "/hc/b.txt"]


def test_a_document_deleted_while_the_background_holds_it_is_not_left_searchable(store, open_index):
    # the soak's "1 stale text-index document": the background read a document and held it; its document was
    # deleted (the watcher's file went); the next round re-read the entry for the deletion, found nothing, and the
    # flush took the version held from before for the entry's current one: searchable for ever, though gone
    index = open_index()
    index.sync()
    eid = add_documents(store, {"/hd/gone.txt": "ephemeral words"})["/hd/gone.txt"]
    index.sync(None, hold=True)  # read and held
    docs.delete_documents(store, [eid])
    index.sync(None, hold=True)  # the deletion applied, the entry read again: nothing to read
    snap = index.sync(None, hold=True)  # nothing new: what is held is written
    assert snap.queued == frozenset() and index.live_entries() == set()
    assert found(snap, "ephemeral") == []


def test_a_document_rewritten_while_the_background_holds_it_keeps_only_its_new_version(store, open_index):
    index = open_index()
    index.sync()
    eid = add_documents(store, {"/hd/list.txt": "run 1 of the plan"})["/hd/list.txt"]
    index.sync(None, hold=True)
    write(store, eid, "run 2 of the plan")
    index.sync(None, hold=True)  # the new version read into the same builder as the old
    snap = index.sync(None, hold=True)
    assert index.live_entries() == {eid}
    assert found(snap, "run") == [("/hd/list.txt", 1, "run 2 of the plan")]


def test_a_change_that_commits_after_a_later_one_is_applied_all_the_same(store, open_index):
    # PostgreSQL: a writer draws change number N, another draws N+1 and commits first; the index applies N+1, and
    # must still apply N when it commits (here a document made unsearchable, then one rewritten), not skip it
    if store.dialect.name == "sqlite":
        pytest.skip("SQLite commits one writer at a time: its changes appear in the order of their numbers")
    ids = add_documents(store, {"/late/a.txt": "walrus a", "/late/b.txt": "walrus b", "/late/c.txt": "other"})
    index = open_index()
    assert len(found(index.sync(), "walrus")) == 2
    with store.connect() as slow:
        with slow.begin():  # draws its change number first, commits last
            slow.execute(text("UPDATE documents SET status = 'error' WHERE entry_id = :e"), {"e": ids["/late/a.txt"]})
            write(store, ids["/late/c.txt"], "newer text")  # a later number, committed at once
            index.sync()
        snap = index.sync()
    assert found(snap, "walrus") == [("/late/b.txt", 1, "walrus b")] and snap.queued == frozenset()
    assert index.live_entries() == {ids["/late/b.txt"], ids["/late/c.txt"]}
    with store.connect() as slow:
        with slow.begin():
            slow.execute(text("UPDATE documents SET status = 'ok' WHERE entry_id = :e"), {"e": ids["/late/a.txt"]})
            write(store, ids["/late/c.txt"], "newest text")
            index.sync()
        index.close()  # a restart in between: the open hole is in the manifest
    assert [p for p, _, _ in found(open_index().sync(), "walrus")] == ["/late/a.txt", "/late/b.txt"]


def test_a_merge_never_builds_a_segment_past_the_cap(store, open_index, ix_dir, monkeypatch):
    index = open_index()
    _segments_by_rounds(store, index, 4)
    snap = index.sync()
    sizes = sorted(s.text_bytes for s in snap.segments)
    monkeypatch.setattr("store.textindex.index.MERGE_CAP", sizes[0] + sizes[1])  # room for the two smallest only
    before = answers(snap)
    assert index.merge(max_segments=1)
    snap = index.snapshot()
    assert len(snap.segments) == 3 and max(s.text_bytes for s in snap.segments) == max(sizes[-1], sizes[0] + sizes[1])
    assert answers(snap) == before
    monkeypatch.setattr("store.textindex.index.MERGE_CAP", 1)  # nothing fits: segments add up, nothing is merged
    assert not index.merge(max_segments=1)

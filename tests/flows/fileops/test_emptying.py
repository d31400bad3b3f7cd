"""The trash emptied: by age (the retention, with the setting of the moment), leaving what another machine's trash
holds, and one retention thread per store however often a process starts serving it."""

from __future__ import annotations

import os
import time

from sqlalchemy import func, select

from flows.fileops import emptying
from flows.index.indexer import index_tree
from flows.fileops.trashing import trash_one
from store import entries, file_journal, kept
from store import sets as store_sets
from store.file_journal import Origin
from store.models.file_operations import KeptItem


def trashed(engine, tree, *names: str) -> list[int]:
    origin = Origin.for_tool("delete-files")
    for name in names:
        trash_one(engine, origin, str(tree / name))
    return [r["id"] for r in file_journal.of_call(engine, origin.call_id)]


def test_the_retention_empties_only_what_is_older_than_its_days(engine, tree, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "home-dir"))
    (tmp_path / "home-dir").mkdir()
    index_tree(engine, str(tree), scan_id=1)
    with engine.begin() as conn:
        keep = store_sets.ensure_set(conn, name="keep")
        readme = entries.get_entry(engine, path=str(tree / "docs" / "readme.md"))
        store_sets.add_member_ids(conn, set_id=keep["id"], entry_ids=[readme["id"]])
    old, new = trashed(engine, tree, "docs/readme.md"), trashed(engine, tree, "Photos/notes.txt")
    with engine.connect() as conn:
        assert kept.counts(conn, old[0]) == {"memberships": 1, "maps": 0}
    [where] = [r["dst"] for r in file_journal.trashed(engine, ids=old)]
    assert emptying.purge_expired(engine, 30)["purgedCount"] == 0  # both trashed just now
    in_31_days = time.time() + 31 * emptying.DAY
    assert emptying.purge_expired(engine, 0, now=in_31_days)["purgedCount"] == 0  # 0: kept until trash-empty
    with engine.begin() as conn:  # the first trashed 40 days ago
        conn.execute(file_journal.F.update().where(file_journal.F.c.id.in_(old))
                     .values(finished_at=time.time() - 40 * emptying.DAY))
    result = emptying.purge_expired(engine, 30)
    assert [(r["operationId"], r["status"]) for r in result["results"]] == [(old[0], "purged")]
    assert not os.path.lexists(where) and file_journal.get(engine, old[0])["state"] == "purged"
    assert "the retention (30 days)" in file_journal.get(engine, old[0])["error"]
    assert [r["id"] for r in file_journal.trashed(engine)] == new
    with engine.connect() as conn:  # what its undo would have put back is dropped with it
        assert conn.execute(select(func.count()).select_from(KeptItem.__table__)
                            .where(KeptItem.__table__.c.operation_id == old[0])).scalar() == 0


def test_what_a_trash_this_machine_cannot_see_holds_is_left_alone(engine, tree, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "home-dir"))
    (tmp_path / "home-dir").mkdir()
    [op] = trashed(engine, tree, "docs/readme.md")
    with engine.begin() as conn:  # as another machine's volume trash would read here
        conn.execute(file_journal.F.update().where(file_journal.F.c.id == op)
                     .values(dst="/nowhere/.Trash-1000/files/readme.md"))
    [item] = emptying.listing(engine)["items"]
    assert item["inTrash"] is False and "not visible on this machine" in item["note"]
    result = emptying.empty(engine, everything=True)
    assert [r["status"] for r in result["results"]] == ["skipped"] and result["skippedCount"] == 1
    assert file_journal.get(engine, op)["state"] == "done"


def test_one_retention_thread_per_store(engine):
    first = emptying.start_retention(engine)
    again = emptying.start_retention(engine)
    try:
        assert again is first and first.thread.is_alive()
    finally:
        first.stop()
        first.thread.join(5)

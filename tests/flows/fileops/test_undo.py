"""Undo from the journal: a plan execution's moves go back (the store follows: same entry ids, set memberships kept),
a copy is removed, what an overwrite trashed comes back; refused, naming the file, when the file changed since, its
old place is taken, or it was undone already; a dry run changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from dsl.model import Plan
from flows.core.roots import Roots
from flows.fileops.undo import undo
from flows.index.indexer import index_tree
from flows.plans.service import PlanService
from store import file_journal
from store import sets as store_sets
from store.entries import T
from store.engine import make_engine
from store.errors import InvalidInput, NotFound
from tests.conftest import fresh_pg_database
from tests.flows.index.checks import assert_store_consistent


@pytest.fixture
def service(engine, tree, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "home-dir"))  # the trash of an overwrite: a temp home's
    (tmp_path / "home-dir").mkdir()
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def execute(service: PlanService, tree: Path, outcome: dict, when: str) -> dict:
    p = Plan.from_object({"name": "sort", "sources": [{"name": "home", "type": "filesystem.index",
                                                       "config": {"path": str(tree)}}],
                          "rules": [{"name": "r", "when": when, "outcomes": [outcome]}]})
    service.save(p, create=None)
    row = service.execute(p, wait=True)
    assert row["status"] == "success", row
    return row


def ids(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {p: i for i, p in conn.execute(select(T.c.id, T.c.path))}


def test_undo_of_an_execution_moves_every_file_back_and_the_store_follows(service, engine, tree):
    execute(service, tree, {"type": "move", "to": "Sorted/"}, "extension = .txt")
    row = file_journal.history(engine, path=str(tree / "Photos" / "notes.txt"))[0]
    store_sets.create_set(engine, name="keep")
    store_sets.modify_members(engine, name="keep", operation="add", paths=[row["dst"]])
    origin = file_journal.Origin.for_tool("undo")
    preview = undo(engine, service.roots, origin=origin, execution_id=row["execution_id"], dry_run=True)
    assert preview["wouldUndo"] == 2 and (tree / "Sorted" / "notes.txt").exists()
    done = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"), execution_id=row["execution_id"])
    assert (done["undone"], done["refused"]) == (2, 0), done
    assert (tree / "Photos" / "notes.txt").exists() and (tree / "docs" / "deep" / "a" / "b" / "c.txt").exists()
    assert not (tree / "Sorted" / "notes.txt").exists()
    now = ids(engine)
    assert now[str(tree / "Photos" / "notes.txt")] == row["entry_id"]  # the same entry, back at its place
    assert [e["path"] for e in store_sets.describe_set(engine, name="keep", include_entries=True)["entries"]] == [
        str(tree / "Photos" / "notes.txt")]
    assert {o["state"] for o in file_journal.history(engine, execution_id=row["execution_id"])} == {"undone"}
    assert_store_consistent(engine, str(tree))
    again = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"), execution_id=row["execution_id"])
    assert again["refused"] == 2 and all(r["reason"] == "undone already" for r in again["results"])


def test_undo_is_refused_for_a_changed_file_and_a_taken_place_and_goes_on_with_the_rest(service, engine, tree):
    row = execute(service, tree, {"type": "move", "to": "Sorted/"}, "extension = .txt")
    (tree / "Sorted" / "notes.txt").write_text("edited after the move")
    (tree / "docs" / "deep" / "a" / "b" / "c.txt").write_text("someone took the old place")
    done = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"),
                execution_id=row["execution_id"])
    reasons = {r["from"]: r["reason"] for r in done["results"]}
    assert done["refused"] == 2
    assert "changed since" in reasons[str(tree / "Sorted" / "notes.txt")]
    assert "is taken now" in reasons[str(tree / "Sorted" / "c.txt")]


def test_undo_of_a_copy_removes_it_and_of_an_overwrite_brings_back_what_it_replaced(service, engine, tree):
    copied = execute(service, tree, {"type": "copy", "to": "Backup/"}, "name = readme.md")
    assert undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"),
                execution_id=copied["execution_id"])["undone"] == 1
    assert not (tree / "Backup" / "readme.md").exists() and (tree / "docs" / "readme.md").exists()
    (tree / "Photos" / "readme.md").write_text("the one that was there")
    moved = execute(service, tree, {"type": "move", "to": "Photos/", "conflict": "overwrite"}, "name = readme.md")
    assert (tree / "Photos" / "readme.md").read_text() != "the one that was there"
    ops = file_journal.history(engine, execution_id=moved["execution_id"])
    assert sorted(o["op"] for o in ops) == ["move", "trash"]
    done = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"),
                execution_id=moved["execution_id"])
    assert done["undone"] == 2, done
    assert (tree / "Photos" / "readme.md").read_text() == "the one that was there"
    assert (tree / "docs" / "readme.md").exists()
    assert str(tree / "Photos" / "readme.md") in ids(engine)


def test_undo_needs_exactly_one_selector_and_a_known_one(engine, roots):
    origin = file_journal.Origin.for_tool("undo")
    with pytest.raises(InvalidInput, match="exactly one"):
        undo(engine, roots, origin=origin)
    with pytest.raises(NotFound):
        undo(engine, roots, origin=origin, operation_id=12345)


def test_a_trash_plan_trashes_the_files_and_undo_brings_them_back_into_the_index(service, engine, tree, tmp_path):
    row = execute(service, tree, {"type": "trash"}, "extension = .txt")
    assert not (tree / "Photos" / "notes.txt").exists()
    trashed = tmp_path / "home-dir" / ".local" / "share" / "Trash" / "files"
    assert sorted(p.name for p in trashed.iterdir()) == ["c.txt", "notes.txt"]
    assert str(tree / "Photos" / "notes.txt") not in ids(engine)
    done = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"), execution_id=row["execution_id"])
    assert done["undone"] == 2, done
    assert (tree / "Photos" / "notes.txt").exists() and not list(trashed.iterdir())
    assert str(tree / "Photos" / "notes.txt") in ids(engine)


def test_undo_of_a_trash_plan_puts_the_files_back_in_their_sets(service, engine, tree):
    txt = [str(tree / "Photos" / "notes.txt"), str(tree / "docs" / "deep" / "a" / "b" / "c.txt")]
    index_tree(engine, str(tree), scan_id=1)
    store_sets.create_set(engine, name="texts")
    store_sets.modify_members(engine, name="texts", operation="add", paths=[*txt, str(tree / "docs" / "readme.md")])
    row = execute(service, tree, {"type": "trash"}, "extension = .txt")
    assert store_sets.describe_set(engine, name="texts")["entry_count"] == 1
    done = undo(engine, service.roots, origin=file_journal.Origin.for_tool("undo"), execution_id=row["execution_id"])
    assert done["undone"] == 2 and [r["restored"] for r in done["results"]] == [{"memberships": 1, "maps": 0}] * 2
    entries = store_sets.describe_set(engine, name="texts", include_entries=True)["entries"]
    assert sorted(e["path"] for e in entries) == sorted([*txt, str(tree / "docs" / "readme.md")])


@pytest.mark.postgres
def test_a_move_plan_and_its_undo_on_postgresql(pg_url, tree):
    with fresh_pg_database(pg_url, "assay_undo") as url:
        engine = make_engine(url)
        svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
        try:
            row = execute(svc, tree, {"type": "move", "to": "Sorted/{mtime:%Y}/", "conflict": "rename_new"},
                          "extension in [.txt, .md]")
            assert row["outcomes_applied"] == 3 and not (tree / "docs" / "readme.md").exists()
            assert_store_consistent(engine, str(tree))
            done = undo(engine, svc.roots, origin=file_journal.Origin.for_tool("undo"),
                        execution_id=row["execution_id"])
            assert (done["undone"], done["refused"]) == (3, 0), done
            assert (tree / "docs" / "readme.md").exists() and not [p for p in (tree / "Sorted").rglob("*")
                                                                   if p.is_file()]
            assert_store_consistent(engine, str(tree))
        finally:
            svc.shutdown()
            engine.dispose()

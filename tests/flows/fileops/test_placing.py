"""Plans that place files: move, copy and rename outcomes run through the plan engine (no Prefect, no MCP). The
disk and the store agree after each; moved entries keep their ids (set memberships follow); each change is in the
journal with its hash; the preview lists what the run then does; a second run does nothing; a file a template
cannot name is that file's error."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from dsl.model import Plan
from flows.core.roots import Roots
from flows.fileops.destinations import Planned
from flows.fileops.placing import place
from flows.index.indexer import index_tree
from flows.plans.preview import preview_plan
from flows.plans.service import PlanService
from store import entries, file_journal
from store import sets as store_sets
from store.entries import T
from tests.flows.index.checks import assert_store_consistent


@pytest.fixture
def service(engine, tree):
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def plan(tree: Path, outcome: dict, when: str = "extension in [.txt, .md]") -> Plan:
    return Plan.from_object({"name": "sort", "sources": [{"name": "home", "type": "filesystem.index",
                                                          "config": {"path": str(tree)}}],
                             "rules": [{"name": "texts", "when": when, "outcomes": [outcome]}]})


def run(service: PlanService, p: Plan) -> dict:
    service.save(p, create=None)
    return service.execute(p, wait=True)


def paths(engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(select(T.c.path).where(T.c.kind == "file")).scalars())


def test_a_move_plan_moves_the_files_the_store_follows_and_the_journal_has_each(service, engine, tree):
    for name in ("notes.txt", "readme.md"):
        os.utime(next(tree.rglob(name)), (0, time.mktime((2022, 5, 1, 0, 0, 0, 0, 0, -1))))
    p = plan(tree, {"type": "move", "to": "Sorted/{mtime:%Y}/"})
    run(service, Plan.from_object({"name": "scan", "sources": [{"name": "home", "type": "filesystem.index",
                                                                "config": {"path": str(tree)}}]}))
    readme_id = next(r for r in store_ids(engine) if r[1].endswith("/readme.md"))[0]
    store_sets.create_set(engine, name="keep")
    store_sets.modify_members(engine, name="keep", operation="add", paths=[str(tree / "docs" / "readme.md")])
    shown = preview_plan(engine, p, roots=service.roots)["rules"][0]["outcomes"][0]
    row = run(service, p)
    assert row["status"] == "success", row
    moved = {str(tree / "Sorted" / "2022" / "notes.txt"), str(tree / "Sorted" / "2022" / "readme.md")}
    assert moved <= {str(x) for x in tree.rglob("*")}
    assert not (tree / "docs" / "readme.md").exists()
    assert moved <= paths(engine)
    assert dict(store_ids(engine))[readme_id].endswith("/Sorted/2022/readme.md")  # same entry id
    assert [e["path"] for e in store_sets.describe_set(engine, name="keep", include_entries=True)["entries"]] == [
        str(tree / "Sorted" / "2022" / "readme.md")]
    assert sorted((f["from"], f["to"]) for f in shown["files"] if f["action"] == "move") == sorted(
        (f["from"], f["to"]) for f in _done(engine, row["execution_id"]))
    ops = file_journal.history(engine, execution_id=row["execution_id"])
    assert {o["state"] for o in ops} == {"done"} and all(o["content_hash"].startswith("xxh128:") for o in ops)
    assert_store_consistent(engine, str(tree))
    again = run(service, p)  # the same rule: the moved files are done (no loop, nothing moved again)
    assert again["outcomes_applied"] == 0


def store_ids(engine) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(T.c.id, T.c.path))]


def _done(engine, execution_id: int) -> list[dict]:
    return [{"from": o["src"], "to": o["dst"]} for o in file_journal.history(engine, execution_id=execution_id)
            if o["state"] == "done"]


def test_copy_keeps_the_source_and_indexes_the_copy(service, engine, tree):
    row = run(service, plan(tree, {"type": "copy", "to": "Backup/"}, when="name = readme.md"))
    assert row["status"] == "success", row
    assert (tree / "docs" / "readme.md").exists() and (tree / "Backup" / "readme.md").read_bytes() == \
        (tree / "docs" / "readme.md").read_bytes()
    assert {str(tree / "Backup" / "readme.md"), str(tree / "docs" / "readme.md")} <= paths(engine)


def test_rename_with_conflicts_by_mode(service, engine, tree):
    (tree / "docs" / "old-readme.md").write_text("in the way")
    row = run(service, plan(tree, {"type": "rename", "name": "old-{name}", "conflict": "rename_new"},
                            when="name = readme.md"))
    assert row["status"] == "success", row
    assert (tree / "docs" / "old-readme (2).md").exists() and (tree / "docs" / "old-readme.md").read_text() == \
        "in the way"


def test_a_template_field_a_file_lacks_is_that_files_error(service, engine, tree):
    row = run(service, plan(tree, {"type": "move", "to": "{exif.Model}/"}))
    assert row["status"] == "partial", row
    samples = [s for r in row["summary"]["rules"].values() for o in r["outcomes"] for s in o["error_samples"]]
    assert samples and all("exif.Model" in s for s in samples)
    assert (tree / "docs" / "readme.md").exists()


@pytest.mark.parametrize("mode", ["rename_new", "skip", "fail"])
def test_a_destination_taken_after_planning_is_settled_by_the_conflict_mode(engine, tree, mode):
    index_tree(engine, str(tree), scan_id=1)
    notes = tree / "Photos" / "notes.txt"
    entry = entries.get_entry(engine, path=str(notes))
    planned = [Planned(int(entry["id"]), str(notes), "move", dst=str(tree / "docs" / "notes.txt"))]
    (tree / "docs" / "notes.txt").write_text("another program wrote here after the plan was made")
    (tree / "docs" / "notes (2).txt").write_text("and here")
    origin = file_journal.Origin.for_tool("move outcome")
    result, placed = place(engine, planned, origin=origin, conflict=mode)
    [op] = file_journal.of_call(engine, origin.call_id)
    if mode == "rename_new":  # the next free name, written to the journal before the rename
        assert result.applied == 1 and placed[0]["to"] == str(tree / "docs" / "notes (3).txt")
        assert (op["state"], op["dst"]) == ("done", placed[0]["to"]) and not notes.exists()
        assert entries.get_entry(engine, path=placed[0]["to"])["id"] == entry["id"]
    elif mode == "skip":
        assert (result.applied, result.unchanged, result.errors) == (0, 1, []) and notes.exists()
        assert op["state"] == "failed" and "conflict: skip" in op["error"]
    else:
        assert result.applied == 0 and "appeared meanwhile" in result.errors[0][1] and notes.exists()
    assert (tree / "docs" / "notes.txt").read_text().startswith("another program")
    assert_store_consistent(engine, str(tree))

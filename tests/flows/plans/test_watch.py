"""Continuous plans: once executed they keep watching (watchfiles), act on settled files only, follow deletes and
renames, stop when paused, and catch up after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.model import Plan
from flows.plans.service import PlanService
from flows.plans.watch import PlanWatchers
from flows.core.roots import Roots
from store import sets as store_sets
from tests.conftest import wait_for



def members(engine, name: str) -> list[str]:
    try:
        found = store_sets.describe_set(engine, name=name, include_entries=True, limit=1000)
    except Exception:
        return []
    return sorted(Path(e["path"]).name for e in found["entries"])


def make_service(engine, tree) -> PlanService:
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    svc.watching = PlanWatchers(svc)
    return svc


@pytest.fixture
def inbox(tree) -> Path:
    d = tree / "inbox"
    d.mkdir()
    (d / "old.txt").write_text("there before")
    return d


def inbox_plan(inbox: Path, **extra) -> Plan:
    return Plan.from_object({"name": "inbox", "mode": "continuous", "sources": [
        {"name": "inbox", "type": "filesystem.watch", "target_set": "inbox", "config": {
            "path": str(inbox), "debounce_ms": 100}}],
        "rules": [{"name": "notes", "when": "extension = .txt",
                   "outcomes": [{"type": "selection_set", "selectionSetName": "notes"}]}], **extra})


def test_a_continuous_plan_acts_on_new_files_renames_and_deletes(engine, tree, inbox):
    svc = make_service(engine, tree)
    try:
        plan = inbox_plan(inbox)
        svc.save(plan, create=True)
        row = svc.execute(plan, wait=True)
        assert row["status"] == "success" and members(engine, "notes") == ["old.txt"]
        assert svc.watching.is_watching("inbox")

        (inbox / "new.txt").write_text("hello")
        wait_for(lambda: "new.txt" in members(engine, "notes"))

        (inbox / "download.txt.part").write_text("half")  # a partial download is never indexed
        (inbox / "photo.jpg").write_bytes(b"x" * 10)
        wait_for(lambda: "photo.jpg" in members(engine, "inbox"))
        assert "download.txt.part" not in members(engine, "inbox")
        (inbox / "download.txt.part").rename(inbox / "download.txt")
        wait_for(lambda: "download.txt" in members(engine, "notes"))

        (inbox / "new.txt").rename(inbox / "renamed.txt")  # keeps its entry, hence its sets
        wait_for(lambda: members(engine, "notes") == ["download.txt", "old.txt", "renamed.txt"])
        (inbox / "old.txt").unlink()
        wait_for(lambda: members(engine, "notes") == ["download.txt", "renamed.txt"])
        from store import plans as store_plans

        rows, _ = store_plans.list_executions(engine, plan_name="inbox", limit=100)
        assert rows and not [r for r in rows if r["trigger"] == "watch" and r["status"] == "partial"]
    finally:
        svc.shutdown()


def test_pausing_stops_the_watch_and_a_restart_catches_up(engine, tree, inbox):
    svc = make_service(engine, tree)
    plan = inbox_plan(inbox)
    try:
        svc.save(plan, create=True)
        svc.execute(plan, wait=True)
        assert svc.watching.is_watching("inbox")
        svc.save(plan.model_copy(update={"status": "paused"}), create=False)
        assert not svc.watching.is_watching("inbox")
        (inbox / "while-paused.txt").write_text("written while paused")
        svc.save(plan, create=False)  # active again: it catches up and watches, as before the pause
        assert svc.watching.is_watching("inbox")
        wait_for(lambda: "while-paused.txt" in members(engine, "notes"))
    finally:
        svc.shutdown()  # the server stops
    (inbox / "while-away.txt").write_text("written while nobody watched")
    (inbox / "unfinished.txt.part").write_text("a download that was not finished")
    restarted = make_service(engine, tree)
    try:
        restarted.resume()  # as the server does at start
        assert restarted.watching.is_watching("inbox")
        wait_for(lambda: "while-away.txt" in members(engine, "notes"))
        assert "unfinished.txt.part" not in members(engine, "inbox")  # the catch-up indexed it; the plan skips it
    finally:
        restarted.shutdown()

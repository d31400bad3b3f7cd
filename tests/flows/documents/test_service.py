"""The built-in "documents" plan: generated from the roots and the formats, installed at server start (active for
configured roots, paused for the home-directory fallback), updated when the roots change while it is still as
generated, never touched once a user changed it; run by a continuous plan it keeps the index current as files are
created, changed and deleted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows.documents import service
from flows.documents.formats import EXTENSIONS
from flows.plans.checks import check_plan
from flows.plans.service import PlanService, merge_update
from flows.plans.watch import PlanWatchers
from flows.core.roots import Roots
from mcp_server.config import Settings
from store import documents as store_docs
from store import plans as store_plans
from store.entries import get_entry
from tests.conftest import wait_for


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "library"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "first.md").write_text("# First\nthe quick brown fox\n")
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    return root


@pytest.fixture
def plans(engine, library: Path, monkeypatch):
    monkeypatch.setenv("ASSAY_DOCUMENTS_PLAN", "on")
    svc = PlanService(engine, Roots.of([str(library)]), use_prefect=False)
    svc.watching = PlanWatchers(svc)
    yield svc
    svc.shutdown()


def _settings(*roots: Path) -> Settings:
    return Settings(roots=[str(r) for r in roots], use_prefect=False)


def _wait_for_executions(plans: PlanService) -> list[dict]:
    """The plan's executions started at install (trigger manual), once finished; the watcher's catch-up runs
    (trigger watch) that may follow are not what these tests count."""
    rows, _ = store_plans.list_executions(plans.engine, plan_name=service.PLAN_NAME, limit=10)
    return [plans.wait(r["execution_id"], timeout=60) for r in rows if r["trigger"] == "manual"]


def test_the_plan_watches_each_root_and_lists_the_extensions_it_extracts(tmp_path):
    a, b = tmp_path / "books", tmp_path / "other" / "books"
    a.mkdir()
    b.mkdir(parents=True)
    plan = service.builtin_plan(Roots.of([str(a), str(b)]), explicit=True)
    assert plan.mode == "continuous" and plan.status == "active"
    assert [(s.name, s.type, s.config.paths) for s in plan.sources] == [
        ("books", "filesystem.watch", [str(a)]), ("books-2", "filesystem.watch", [str(b)])]
    (rule,) = plan.rules
    assert rule.name == "extract" and [o.type for o in rule.outcomes] == ["extract_text"]
    assert rule.when.field == "extension" and rule.when.op == "in" and set(rule.when.value) == set(EXTENSIONS)
    assert "fell back" not in plan.description and "status paused stops it" in plan.description
    assert check_plan(plan, roots=Roots.of([str(a), str(b)])) == []
    assert service.is_generated(plan)
    assert not service.is_generated(merge_update(plan, status="paused").model_copy(
        update={"preferences": plan.preferences}))


def test_configured_roots_install_it_active_and_run_it(plans, library, fake):
    assert service.ensure_builtin_plan(plans, plans.roots, _settings(library)) == "created"
    (run,) = _wait_for_executions(plans)
    assert run["status"] == "success" and fake.asked == ["first.md"]
    entry = get_entry(plans.engine, path=str(library / "notes" / "first.md"))
    assert store_docs.document_row(plans.engine, entry["id"])["status"] == "ok"
    assert plans.watching.is_watching(service.PLAN_NAME)  # and it keeps watching
    # the next start finds it as generated and does not run it again: resuming watchers catch up instead
    assert service.ensure_builtin_plan(plans, plans.roots, _settings(library)) == "current"
    assert len(_wait_for_executions(plans)) == 1


def test_the_home_directory_fallback_installs_it_paused_and_does_not_run_it(plans, library, fake):
    assert service.ensure_builtin_plan(plans, plans.roots, _settings()) == "created"
    plan = plans.load(service.PLAN_NAME)
    assert plan.status == "paused" and "fell back to your home directory" in plan.description
    assert store_plans.list_executions(plans.engine, plan_name=service.PLAN_NAME, limit=1)[1] == 0
    assert fake.asked == []


def test_off_installs_nothing(plans, library, monkeypatch):
    monkeypatch.setenv("ASSAY_DOCUMENTS_PLAN", "off")
    assert service.ensure_builtin_plan(plans, plans.roots, _settings(library)) == "off"
    assert store_plans.find_plan(plans.engine, name=service.PLAN_NAME) is None


def test_new_roots_update_a_generated_plan(plans, library, tmp_path, fake):
    service.ensure_builtin_plan(plans, Roots.of([str(library)]), _settings())  # paused: home fallback
    more = tmp_path / "more"
    more.mkdir()
    roots = Roots.of([str(library), str(more)])
    plans.roots = roots
    assert service.ensure_builtin_plan(plans, roots, _settings(library, more)) == "updated"
    plan = plans.load(service.PLAN_NAME)
    assert [s.config.paths[0] for s in plan.sources] == [str(library), str(more)]
    assert plan.status == "active" and service.is_generated(plan)  # assay paused it, so assay may start it
    (run,) = _wait_for_executions(plans)
    assert run["status"] == "success" and fake.asked == ["first.md"]


@pytest.mark.parametrize("change", ["paused", "edited"])
def test_a_plan_a_user_changed_is_left_as_it_is(plans, library, tmp_path, fake, change):
    service.ensure_builtin_plan(plans, plans.roots, _settings(library))
    _wait_for_executions(plans)
    current = plans.load(service.PLAN_NAME)
    if change == "paused":
        changed = merge_update(current, status="paused")
    else:
        rules = [{**current.rules[0].model_dump(mode="json", exclude_none=True),
                  "when": "extension in [.md, .pdf]"}]
        changed = merge_update(current, rules=rules)
    plans.save(changed, create=False)
    more = tmp_path / "more"
    more.mkdir()
    roots = Roots.of([str(library), str(more)])
    assert service.ensure_builtin_plan(plans, roots, _settings(library, more)) == "changed-by-user"
    assert plans.load(service.PLAN_NAME) == changed  # not un-paused, its sources not replaced


def _search_lines(engine, root: Path, query: str) -> list[tuple[str, int]]:
    from flows.documents.search import search

    outcome = search(engine, query, under=[str(root)], context_lines=0,
                     display=lambda p: os.path.relpath(p, root))
    return [(m.document, m.line) for m in outcome.matches]


def test_the_running_plan_follows_files_as_they_are_created_changed_and_deleted(plans, library):
    """The real extraction pool and the real index, through the plan's watcher."""
    service.ensure_builtin_plan(plans, plans.roots, _settings(library))
    _wait_for_executions(plans)
    engine = plans.engine
    assert _search_lines(engine, library, "quick fox") == [("notes/first.md", 2)]
    wait_for(lambda: plans.watching.is_watching(service.PLAN_NAME), what="the plan to watch")

    new = library / "notes" / "second.md"
    new.write_text("# Second\n\nA lazy dog sleeps.\n")
    wait_for(lambda: _search_lines(engine, library, "lazy dog") == [("notes/second.md", 3)], what="a new file")

    new.write_text("# Second\nno animals here\n\nthe dog left\n")
    wait_for(lambda: _search_lines(engine, library, "dog") == [("notes/second.md", 4)], what="a changed file")
    assert _search_lines(engine, library, "lazy") == []

    new.unlink()
    wait_for(lambda: _search_lines(engine, library, "dog") == [], what="a deleted file to leave the index")
    assert get_entry(engine, path=str(new)) is None
    with engine.connect() as conn:
        from sqlalchemy import func, select

        from store.models import DocumentSegment

        assert conn.execute(select(func.count()).select_from(DocumentSegment.__table__)).scalar_one() == 1


def test_the_built_in_plan_runs_as_a_prefect_flow(engine, library, monkeypatch):
    """The one run through real Prefect: the server's way of running the plan, with the real extraction pool."""
    monkeypatch.setenv("ASSAY_DOCUMENTS_PLAN", "on")
    svc = PlanService(engine, Roots.of([str(library)]), use_prefect=True)
    try:
        assert service.ensure_builtin_plan(svc, svc.roots, _settings(library)) == "created"
        (run,) = _wait_for_executions(svc)
    finally:
        svc.shutdown()
    assert run["status"] == "success", run
    assert run["summary"]["rules"]["extract"]["outcomes"][0]["applied"] == 1
    assert _search_lines(engine, library, "brown") == [("notes/first.md", 2)]


def test_a_starting_server_installs_the_plan_through_the_capability_hook(library, data_dir, fake, monkeypatch):
    from mcp_server.app import AssayApp
    from store.engine import dispose_engines

    monkeypatch.setenv("ASSAY_DOCUMENTS_PLAN", "on")
    app = AssayApp.create(Settings(data_dir=data_dir, roots=[str(library)], use_prefect=False))
    try:
        app.start_background()
        assert [p["name"] for p in store_plans.list_plans(app.engine)] == [service.PLAN_NAME]
        (run,) = _wait_for_executions(app.plans)
        assert run["status"] == "success" and fake.asked == ["first.md"]
    finally:
        app.close()
        dispose_engines()


def test_plan_roots_are_the_existing_folders_the_stored_documents_plan_covers(tmp_path):
    """`assay search` without --root searches what the server's built-in plan extracts."""
    from flows.documents.service import plan_roots
    from store.engine import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    assert plan_roots(engine) == []
    (tmp_path / "lib").mkdir()
    plan = service.builtin_plan([str(tmp_path / "lib"), str(tmp_path / "gone")], explicit=True)
    store_plans.save_plan(engine, definition=plan.to_object(), create=True)
    assert plan_roots(engine) == [str(tmp_path / "lib")]

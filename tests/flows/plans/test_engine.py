"""Plan execution as plain functions (no Prefect, no MCP): sources, rules, outcomes, counters, re-runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.model import Plan
from flows.core import outcomes as flow_outcomes
from flows.plans.service import PlanService
from flows.plans.checks import check_plan
from flows.core.roots import Roots
from store import plans as store_plans
from store import queries as store_queries
from store import sets as store_sets
from store.errors import NoSpace


@pytest.fixture
def service(engine, tree):
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def members(engine, name: str) -> list[str]:
    found = store_sets.describe_set(engine, name=name, include_entries=True, limit=1000)
    return sorted(Path(e["path"]).name for e in found["entries"])


def plan(tree: Path, **extra) -> Plan:
    data = {"name": "media", "sources": [{"name": "home", "type": "filesystem.index",
                                          "config": {"path": str(tree)}}]}
    data.update(extra)
    return Plan.from_object(data)


def run(service: PlanService, p: Plan, **kw) -> dict:
    service.save(p, create=None)
    return service.execute(p, wait=True, **kw)


def test_reference_plan_indexes_its_source_fills_the_target_set_and_applies_outcomes(service, engine, tree):
    p = Plan.from_object({
        "name": "index-media",
        "sources": [{"name": "index-photos", "type": "filesystem.index", "target_set": "photos",
                     "config": {"path": str(tree / "Photos"), "recursive": True}}],
        "outcomes": [{"type": "selection_set", "selectionSetName": "new-files", "operation": "add"}],
    })
    row = run(service, p)
    assert row["status"] == "success", row
    assert row["entries_processed"] == 4  # files only: beach, sunset, photo, notes
    assert row["entries_matched"] == 4 and row["outcomes_applied"] == 4
    assert members(engine, "photos") == ["beach.jpg", "notes.txt", "photo.jpg", "sunset.jpg"]
    assert members(engine, "new-files") == members(engine, "photos")
    assert row["summary"]["sources"]["index-photos"]["index_jobs"][0]["files"] == 4


@pytest.mark.parametrize("when, expected", [
    ("extension = .jpg", ["beach.jpg", "photo.jpg", "sunset.jpg"]),
    ("media_type = video and size > 10KB", ["movie.mp4"]),
    ("size < 100 or name startswith readme", ["c.txt", "notes.txt", "readme.md"]),
    ("not path contains \"/Photos/\" and media_type in [image, video, document]",
     ["clip.mov", "movie.mp4", "report_2024.pdf"]),
    ({"type": "all", "conditions": [{"type": "path", "pathSuffix": ".pdf"}, {"type": "size", "maxSize": 50000000}]},
     ["report_2024.pdf"]),
    ("name matches \"^[a-c]\"", ["beach.jpg", "c.txt", "clip.mov"]),
    ("name glob \"*.m??\"", ["clip.mov", "movie.mp4"]),
])
def test_rule_conditions_select_the_expected_files(service, engine, tree, when, expected):
    p = plan(tree, rules=[{"name": "pick", "when": when,
                           "outcomes": [{"type": "selection_set", "selectionSetName": "picked"}]}])
    row = run(service, p)
    assert members(engine, "picked") == expected
    assert row["entries_matched"] == len(expected)


def test_hidden_files_and_directories_are_left_out_unless_asked(service, engine, tree):
    row = run(service, plan(tree, outcomes=[{"type": "selection_set", "selectionSetName": "all"}]))
    assert ".hidden" not in members(engine, "all") and "Photos" not in members(engine, "all")
    assert row["entries_processed"] == 9
    p = Plan.from_object({"name": "everything", "sources": [{"name": "home", "type": "filesystem.index", "config": {
        "path": str(tree), "include_hidden": True, "include_directories": True}}],
        "outcomes": [{"type": "selection_set", "selectionSetName": "every"}]})
    row = run(service, p)
    assert ".hidden" in members(engine, "every") and "Photos" in members(engine, "every")


def test_exclude_globs_recursive_and_max_depth_narrow_a_source(service, engine, tree):
    p = Plan.from_object({"name": "narrow", "sources": [
        {"name": "docs", "type": "filesystem.index", "config": {"path": str(tree / "docs"), "max_depth": 1,
                                                                "exclude": ["*.md"]}},
        {"name": "photos", "type": "filesystem.index", "config": {"path": str(tree / "Photos"), "recursive": False}},
    ], "outcomes": [{"type": "selection_set", "selectionSetName": "narrow"}]})
    run(service, p)
    assert members(engine, "narrow") == ["notes.txt", "photo.jpg", "report_2024.pdf"]


def test_several_sources_are_merged_without_duplicates(service, engine, tree):
    p = Plan.from_object({"name": "twice", "sources": [
        {"name": "a", "type": "filesystem.index", "config": {"path": str(tree)}},
        {"name": "b", "type": "filesystem.index", "config": {"path": str(tree / "Photos")}},
    ], "outcomes": [{"type": "selection_set", "selectionSetName": "twice"}]})
    row = run(service, p)
    assert row["entries_processed"] == 9 and row["outcomes_applied"] == 9


def test_selection_set_and_saved_query_sources_yield_their_entries(service, engine, tree):
    run(service, plan(tree, rules=[{"name": "jpgs", "when": "extension = .jpg",
                                    "outcomes": [{"type": "selection_set", "selectionSetName": "jpgs"}]}]))
    store_queries.create_query(engine, name="videos", query={"media_type": "video"})
    p = Plan.from_object({"name": "from-store", "sources": [
        {"name": "jpgs", "type": "selection_set", "config": {"set": "jpgs"}},
        {"name": "videos", "type": "query", "config": {"query": "videos"}}],
        "rules": [{"name": "big", "when": "size >= 3000",
                   "outcomes": [{"type": "selection_set", "selectionSetName": "big"}]}]})
    row = run(service, p)
    assert row["entries_processed"] == 5
    assert members(engine, "big") == ["beach.jpg", "clip.mov", "movie.mp4", "photo.jpg"]


def test_a_missing_source_set_ends_the_execution_as_an_error_naming_it(service, tree):
    p = Plan.from_object({"name": "lost", "sources": [{"name": "s", "type": "selection_set",
                                                        "config": {"set": "nope"}}]})
    row = run(service, p)
    assert row["status"] == "error" and "'nope' does not exist" in row["error_message"]


def test_nothing_matched_is_partial(service, tree):
    row = run(service, plan(tree, conditions="size > 1TB",
                            outcomes=[{"type": "selection_set", "selectionSetName": "huge"}]))
    assert row["status"] == "partial" and row["entries_matched"] == 0
    assert row["error_message"] == "nothing matched"


def test_rerunning_on_unchanged_files_applies_nothing_again(service, engine, tree):
    p = plan(tree, outcomes=[{"type": "selection_set", "selectionSetName": "all"}])
    first = run(service, p)
    second = service.execute(p, wait=True)
    assert first["outcomes_applied"] == 9 and second["outcomes_applied"] == 0
    assert second["entries_matched"] == 9


def test_small_batches_give_the_same_result_in_more_batches(engine, tree):
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False, batch_size=2, id_batch_size=2)
    try:
        row = run(svc, plan(tree, outcomes=[{"type": "selection_set", "selectionSetName": "all"}]))
    finally:
        svc.shutdown()
    outcome = row["summary"]["rules"]["media"]["outcomes"][0]
    assert outcome["applied"] == 9 and outcome["batches"] == 5
    assert row["entries_matched"] == 9 and row["summary"]["rules"]["media"]["matched"] == 9
    assert len(members(engine, "all")) == 9


def test_remove_operation_and_per_outcome_conditions(service, engine, tree):
    p = plan(tree, rules=[
        {"name": "fill", "outcomes": [{"type": "selection_set", "selectionSetName": "s"}]},
        {"name": "thin", "when": "media_type = image",
         "outcomes": [{"type": "selection_set", "selectionSetName": "s", "operation": "remove",
                       "when": "size >= 3000"}]},
    ])
    run(service, p)
    assert members(engine, "s") == ["c.txt", "clip.mov", "movie.mp4", "notes.txt", "readme.md", "report_2024.pdf",
                                    "sunset.jpg"]


class FakeWork(flow_outcomes.OutcomeExecutor):
    """Stands in for an expensive outcome (a classifier): records what it was asked to do."""

    type = "classifier"
    records_work = True

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on

    def apply_rows(self, conn, outcome, rows, ctx):
        result = flow_outcomes.BatchResult()
        for r in rows:
            self.calls.append(r["name"])
            if r["name"] == self.fail_on:
                result.errors.append((r["id"], "could not decode"))
                result.failed_ids.add(r["id"])
            else:
                result.applied += 1
        return result


@pytest.fixture
def fake_classifier(monkeypatch):
    flow_outcomes.installed_executors()  # the real one registered first, so replacing it is undone afterwards
    fake = FakeWork(fail_on="sunset.jpg")
    monkeypatch.setitem(flow_outcomes.EXECUTORS, "classifier", fake)
    return fake


def test_expensive_outcomes_are_done_once_per_file_state(service, engine, tree, fake_classifier):
    p = plan(tree, conditions="media_type = image",
             outcomes=[{"type": "classifier", "classifierOperation": "generate_thumbnail"}])
    first = run(service, p)
    assert sorted(fake_classifier.calls) == ["beach.jpg", "photo.jpg", "sunset.jpg"]
    assert first["outcomes_applied"] == 2
    assert "1 outcome error" in first["error_message"]
    fake_classifier.calls.clear()
    (tree / "Photos" / "photo.jpg").write_bytes(b"y" * 6000)  # changed: done again; failed ones are retried
    second = service.execute(p, wait=True)
    assert sorted(fake_classifier.calls) == ["photo.jpg", "sunset.jpg"]
    assert second["summary"]["rules"]["media"]["outcomes"][0]["skipped_unchanged_entries"] == 1


class FullDiskWork(FakeWork):
    """An expensive outcome whose second batch finds the disk full."""

    def apply_rows(self, conn, outcome, rows, ctx):
        if self.calls:
            raise NoSpace("the disk holding the cache is full (no space left on device); free space and run the work "
                          "again: what was done before is kept")
        return super().apply_rows(conn, outcome, rows, ctx)


def test_a_run_a_full_disk_stopped_says_no_space_and_what_its_outcomes_did(engine, tree, monkeypatch):
    flow_outcomes.installed_executors()
    monkeypatch.setitem(flow_outcomes.EXECUTORS, "classifier", FullDiskWork())
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False, batch_size=2, id_batch_size=2)
    try:
        row = run(svc, plan(tree, conditions="media_type = image", outcomes=[{"type": "classifier"}]))
    finally:
        svc.shutdown()
    assert row["status"] == "error"
    assert row["error_message"].startswith("NO_SPACE: the disk holding the cache is full"), row["error_message"]
    assert row["outcomes_applied"] == 2
    outcome = row["summary"]["rules"]["media"]["outcomes"]  # the batch written before the disk filled is reported
    assert [(o["type"], o["applied"], o["batches"]) for o in outcome] == [("classifier", 2, 1)]


def test_chained_outcomes_stop_on_error_per_entry(service, engine, tree, fake_classifier):
    p = plan(tree, conditions="media_type = image", outcomes=[{"type": "chained", "stopOnError": True, "outcomes": [
        {"type": "classifier"}, {"type": "selection_set", "selectionSetName": "thumbnailed"}]}])
    run(service, p)
    assert members(engine, "thumbnailed") == ["beach.jpg", "photo.jpg"]


def test_check_plan_refuses_what_this_installation_cannot_run(tree, monkeypatch):
    import dsl.fields

    flow_outcomes.installed_executors()  # an installation without the citations capability: map has no executor
    monkeypatch.delitem(flow_outcomes.EXECUTORS, "map")
    monkeypatch.setattr(dsl.fields, "INSTALLED_PRODUCERS", dsl.fields.INSTALLED_PRODUCERS - {"labels"})
    p = plan(tree / ".." / "..", rules=[
        {"name": "r", "when": "label = receipt", "outcomes": [{"type": "map"}]}])
    problems = check_plan(p, roots=Roots.of([str(tree)]))
    text = "\n".join(pr.render() for pr in problems)
    assert "sources[0].config.paths[0]" in text and "outside the allowed roots" in text
    assert "rules[0].when: field 'label' is filled by the zero-shot labelling module" in text
    assert "rules[0].outcomes[0]: outcome type 'map' is not installed" in text


def test_check_plan_accepts_the_classifier_and_its_fields_once_installed(tree, monkeypatch):
    import flows.classify.fields  # noqa: F401  (what flows.classify's import does)

    p = plan(tree, rules=[{"name": "c", "outcomes": [{"type": "classifier", "classifierOperation": "all"}]},
                          {"name": "wide", "when": "width > 100 and duplicates = 0 and exif.Model = X-T4",
                           "outcomes": [{"type": "selection_set", "selectionSetName": "wide"}]}])
    flow_outcomes.installed_executors()
    monkeypatch.setitem(flow_outcomes.EXECUTORS, "classifier", FakeWork())  # whether flows.classify registered it
    assert check_plan(p, roots=Roots.of([str(tree)])) == []


def test_paused_plans_do_not_run(service, tree):
    p = plan(tree, status="paused")
    service.save(p, create=True)
    from store.errors import Conflict

    with pytest.raises(Conflict, match="paused"):
        service.execute(p)


def test_executions_are_listed_newest_first_with_counters(service, engine, tree):
    p = plan(tree)
    run(service, p)
    service.execute(p, wait=True)
    rows, total = store_plans.list_executions(engine, plan_name="media")
    assert total == 2 and rows[0]["execution_id"] > rows[1]["execution_id"]
    assert rows[0]["status"] == "success" and rows[0]["duration_ms"] is not None


def test_async_execution_returns_running_then_finishes(service, tree):
    p = plan(tree)
    service.save(p, create=True)
    started = service.execute(p)
    assert started["status"] == "running" and started["plan_name"] == "media"
    done = service.wait(started["execution_id"], timeout=60)
    assert done["status"] == "success"


@pytest.mark.parametrize("when", ["extension = .jpg", "media_type = video and size > 10KB",
                                  "not path contains \"/Photos/\" and size < 1KB"])
def test_conditions_evaluated_in_python_select_what_sql_selects(service, engine, tree, monkeypatch, when):
    from flows.core import conditions
    sql_plan = plan(tree, name="in-sql", rules=[{"name": "r", "when": when, "outcomes": [
        {"type": "selection_set", "selectionSetName": "by-sql"}]}])
    run(service, sql_plan)
    monkeypatch.setattr(conditions, "split", lambda cond: (None, cond))  # nothing pushed down: all in Python
    py_plan = plan(tree, name="in-python", rules=[{"name": "r", "when": when, "outcomes": [
        {"type": "selection_set", "selectionSetName": "by-python"}]}])
    row = run(service, py_plan)
    assert members(engine, "by-python") == members(engine, "by-sql")
    assert row["entries_matched"] == len(members(engine, "by-sql"))


def test_progress_is_reported_per_stage_and_reaches_100_percent(engine, tree):
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False, batch_size=2, id_batch_size=2)
    seen: list[dict] = []
    try:
        p = plan(tree, rules=[{"name": "a", "outcomes": [{"type": "selection_set", "selectionSetName": "a"}]},
                              {"name": "b", "when": "size > 1KB",
                               "outcomes": [{"type": "selection_set", "selectionSetName": "b"}]}])
        svc.save(p, create=True)
        svc.execute(p, wait=True, on_progress=seen.append)
    finally:
        svc.shutdown()
    percents = [s["percent"] for s in seen]
    assert percents == sorted(percents) and percents[-1] == 100.0 and len(percents) > 5
    stages = [s["stage"] for s in seen]
    assert stages[:3] == ["scan home", "match a", "selection_set a [batch 1]"]
    # each rule is matched just before its own outcomes run (a later rule sees what earlier outcomes wrote)
    assert stages.index("match b") > stages.index("selection_set a [batch 5]")

"""plan-* tools through an in-process MCP client (reference 000, "Plan Management", plus plan-validate, -preview,
-explain), and the synthesis://plans resources."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ToolFailed, call, index_sync, read_json


def reference_plan(tree) -> dict:
    """Reference 000's plan-create example, on the test tree."""
    return {"name": "index-media", "sources": [
        {"name": "index-photos", "type": "filesystem.index", "target_set": "photos",
         "config": {"path": str(tree / "Photos"), "recursive": True}}],
        "outcomes": [{"type": "selection_set", "selectionSetName": "new-files", "operation": "add"}]}


async def test_reference_create_and_execute_example_fills_the_sets(client, app, tree):
    created = await call(client, "plan-create", reference_plan(tree))
    assert created["name"] == "index-media" and created["mode"] == "oneshot" and created["status"] == "active"
    assert created["rules"][0]["outcomes"][0]["selectionSetName"] == "new-files"
    started = await call(client, "plan-execute", {"name": "index-media"})
    assert set(started) >= {"execution_id", "plan_name", "status", "started_at"}
    assert started["plan_name"] == "index-media" and started["status"] == "running"
    assert isinstance(started["started_at"], int)
    done = app.plans.wait(started["execution_id"], timeout=60)
    assert done["status"] == "success" and done["entries_processed"] == 4 and done["outcomes_applied"] == 4
    photos = await call(client, "resource-set-get", {"name": "photos"})
    assert photos["entry_count"] == 4
    assert (await call(client, "resource-set-get", {"name": "new-files"}))["entry_count"] == 4


async def test_reference_example_workflow_1_runs_end_to_end(client, app, tree):
    await call(client, "resource-set-create", {"name": "photos"})
    await call(client, "resource-set-create", {"name": "all-media"})
    await call(client, "resource-set-add-child", {"parent": "all-media", "child": "photos"})
    await call(client, "plan-create", {"name": "index-photos", "sources": [{
        "name": "scan-photos", "type": "filesystem.index", "target_set": "photos",
        "config": {"path": str(tree / "Photos"), "recursive": True}}]})
    done = await call(client, "plan-execute", {"name": "index-photos", "wait": True})
    assert done["status"] == "success" and done["entries_processed"] == 4
    total = await call(client, "resource-sum", {"name": "all-media", "metric": "size"})
    assert total["value"] == 3000 + 2000 + 5000 + 10
    jpgs = await call(client, "resource-fuzzy-match", {"name": "photos", "field": "path", "pattern": ".jpg",
                                                       "mode": "suffix"})
    assert jpgs["total_count"] == 3


async def test_reference_example_workflow_2_creates_a_continuous_watch_plan(client, app, tree):
    res = await call(client, "plan-create", {"name": "watch-downloads", "mode": "continuous", "sources": [{
        "name": "downloads-watch", "type": "filesystem.watch", "target_set": "downloads",
        "config": {"path": str(tree / "docs"), "recursive": True, "debounce_ms": 500}}]})
    assert res["mode"] == "continuous"
    done = await call(client, "plan-execute", {"name": "watch-downloads", "wait": True})
    assert done["status"] == "success"
    assert (await call(client, "resource-set-get", {"name": "downloads"}))["entry_count"] == 3
    await call(client, "plan-update", {"name": "watch-downloads", "status": "paused"})
    assert not app.plans.watching.is_watching("watch-downloads")


async def test_plan_text_in_yaml_creates_the_same_plan_as_fields(client, tree):
    yaml_text = f"""
name: videos
sources:
  - name: home
    type: filesystem.index
    config: {{path: "{tree}"}}
rules:
  - name: big-videos
    when: media_type = video and size > 10KB
    outcomes: [{{type: selection_set, selectionSetName: big-videos}}]
"""
    created = await call(client, "plan-create", {"text": yaml_text})
    assert created["rules"][0]["name"] == "big-videos"
    got = await call(client, "plan-get", {"name": "videos", "format": "yaml"})
    assert "media_type = video and size > 10KB" in got["text"]
    done = await call(client, "plan-execute", {"name": "videos", "wait": True})
    assert done["entries_matched"] == 1


async def test_create_refuses_an_unknown_condition_key_naming_it_and_its_place(client, tree):
    bad = reference_plan(tree) | {"conditions": {"type": "size", "minSise": 5}}
    result = await client.call_tool("plan-create", bad)
    assert result.is_error
    text = result.content[0].text
    assert "PLAN_VALIDATION_ERROR" in text and "conditions: unknown key(s) 'minSise'" in text
    assert "accepted: minSize, maxSize" in text
    problems = json.loads(result.content[1].text)["error"]["data"]["problems"]
    assert problems[0]["path"] == "conditions"
    with pytest.raises(ToolFailed, match="plan 'index-media' not found"):
        await call(client, "plan-get", {"name": "index-media"})


@pytest.fixture
def without_map(monkeypatch):
    """An installation without the citations capability: the language knows the map outcome, no executor runs
    it."""
    from flows.core import outcomes as flow_outcomes

    flow_outcomes.installed_executors()
    monkeypatch.delitem(flow_outcomes.EXECUTORS, "map")


async def test_create_refuses_sources_outside_the_roots_and_uninstalled_outcomes(client, tree, without_map):
    bad = {"name": "x", "sources": [{"name": "etc", "type": "filesystem.index", "config": {"path": "/etc"}}],
           "outcomes": [{"type": "map"}]}
    with pytest.raises(ToolFailed) as err:
        await call(client, "plan-create", bad)
    assert "2 problems" in str(err.value)
    assert "sources[0].config.paths[0]" in str(err.value) and "outside the allowed roots" in str(err.value)
    assert "outcomes[0]: outcome type 'map' is not installed" in str(err.value)


async def test_create_twice_is_refused(client, tree):
    await call(client, "plan-create", reference_plan(tree))
    with pytest.raises(ToolFailed, match="plan named 'index-media' already exists"):
        await call(client, "plan-create", reference_plan(tree))


async def test_validate_reports_every_problem_without_saving(client, tree):
    res = await call(client, "plan-validate", {"name": "v", "sources": [
        {"name": "s", "type": "filesystem.idx", "config": {"path": str(tree)}}],
        "conditions": "size > 1GX", "outcomes": [{"type": "selection_set"}]})
    assert res["valid"] is False
    paths = [p.get("path") for p in res["problems"]]
    assert "sources[0].type" in paths and "outcomes[0].selectionSetName" in paths
    assert any("unknown size unit 'GX'" in p["message"] for p in res["problems"])
    ok = await call(client, "plan-validate", reference_plan(tree))
    assert ok["valid"] is True and ok["problems"] == [] and "index-media" in ok["yaml"]
    assert (await call(client, "plan-list"))["total"] == 0


async def test_list_and_get_show_plans_with_their_executions(client, app, tree):
    await call(client, "plan-create", reference_plan(tree))
    await call(client, "plan-execute", {"name": "index-media", "wait": True})
    await call(client, "plan-execute", {"name": "index-media", "wait": True})
    listed = await call(client, "plan-list")
    assert listed["total"] == 1 and listed["plans"][0]["last_execution"]["status"] == "success"
    got = await call(client, "plan-get", {"name": "index-media", "execution_limit": 1})
    assert got["execution_total"] == 2 and len(got["executions"]) == 1
    assert got["executions"][0]["outcomes_applied"] == 0  # the second run repeated no work
    quiet = await call(client, "plan-get", {"name": "index-media", "include_executions": False})
    assert quiet.get("executions") is None


async def test_update_changes_fields_and_status(client, tree):
    await call(client, "plan-create", reference_plan(tree))
    res = await call(client, "plan-update", {"name": "index-media", "description": "photos",
                                             "conditions": "extension = .jpg"})
    assert res["description"] == "photos"
    assert res["rules"][0]["when"]["field"] == "extension"
    paused = await call(client, "plan-update", {"name": "index-media", "status": "paused"})
    assert paused["status"] == "paused"
    with pytest.raises(ToolFailed, match="is paused"):
        await call(client, "plan-execute", {"name": "index-media"})
    with pytest.raises(ToolFailed, match="nothing to update"):
        await call(client, "plan-update", {"name": "index-media"})


async def test_delete_removes_the_plan_and_its_history(client, tree):
    await call(client, "plan-create", reference_plan(tree))
    await call(client, "plan-execute", {"name": "index-media", "wait": True})
    res = await call(client, "plan-delete", {"name": "index-media"})
    assert res == {"name": "index-media", "deleted": True, "executions_removed": 1}
    with pytest.raises(ToolFailed, match="not found"):
        await call(client, "plan-delete", {"name": "index-media"})


async def test_preview_counts_matches_and_changes_nothing(client, app, tree):
    index_sync(app, tree)
    await call(client, "plan-create", {"name": "p", "sources": [
        {"name": "home", "type": "filesystem.index", "config": {"path": str(tree)}}],
        "rules": [{"name": "jpgs", "when": "extension = .jpg",
                   "outcomes": [{"type": "selection_set", "selectionSetName": "jpgs"}]}]})
    res = await call(client, "plan-preview", {"name": "p"})
    rule = res["rules"][0]
    assert rule["matched"] == 3 and len(rule["samples"]) == 3
    assert rule["outcomes"][0]["would_add"] == 3 and rule["outcomes"][0]["set_exists"] is False
    assert (await call(client, "resource-set-list"))["resource_sets"] == []


async def test_explain_shows_each_condition_with_the_value_it_saw(client, app, tree):
    index_sync(app, tree)
    text = f"""{{"name": "e", "sources": [{{"name": "home", "type": "filesystem.index",
        "config": {{"path": "{tree}"}}}}], "rules": [{{"name": "big-jpgs",
        "when": "extension = .jpg and size > 4KB", "outcomes": []}}]}}"""
    res = await call(client, "plan-explain", {"text": text, "path": str(tree / "Photos" / "vacation" / "beach.jpg")})
    rule = res["rules"][0]
    assert res["is_candidate"] is True and rule["matched"] is False
    leaves = rule["condition"]["children"] if "children" in rule["condition"] else rule["condition"]["conditions"]
    assert [leaf["passed"] for leaf in leaves] == [True, False]
    assert leaves[1]["seen"] == 3000


async def test_plan_resources_list_plans_and_executions(client, app, tree):
    await call(client, "plan-create", reference_plan(tree))
    done = await call(client, "plan-execute", {"name": "index-media", "wait": True})
    plans = await read_json(client, "synthesis://plans")
    assert [p["name"] for p in plans["plans"]] == ["index-media"]
    one = await read_json(client, "synthesis://plans/index-media")
    assert one["executionsUri"] == "synthesis://plans/index-media/executions"
    history = await read_json(client, "synthesis://plans/index-media/executions")
    assert history["executions"][0]["execution_id"] == done["execution_id"]
    everything = await read_json(client, "synthesis://plan-executions")
    assert everything["total"] == 1


async def test_update_refuses_text_with_fields_and_conditions_without_a_main_rule(client, tree):
    await call(client, "plan-create", {"name": "two", "sources": [
        {"name": "home", "type": "filesystem.index", "config": {"path": str(tree)}}],
        "rules": [{"name": "a", "when": "size > 1KB"}, {"name": "b", "when": "size < 1KB"}]})
    with pytest.raises(ToolFailed, match="give either text or the fields to change, not both"):
        await call(client, "plan-update", {"name": "two", "description": "x",
                                           "text": f"plan two\nsource home index {tree}\n"})
    with pytest.raises(ToolFailed, match="this plan has none: its rules are a, b"):
        await call(client, "plan-update", {"name": "two", "conditions": "size > 1MB"})


async def test_problems_found_after_parsing_dsl_text_carry_their_line(client, tree, without_map):
    text = f"plan p\nsource home index {tree}\nrule r when size > 1MB\n  do map\n"
    res = await call(client, "plan-validate", {"text": text})
    assert res["valid"] is False
    assert res["problems"][0]["line"] == 4 and "'map' is not installed" in res["problems"][0]["message"]
    with pytest.raises(ToolFailed, match="line 4, column"):
        await call(client, "plan-create", {"text": text})


def _classified(app, tree) -> None:
    """What the classifier's metadata operation would have written for three photos: width rows and hashes (two
    photos identical)."""
    from sqlalchemy import insert, select, update

    from store.entries import T
    from store.models import MetadataValue

    index_sync(app, tree)
    widths = {"beach.jpg": 4000, "sunset.jpg": 4000, "photo.jpg": 640}
    with app.engine.begin() as conn:
        ids = dict(conn.execute(select(T.c.name, T.c.id).where(T.c.name.in_(list(widths)))).all())
        conn.execute(insert(MetadataValue.__table__), [{"entry_id": ids[n], "key": "width", "num_value": w}
                                                       for n, w in widths.items()])
        for name in widths:
            digit = "1" if name != "photo.jpg" else "2"
            conn.execute(update(T).where(T.c.id == ids[name]).values(hash="xxh128:" + digit * 32))


CLASSIFY_THEN_SELECT = {"name": "cw", "rules": [
    {"name": "classify", "when": "media_type = image",
     "outcomes": [{"type": "classifier", "classifierOperation": "extract_metadata"}]},
    {"name": "wide", "when": "width > 3000 and duplicates > 0",
     "outcomes": [{"type": "selection_set", "selectionSetName": "wide"}]}]}


async def test_preview_counts_classified_entries_and_notes_the_earlier_classifier_rule(client, app, tree):
    _classified(app, tree)
    await call(client, "plan-create", CLASSIFY_THEN_SELECT | {"sources": [
        {"name": "home", "type": "filesystem.index", "config": {"path": str(tree)}}]})
    res = await call(client, "plan-preview", {"name": "cw"})
    classify, wide = res["rules"]
    assert classify["matched"] == 3 and classify["outcomes"][0]["would_apply_to"] == 3
    assert wide["matched"] == 2 and wide["outcomes"][0]["would_add"] == 2
    assert wide["notes"] == ["uses width, duplicates, filled by the classifier outcome of rule 'classify'; entries it "
                             "has not processed yet are counted as not matching here (plan-execute runs rule "
                             "'classify' first, so more may match then)"]


async def test_explain_shows_the_classifier_values_it_saw(client, app, tree):
    _classified(app, tree)
    text = json.dumps(CLASSIFY_THEN_SELECT | {"sources": [
        {"name": "home", "type": "filesystem.index", "config": {"path": str(tree)}}]})
    res = await call(client, "plan-explain", {"text": text, "path": str(tree / "Photos" / "photo.jpg")})
    wide = res["rules"][1]
    assert wide["matched"] is False and wide["notes"]
    seen = {leaf["field"]: (leaf["seen"], leaf["passed"]) for leaf in wide["condition"]["children"]}
    assert seen == {"width": (640, False), "duplicates": (0, False)}
    res = await call(client, "plan-explain", {"text": text, "path": str(tree / "Photos" / "vacation" / "beach.jpg")})
    assert res["rules"][1]["matched"] is True
    assert [leaf["seen"] for leaf in res["rules"][1]["condition"]["children"]] == [4000, 1]

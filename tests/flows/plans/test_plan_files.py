"""Plan files kept in git keep what people wrote: an update through the plan service (as plan-update makes it)
changes only the lines of what changed, in YAML, JSON and the DSL; a file that no longer parses is written whole."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest

from dsl.errors import PlanError
from dsl.parse import parse_plan_text
from dsl.printer import plan_to_dsl, plan_to_yaml
from flows.plans.files import PlansDirectory
from flows.plans.service import PlanService, merge_update
from flows.core.roots import Roots
from tests.conftest import call

YAML = """\
# Team plan: photos, kept in git by the data team
name: team
description: Photos of the team   # shown in plan-list
sources:
  - name: photos
    type: filesystem.index
    config: {path: ../home/user/Photos}
rules:
  # the jpgs go in their own set
  - name: jpgs
    when: extension = .jpg
    outcomes:
      - {type: selection_set, selectionSetName: jpgs}
  # large files, checked by hand
  - name: large
    when: size > 4KB   # most photos are smaller
    outcomes: [{type: selection_set, selectionSetName: large}]
"""


def json_rule(name: str, when: str) -> str:
    """A rule of the JSON file, as its line says it (on one line)."""
    return f'{{"name": "{name}", "when": "{when}", "outcomes": [{{"type": "selection_set", "selectionSetName": ' \
           f'"{name}"}}]}}'


JSON = f"""\
{{
\t"name": "team",
\t"description": "Photos of the team",
\t"sources": [{{"name": "photos", "type": "filesystem.index", "config": {{"path": "../home/user/Photos"}}}}],
\t"rules": [
\t\t{json_rule("jpgs", "extension = .jpg")},
\t\t{json_rule("large", "size > 4KB")}
\t]
}}
"""

DSL = """\
# Team plan: photos, kept in git by the data team
plan team
description "Photos of the team"   # shown in plan-list
source photos index ../home/user/Photos

# the jpgs go in their own set
rule jpgs when extension = .jpg
  do selection_set jpgs
# large files, checked by hand
rule large when size > 4KB   # most photos are smaller
  do selection_set large
"""

FILES = {"yaml": ("team.yaml", YAML), "json": ("team.json", JSON), "dsl": ("team.plan", DSL)}
FORMS = list(FILES)
VIDEOS = {"name": "videos", "when": "extension in [.mp4, .mov]",
          "outcomes": [{"type": "selection_set", "selectionSetName": "videos"}]}


@pytest.fixture
def service(engine, tree):
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def plan_file(tmp_path: Path, service: PlanService, form: str, text: str | None = None) -> Path:
    """The plan file of ``form`` in a plans directory, loaded into ``service``."""
    folder = tmp_path / "plans"
    folder.mkdir(exist_ok=True)
    name, default = FILES[form]
    (folder / name).write_text(text or default)
    service.plans_dir = PlansDirectory(folder, service)
    assert service.plans_dir.load_all() == {"loaded": ["team"], "errors": []}
    return folder / name


def update(service: PlanService, **fields):
    """What plan-update does: the stored plan, the fields given replacing theirs, saved (and written back)."""
    plan = merge_update(service.load("team"), **fields)
    service.save(plan, create=False)
    return plan


def rules_with(service: PlanService, change) -> list[dict]:
    rules = service.load("team").to_object()["rules"]
    change(rules)
    return rules


def diff(before: str, after: str) -> list[str]:
    """The changed lines, ``-old`` / ``+new``."""
    return [line.rstrip("\n") for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def written(file: Path, form: str, plan) -> str:
    text = file.read_text()
    assert parse_plan_text(text, format=form) == plan  # what the file says is the plan that was saved
    return text


DESCRIPTION = {
    "yaml": ["-description: Photos of the team   # shown in plan-list",
             "+description: Team photos          # shown in plan-list"],
    "json": ['-\t"description": "Photos of the team",', '+\t"description": "Team photos",'],
    "dsl": ['-description "Photos of the team"   # shown in plan-list',
            '+description "Team photos"          # shown in plan-list'],
}


@pytest.mark.parametrize("form", FORMS)
def test_updating_the_description_changes_only_its_line(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, description="Team photos")
    assert diff(FILES[form][1], written(file, form, plan)) == DESCRIPTION[form]


CONDITION = {
    "yaml": ["-    when: size > 4KB   # most photos are smaller", "+    when: size > 8KB   # most photos are smaller"],
    "json": ["-\t\t" + json_rule("large", "size > 4KB"), "+\t\t" + json_rule("large", "size > 8KB")],
    "dsl": ["-rule large when size > 4KB   # most photos are smaller",
            "+rule large when size > 8KB   # most photos are smaller"],
}


@pytest.mark.parametrize("form", FORMS)
def test_changing_one_rules_condition_changes_only_that_rules_lines(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, rules=rules_with(service, lambda rules: rules[1].update(when="size > 8KB")))
    assert diff(FILES[form][1], written(file, form, plan)) == CONDITION[form]


OUTCOME = {
    "yaml": ["-      - {type: selection_set, selectionSetName: jpgs}",
             "+      - {type: selection_set, selectionSetName: photos-jpg}"],
    "json": ["-\t\t" + json_rule("jpgs", "extension = .jpg") + ",",
             "+\t\t" + json_rule("jpgs", "extension = .jpg").replace('Name": "jpgs', 'Name": "photos-jpg') + ","],
    "dsl": ["-  do selection_set jpgs", "+  do selection_set photos-jpg"],
}


@pytest.mark.parametrize("form", FORMS)
def test_changing_a_rules_outcome_keeps_the_comment_above_the_next_rule(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, rules=rules_with(
        service, lambda rules: rules[0]["outcomes"][0].update(selectionSetName="photos-jpg")))
    assert diff(FILES[form][1], written(file, form, plan)) == OUTCOME[form]


INSERTED = {
    "yaml": "  - name: videos\n    when: extension in [.mp4, .mov]\n    outcomes:\n"
            "      - {type: selection_set, selectionSetName: videos}\n",
    "dsl": "rule videos when extension in [.mp4, .mov]\n  do selection_set videos\n",
}


@pytest.mark.parametrize("form", ["yaml", "dsl"])
def test_a_rule_inserted_between_two_goes_above_the_comment_of_the_next_one(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, rules=rules_with(service, lambda rules: rules.insert(1, VIDEOS)))
    above = "  # large files" if form == "yaml" else "# large files"
    assert written(file, form, plan) == FILES[form][1].replace(above, INSERTED[form] + above)


ADDED = {
    "yaml": ["+  - name: videos", "+    when: extension in [.mp4, .mov]", "+    outcomes:",
             "+      - {type: selection_set, selectionSetName: videos}"],
    "json": ["-\t\t" + json_rule("large", "size > 4KB"), "+\t\t" + json_rule("large", "size > 4KB") + ",",
             "+\t\t" + json_rule("videos", "extension in [.mp4, .mov]")],  # a comma after the rule before it
    "dsl": ["+rule videos when extension in [.mp4, .mov]", "+  do selection_set videos"],
}


@pytest.mark.parametrize("form", FORMS)
def test_a_new_rule_is_added_after_the_last_one_and_nothing_else_changes(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, rules=rules_with(service, lambda rules: rules.append(VIDEOS)))
    text = written(file, form, plan)
    assert diff(FILES[form][1], text) == ADDED[form]
    if form != "json":
        assert text.startswith(FILES[form][1])  # at the end, after the rule that was last


REMOVED = {
    "yaml": ["-  - name: jpgs", "-    when: extension = .jpg", "-    outcomes:",
             "-      - {type: selection_set, selectionSetName: jpgs}"],
    "json": ["-\t\t" + json_rule("jpgs", "extension = .jpg") + ","],
    "dsl": ["-rule jpgs when extension = .jpg", "-  do selection_set jpgs"],
}


@pytest.mark.parametrize("form", FORMS)
def test_removing_a_rule_removes_its_lines_and_keeps_the_comments_around_it(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, rules=rules_with(service, lambda rules: rules.pop(0)))
    assert diff(FILES[form][1], written(file, form, plan)) == REMOVED[form]


PAUSED = {"yaml": ["+status: paused"], "json": ['+\t"status": "paused",'], "dsl": ["+status paused"]}


@pytest.mark.parametrize("form", FORMS)
def test_pausing_a_plan_adds_one_status_line_after_the_description(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    plan = update(service, status="paused")
    text = written(file, form, plan)
    assert diff(FILES[form][1], text) == PAUSED[form]
    lines = text.splitlines()
    assert "description" in lines[lines.index(PAUSED[form][0][1:]) - 1]
    plan = update(service, status="active")
    assert written(file, form, plan) == FILES[form][1]  # and active again: the file is as it was


STATED = {"yaml": ("description: Photos of the team   # shown in plan-list\n", "status: {}   # on call\n"),
          "dsl": ('description "Photos of the team"   # shown in plan-list\n', "status {}   # on call\n")}


@pytest.mark.parametrize("form", ["yaml", "dsl"])
def test_a_status_the_file_states_is_changed_where_it_is(tmp_path, service, form):
    after, line = STATED[form]
    text = FILES[form][1].replace(after, after + line.format("active"))
    file = plan_file(tmp_path, service, form, text)
    plan = update(service, status="paused")
    assert diff(text, written(file, form, plan)) == ["-" + line.format("active")[:-1],
                                                     "+" + line.format("paused")[:-1]]


@pytest.mark.parametrize("form", FORMS)
def test_a_file_with_windows_line_ends_keeps_them(tmp_path, service, form):
    text = FILES[form][1].replace("\n", "\r\n")
    file = plan_file(tmp_path, service, form, text)
    plan = update(service, description="Team photos")
    after = file.read_bytes().decode()
    assert after.count("\r\n") == after.count("\n") == text.count("\n")
    assert diff(FILES[form][1], after.replace("\r\n", "\n")) == DESCRIPTION[form]
    assert parse_plan_text(after, format=form) == plan


def test_a_rule_given_as_conditions_and_outcomes_is_edited_where_it_is(tmp_path, service):
    text = YAML.split("rules:")[0] + "conditions: extension = .jpg   # only jpgs\n" \
                                     "outcomes: [{type: selection_set, selectionSetName: jpgs}]\n"
    file = plan_file(tmp_path, service, "yaml", text)
    plan = update(service, conditions="extension = .png")
    assert diff(text, written(file, "yaml", plan)) == ["-conditions: extension = .jpg   # only jpgs",
                                                       "+conditions: extension = .png   # only jpgs"]


WHOLE = {"yaml": plan_to_yaml, "dsl": plan_to_dsl, "json": lambda plan: json.dumps(plan.to_object(), indent=2) + "\n"}
BROKEN = {"yaml": YAML + "  - name: [videos\n", "json": JSON.replace("]\n}", "]\n"), "dsl": DSL + "rule (\n"}


@pytest.mark.parametrize("form", FORMS)
def test_a_file_that_no_longer_parses_is_written_whole_as_before(tmp_path, service, form):
    file = plan_file(tmp_path, service, form)
    file.write_text(BROKEN[form])  # broken while the plan is loaded (the watcher would report it)
    with pytest.raises(PlanError):
        parse_plan_text(BROKEN[form], format=form)
    plan = update(service, description="Team photos")
    assert written(file, form, plan) == WHOLE[form](plan)


def test_the_file_is_edited_as_it_is_now_not_as_it_was_loaded(tmp_path, service):
    file = plan_file(tmp_path, service, "yaml")
    now = YAML.replace("rules:\n", "rules:  # reviewed in March\n")  # edited on disk since it was loaded
    file.write_text(now)
    plan = update(service, description="Team photos")
    assert diff(now, written(file, "yaml", plan)) == DESCRIPTION["yaml"]


async def test_plan_update_over_mcp_keeps_the_comments_of_the_plan_file(tmp_path, tree, data_dir):
    from mcp import Client

    from mcp_server.app import AssayApp, build_server
    from mcp_server.config import Settings
    from store.engine import dispose_engines

    folder = tmp_path / "plans"
    folder.mkdir()
    (folder / "team.yaml").write_text(YAML)
    app = AssayApp.create(Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, plans_dir=folder))
    try:
        async with Client(build_server(app)) as client:
            await call(client, "plan-update", {"name": "team", "description": "Team photos"})
    finally:
        app.close()
        dispose_engines()
    assert diff(YAML, (folder / "team.yaml").read_text()) == DESCRIPTION["yaml"]

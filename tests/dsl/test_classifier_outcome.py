"""The classifier outcome in its three forms (reference 000's JSON object, YAML, the DSL's ``do classifier``), alone
and inside ``chained``: the forms give the same plan, print back to themselves, and bad values are refused with
their place (line and column, or the JSON / YAML path) and what is accepted."""

from __future__ import annotations

import json

import pytest

from dsl import parse_plan_text, plan_to_dsl, plan_to_yaml
from dsl.errors import PlanValidationError

SOURCE = {"name": "photos", "type": "filesystem.index", "config": {"path": "/data/photos"}}
CLASSIFY = {"type": "classifier", "classifierOperation": "generate_thumbnail", "maxWidth": 640, "maxHeight": 480,
            "quality": 85}
DSL = """plan thumbs
source photos index /data/photos
rule photos when media_type = image
  do classifier generate_thumbnail maxWidth=640 maxHeight=480 quality=85
rule everything
  do chained stopOnError=true (classifier extract_metadata, selection_set classified)
rule wide when width > 3000 and duplicates = 0
  do selection_set wide
"""
OBJECT = {"name": "thumbs", "sources": [SOURCE], "rules": [
    {"name": "photos", "when": "media_type = image", "outcomes": [CLASSIFY]},
    {"name": "everything", "outcomes": [{"type": "chained", "stopOnError": True, "outcomes": [
        {"type": "classifier", "classifierOperation": "extract_metadata"},
        {"type": "selection_set", "selectionSetName": "classified"}]}]},
    {"name": "wide", "when": "width > 3000 and duplicates = 0",
     "outcomes": [{"type": "selection_set", "selectionSetName": "wide"}]}]}
YAML = """name: thumbs
sources:
  - {name: photos, type: filesystem.index, config: {path: /data/photos}}
rules:
  - name: photos
    when: media_type = image
    outcomes:
      - type: classifier
        classifierOperation: generate_thumbnail
        maxWidth: 640
        maxHeight: 480
        quality: 85
  - name: everything
    outcomes:
      - type: chained
        stopOnError: true
        outcomes:
          - {type: classifier, classifierOperation: extract_metadata}
          - {type: selection_set, selectionSetName: classified}
  - name: wide
    when: width > 3000 and duplicates = 0
    outcomes: [{type: selection_set, selectionSetName: wide}]
"""


def test_the_three_forms_give_the_same_plan_and_print_back_to_it():
    from_dsl = parse_plan_text(DSL, format="dsl")
    assert parse_plan_text(json.dumps(OBJECT), format="json") == from_dsl
    assert parse_plan_text(YAML, format="yaml") == from_dsl
    assert parse_plan_text(plan_to_dsl(from_dsl), format="dsl") == from_dsl
    assert parse_plan_text(plan_to_yaml(from_dsl), format="yaml") == from_dsl
    out = from_dsl.rules[0].outcomes[0]
    assert out.params() == CLASSIFY  # reference 000's JSON form exactly
    assert "do classifier generate_thumbnail maxWidth=640 maxHeight=480 quality=85" in plan_to_dsl(from_dsl)


@pytest.mark.parametrize("operation", ["generate_thumbnail", "generate_timeline", "extract_metadata", "all"])
def test_every_operation_round_trips_alone_and_chained(operation):
    text = (f"plan p\nsource s index /d\nrule r\n  do classifier {operation}\n"
            f"  do chained (classifier {operation} quality=50, selection_set done)\n")
    plan = parse_plan_text(text, format="dsl")
    assert plan.rules[0].outcomes[0].classifierOperation == operation
    assert plan.rules[0].outcomes[1].outcomes[0].quality == 50
    assert parse_plan_text(plan_to_dsl(plan), format="dsl") == plan
    assert parse_plan_text(plan_to_yaml(plan), format="yaml") == plan


def test_the_default_operation_is_all_and_prints_without_it():
    plan = parse_plan_text("plan p\nsource s index /d\nrule r\n  do classifier\n", format="dsl")
    assert plan.rules[0].outcomes[0].classifierOperation == "all"
    assert "  do classifier\n" in plan_to_dsl(plan)


@pytest.mark.parametrize("outcome, fragment, column", [
    ("classifier all maxWidth=0", "maxWidth 0 is not accepted; give a whole number of pixels from 1 to 8192", 21),
    ("classifier all maxHeight=9000", "maxHeight 9000 is not accepted; give a whole number of pixels from 1 to 8192",
     21),
    ("classifier all quality=101", "quality 101 is not accepted; give a whole number from 1 to 100", 21),
    ("classifier all quality=0", "quality 0 is not accepted", 21),
    ("classifier all maxWidth=wide", "maxWidth 'wide' is not accepted", 21),
    ("classifier make_coffee", "'generate_thumbnail', 'generate_timeline', 'extract_metadata' or 'all'", 17),
    ("classifier all frames=3", "unknown key 'frames'; accepted: type, when, classifierOperation, maxWidth", 21),
])
def test_bad_values_in_the_dsl_say_where_and_what_is_accepted(outcome, fragment, column):
    with pytest.raises(PlanValidationError) as err:
        parse_plan_text(f"plan p\nsource s index /d\nrule r\n  do {outcome}\n", format="dsl")
    problem = err.value.problems[0]
    assert fragment in problem.message
    assert (problem.line, problem.column) == (4, column)


def test_bad_values_in_json_and_yaml_name_their_path_and_line():
    bad = {**OBJECT, "rules": [{"name": "r", "outcomes": [{"type": "chained", "outcomes": [
        {"type": "classifier", "classifierOperation": "thumbs", "maxWidth": 0, "quality": 101}]}]}]}
    with pytest.raises(PlanValidationError) as err:
        parse_plan_text(json.dumps(bad, indent=1), format="json")
    found = {p.path: p for p in err.value.problems}
    base = "rules[0].outcomes[0].outcomes[0]"
    assert set(found) == {f"{base}.classifierOperation", f"{base}.maxWidth", f"{base}.quality"}
    assert "from 1 to 8192" in found[f"{base}.maxWidth"].message and found[f"{base}.maxWidth"].line is not None
    yaml_text = YAML.replace("quality: 85", "quality: 101")
    with pytest.raises(PlanValidationError) as err:
        parse_plan_text(yaml_text, format="yaml")
    (problem,) = err.value.problems
    assert problem.path == "rules[0].outcomes[0].quality" and problem.line == 12
    assert "from 1 to 100" in problem.message

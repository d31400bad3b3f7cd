"""YAML and JSON plans: the design's example, reference 000's JSON form, and errors with their YAML lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsl import Plan, PlanSyntaxError, PlanValidationError, parse_expression, parse_plan_file, parse_plan_text
from dsl.conditions import Compare, Group
from dsl.parse import parse_plan_object
from dsl.printer import plan_to_dsl, plan_to_yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plans"

DESIGN_YAML = """\
name: media-library
description: Thumbnail the photos, collect big videos, embed the papers
mode: continuous                      # oneshot (default) | continuous
sources:
  - name: photos
    type: filesystem.watch            # filesystem.index | filesystem.watch | selection_set | query
    target_set: photos
    config: {path: ~/Photos, recursive: true, debounce_ms: 500, exclude: ["*.tmp"]}
rules:
  - name: big-videos
    when: media_type = video and size > 1GB          # an expression, or a condition object
    outcomes:
      - {type: selection_set, selectionSetName: big-videos, operation: add}
      - {type: classifier, classifierOperation: generate_timeline}
  - name: papers
    when:                                            # the reference's object form
      type: all
      conditions: [{type: path, pathSuffix: .pdf}, {type: size, maxSize: 50000000}]
    outcomes:
      - {type: embed, collection: papers}
"""

REFERENCE_JSON = {
    "name": "papers",
    "sources": [{"name": "documents", "type": "filesystem.index", "config": {"path": "/data/documents"}}],
    "conditions": {"type": "all", "conditions": [{"type": "path", "pathSuffix": ".pdf"},
                                                 {"type": "size", "maxSize": 50000000}]},
    "outcomes": [{"type": "selection_set", "selectionSetName": "papers", "operation": "add"}],
}


def test_the_design_example_yaml_reads_conditions_from_text_and_objects():
    plan = parse_plan_text(DESIGN_YAML)
    assert plan.mode == "continuous"
    assert plan.sources[0].config.paths == ["~/Photos"] and plan.sources[0].config.exclude == ["*.tmp"]
    assert plan.rules[0].when == parse_expression("media_type = video and size > 1GB")
    assert plan.rules[1].when == parse_expression("all(path endswith .pdf, size <= 50000000)")
    assert [o.type for o in plan.rules[0].outcomes] == ["selection_set", "classifier"]
    assert plan.rules[1].outcomes[0].collection == "papers"


@pytest.mark.parametrize("fmt", ["json", "auto"])
def test_the_reference_json_form_becomes_one_rule_named_after_the_plan(fmt):
    plan = parse_plan_text(json.dumps(REFERENCE_JSON, indent=2), format=fmt)
    assert [r.name for r in plan.rules] == ["papers"]
    assert plan.rules[0].when == Group(type="all", conditions=[
        Compare(field="path", op="endswith", value=".pdf"), Compare(field="size", op="<=", value=50_000_000)])
    outcome = plan.rules[0].outcomes[0]
    assert (outcome.type, outcome.selectionSetName, outcome.operation) == ("selection_set", "papers", "add")
    assert parse_plan_object(REFERENCE_JSON) == plan


@pytest.mark.parametrize("when, expected", [
    ("size > 10MB", "size > 10MB"),
    ({"type": "size", "minSize": "1KB", "maxSize": 2048}, "all(size >= 1KB, size <= 2048)"),
    ({"type": "time", "minMtime": "2024-01-01"}, "mtime >= 2024-01-01"),
    ({"type": "media_type", "mediaType": "image"}, "media_type = image"),
    ({"type": "path", "pathPattern": r"\.pdf$"}, r'path matches "\.pdf$"'),
    ({"all": ["size > 1", {"not": "name = a"}]}, "all(size > 1, not name = a)"),
    ({"any": "size > 1"}, "any(size > 1)"),
    ({"none": [{"field": "name", "op": "glob", "value": "*.tmp"}]}, 'none(name glob "*.tmp")'),
    (["size > 1", "size < 5"], "all(size > 1, size < 5)"),
    (True, "all()"),
    (False, "any()"),
])
def test_every_condition_form_reads_into_the_same_tree(when, expected):
    plan = Plan.from_object({"name": "p", "sources": [{"name": "s", "type": "query", "config": {"query": "q"}}],
                             "rules": [{"name": "r", "when": when}]})
    assert plan.rules[0].when == parse_expression(expected)


def test_yaml_dates_stay_text_for_conditions_and_preferences():
    plan = parse_plan_text("name: p\nsources: [{name: s, type: query, config: {query: q}}]\n"
                           "rules: [{name: r, when: {type: time, maxMtime: 2024-06-01}}]\n"
                           "preferences: {since: 2024-01-01}\n")
    assert plan.rules[0].when.value == "2024-06-01"
    assert plan.preferences == {"since": "2024-01-01"}


@pytest.mark.parametrize("text, path, line, fragment", [
    ("name: p\nsources: [{name: s, type: query, config: {query: q}}]\nrules:\n  - name: r\n"
     "    when: {type: size, minSise: 5}\n", "rules[0].when", 5, "unknown key(s) 'minSise'"),
    ("name: p\nsources: [{name: s, type: query, config: {query: q}}]\nrules:\n  - name: r\n"
     "    when: size > 10XB\n", "rules[0].when", 5, "unknown size unit 'XB'"),
    ("name: p\nsources:\n  - name: s\n    type: filesystem.index\n    config: {path: /x, recursve: true}\n",
     "sources[0].config.recursve", 5, "unknown key 'recursve'; accepted: paths, recursive"),
    ("name: p\nsources:\n  - name: s\n    type: filesystem.indexx\n", "sources[0].type", 4,
     "'filesystem.index', 'filesystem.watch', 'selection_set' or 'query'"),
    ("name: p\nsources: [{name: s, type: query, config: {query: q}}]\nrules:\n  - name: r\n    outcomes:\n"
     "      - {type: selection_set}\n", "rules[0].outcomes[0].selectionSetName", 6, "'selectionSetName' is required"),
    ("name: p\nsources: [{name: s, type: query, config: {query: q}}]\nrules:\n  - name: r\n    outcomes:\n"
     "      - {type: thumbnail}\n", "rules[0].outcomes[0]", 6, "unknown outcome type 'thumbnail'"),
    ("name: p\nsources: [{name: s, type: query, config: {query: q}}]\ncolour: red\n", "colour", 3,
     "unknown key 'colour'"),
])
def test_a_yaml_validation_problem_names_its_path_and_line(text, path, line, fragment):
    with pytest.raises(PlanValidationError) as err:
        parse_plan_text(text, source="plan.yaml")
    problem = err.value.problems[0]
    assert problem.path == path and problem.line == line and fragment in problem.message
    assert f"line {line}" in str(err.value) and "plan.yaml" in str(err.value)


def test_an_expression_error_inside_yaml_names_the_column_of_the_expression():
    with pytest.raises(PlanValidationError) as err:
        parse_plan_text("name: p\nsources: [{name: s, type: query, config: {query: q}}]\n"
                        "rules: [{name: r, when: size > 1 and sise < 2}]\n")
    assert "unknown field 'sise'" in err.value.problems[0].message
    assert "column 14 of the expression" in err.value.problems[0].message
    assert err.value.problems[0].line == 3


def test_the_reference_form_locates_problems_at_its_own_keys():
    text = json.dumps({**REFERENCE_JSON, "conditions": {"type": "size", "minSise": 1}}, indent=2)
    with pytest.raises(PlanValidationError) as err:
        parse_plan_text(text)
    problem = err.value.problems[0]
    assert problem.path == "conditions" and problem.line == text.splitlines().index('  "conditions": {') + 1


@pytest.mark.parametrize("text, fmt, line, column, fragment", [
    ("name: p\nsources: [\n", "yaml", 3, 1, "invalid YAML"),
    ("name: p\n  bad: indent\n", "yaml", 2, 6, "invalid YAML"),
    ('{"name": "p",\n "sources": [}', "json", 2, 14, "invalid JSON"),
])
def test_invalid_yaml_or_json_is_a_syntax_error_with_its_position(text, fmt, line, column, fragment):
    with pytest.raises(PlanSyntaxError) as err:
        parse_plan_text(text, format=fmt)
    problem = err.value.problems[0]
    assert fragment in problem.message and (problem.line, problem.column) == (line, column)
    assert "^" in problem.context


@pytest.mark.parametrize("data, fragment", [
    ([1, 2], "a plan is a mapping"),
    ({"name": "p"}, "a plan needs at least one source"),
])
def test_a_plan_that_is_not_a_mapping_or_has_no_source_says_what_is_accepted(data, fragment):
    with pytest.raises(PlanValidationError, match=fragment):
        parse_plan_text(json.dumps(data), format="json")


def test_an_unknown_format_is_refused_with_the_accepted_ones():
    with pytest.raises(PlanValidationError, match="auto, yaml, json, dsl"):
        parse_plan_text("name: p", format="toml")


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json", ".plan", ".txt"])
def test_plan_files_are_read_by_their_suffix(tmp_path, suffix):
    plan = parse_plan_text(DESIGN_YAML)
    text = {".json": json.dumps(plan.to_object()), ".plan": plan_to_dsl(plan)}.get(suffix, plan_to_yaml(plan))
    path = tmp_path / f"plan{suffix}"
    path.write_text(text)
    assert parse_plan_file(path) == plan


def test_a_missing_plan_file_is_a_plan_error(tmp_path):
    with pytest.raises(PlanValidationError, match="cannot read the plan file"):
        parse_plan_file(tmp_path / "nope.yaml")


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason="no examples/plans")
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*")) if EXAMPLES.is_dir() else [], ids=lambda p: p.name)
def test_every_example_plan_parses_and_round_trips(path):
    plan = parse_plan_file(path)
    assert parse_plan_text(plan_to_yaml(plan), format="yaml") == plan
    assert parse_plan_text(plan_to_dsl(plan), format="dsl") == plan

"""The JSON Schema of plan files: valid draft 2020-12, and it accepts the plans the parser accepts."""

from __future__ import annotations

import json

import pytest
import yaml

from dsl import plan_json_schema
from dsl.outcomes import OUTCOME_MODELS
from tests.dsl.test_parse_yaml_json import DESIGN_YAML, EXAMPLES, REFERENCE_JSON

def _validator():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed; structure is tested alone")
    schema = plan_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_schema_is_json_with_the_plan_keys_and_definitions():
    schema = json.loads(json.dumps(plan_json_schema()))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) >= {"name", "description", "mode", "status", "sources", "rules", "preferences",
                                         "conditions", "outcomes"}
    assert {"source", "rule", "condition", "compare", "outcome"} <= set(schema["$defs"])
    kinds = [v["properties"]["type"]["const"] for v in schema["$defs"]["outcome"]["oneOf"]]
    assert kinds == list(OUTCOME_MODELS)


def test_the_schema_is_valid_draft_2020_12():
    _validator()


def _example_objects():
    found = [("design", yaml.safe_load(DESIGN_YAML)), ("reference", REFERENCE_JSON)]
    if EXAMPLES.is_dir():
        found += [(p.name, yaml.safe_load(p.read_text())) for p in sorted(EXAMPLES.glob("*.y*ml"))]
        found += [(p.name, json.loads(p.read_text())) for p in sorted(EXAMPLES.glob("*.json"))]
    return found


@pytest.mark.parametrize("name, data", _example_objects(), ids=[n for n, _ in _example_objects()])
def test_the_example_plans_validate_against_the_schema(name, data):
    errors = [e.message for e in _validator().iter_errors(data)]
    assert errors == []


def test_printed_yaml_validates_against_the_schema():
    from dsl import parse_plan_text, plan_to_yaml

    plan = parse_plan_text(DESIGN_YAML)
    assert [e.message for e in _validator().iter_errors(yaml.safe_load(plan_to_yaml(plan)))] == []


@pytest.mark.parametrize("data", [
    {"name": "p", "sources": [{"name": "s", "type": "nfs"}]},
    {"name": "p", "sources": [{"name": "s", "type": "query", "config": {"query": "q"}}], "colour": 1},
    {"name": "p", "sources": [{"name": "s", "type": "query"}], "rules": [
        {"name": "r", "outcomes": [{"type": "selection_set"}]}]},
    {"name": "p", "sources": [{"name": "s", "type": "query"}], "rules": [{"name": "r", "when": {"type": "size"}}]},
    {"name": "bad name!", "sources": [{"name": "s", "type": "query"}]},
])
def test_the_schema_flags_what_the_parser_refuses(data):
    assert list(_validator().iter_errors(data))

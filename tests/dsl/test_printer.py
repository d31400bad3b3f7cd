"""Printing plans and conditions back: canonical spellings, and parse(print(x)) == x for every plan."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from dsl import Plan, condition_to_text, parse_expression, parse_plan_text
from dsl.parse import parse_dsl
from dsl.conditions import Compare, Group, Not
from dsl.printer import plan_to_dsl, plan_to_yaml
from tests.dsl.strategies import conditions, plans

ROUND_TRIPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def C(field, op, value, arg=None):
    return Compare(field=field, op=op, value=value, arg=arg)


A, B = C("name", "=", "a"), C("name", "=", "b")


@pytest.mark.parametrize("cond, text", [
    (C("size", ">", 10_000_000), "size > 10MB"),
    (C("size", ">=", 1024**3), "size >= 1GiB"),
    (C("size", "<", 1500), "size < 1500"),
    (C("duration", ">", 0.5), "duration > 500ms"),
    (C("duration", "<", 604800), "duration < 7d"),
    (C("mtime", ">", "now - 7d"), "mtime > now - 7d"),
    (C("mtime", "<", "2024-01-01"), "mtime < 2024-01-01"),
    (C("mtime", "<", "2024-01-01 12:30"), "mtime < 2024-01-01T12:30:00Z"),
    (C("extension", "in", ["pdf", ".EPUB"]), "extension in [.pdf, .epub]"),
    (C("name", "=", "two words"), 'name = "two words"'),
    (C("name", "=", "007"), "name = 007"),
    (C("name", "=", "and"), 'name = "and"'),
    (C("name", "glob", "*.tmp"), 'name glob "*.tmp"'),
    (C("name", "matches", r"\d+\.pdf$"), r'name matches "\d+\.pdf$"'),
    (C("title", "=", 'say "hi"\n'), r'title = "say \"hi\"\n"'),
    (C("exif.ISO", "=", 100), "exif.ISO = 100"),
    (C("exif.ISO", "=", "100"), 'exif.ISO = "100"'),
    (C("metadata.two words", "=", 1.5), '"metadata.two words" = 1.5'),
    (C("similarity", ">=", 0.4, arg="a beach"), 'similarity("a beach") >= 0.4'),
    (C("size", "between", ["1MB", "2MB"]), "size between 1MB and 2MB"),
    (Not(condition=C("extension", "in", [".part"])), "extension not in [.part]"),
    (Not(condition=C("size", ">", 1)), "not size > 1"),
    (Group(type="all", conditions=[A, B]), "name = a and name = b"),
    (Group(type="any", conditions=[A, Group(type="all", conditions=[A, B])]), "name = a or (name = a and name = b)"),
    (Group(type="all", conditions=[A, Group(type="all", conditions=[A, B])]),
     "name = a and (name = a and name = b)"),
    (Group(type="all", conditions=[A]), "all(name = a)"),
    (Group(type="none", conditions=[A, B]), "none(name = a, name = b)"),
    (Group(type="all"), "all()"),
    (Group(type="any"), "any()"),
    (Not(condition=Group(type="all", conditions=[A, B])), "not (name = a and name = b)"),
    (Not(condition=Not(condition=A)), "not not name = a"),
])
def test_a_condition_prints_as_canonical_expression_text(cond, text):
    assert condition_to_text(cond) == text
    assert parse_expression(text) == cond


def test_a_plan_prints_as_readable_yaml_with_defaults_left_out():
    plan = parse_plan_text("plan p\nsource s index /data into all-files recursive=true max_depth=2\n"
                           "rule big when size > 1GB\n  do selection_set big\n  do classifier quality=80\n")
    assert plan_to_yaml(plan) == (
        "name: p\n"
        "sources:\n"
        "  - name: s\n"
        "    type: filesystem.index\n"
        "    target_set: all-files\n"
        "    config: {path: /data, max_depth: 2}\n"
        "rules:\n"
        "  - name: big\n"
        "    when: size > 1GB\n"
        "    outcomes:\n"
        "      - {type: selection_set, selectionSetName: big}\n"
        "      - {type: classifier, quality: 80}\n")


def test_a_plan_prints_as_dsl_one_statement_a_line():
    plan = parse_plan_text(
        "name: p\ndescription: Big \"files\"\nmode: continuous\nstatus: paused\n"
        "sources: [{name: s, type: filesystem.watch, config: {paths: [/a, '/b c'], exclude: ['*.tmp']}},\n"
        "          {name: f, type: selection_set, target_set: out, config: {set: favs}}]\n"
        "rules:\n  - name: r\n    when: size > 1GB\n    outcomes:\n"
        "      - {type: chained, stopOnError: true, outcomes: [{type: selection_set, selectionSetName: a},\n"
        "          {type: selection_set, selectionSetName: b, operation: remove, when: kind = file}]}\n"
        "  - name: everything\n    outcomes: [{type: label, classes: [cat, hot dog]}]\n"
        "preferences: {sort: size, limit: 10}\n")
    assert plan_to_dsl(plan) == (
        "plan p\n"
        'description "Big \\"files\\""\n'
        "mode continuous\n"
        "status paused\n"
        'source s watch /a "/b c" exclude=["*.tmp"]\n'
        "source f set favs into out\n"
        "rule r when size > 1GB\n"
        "  do chained stopOnError=true (selection_set a, selection_set b remove when kind = file)\n"
        "rule everything\n"
        '  do label cat "hot dog"\n'
        "prefer sort=size limit=10\n")


@pytest.mark.parametrize("outcome, text", [
    ({"type": "label", "classes": ["invoice", {"name": "receipt", "description": "proof of a payment"}],
      "threshold": 0.4, "collection": "papers"},
     'label invoice receipt="proof of a payment" threshold=0.4 collection=papers'),
    ({"type": "label", "classes": [{"name": "b", "description": "bee"}, "c"]}, 'label b="bee" c'),
    ({"type": "label", "classes": [{"name": "threshold", "description": "a limit"}, "c"]},  # named like an option
     'label classes=[{name=threshold, "description"="a limit"}, c]'),
])
def test_label_classes_print_as_names_and_name_equals_description(outcome, text):
    from dsl.outcomes import LabelOutcome
    from dsl.printer import outcome_text

    model = LabelOutcome.model_validate(outcome)
    assert outcome_text(model) == text
    plan = Plan.from_object({"name": "p", "sources": [{"name": "s", "type": "filesystem.index",
                                                       "config": {"path": "/x"}}],
                             "rules": [{"name": "r", "outcomes": [outcome]}]})
    assert parse_dsl(plan_to_dsl(plan)) == plan and parse_plan_text(plan_to_yaml(plan)) == plan


@pytest.mark.parametrize("value, text", [
    ({"k": None}, "k=null"), ({"k": True}, "k=true"), ({"k": "true"}, 'k="true"'), ({"k": "12"}, 'k="12"'),
    ({"k": 12}, "k=12"), ({"k": 1e-05}, "k=1e-05"), ({"k": []}, "k=[]"), ({"k": {}}, "k={}"),
    ({"when": 1}, '"when"=1'), ({"": ""}, '""=""'), ({"k": {"a b": [1, "x y"]}}, 'k={"a b"=[1, "x y"]}'),
])
def test_preferences_print_as_typed_option_values(value, text):
    plan = Plan.from_object({"name": "p", "sources": [{"name": "s", "type": "query", "config": {"query": "q"}}],
                             "preferences": value})
    assert plan_to_dsl(plan).splitlines()[-1] == f"prefer {text}"
    assert parse_plan_text(plan_to_dsl(plan)) == plan


@ROUND_TRIPS
@given(conditions)
def test_any_condition_reads_back_from_its_text(cond):
    assert parse_expression(condition_to_text(cond)) == cond


@ROUND_TRIPS
@given(plans())
def test_any_plan_reads_back_from_its_yaml(plan):
    assert parse_plan_text(plan_to_yaml(plan), format="yaml") == plan
    assert parse_plan_text(plan_to_yaml(plan)) == plan


@ROUND_TRIPS
@given(plans())
def test_any_plan_reads_back_from_its_dsl(plan):
    assert parse_plan_text(plan_to_dsl(plan), format="dsl") == plan
    assert parse_plan_text(plan_to_dsl(plan)) == plan


# --- SQL-style lists: agents write (a, b) as often as [a, b] -------------------------------------------------------


@pytest.mark.parametrize("text, brackets", [
    ('extension in (".txt", ".md")', 'extension in [".txt", ".md"]'),
    ("extension not in (.part, .tmp,)", "extension not in [.part, .tmp]"),
    ("size in (1KB)", "size in [1KB]"),
    ("kind = file and (name in (a, b) or size > 1MB)", "kind = file and (name in [a, b] or size > 1MB)"),
    ("any(extension in (.jpg), not media_type in (video, audio))",
     "any(extension in [.jpg], not media_type in [video, audio])"),
])
def test_a_list_in_parentheses_reads_as_the_same_list_in_brackets(text, brackets):
    assert parse_expression(text) == parse_expression(brackets)
    assert "[" in condition_to_text(parse_expression(text))  # printed back canonical, with brackets


def test_sql_style_lists_work_in_yaml_when_strings_and_dsl_rules():
    yaml_plan = parse_plan_text("name: p\nsources: [{name: s, type: filesystem.index, config: {path: /tmp}}]\n"
                                "rules:\n  - name: r\n    when: extension in ('.txt', '.md')\n    outcomes: []\n")
    dsl_plan = parse_plan_text("plan p\nsource s index /tmp\nrule r when extension in (.txt,\n  .md)\n")
    assert yaml_plan.rules[0].when == dsl_plan.rules[0].when == parse_expression("extension in [.txt, .md]")


def _with_sql_lists(cond) -> str:
    """Expression text of ``cond`` with every list written in parentheses (values spelt as the printer spells them)."""
    from dsl.fields import field_spec
    from dsl.printer import value_text

    if isinstance(cond, Compare) and cond.op == "in":
        name = condition_to_text(C(cond.field, "=", cond.value[0], cond.arg)).split(" = ", 1)[0]
        spec = field_spec(cond.field)
        return f"{name} in ({', '.join(value_text(spec, 'in', v) for v in cond.value)})"
    if isinstance(cond, Compare):
        return condition_to_text(cond)
    if isinstance(cond, Not):
        return f"not ({_with_sql_lists(cond.condition)})"
    return f"{cond.type}({', '.join(_with_sql_lists(c) for c in cond.conditions)})"


@ROUND_TRIPS
@given(conditions)
def test_any_condition_reads_back_from_text_with_sql_style_lists(cond):
    assert parse_expression(_with_sql_lists(cond)) == cond

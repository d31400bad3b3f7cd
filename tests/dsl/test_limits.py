"""Hostile plan text and objects end in located plan errors, never in RecursionError, VisitError or ValueError:
nesting depth, text size and number size are limited (dsl.limits), and each limit is named in the error."""

from __future__ import annotations

import json

import pytest

from dsl import PlanSyntaxError, PlanValidationError
from dsl.limits import MAX_DEPTH, MAX_TEXT
from dsl.model import Plan
from dsl.parse import parse_expression, parse_plan_text

SOURCE = "source a index /tmp"
PARENS = "(" * 3000 + "size > 1" + ")" * 3000
NOTS = "not " * 5000 + "size > 1"
LISTS = "name in " + "[" * 3000 + "a" + "]" * 3000
GROUPS = "all(" * 3000 + "size > 1" + ")" * 3000
LONG_NUMBER = "size > " + "9" * 5000


@pytest.mark.parametrize("text, column, says", [
    (PARENS, MAX_DEPTH + 1, "nest at most 64 levels"),
    (NOTS, 4 * MAX_DEPTH + 1, "nest at most 64 levels"),
    (LISTS, len("name in ") + MAX_DEPTH + 1, "nest at most 64 levels"),
    (GROUPS, 4 * MAX_DEPTH + 4, "nest at most 64 levels"),
    (LONG_NUMBER, 8, "a number is at most 100 characters"),
])
def test_hostile_expressions_are_located_plan_errors(text, column, says):
    with pytest.raises((PlanSyntaxError, PlanValidationError)) as caught:
        parse_expression(text)
    problem = caught.value.problems[0]
    assert says in problem.message and (problem.line, problem.column) == (1, column)
    assert len(caught.value.message) < 1000  # the context line is cut around the caret, not printed whole


@pytest.mark.parametrize("when, says", [
    (PARENS, "nest at most"), (NOTS, "nest at most"), (LONG_NUMBER, "a number is at most 100 characters"),
    ("width > " + "9" * 30, "whole numbers lie between"), ("width > 1e400", "finite number"),
    ("size > " + "9" * 40 + "GB", "out of range"), ("mtime > now - " + "9" * 40 + "d", "out of range"),
    ("mtime > " + "9" * 40, "out of range"),
])
def test_hostile_rules_in_dsl_text_are_located_on_their_line(when, says):
    with pytest.raises((PlanSyntaxError, PlanValidationError)) as caught:
        parse_plan_text(f"plan x\n{SOURCE}\nrule r when {when}\n")
    problem = caught.value.problems[0]
    assert says in problem.message and problem.line == 3 and problem.column is not None


def test_a_long_number_as_an_option_value_is_located():
    with pytest.raises(PlanValidationError) as caught:
        parse_plan_text(f"plan x\n{SOURCE} max_depth={'9' * 5000}\n")
    assert (caught.value.problems[0].line, caught.value.problems[0].column) == (2, 31)


def test_deep_nesting_within_the_limit_still_parses():
    depth = MAX_DEPTH - 1
    cond = parse_expression("(" * depth + "size > 1" + ")" * depth)
    assert cond.field == "size"
    assert parse_expression(" and ".join(["not size > 1"] * 3000)).type == "all"  # long, but flat


def test_text_longer_than_the_limit_is_refused_where_it_goes_over():
    with pytest.raises(PlanSyntaxError) as caught:
        parse_plan_text("plan x\n" + "#" * MAX_TEXT + "\n")
    assert "at most 1,000,000 characters" in caught.value.message
    assert caught.value.problems[0].line == 2


def _nested_not(depth: int) -> dict:
    cond: dict = {"field": "size", "op": ">", "value": 1}
    for _ in range(depth):
        cond = {"not": cond}
    return cond


def _plan_object(conditions) -> dict:
    return {"name": "x", "sources": [{"name": "a", "type": "filesystem.index", "config": {"path": "/tmp"}}],
            "conditions": conditions}


@pytest.mark.parametrize("depth", [200, 5000])
def test_deeply_nested_json_and_yaml_plans_are_plan_errors(depth):
    text = json.dumps(_plan_object("HOLE")).replace('"HOLE"', '{"not": ' * depth + '{"field": "size"}' + "}" * depth)
    for fmt in ("json", "yaml"):  # JSON is YAML too
        with pytest.raises((PlanSyntaxError, PlanValidationError), match="nests at most 144 levels"):
            parse_plan_text(text, format=fmt)


def test_deeply_nested_plan_objects_are_refused_with_the_path():
    with pytest.raises(PlanValidationError) as caught:
        Plan.from_object(_plan_object(_nested_not(5000)))
    assert caught.value.problems[0].path.startswith("conditions.not.not")


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_numbers_past_pythons_digit_limit_in_json_and_yaml_are_located(fmt):
    text = json.dumps(_plan_object({"field": "size", "op": ">", "value": 1})).replace(": 1}", ": " + "9" * 5000 + "}")
    with pytest.raises(PlanSyntaxError) as caught:
        parse_plan_text(text, format=fmt)
    problem = caught.value.problems[0]
    assert "a number is at most 100 characters" in problem.message and problem.line == 1 and problem.column

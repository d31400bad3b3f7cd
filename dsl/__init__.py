"""The plan language: one canonical model (:class:`Plan`) and its front doors (DSL text, YAML, JSON, objects),
condition expressions, printing back (YAML, DSL, expression text) and a JSON Schema for editors."""

from dsl.errors import PlanError, PlanSyntaxError, PlanValidationError
from dsl.model import Plan
from dsl.parse import parse_expression, parse_plan_file, parse_plan_text
from dsl.printer import condition_to_text
from dsl.schema import plan_json_schema

__all__ = ["Plan", "PlanError", "PlanSyntaxError", "PlanValidationError", "condition_to_text", "parse_expression",
           "parse_plan_file", "parse_plan_text", "plan_json_schema"]

"""The plan language: one canonical model (:class:`Plan`) and its front doors (DSL text, YAML, JSON, objects),
condition expressions, printing back (YAML, DSL, expression text) and a JSON Schema for editors.

Modules, bottom to top (each imports only modules below it; tests/dsl/test_import_graph.py keeps it so): errors,
fields, limits, regex, units, syntax_errors; nodes (condition node types, object forms only); grammar (Lark) and
expressions (expression text -> nodes); conditions (the Condition type: objects and expression text); outcomes;
model (Plan); parse (DSL / YAML / JSON -> Plan) and printer (Plan -> YAML / DSL, conditions -> text); evaluate, sql
and schema.
"""

from dsl.errors import PlanError, PlanSyntaxError, PlanValidationError
from dsl.model import Plan
from dsl.parse import parse_expression, parse_plan_file, parse_plan_object, parse_plan_text
from dsl.printer import condition_to_text, plan_to_dsl, plan_to_yaml
from dsl.schema import plan_json_schema

__all__ = ["Plan", "PlanError", "PlanSyntaxError", "PlanValidationError", "condition_to_text", "parse_expression",
           "parse_plan_file", "parse_plan_object", "parse_plan_text", "plan_json_schema", "plan_to_dsl",
           "plan_to_yaml"]

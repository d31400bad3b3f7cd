"""The plan language: one canonical model (:class:`Plan`) and its front doors (DSL text, YAML, JSON, objects),
condition expressions, printing back (YAML, DSL, expression text) and a JSON Schema for editors.

Modules, bottom to top (each imports only modules below it; tests/dsl/test_import_graph.py keeps it so): errors,
fields, limits, regex, units, syntax_errors; nodes (condition node types, object forms only); grammar (Lark) and
expressions (expression text -> nodes); conditions (the Condition type: objects and expression text); outcomes;
schedule (when a plan runs on its own); model (Plan); parse (DSL / YAML / JSON -> Plan) and printer (Plan -> YAML /
DSL, conditions -> text); evaluate, sql and schema.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it; imported on first use (PEP 562), so a caller that needs only dsl.errors (the
# error root every layer imports) or dsl.regex does not load the grammar, the models and Lark
_EXPORTS = {
    "PlanError": "dsl.errors", "PlanSyntaxError": "dsl.errors", "PlanValidationError": "dsl.errors",
    "Plan": "dsl.model",
    "parse_expression": "dsl.parse", "parse_plan_file": "dsl.parse", "parse_plan_object": "dsl.parse",
    "parse_plan_text": "dsl.parse",
    "condition_to_text": "dsl.printer", "plan_to_dsl": "dsl.printer", "plan_to_yaml": "dsl.printer",
    "plan_json_schema": "dsl.schema",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dsl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

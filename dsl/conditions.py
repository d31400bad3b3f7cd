"""The condition type of plans: :data:`Condition` reads every input form of a condition -- the object forms of
:mod:`dsl.nodes` and expression text (``media_type = video and size > 1GB``), at any place in a tree
(``{all: ["size > 1MB", {not: "name glob '*.tmp'"}]}``) -- into one canonical tree.

Layering: the node types (:mod:`dsl.nodes`) sit below the grammar and know nothing of text; the grammar
(:mod:`dsl.grammar`, :mod:`dsl.expressions`) builds nodes; this module, above both, parses the text parts of an
input first and hands the rest to the node types. A text part that does not parse is left in place as a
:class:`~dsl.nodes.BadExpression`, so its error is reported at its own path (``rules[0].when.conditions[1]``).
The node names are re-exported here for callers (``from dsl.conditions import Compare, Group, Not``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from dsl.errors import PlanError
from dsl.expressions import parse_expression
from dsl.nodes import (CONDITION_TYPES, GROUP_TYPES, OP_ALIASES, REFERENCE_LEAVES, TRUE, BadExpression, Compare,
                       Group, Node, Not, iter_leaves, normalise_value)

__all__ = ["CONDITION_TYPES", "GROUP_TYPES", "OP_ALIASES", "REFERENCE_LEAVES", "TRUE", "Compare", "Condition",
           "Group", "Not", "iter_leaves", "normalise_value", "read_expressions"]


def _read(text: str) -> Any:
    try:
        return parse_expression(text)
    except PlanError as exc:
        return BadExpression(exc.message)


def read_expressions(data: Any) -> Any:
    """``data`` with every expression text where a condition goes replaced by its tree (a new structure; the input
    is not changed). Only the places the node types read as conditions are looked at: the data itself, the items of
    a list, ``conditions`` / ``condition`` of a typed group or not, and the value of ``{all|any|none|not: ...}``."""
    if isinstance(data, str):
        return _read(data)
    if isinstance(data, list):
        return [read_expressions(item) for item in data]
    if not isinstance(data, dict):
        return data
    kind = data.get("type")
    if kind in GROUP_TYPES and isinstance(data.get("conditions"), list):
        return {**data, "conditions": [read_expressions(item) for item in data["conditions"]]}
    if kind == "not" and "condition" in data:
        return {**data, "condition": read_expressions(data["condition"])}
    if kind is None and len(data) == 1:
        (key, value), = data.items()
        if key in ("all", "any", "none", "not"):
            return {key: read_expressions(value)}
    return data


Condition = Annotated[Node, BeforeValidator(read_expressions)]

"""Condition trees: ``all`` / ``any`` / ``none`` groups, ``not``, and comparison leaves ``field op value``.

The bottom of the plan language: node types that read every *object* form of a condition -- condition objects, the
reference's JSON leaves (``{type: size, minSize: ...}``), ``{all: [...]}`` shorthands, lists (meaning all) and
booleans. Expression text (``media_type = video and size > 1GB``) is read one level up, by
:data:`dsl.conditions.Condition`, which parses it with the grammar before these types see it. Leaves are checked and
their values normalised when built (units parsed, regexes checked, choices checked), so a tree that exists is valid
and prints back to the same tree.

Semantics: empty ``all`` is true, empty ``any`` false, empty ``none`` true; ``none`` means no child matches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Tag, model_validator

from dsl import units
from dsl.fields import KINDS, MEDIA_TYPES, FieldSpec, UnknownField, field_spec
from dsl.limits import MAX_NUMBER, NUMBER_RULE, check_int
from dsl.regex import check_regex

OP_ALIASES = {"==": "=", "<>": "!=", "~": "matches", "=~": "matches", "starts_with": "startswith",
              "ends_with": "endswith", "like": "glob"}


class _Node(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Compare(_Node):
    """``field op value``; ``arg`` is the phrase of ``similarity("...")``."""

    type: Literal["compare"] = "compare"
    field: str
    op: str
    value: Any = None
    arg: str | None = None

    @model_validator(mode="after")
    def _normalise(self) -> "Compare":
        try:
            spec = field_spec(self.field)
        except UnknownField as exc:
            raise ValueError(str(exc)) from None
        op = OP_ALIASES.get(self.op, self.op)
        if op not in spec.operators:
            raise ValueError(f"operator {self.op!r} does not apply to {spec.type} field {self.field!r}; "
                             f"use one of: {', '.join(spec.operators)}")
        if spec.needs_arg and not self.arg:
            raise ValueError(f"field {self.field!r} needs a phrase: {self.field}(\"a beach at sunset\") >= 0.4")
        if not spec.needs_arg and self.arg is not None:
            raise ValueError(f"field {self.field!r} takes no argument")
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "value", normalise_value(spec, op, self.value))
        return self


def normalise_value(spec: FieldSpec, op: str, value: Any) -> Any:
    """The canonical value of ``value`` for ``spec`` and ``op`` (a list for ``in``, ``[lo, hi]`` for ``between``)."""
    if op == "in":
        if not isinstance(value, (list, tuple)) or not value:
            raise ValueError(f"'in' needs a non-empty list of values, e.g. {spec.name} in [a, b]; got {value!r}")
        return [_one(spec, op, v) for v in value]
    if op == "between":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError(f"'between' needs two values, e.g. {spec.name} between 1MB and 10MB; got {value!r}")
        lo, hi = (_one(spec, op, v) for v in value)
        if spec.type != "time" and lo > hi:
            raise ValueError(f"'between' needs the smaller value first; got {value[0]!r} and {value[1]!r}")
        return [lo, hi]
    if isinstance(value, (list, tuple)):
        raise ValueError(f"operator {op!r} takes one value, not a list (use 'in' for a list)")
    return _one(spec, op, value)


def _one(spec: FieldSpec, op: str, value: Any) -> Any:
    if value is None:
        raise ValueError(f"field {spec.name!r} needs a value")
    try:
        if spec.type == "size":
            return units.parse_size(value)
        if spec.type == "time":
            return units.canonical_time(value)
        if spec.type == "duration":
            return units.parse_duration(value)
    except units.UnitError as exc:
        raise ValueError(f"{spec.name}: {exc}") from None
    if spec.type in ("number", "similarity"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            text = str(value)
            if len(text) > MAX_NUMBER:
                raise ValueError(f"{spec.name} compares with a number; {NUMBER_RULE}")
            try:
                value = float(text) if "." in text else int(text)
            except (TypeError, ValueError):
                raise ValueError(f"{spec.name} compares with a number, got {value!r}") from None
        value = _storable(spec, value)
        if spec.type == "similarity" and not 0 <= value <= 1:
            raise ValueError(f"similarity is between 0 and 1, got {value!r}")
        return value
    if spec.type == "metadata":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{spec.name} compares with text or a number, got {value!r}")
        return value if isinstance(value, str) else _storable(spec, value)
    if not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and spec.type == "text":
            value = str(value)
        else:
            raise ValueError(f"{spec.name} compares with text, got {value!r}")
    if spec.type == "choice":
        choices = KINDS if spec.name == "kind" else MEDIA_TYPES
        if value.lower() not in choices:
            raise ValueError(f"{spec.name} {value!r} is not one of: {', '.join(choices)}")
        return value.lower()
    if spec.name == "extension" and op in ("=", "!=", "in"):
        value = value.strip().lower()
        return value if value.startswith(".") or not value else "." + value
    if op == "matches":
        check_regex(value)  # RE2: a RegexError is a ValueError whose message names the RE2 rule
    if spec.type == "set" and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", value):
        raise ValueError(f"{value!r} is not a resource-set name (letters, digits, - _ .)")
    return value


def _storable(spec: FieldSpec, value: int | float) -> int | float:
    """A number the store can compare with: a finite float, or an int within 64 bits."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{spec.name} compares with a finite number, got {value!r}")
    return check_int(value, spec.name) if isinstance(value, int) else value


class Group(_Node):
    type: Literal["all", "any", "none"]
    conditions: list["Node"] = []


class Not(_Node):
    type: Literal["not"] = "not"
    condition: "Node"


class BadExpression:
    """Expression text that did not parse, left in an input where a condition goes, so that the error is reported
    at that place (see :func:`dsl.conditions.read_expressions`)."""

    def __init__(self, message: str) -> None:
        self.message = message


# --- input forms -------------------------------------------------------------------------------------------------

# The reference's JSON leaves, accepted exactly (unknown keys rejected): key -> (field, operator)
REFERENCE_LEAVES: dict[str, dict[str, tuple[str, str]]] = {
    "media_type": {"mediaType": ("media_type", "=")},
    "size": {"minSize": ("size", ">="), "maxSize": ("size", "<=")},
    "time": {"minMtime": ("mtime", ">="), "maxMtime": ("mtime", "<="), "minCtime": ("ctime", ">="),
             "maxCtime": ("ctime", "<=")},
    "path": {"pathContains": ("path", "contains"), "pathPrefix": ("path", "startswith"),
             "pathSuffix": ("path", "endswith"), "pathPattern": ("path", "matches")},
}
GROUP_TYPES = ("all", "any", "none")
CONDITION_TYPES = (*GROUP_TYPES, "not", "compare", *REFERENCE_LEAVES)
_LEAF_KEYS = {"type", "field", "op", "value", "arg"}


def _from_reference(data: dict[str, Any]) -> dict[str, Any]:
    kind = data["type"]
    keys = REFERENCE_LEAVES[kind]
    unknown = [k for k in data if k != "type" and k not in keys]
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(map(repr, unknown))} in a {kind!r} condition; "
                         f"accepted: {', '.join(keys)}")
    leaves = [{"type": "compare", "field": keys[k][0], "op": keys[k][1], "value": data[k]}
              for k in keys if data.get(k) is not None]
    if not leaves:
        raise ValueError(f"a {kind!r} condition needs at least one of: {', '.join(keys)}")
    return leaves[0] if len(leaves) == 1 else {"type": "all", "conditions": leaves}


def coerce_node(data: Any) -> Any:
    """Turn every accepted object form into the canonical object form (validation proper happens after)."""
    if isinstance(data, _Node):
        return data
    if isinstance(data, BadExpression):
        raise ValueError(data.message)
    if isinstance(data, bool):
        return {"type": "all" if data else "any", "conditions": []}
    if isinstance(data, str):
        raise ValueError("expression text is read by dsl.conditions.Condition (a plan's when:, conditions:); "
                         "here give a condition object such as {field: size, op: '>', value: 10MB}")
    if isinstance(data, list):
        return {"type": "all", "conditions": data}
    if isinstance(data, dict):
        if "type" not in data:
            shorthand = [k for k in ("all", "any", "none", "not") if k in data]
            if len(shorthand) == 1 and len(data) == 1:
                key = shorthand[0]
                if key == "not":
                    return {"type": "not", "condition": data[key]}
                items = data[key]
                return {"type": key, "conditions": items if isinstance(items, list) else [items]}
            if "field" in data:
                return {"type": "compare", **data}
            raise ValueError("a condition needs a type (" + ", ".join(CONDITION_TYPES) + "), or the form "
                             "{field, op, value}, {all: [...]}, {any: [...]}, {none: [...]}, {not: ...}, "
                             "or expression text such as \"size > 10MB and extension = .pdf\"")
        kind = data["type"]
        if kind in REFERENCE_LEAVES:
            return _from_reference(data)
        if kind not in ("all", "any", "none", "not", "compare"):
            raise ValueError(f"unknown condition type {kind!r}; use one of: {', '.join(CONDITION_TYPES)}")
    return data


def _tag(data: Any) -> str | None:
    kind = data.type if isinstance(data, (Group, Not, Compare)) else \
        data.get("type") if isinstance(data, dict) else None
    return "group" if kind in GROUP_TYPES else kind


# A condition node from its object forms; expression text is not read here (see dsl.conditions.Condition).
Node = Annotated[
    Union[Annotated[Group, Tag("group")], Annotated[Not, Tag("not")], Annotated[Compare, Tag("compare")]],
    Discriminator(_tag, custom_error_type="invalid_condition",
                  custom_error_message="not a condition; use a type of " + ", ".join(CONDITION_TYPES)),
    BeforeValidator(coerce_node),
]

Group.model_rebuild()
Not.model_rebuild()

TRUE = Group(type="all", conditions=[])


def iter_leaves(node: Any) -> Iterator[Compare]:
    """Every Compare leaf of a tree, depth first."""
    if isinstance(node, Compare):
        yield node
    elif isinstance(node, Group):
        for child in node.conditions:
            yield from iter_leaves(child)
    elif isinstance(node, Not):
        yield from iter_leaves(node.condition)

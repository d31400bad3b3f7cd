"""A JSON Schema (draft 2020-12) of the plan file format, for editors (YAML language servers, VS Code ``$schema``).

It describes what a plan file may hold: conditions as expression text or any of the object forms, outcomes by type,
sources with their config. It is a guide for completion and early hints; :meth:`Plan.from_object` stays the judge
(field names, units and regexes inside expressions are checked there).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, get_args

from pydantic import BaseModel, TypeAdapter

from dsl.nodes import REFERENCE_LEAVES
from dsl.fields import FIELDS, OPERATORS
from dsl.model import NAME_RE, SOURCE_TYPES, Plan, SourceConfig
from dsl.outcomes import OUTCOME_MODELS
from dsl.schedule import KINDS, Schedule

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _model_properties(model: type[BaseModel], skip: Collection[str] = ()) -> dict[str, Any]:
    """The JSON Schema properties of a pydantic model's plain fields (titles dropped)."""
    out = {}
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        kind: Any = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
        schema = TypeAdapter(kind).json_schema()
        if info.description:
            schema["description"] = info.description
        if not info.is_required():
            default = info.get_default(call_default_factory=True)
            if default is not None:
                schema["default"] = default
        out[name] = schema
    return out


def _condition_defs() -> dict[str, Any]:
    group = {"type": "array", "items": _ref("condition")}
    reference = []
    for kind, keys in REFERENCE_LEAVES.items():
        reference.append({
            "type": "object",
            "properties": {"type": {"const": kind},
                           **{k: {"type": ["string", "number"], "description": f"{f} {op} this"}
                              for k, (f, op) in keys.items()}},
            "required": ["type"], "minProperties": 2, "additionalProperties": False,
        })
    return {
        "condition": {
            "description": "which entries match: expression text (media_type = video and size > 1GB), a list "
                           "(all of), or an object form",
            "anyOf": [
                {"type": "string", "minLength": 1, "description": "expression text, e.g. size > 10MB and "
                                                                  "extension in [.pdf, .epub]"},
                {"type": "boolean"},
                group,
                {"type": "object", "properties": {"type": {"enum": ["all", "any", "none"]}, "conditions": group},
                 "required": ["type"], "additionalProperties": False},
                {"type": "object", "properties": {"type": {"const": "not"}, "condition": _ref("condition")},
                 "required": ["type", "condition"], "additionalProperties": False},
                _ref("compare"),
                *({"type": "object", "properties": {key: group}, "required": [key], "additionalProperties": False}
                  for key in ("all", "any", "none")),
                {"type": "object", "properties": {"not": _ref("condition")}, "required": ["not"],
                 "additionalProperties": False},
                *reference,
            ],
        },
        "compare": {
            "type": "object",
            "description": "field op value",
            "properties": {
                "type": {"const": "compare"},
                "field": {"type": "string", "description": "a field: " + ", ".join(FIELDS) + ", exif.<tag>, "
                                                                                             "metadata.<key>",
                          "anyOf": [{"enum": list(FIELDS)}, {"pattern": r"^(exif|metadata)\..+"}]},
                "op": {"enum": [*OPERATORS, "==", "<>", "~", "=~", "like", "starts_with", "ends_with"]},
                "value": {"description": "a value with its unit (10MB, 7d, 2024-01-01, now - 7d); a list for in, "
                                         "[low, high] for between"},
                "arg": {"type": "string", "description": "the phrase of similarity"},
            },
            "required": ["field", "op", "value"],
            "additionalProperties": False,
        },
    }


def _outcome_defs() -> dict[str, Any]:
    variants = []
    for kind, model in OUTCOME_MODELS.items():
        props = _model_properties(model, skip=("when", "outcomes"))
        props["type"] = {"const": kind}
        props["when"] = _ref("condition")
        required = ["type", *(n for n, f in model.model_fields.items() if f.is_required() and n != "type")]
        if kind == "chained":
            props["outcomes"] = {"type": "array", "items": _ref("outcome"), "minItems": 1}
        variants.append({"type": "object", "description": (model.__doc__ or kind).strip().splitlines()[0],
                         "properties": props, "required": required, "additionalProperties": False})
    return {"outcome": {"oneOf": variants}}


def _schedule_def() -> dict[str, Any]:
    props = _model_properties(Schedule)
    for key in (*KINDS, "anchor"):  # a value when given, not null
        props[key] = {k: v for k, v in props[key].items() if k != "anyOf"} | {"type": "string"}
    props["interval"] = {"type": ["number", "string"], "description": props["interval"]["description"]}
    return {"type": "object", "description": (Schedule.__doc__ or "").strip(), "properties": props,
            "oneOf": [{"required": [kind]} for kind in KINDS], "additionalProperties": False}


def plan_json_schema() -> dict[str, Any]:
    """The JSON Schema of a plan file (YAML or JSON)."""
    name = {"type": "string", "pattern": f"^{NAME_RE.pattern}$"}
    config = _model_properties(SourceConfig)
    config["path"] = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
                      "description": "the folder (or folders) to index or watch"}
    config["paths"] = {"anyOf": [{"type": "string"}, config["paths"]]}
    config["exclude"] = {"anyOf": [{"type": "string"}, config["exclude"]]}
    outcomes = {"type": "array", "items": _ref("outcome")}
    return {
        "$schema": DRAFT,
        "$id": "https://assay.invalid/schemas/plan.json",
        "title": "assay plan",
        "description": "A declarative plan: where entries come from (sources), which match (rules' conditions) and "
                       "what happens to them (outcomes).",
        "type": "object",
        "properties": {
            "name": name,
            "description": {"type": "string"},
            "mode": {"enum": list(get_args(Plan.model_fields["mode"].annotation)), "default": "oneshot"},
            "status": {"enum": list(get_args(Plan.model_fields["status"].annotation)), "default": "active"},
            "sources": {"type": "array", "items": _ref("source"), "minItems": 1},
            "rules": {"type": "array", "items": _ref("rule")},
            "preferences": {"type": "object"},
            "schedule": _ref("schedule"),
            "conditions": _ref("condition"),
            "outcomes": outcomes,
        },
        "required": ["name", "sources"],
        "additionalProperties": False,
        "$defs": {
            "name": name,
            "source": {
                "type": "object",
                "properties": {"name": _ref("name"), "type": {"enum": list(SOURCE_TYPES)},
                               "target_set": _ref("name"),
                               "config": {"type": "object", "properties": config, "additionalProperties": False}},
                "required": ["name", "type"],
                "additionalProperties": False,
            },
            "rule": {
                "type": "object",
                "properties": {"name": _ref("name"), "when": _ref("condition"), "condition": _ref("condition"),
                               "conditions": _ref("condition"), "outcomes": outcomes},
                "required": ["name"],
                "additionalProperties": False,
            },
            "schedule": _schedule_def(),
            **_condition_defs(),
            **_outcome_defs(),
        },
    }

"""Plans and conditions printed back as text: expression text, canonical YAML and the DSL.

The law: ``parse(print(plan)) == plan`` for YAML and DSL, and ``parse_expression(condition_to_text(c)) == c``.
Values are spelled the shortest way that reads back to the same canonical value (``10MB``, ``7d``, ``.pdf``) and
quoted only when a bare word would read differently.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any, TypeGuard

import yaml
from pydantic import BaseModel

from dsl.nodes import Compare, Group, Node, Not, normalise_value
from dsl.fields import FieldSpec, field_spec
from dsl.grammar import LABEL_OPTIONS, POSITIONALS, SHORT_SOURCES, is_bare, option_value, quote, unescape, word_value
from dsl.model import Plan, Source
from dsl.outcomes import OutcomeBase
from dsl.schedule import Schedule
from dsl.units import format_duration, format_size, parse_duration

TRUE_TEXT = "all()"
WORD_OPS = ("in", "contains", "startswith", "endswith", "matches", "glob", "between")
SHORT_SOURCE = {full: short for short, full in SHORT_SOURCES.items()}

# --- conditions --------------------------------------------------------------------------------------------------


def condition_to_text(cond: Node) -> str:
    """Expression text of a condition tree: ``a and b`` for an all-group, ``none(...)``, ``all(x)`` for one child,
    ``all()`` / ``any()`` for empty groups; nested and/or groups in parentheses."""
    if _chain(cond):
        joiner = " and " if cond.type == "all" else " or "
        return joiner.join(_operand(c) for c in cond.conditions)
    return _atom(cond)


def _chain(cond: object) -> TypeGuard[Group]:
    return isinstance(cond, Group) and cond.type in ("all", "any") and len(cond.conditions) >= 2


def _operand(cond: Node) -> str:
    return f"({condition_to_text(cond)})" if _chain(cond) else _atom(cond)


def _atom(cond: object) -> str:
    if isinstance(cond, Group):
        return f"{cond.type}({', '.join(condition_to_text(c) for c in cond.conditions)})"
    if isinstance(cond, Not):
        inner = cond.condition
        if isinstance(inner, Compare) and inner.op in WORD_OPS:
            return _compare(inner, negated=True)
        return "not " + _operand(inner)
    if isinstance(cond, Compare):
        return _compare(cond)
    raise TypeError(f"not a condition: {cond!r}")


def _compare(c: Compare, negated: bool = False) -> str:
    spec = field_spec(c.field)
    if spec.needs_arg:
        name = f"similarity({quote(c.arg or '')})"
    else:
        name = c.field if is_bare(c.field) else quote(c.field)
    op = f"not {c.op}" if negated else c.op
    if c.op == "between":
        low, high = c.value
        return f"{name} {op} {value_text(spec, c.op, low)} and {value_text(spec, c.op, high)}"
    if c.op == "in":
        return f"{name} {op} [{', '.join(value_text(spec, c.op, v) for v in c.value)}]"
    return f"{name} {op} {value_text(spec, c.op, c.value)}"


def value_text(spec: FieldSpec, op: str, value: Any) -> str:
    """The shortest spelling of one canonical ``value`` that reads back to it."""
    candidates: list[str] = []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if spec.type == "size":
            candidates.append(format_size(int(value)))
        elif spec.type == "duration":
            candidates.append(format_duration(value))
        if math.isfinite(value):
            candidates.append(repr(value))
    elif isinstance(value, str):
        candidates += [quote(value)] if _globby(value) else [value, quote(value)]
    for text in candidates:
        if _reads_back(spec, op, text, value):
            return text
    raise ValueError(f"{spec.name}: cannot print {value!r} so that it reads back")


def _reads_back(spec: FieldSpec, op: str, text: str, value: Any) -> bool:
    if text.startswith('"'):
        raw: Any = unescape(text)
    elif text == "now" or text.startswith(("now - ", "now + ")) and is_bare(text[6:]):
        raw = text
    elif is_bare(text):
        raw = word_value(text, spec.type)
    else:
        return False
    try:
        again = normalise_value(spec, "=" if op in ("in", "between") else op, raw)
    except ValueError:
        return False
    return again == value and type(again) is type(value)


# --- YAML --------------------------------------------------------------------------------------------------------


class _Flow(dict[str, Any]):
    """A mapping printed on one line: ``{type: selection_set, selectionSetName: videos}``."""


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:  # list items under their key
        return super().increase_indent(flow, False)


_Dumper.add_representer(_Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True))
_LINE_BREAKS = ("\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # PyYAML writes these line breaks raw inside plain and single-quoted scalars, where they read back as spaces
    style = '"' if any(c in text for c in _LINE_BREAKS) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(dict, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=False))


def _changed(model: BaseModel, exclude: Collection[str] = ()) -> dict[str, Any]:
    """The fields of ``model`` that differ from their defaults, in model order."""
    out = {}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if name in exclude or (not info.is_required() and value == info.get_default(call_default_factory=True)):
            continue
        out[name] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """Nested models (a label class with its description) as plain mappings."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _outcome_object(outcome: OutcomeBase) -> dict[str, Any]:
    data = {"type": outcome.type, **_changed(outcome, exclude=("type", "when", "outcomes"))}
    if hasattr(outcome, "outcomes"):
        data["outcomes"] = [_outcome_object(o) for o in outcome.outcomes]
    if outcome.when is not None:
        data["when"] = condition_to_text(outcome.when)
    return dict(data) if "outcomes" in data else _Flow(data)


def _source_object(source: Source) -> dict[str, Any]:
    data: dict[str, Any] = {"name": source.name, "type": source.type}
    if source.target_set is not None:
        data["target_set"] = source.target_set
    config = _changed(source.config)
    if len(config.get("paths", [])) == 1:
        config = {("path" if k == "paths" else k): (v[0] if k == "paths" else v) for k, v in config.items()}
    if config:
        data["config"] = _Flow(config)
    return data


def interval_text(seconds: float) -> str | float:
    """An interval as a duration (``15m``, ``90s``) when that reads back exactly, else its seconds."""
    text = format_duration(seconds)
    return text if parse_duration(text) == seconds else seconds


def schedule_object(schedule: Schedule) -> dict[str, Any]:
    """A schedule's keys that are set, the interval as a duration: ``{interval: 15m, timezone: Europe/Berlin}``."""
    data = _changed(schedule)
    if "interval" in data:
        data["interval"] = interval_text(data["interval"])
    return _Flow(data)


def plan_object(plan: Plan) -> dict[str, Any]:
    """The canonical plan object of the YAML form: defaults omitted, conditions as expression text."""
    data = _changed(plan, exclude=("sources", "rules", "preferences", "schedule"))
    if plan.schedule is not None:
        data["schedule"] = schedule_object(plan.schedule)
    data["sources"] = [_source_object(s) for s in plan.sources]
    rules = []
    for rule in plan.rules:
        item: dict[str, Any] = {"name": rule.name}
        if rule.when != Group(type="all"):
            item["when"] = condition_to_text(rule.when)
        item["outcomes"] = [_outcome_object(o) for o in rule.outcomes]
        rules.append(item)
    data["rules"] = rules
    if plan.preferences:
        data["preferences"] = plan.preferences
    return data


def plan_to_yaml(plan: Plan) -> str:
    """Canonical, readable YAML of ``plan``."""
    text: str = yaml.dump(plan_object(plan), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    return text


# --- DSL ---------------------------------------------------------------------------------------------------------


def _globby(text: str) -> bool:
    """Globs read better quoted, as shells and the examples write them."""
    return "*" in text or "?" in text


def _word(text: str) -> str:
    return text if is_bare(text) and text != "into" else quote(text)


def option_text(value: Any) -> str:
    """A ``key=value`` value: true / false / null, numbers, words, "quoted text", [lists] and {key=value maps}."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_word(str(k))}={option_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(option_text(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        text = repr(value)
        if option_value(text) == value and type(option_value(text)) is type(value):
            return text
        raise ValueError(f"cannot print the number {value!r} in the DSL (use YAML)")
    text = str(value)
    return text if is_bare(text) and option_value(text) == text and not _globby(text) else quote(text)


def _options(values: dict[str, Any]) -> list[str]:
    return [f"{_word(k)}={option_text(v)}" for k, v in values.items()]


def _source_line(source: Source) -> str:
    config = _changed(source.config)
    key = {"selection_set": "set", "query": "query"}.get(source.type, "paths")
    given = config.pop(key, None)
    positionals = [] if given is None else given if isinstance(given, list) else [given]
    parts = ["source", _word(source.name), SHORT_SOURCE.get(source.type, source.type), *map(_word, positionals)]
    if source.target_set is not None:
        parts += ["into", _word(source.target_set)]
    return " ".join(parts + _options(config))


def _label_parts(outcome: OutcomeBase, fields: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """A label outcome's classes as written after ``label``: ``invoice receipt="proof of a payment"``; when a
    described class is named like one of its options (``threshold="..."``), all of them as ``classes=[...]``."""
    classes = fields.pop("classes")  # names, and {name, description} mappings (``_changed``)
    if all(isinstance(c, str) or c["name"] not in LABEL_OPTIONS for c in classes):
        return [_word(c) if isinstance(c, str) else f"{_word(c['name'])}={quote(c['description'])}"
                for c in classes], fields
    return [], {"classes": classes, **fields}


def outcome_text(outcome: OutcomeBase) -> str:
    """One outcome as written after ``do`` (or inside a chained outcome's parentheses)."""
    fields = _changed(outcome, exclude=("type", "when", "outcomes"))
    slots = POSITIONALS[outcome.type]
    positionals: list[str] = []
    if outcome.type == "label":
        positionals, fields = _label_parts(outcome, fields)
    else:
        for slot in slots:
            if slot not in fields:
                break
            positionals.append(_word(fields.pop(slot)))
    parts = [outcome.type, *positionals, *_options(fields)]
    if hasattr(outcome, "outcomes"):
        parts.append("(" + ", ".join(outcome_text(o) for o in outcome.outcomes) + ")")
    if outcome.when is not None:
        parts += ["when", condition_to_text(outcome.when)]
    return " ".join(parts)


def schedule_line(schedule: Schedule) -> str:
    """``schedule cron "0 3 * * *" timezone Europe/Berlin``, ``schedule every 15m``, ``schedule rrule "..."``."""
    if schedule.cron is not None:
        parts = ["cron", quote(schedule.cron)]
    elif schedule.interval is not None:
        parts = ["every", str(interval_text(schedule.interval))]
    else:
        parts = ["rrule", quote(schedule.rrule or "")]
    if schedule.timezone != Schedule.model_fields["timezone"].default:
        parts += ["timezone", _word(schedule.timezone)]
    if schedule.anchor is not None:
        parts += ["anchor", _word(schedule.anchor)]
    return " ".join(["schedule", *parts])


def plan_to_dsl(plan: Plan) -> str:
    """``plan`` as DSL text (see :mod:`dsl.parse` for the syntax)."""
    lines = [f"plan {_word(plan.name)}"]
    if plan.description is not None:
        lines.append(f"description {quote(plan.description)}")
    for key in ("mode", "status"):
        if getattr(plan, key) != Plan.model_fields[key].default:
            lines.append(f"{key} {getattr(plan, key)}")
    if plan.schedule is not None:
        lines.append(schedule_line(plan.schedule))
    lines += [_source_line(s) for s in plan.sources]
    for rule in plan.rules:
        when = "" if rule.when == Group(type="all") else f" when {condition_to_text(rule.when)}"
        lines.append(f"rule {_word(rule.name)}{when}")
        lines += [f"  do {outcome_text(o)}" for o in rule.outcomes]
    if plan.preferences:
        lines.append("prefer " + " ".join(_options(plan.preferences)))
    return "\n".join(lines) + "\n"

"""The canonical plan model: every front door (YAML, JSON, reference 000's plan-create objects, the text DSL) ends in
``Plan.model_validate`` through :meth:`Plan.from_object`, which turns validation failures into a
:class:`~dsl.errors.PlanValidationError` listing every problem with its path (``rules[0].when.conditions[1]``).

A plan names its sources (where entries come from), its rules (a condition and the outcomes for entries that pass)
and preferences, and may carry a schedule (:mod:`dsl.schedule`: when it runs on its own). The reference's single
``conditions`` + ``outcomes`` pair is shorthand for one rule named after the plan.

The text front doors sit above this module: :func:`dsl.parse.parse_plan_text` and :func:`~dsl.parse.parse_plan_file`
read DSL, YAML and JSON; :func:`dsl.printer.plan_to_yaml` and :func:`~dsl.printer.plan_to_dsl` print a plan back
(all four re-exported from :mod:`dsl`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from dsl.conditions import TRUE, Condition
from dsl.errors import PlanValidationError, Problem
from dsl.limits import OBJECT_DEPTH_RULE, object_too_deep
from dsl.outcomes import OUTCOME_MODELS, Outcome
from dsl.schedule import Schedule

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1-128 letters, digits, '-', '_' or '.', starting with a letter or digit"
SOURCE_TYPES = ("filesystem.index", "filesystem.watch", "selection_set", "query")
PARTIAL_NAMES = ("*.part", "*.crdownload", "*.tmp", "*.download", "*.partial", ".~lock.*", "~$*", "*.swp")


def _check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise ValueError(f"{what} {value!r} is not valid; use {NAME_RULE}")
    return value


class SourceConfig(BaseModel):
    """Where a source's entries come from and which of them it yields."""

    model_config = ConfigDict(extra="forbid")

    paths: list[str] = Field(default_factory=list, description="folders (or files) to index or watch")
    recursive: bool = True
    max_depth: int | None = Field(default=None, ge=0, description="levels below each path (0: the path's own "
                                                                   "entries only)")
    include_hidden: bool = False
    include_directories: bool = Field(default=False, description="offer directories to the rules, not only files")
    follow_symlinks: bool = False
    exclude: list[str] = Field(default_factory=list, description="globs of names or paths to leave out")
    debounce_ms: int = Field(default=500, ge=0, le=600_000)
    set: str | None = Field(default=None, description="selection_set sources: the resource set")
    query: str | None = Field(default=None, description="query sources: the saved query's name")

    @model_validator(mode="before")
    @classmethod
    def _path_alias(cls, data: Any) -> Any:
        if isinstance(data, dict) and "path" in data:
            data = dict(data)
            path = data.pop("path")
            if "paths" in data:
                raise ValueError("give either path or paths, not both")
            data["paths"] = path if isinstance(path, list) else [path]
        if isinstance(data, dict) and isinstance(data.get("paths"), str):
            data = {**data, "paths": [data["paths"]]}
        if isinstance(data, dict) and isinstance(data.get("exclude"), str):
            data = {**data, "exclude": [data["exclude"]]}
        return data

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        for p in v:
            if not isinstance(p, str) or not p.strip():
                raise ValueError("paths must be non-empty strings")
        return v


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    type: Literal["filesystem.index", "filesystem.watch", "selection_set", "query"]
    target_set: str | None = Field(default=None, description="put every entry the source yields in this set")
    config: SourceConfig = Field(default_factory=SourceConfig)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v, "source name")

    @field_validator("target_set")
    @classmethod
    def _target(cls, v: str | None) -> str | None:
        return None if v is None else _check_name(v, "target_set")

    @model_validator(mode="after")
    def _config_fits_type(self) -> "Source":
        c = self.config
        if self.type.startswith("filesystem.") and not c.paths:
            raise ValueError(f"a {self.type} source needs config.path (or config.paths): the folder to "
                             f"{'watch' if self.type.endswith('watch') else 'index'}")
        if self.type == "selection_set":
            if not c.set:
                raise ValueError("a selection_set source needs config.set: the resource set whose entries it yields")
            _check_name(c.set, "config.set")
        if self.type == "query" and not c.query:
            raise ValueError("a query source needs config.query: the name of a saved query (query-list shows them)")
        if not self.type.startswith("filesystem.") and c.paths:
            raise ValueError(f"config.path is for filesystem sources; a {self.type} source takes "
                             f"config.{'set' if self.type == 'selection_set' else 'query'}")
        return self


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    when: Condition = Field(default=TRUE, description="which entries the rule matches (default: all)")
    outcomes: list[Outcome] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for alias in ("conditions", "condition"):
                if alias in data:
                    if "when" in data:
                        raise ValueError(f"give either when or {alias}, not both")
                    data = {**{k: v for k, v in data.items() if k != alias}, "when": data[alias]}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v, "rule name")


# a path into the input (keys and indexes) -> its (line, column) in the text, if known
Locate = Callable[[tuple[Any, ...]], tuple[int, int] | None]


def shorthand_as_rule(data: Any) -> Any:
    """The reference's ``conditions`` + ``outcomes`` become one rule named after the plan."""
    if isinstance(data, dict) and ("conditions" in data or "outcomes" in data):
        data = dict(data)
        rule: dict[str, Any] = {"name": data.get("name") if isinstance(data.get("name"), str) else "main"}
        if "conditions" in data:
            rule["when"] = data.pop("conditions")
        if "outcomes" in data:
            rule["outcomes"] = data.pop("outcomes")
        if rule.get("when") is None and not rule.get("outcomes"):
            return data  # conditions: null, outcomes: [] -- nothing to add
        if rule.get("when") is None:
            rule.pop("when", None)
        data["rules"] = [rule, *(data.get("rules") or [])]
    return data


class Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str | None = None
    mode: Literal["oneshot", "continuous"] = "oneshot"
    status: Literal["active", "paused", "disabled"] = "active"
    sources: list[Source] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    preferences: dict[str, Any] = Field(default_factory=dict)
    schedule: Schedule | None = Field(default=None, description="when the plan runs on its own (its Prefect "
                                                                "deployment's schedule); not for watched plans")
    # the folder of the plan file it came from: relative source paths are relative to it (not part of the plan)
    _base_dir: str | None = PrivateAttr(default=None)

    def with_base_dir(self, base_dir: str | None) -> "Plan":
        self._base_dir = base_dir
        return self

    @property
    def base_dir(self) -> str | None:
        return self._base_dir

    def __eq__(self, other: object) -> bool:  # the base folder is where the plan lives, not what it says
        if not isinstance(other, Plan):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return shorthand_as_rule(data)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return _check_name(v, "plan name")

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: Schedule | None, info: ValidationInfo) -> Schedule | None:
        """A watched plan runs on file events, on the machine whose files it watches: no schedule."""
        if v is None:
            return v
        watched = [s.name for s in info.data.get("sources") or [] if s.type == "filesystem.watch"]
        if info.data.get("mode") == "continuous" or watched:
            why = "a continuous plan" if info.data.get("mode") == "continuous" else \
                f"a plan with a filesystem.watch source ({', '.join(map(repr, watched))})"
            raise ValueError(f"{why} cannot carry a schedule: it runs on file events, on the machine whose files it "
                             "watches; remove the schedule, or make the plan mode oneshot with filesystem.index "
                             "sources")
        return v

    @model_validator(mode="after")
    def _whole(self) -> "Plan":
        if not self.sources:
            raise ValueError("a plan needs at least one source, e.g. {name: photos, type: filesystem.index, "
                             f"config: {{path: ~/Photos}}}}; source types: {', '.join(SOURCE_TYPES)}")
        for what, items in (("source", self.sources), ("rule", self.rules)):
            seen: set[str] = set()
            for item in items:
                if item.name in seen:
                    raise ValueError(f"two {what}s are named {item.name!r}; {what} names must be unique in a plan")
                seen.add(item.name)
        return self

    # --- objects in and out ----------------------------------------------------------------------------------

    @classmethod
    def from_object(cls, data: Any, *, source: str | None = None, locate: Locate | None = None) -> "Plan":
        """Validate a plan object (parsed YAML / JSON, or plan-create's arguments); every problem is reported with
        its path. ``locate(path_tuple) -> (line, column) | None`` adds positions for text input."""
        if not isinstance(data, dict):
            raise PlanValidationError(problems=[Problem(
                f"a plan is a mapping with keys name, sources, rules (or conditions + outcomes); got "
                f"{type(data).__name__}")], source=source)
        deep = object_too_deep(data)
        if deep is not None:
            at = locate(deep) if locate is not None else None
            raise PlanValidationError(problems=[Problem(
                f"nested too deeply: {OBJECT_DEPTH_RULE}; write long chains flat ({{all: [a, b, c]}})",
                path=_format_path(list(deep[:8])) + ("..." if len(deep) > 8 else ""),
                line=at[0] if at else None, column=at[1] if at else None)], source=source)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            shaped = data
            if "conditions" in data or "outcomes" in data:
                try:
                    shaped = shorthand_as_rule(data)
                except ValueError:
                    shaped = data
            if shaped is not data and locate is not None:
                locate = _through_shorthand(locate, data, shaped)
            problems = problems_from(exc, shaped, locate=locate)
            if shaped is not data:  # name the reference's keys, not the rule they became
                for p in problems:
                    if p.path and p.path.startswith("rules[0].when"):
                        p.path = "conditions" + p.path[len("rules[0].when"):]
                    elif p.path and p.path.startswith("rules[0].outcomes"):
                        p.path = p.path[len("rules[0]."):]
            raise PlanValidationError(problems=problems, source=source) from None

    def to_object(self) -> dict[str, Any]:
        """The canonical JSON-ready object (conditions as trees)."""
        return self.model_dump(mode="json", exclude_defaults=False)


# --- error locations ------------------------------------------------------------------------------------------


def _through_shorthand(locate: Locate, data: dict[str, Any], shaped: dict[str, Any]) -> Locate:
    """``locate`` for paths into ``shaped`` (the reference's conditions + outcomes made rule 0) given a locator of
    the input as written."""
    if len(shaped.get("rules") or []) != len(data.get("rules") or []) + 1:
        return locate

    def through(parts: tuple[Any, ...]) -> tuple[int, int] | None:
        if parts[:2] == ("rules", 0):
            rest = parts[2:]
            if rest[:1] == ("when",):
                return locate(("conditions", *rest[1:]))
            if rest[:1] == ("outcomes",):
                return locate(rest)
            return locate(("conditions",) if "conditions" in data else ("outcomes",))
        if parts[:1] == ("rules",) and len(parts) > 1 and isinstance(parts[1], int):
            return locate(("rules", parts[1] - 1, *parts[2:]))
        return locate(parts)

    return through


def _format_path(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def clean_location(loc: tuple[Any, ...], data: Any) -> list[Any]:
    """The part of a pydantic error location that names places in the input (union tags and validator names,
    which are not in the input, are dropped)."""
    parts: list[Any] = []
    current = data
    for item in loc:
        if isinstance(current, dict) and "type" not in current and item in ("conditions", "condition"):
            short = [k for k in ("all", "any", "none", "not") if k in current]
            if len(short) == 1:  # {all: [...]} was read as {type: all, conditions: [...]}
                item = short[0]
                if item != "not" and not isinstance(current[item], list):
                    parts.append(item)
                    current = [current[item]]
                    continue
        if isinstance(current, dict) and isinstance(item, str) and item in current:
            parts.append(item)
            current = current[item]
        elif isinstance(current, list) and isinstance(item, int) and 0 <= item < len(current):
            parts.append(item)
            current = current[item]
        elif isinstance(current, dict) and isinstance(item, str) and item in ("path",) and "paths" in current:
            continue
    return parts


def problems_from(exc: ValidationError, data: Any, *, locate: Locate | None = None) -> list[Problem]:
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors():
        parts = clean_location(tuple(err["loc"]), data)
        message = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err["type"] == "extra_forbidden":
            key = err["loc"][-1]
            parent = clean_location(tuple(err["loc"][:-1]), data)
            accepted = _accepted_keys(parent, data)
            message = f"unknown key {key!r}" + (f"; accepted: {', '.join(accepted)}" if accepted else "")
            parts = [*parent, key]
        elif err["type"] == "missing":
            message = f"{err['loc'][-1]!r} is required"
            parts = [*clean_location(tuple(err["loc"][:-1]), data), err["loc"][-1]]
        elif err["type"] in ("invalid_outcome", "invalid_condition"):
            given = err.get("input")
            kind = given.get("type") if isinstance(given, dict) else None
            what = "outcome" if err["type"] == "invalid_outcome" else "condition"
            if kind is None:
                message = f"this {what} has no type; {message.split('; ', 1)[-1]}"
            else:
                message = f"unknown {what} type {kind!r}; {message.split('; ', 1)[-1]}"
        elif err["type"] == "literal_error":
            message = f"{message} (got {err.get('input')!r})"
        path = _format_path(parts)
        if (path, message) in seen:
            continue
        seen.add((path, message))
        line = column = None
        if locate is not None:
            pos = locate(tuple(parts))
            if pos:
                line, column = pos
        problems.append(Problem(message, path=path or None, line=line, column=column))
    return problems


def _accepted_keys(parts: list[Any], data: Any) -> list[str]:
    """The keys the model at ``parts`` accepts (for 'unknown key' messages)."""
    if not parts:
        return list(Plan.model_fields)
    node = data
    for p in parts:
        node = node[p]
    head = [p for p in parts if isinstance(p, str)]
    last = head[-1] if head else ""
    if last == "config":
        return list(SourceConfig.model_fields) + ["path"]
    if parts == ["schedule"]:
        return list(Schedule.model_fields)
    if isinstance(node, dict):
        kind = node.get("type")
        if "sources" in parts and parts[-2:-1] == ["sources"] or (len(parts) >= 2 and parts[-2] == "sources"):
            return list(Source.model_fields)
        if len(parts) >= 2 and parts[-2] == "rules":
            return ["name", "when", "outcomes"]
        if kind in OUTCOME_MODELS and ("outcomes" in parts):
            return list(OUTCOME_MODELS[kind].model_fields)
        if kind == "compare" or "field" in node:
            return ["field", "op", "value", "arg"]
        if kind in ("all", "any", "none"):
            return ["type", "conditions"]
        if kind == "not":
            return ["type", "condition"]
    return []

"""The front doors of the plan language: DSL text, YAML, JSON and plain objects all end in :meth:`Plan.from_object`.

Condition expressions are read by :mod:`dsl.expressions` (its docstring has the syntax).

The plan DSL (files ``*.plan``), one statement a line, ``#`` comments; inside ``( ) [ ] { }`` a statement may
continue over several lines::

    plan media-library
    description "Thumbnail the photos, collect big videos"
    mode continuous                                  # oneshot (default) | continuous
    status active                                    # active (default) | paused | disabled
    source photos watch "~/Photos" into photos recursive=true debounce_ms=500 exclude=["*.tmp", "*.part"]
    source papers index /data/papers max_depth=3     # several paths: index /a /b
    source favs set favourites
    source recent query recent-files
    rule big-videos when media_type = video and size > 1GB
      do selection_set big-videos
      do classifier generate_timeline maxWidth=320
    rule papers when extension = .pdf and size <= 50MB
      do embed papers chunk_size=800 when size > 1KB
    rule tidy when (mtime < now - 365d
                    and path contains /drafts/)
      do chained stopOnError=true (selection_set old, selection_set recent remove)
    rule everything                                  # no when: every entry
      do label cat dog threshold=0.5
    prefer default_sort=size

- ``source NAME TYPE [VALUE...] [into SET] [key=value...]``: TYPE is ``index``, ``watch``, ``set``, ``query`` (or
  ``filesystem.index``, ``filesystem.watch``, ``selection_set``, ``query``); the values are the paths of a
  filesystem source, the set of a ``set`` source, the saved query of a ``query`` source; ``into`` names the
  target set; key=value pairs are the source's config (recursive, max_depth, include_hidden, include_directories,
  follow_symlinks, exclude, debounce_ms, path, paths).
- ``schedule cron "EXPR" | every DURATION | rrule "RULE" [timezone ZONE] [anchor DATE-TIME]``: when the plan runs
  on its own (:mod:`dsl.schedule`), e.g. ``schedule cron "0 3 * * *" timezone Europe/Berlin``, ``schedule every
  15m``, ``schedule rrule "FREQ=DAILY;BYHOUR=6"``; ``anchor`` (where intervals count from) goes with ``every``. A
  plan that watches (mode continuous, or a watch source) has none.
- ``rule NAME [when CONDITION]`` followed by its ``do`` lines; a rule without ``when`` matches every entry.
- ``do TYPE [VALUE...] [key=value...] [(OUTCOME, OUTCOME...)] [when CONDITION]``: the values fill, in order,
  selection_set: selectionSetName, operation (add | remove); classifier: classifierOperation; embed: collection;
  map: strategy; label: its classes (a class with a description is ``NAME="what it means"``, e.g.
  ``do label invoice receipt="proof of a payment" threshold=0.4``). ``chained`` takes its outcomes in parentheses
  (each ``TYPE ...`` without ``do``).
- ``prefer key=value...``: preferences. Option values are bare words (``true``, ``false``, ``null``, numbers and
  other words), quoted text, lists ``[a, b]`` and maps ``{key=value, ...}``.

Every error names the line and column (or the YAML / JSON path, with its line when known) and what is accepted.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

import yaml
from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from dsl.errors import PlanSyntaxError, PlanValidationError, Problem, caret_context
from dsl.expressions import at_offset, check_length, parse_expression, too_deep
from dsl.grammar import PARSER, Build, Built, TooDeep
from dsl.limits import MAX_NUMBER, NUMBER_RULE, OBJECT_DEPTH_RULE
from dsl.model import Locate, Plan
from dsl.syntax_errors import DSL_EXAMPLES, syntax_error

__all__ = ["FORMATS", "detect_format", "locate_problems", "parse_dsl", "parse_expression", "parse_plan_file",
           "parse_plan_object", "parse_plan_text"]

log = logging.getLogger(__name__)

FORMATS = ("auto", "yaml", "json", "dsl")
SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".plan": "dsl"}
_DSL_START = re.compile(r"\A(?:\s*(?:#[^\n]*)?\n)*\s*plan[ \t]+[^\s:#]")


def _dsl_tree(text: str) -> Tree[Token]:
    return PARSER.parse(text if text.endswith("\n") else text + "\n", start="plan")


def parse_dsl(text: str, source: str | None = None) -> Plan:
    """A plan from DSL text; syntax errors raise PlanSyntaxError, everything else PlanValidationError, each with
    its line, column and the line with a caret."""
    check_length(text, "plan text", source)
    try:
        tree = _dsl_tree(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, text, _dsl_tree, DSL_EXAMPLES, PARSER, source=source) from None
    except TooDeep as exc:
        raise too_deep(exc, text, source) from None
    build = Build(text)
    built: Built = build.transform(tree)
    if build.problems:
        raise PlanValidationError(problems=build.problems, source=source)

    def locate(path: tuple[Any, ...]) -> tuple[int, int] | None:
        for end in range(len(path), -1, -1):
            if path[:end] in built.where:
                return built.where[path[:end]]
        return None

    try:
        return Plan.from_object(built.data, source=source, locate=locate)
    except PlanValidationError as exc:
        raise _with_context(exc, text) from None


# --- YAML and JSON ----------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML without implicit dates: ``2024-01-01`` stays text, which conditions and preferences expect."""


_Loader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _yaml_locator(text: str) -> Locate | None:
    """``locate(path) -> (line, column)`` from the YAML node tree of ``text`` (None when it does not compose)."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None

    def locate(path: tuple[Any, ...]) -> tuple[int, int] | None:
        node, mark = root, root.start_mark if root is not None else None
        for part in path:
            if isinstance(node, yaml.MappingNode):
                hit = next(((k, v) for k, v in node.value if k.value == part), None)
                if hit is None:
                    break
                mark, node = hit[0].start_mark, hit[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                mark = node.start_mark
            else:
                break
        return (mark.line + 1, mark.column + 1) if mark is not None else None

    return locate


def _load_yaml(text: str, source: str | None) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        message = f"invalid YAML: {exc.problem or exc.context}; a plan file is a YAML mapping of name, " \
                  f"description, mode, status, sources, rules, preferences"
        raise PlanSyntaxError(problems=[Problem(message, line=line, column=column, context=caret_context(
            text, line, column) if line and column else None)], source=source) from None
    except yaml.YAMLError as exc:
        raise PlanSyntaxError(problems=[Problem(f"invalid YAML: {exc}")], source=source) from None
    except RecursionError:
        raise PlanSyntaxError(problems=[Problem(f"the YAML nests too deeply; {OBJECT_DEPTH_RULE}")],
                              source=source) from None
    except ValueError:  # an integer past Python's digit limit
        raise _long_number(text, source) from None


def _long_number(text: str, source: str | None) -> PlanSyntaxError:
    """The error for a number too long to read in YAML / JSON text, at the first such number."""
    found = re.search(r"\d{%d,}" % (MAX_NUMBER + 1), text)
    message = f"a number is too long; {NUMBER_RULE}"
    if found is None:
        return PlanSyntaxError(problems=[Problem(message)], source=source)
    return at_offset(text, found.start(), message, source)


def _load_json(text: str, source: str | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"invalid JSON: {exc.msg}; a plan is a JSON object with keys name, sources, rules " \
                  f"(or conditions + outcomes)"
        raise PlanSyntaxError(problems=[Problem(message, line=exc.lineno, column=exc.colno, context=caret_context(
            text, exc.lineno, exc.colno))], source=source) from None
    except RecursionError:
        raise PlanSyntaxError(problems=[Problem(f"the JSON nests too deeply; {OBJECT_DEPTH_RULE}")],
                              source=source) from None
    except ValueError:  # an integer past Python's digit limit
        raise _long_number(text, source) from None


def _with_context(exc: PlanValidationError, text: str) -> PlanValidationError:
    for p in exc.problems:
        if p.line is not None and p.context is None:
            p.context = caret_context(text, p.line, p.column or 1)
    exc.message = exc.summary()
    exc.args = (exc.message,)
    return exc


def detect_format(text: str) -> str:
    """``json`` if the text starts with ``{``, ``dsl`` if its first statement is ``plan NAME``, else ``yaml``."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped.startswith("{"):
        return "json"
    return "dsl" if _DSL_START.match(text.lstrip("\ufeff")) else "yaml"


def parse_plan_text(text: str, format: str = "auto", source: str | None = None) -> Plan:
    """A plan from text in ``format`` (auto, yaml, json or dsl)."""
    if format not in FORMATS:
        raise PlanValidationError(problems=[Problem(f"unknown plan format {format!r}; use one of: "
                                                    f"{', '.join(FORMATS)}")], source=source)
    if not isinstance(text, str):
        raise PlanSyntaxError(problems=[Problem(f"plan text is text, got {type(text).__name__}")], source=source)
    check_length(text, "plan text", source)
    if format == "auto":
        format = detect_format(text)
    log.debug("parsing a %s plan from %s", format, source or "text")
    if format == "dsl":
        return parse_dsl(text, source=source)
    data = _load_json(text, source) if format == "json" else _load_yaml(text, source)
    try:
        return Plan.from_object(data, source=source, locate=_yaml_locator(text))
    except PlanValidationError as exc:
        raise _with_context(exc, text) from None


def parse_plan_file(path: str | os.PathLike[str]) -> Plan:
    """A plan from a ``.yaml`` / ``.yml`` / ``.json`` / ``.plan`` (DSL) file; other suffixes are detected."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanValidationError(problems=[Problem(f"cannot read the plan file: {exc.strerror or exc}")],
                                  source=str(file)) from None
    return parse_plan_text(text, format=SUFFIXES.get(file.suffix.lower(), "auto"), source=str(file))


def parse_plan_object(obj: Any, source: str | None = None) -> Plan:
    """A plan from an already parsed object (plan-create's arguments, ``json.load`` output)."""
    return Plan.from_object(obj, source=source)


def locate_problems(problems: list[Problem], text: str, format: str = "auto") -> list[Problem]:
    """Add line, column and a caret to problems found after parsing (``rules[0].outcomes[1]``: an outcome type
    that is not installed, a path outside the roots) from the plan's text; problems already located are kept."""
    if format == "auto":
        format = detect_format(text)
    locate: Locate | None
    try:
        if format == "dsl":
            build = Build(text)
            where: dict[tuple[Any, ...], tuple[int, int]] = build.transform(_dsl_tree(text)).where

            def locate_dsl(path: tuple[Any, ...]) -> tuple[int, int] | None:
                for end in range(len(path), -1, -1):
                    if path[:end] in where:
                        return where[path[:end]]
                return None
            locate = locate_dsl
        else:
            locate = _yaml_locator(text)
    except Exception:  # the text parsed once already; if it does not now, keep the problems as they are
        return problems
    if locate is None:
        return problems
    for p in problems:
        if p.line is not None or not p.path:
            continue
        parts = tuple(int(x) if x.isdigit() else x for x in re.findall(r"[^.\[\]]+", p.path))
        pos = locate(parts)
        if pos:
            p.line, p.column = pos
            p.context = caret_context(text, p.line, p.column or 1)
    return problems

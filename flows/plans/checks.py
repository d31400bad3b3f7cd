"""What this installation can run, beyond what the plan language checks: outcome types with an executor, fields
whose producer is installed, source paths inside the allowed roots (relative ones against the plan file's folder)."""

from __future__ import annotations

import os

from dsl.conditions import iter_leaves
from dsl.errors import PlanValidationError, Problem
from dsl.fields import field_spec, missing_producer
from dsl.model import Plan, Source
from dsl.outcomes import iter_outcomes
from flows.core.outcomes import installed_executors
from flows.core.roots import Roots
from store.errors import AssayError, InvalidInput


def check_plan(plan: Plan, *, roots: Roots | None = None) -> list[Problem]:
    """Problems that make ``plan`` unrunnable here: outcome types without an executor, fields whose producer is
    not installed, source paths outside the allowed roots."""
    installed_executors()  # the installed capabilities register their executors and their fields' producers
    problems: list[Problem] = []
    for i, source in enumerate(plan.sources):
        if source.type.startswith("filesystem."):
            for j, path in enumerate(source.config.paths):
                where = f"sources[{i}].config.paths[{j}]"
                try:
                    absolute = absolute_path(path, plan.base_dir, field="path")
                    if roots is not None:
                        roots.resolve(absolute, field="path")
                except AssayError as exc:
                    problems.append(Problem(exc.message, path=where))
    for i, rule in enumerate(plan.rules):
        _check_condition(rule.when, f"rules[{i}].when", problems)
        for j, outcome in enumerate(rule.outcomes):
            for k, item in enumerate(iter_outcomes([outcome])):
                where = f"rules[{i}].outcomes[{j}]" + ("" if k == 0 else f" (chained step {k})")
                if item.type not in installed_executors():
                    problems.append(Problem(
                        f"outcome type {item.type!r} is not installed in this version of assay; installed: "
                        f"{', '.join(installed_executors())}", path=where))
                if item.when is not None:
                    _check_condition(item.when, where + ".when", problems)
    return problems


def _check_condition(cond, where: str, problems: list[Problem]) -> None:
    for leaf in iter_leaves(cond):
        reason = missing_producer(field_spec(leaf.field))
        if reason:
            problems.append(Problem(reason, path=where))


def validated(plan: Plan, *, roots: Roots | None) -> Plan:
    problems = check_plan(plan, roots=roots)
    if problems:
        raise PlanValidationError(problems=problems)
    return plan


def absolute_path(path: str, base_dir: str | None, *, field: str) -> str:
    """``path`` with ``~`` expanded; a relative path is relative to the plan file's folder (plans in git can name
    folders beside them), and refused for a plan that came from no file."""
    expanded = os.path.expanduser(path)
    if os.path.isabs(expanded):
        return expanded
    if base_dir is None:
        raise InvalidInput(f"{path!r} is relative; give an absolute path (or ~/...): relative paths are "
                           "only for plan files, where they are relative to the file's folder", field=field)
    return os.path.normpath(os.path.join(base_dir, expanded))


def resolved_paths(source: Source, roots: Roots | None, base_dir: str | None = None) -> list[str]:
    out = []
    for path in source.config.paths:
        absolute = absolute_path(path, base_dir, field=f"source {source.name} path")
        out.append(roots.resolve(absolute, field=f"source {source.name} path") if roots else absolute)
    return out

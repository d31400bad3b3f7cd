"""dsl/'s modules import each other without cycles, counting imports inside functions too (no late import dodges
a cycle), and the grammar's tables of source and outcome words agree with the models above it."""

from __future__ import annotations

import ast
from pathlib import Path

import dsl

DSL = Path(dsl.__file__).parent
MODULES = sorted(p.stem for p in DSL.glob("*.py") if p.stem != "__init__")


def imports_of(name: str) -> set[str]:
    """The dsl modules ``dsl/<name>.py`` imports anywhere in its text (module level or inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((DSL / f"{name}.py").read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("dsl.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "dsl":
                found |= {a.name for a in node.names if a.name in MODULES}
                found |= {"__init__"} if any(a.name not in MODULES for a in node.names) else set()
            elif node.module.startswith("dsl."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
    return found - {name}


def test_every_dsl_module_is_seen_and_imports_only_existing_modules():
    assert {"nodes", "grammar", "expressions", "conditions", "model", "parse", "printer"} <= set(MODULES)
    for name in MODULES:
        assert imports_of(name) <= set(MODULES), name  # no module imports the package (dsl/__init__) itself


def test_the_dsl_import_graph_has_no_cycle():
    graph = {name: imports_of(name) for name in MODULES}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, path + [name])
        done.add(name)

    for name in MODULES:
        visit(name, [])


def test_the_layers_are_as_documented():
    below = {name: _closure(name) for name in MODULES}
    assert not below["nodes"] & {"grammar", "expressions", "conditions", "model", "parse", "printer", "outcomes"}
    assert not below["grammar"] & {"conditions", "model", "outcomes", "parse", "printer"}
    assert "grammar" in below["conditions"] and not below["model"] & {"parse", "printer"}


def _closure(name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for dep in imports_of(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_the_grammar_words_match_the_source_and_outcome_models():
    from dsl.grammar import POSITIONALS, SOURCE_TYPES as GRAMMAR_SOURCES
    from dsl.model import SOURCE_TYPES
    from dsl.outcomes import OUTCOME_MODELS

    assert set(GRAMMAR_SOURCES) == set(SOURCE_TYPES)
    assert set(POSITIONALS) == set(OUTCOME_MODELS)
    for kind, slots in POSITIONALS.items():
        assert set(slots) <= set(OUTCOME_MODELS[kind].model_fields), kind


def test_the_label_options_of_the_grammar_are_the_label_outcomes_fields():
    from dsl.grammar import LABEL_OPTIONS
    from dsl.outcomes import LabelOutcome

    assert set(LABEL_OPTIONS) == set(LabelOutcome.model_fields) - {"type", "when"}


def test_the_public_names_callers_use_are_exported():
    from dsl import (Plan, condition_to_text, parse_expression, parse_plan_file, parse_plan_text, plan_to_dsl,
                     plan_to_yaml)
    from dsl.conditions import Compare, Condition, Group, Not, iter_leaves  # noqa: F401

    plan = parse_plan_text("plan p\nsource s index /tmp\nrule r when extension in (.pdf)\n")
    assert isinstance(plan, Plan) and parse_plan_text(plan_to_yaml(plan)) == parse_plan_text(plan_to_dsl(plan))
    assert condition_to_text(parse_expression("size>1")) == "size > 1" and callable(parse_plan_file)

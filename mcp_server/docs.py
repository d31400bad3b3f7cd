"""The README's reference tables, generated from the live server so they cannot drift from it.

``python -m mcp_server.docs`` prints them; ``python -m mcp_server.docs --write README.md`` replaces the text between
each ``<!-- NAME:begin -->`` / ``<!-- NAME:end -->`` marker pair; tests/test_readme.py fails when the README differs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic.fields import FieldInfo

from dsl.fields import FIELDS, PREFIXES, PRODUCERS, field_spec, missing_producer
from dsl.outcomes import OUTCOME_MODELS
from flows.core.capability import load_capabilities
from flows.core.outcomes import installed_executors
from flows.core.settings import AssaySettings
from flows.env import env_of, leaves
from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from mcp_server.guard.placement import TOOL_PERMISSIONS
from mcp_server.tools import group_modules
from mcp_server.tools.common import ToolSet
from store.access import PERMISSIONS, ROLES

SECTIONS = ("tools", "resources", "settings", "fields", "outcomes", "permissions")

# The command-line option of a setting, by its YAML key (the settings table's flag column); each one's destination is
# the setting's flat name (flows.core.settings.FLAT), which tests/mcp_server/test_settings_docs.py checks.
FLAGS: dict[str, str] = {
    "server.transport": "--transport", "server.host": "--host", "server.port": "--port",
    "server.allowed_hosts": "--allowed-hosts", "roots": "--root", "data_dir": "--data-dir",
    "database.url": "--database-url", "tools.groups": "--tool-groups", "plans.dir": "--plans-dir",
    "prefect.enabled": "--no-prefect", "server.auth": "--auth",
    "server.allow_unauthenticated": "--allow-unauthenticated", "cluster.work_pool": "--work-pool",
    "cluster.cache_dir": "--cache-dir",
}
SEPARATORS = {os.pathsep: "os.pathsep", ",": "comma"}  # how the table names a list's separator in a variable


def _schema_type(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        kinds = [_schema_type(p) for p in prop["anyOf"]]
        return " \\| ".join(k for k in dict.fromkeys(kinds) if k != "null") + (" \\| null" if "null" in kinds else "")
    if "enum" in prop:
        return " \\| ".join(f'"{v}"' for v in prop["enum"])
    kind = prop.get("type", "object")
    if kind == "array":
        return f"{_schema_type(prop.get('items', {}))}[]"
    return kind


def _parameters(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    parts = []
    for name, prop in schema.get("properties", {}).items():
        text = f"`{name}`"
        if name not in required:
            default = prop.get("default")
            text += f" = {_literal(default)}" if "default" in prop else " (optional)"
        parts.append(text)
    return ", ".join(parts) or "none"


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def _first_sentence(text: str | None) -> str:
    text = " ".join((text or "").split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    return (match.group(1) if match else text).replace("|", "\\|")


@contextmanager
def _app() -> Iterator[AssayApp]:
    """An application on a throw-away data dir (removed after), to list what a server offers."""
    with tempfile.TemporaryDirectory(prefix="assay-docs-") as data:
        app = AssayApp.create(Settings(data_dir=data, roots=[data], use_prefect=False))
        try:
            yield app
        finally:
            app.close()


def tools_table() -> str:
    with _app() as app:
        lines = ["| group | tool | permission | parameters (= default) | what it does |",
                 "| --- | --- | --- | --- | --- |"]
        for group, module_name in group_modules().items():
            tools = ToolSet()
            importlib.import_module(f"mcp_server.tools.{module_name}").register(tools, app)
            for t in anyio.run(MCPServer("docs", tools=tools.list()).list_tools):
                lines.append(f"| {group} | `{t.name}` | {TOOL_PERMISSIONS.get(t.name, 'none: hidden')} | "
                             f"{_parameters(t.input_schema)} | {_first_sentence(t.description)} |")
        return "\n".join(lines)


def resources_table() -> str:
    with _app() as app:
        mcp = build_server(app)
        lines = ["| URI | what it holds |", "| --- | --- |"]
        for r in anyio.run(mcp.list_resources):
            lines.append(f"| `{r.uri}` | {_first_sentence(r.description)} |")
        for t in anyio.run(mcp.list_resource_templates):
            lines.append(f"| `{t.uri_template}` | {_first_sentence(t.description)} |")
        return "\n".join(lines)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None or value == []:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def setting_rows() -> list[tuple[str, str, str, str, str]]:
    """(setting, flag, environment variable, default, description) for every setting of the model, in its order."""
    rows = []
    for key, field in leaves(AssaySettings):
        setting, env = ".".join(key), env_of(field)
        rows.append((setting, FLAGS.get(setting, ""), env.name if env else "", _default(field),
                     field.description or ""))
    return rows


def settings_table() -> str:
    """Every setting of the one settings model (flows.core.settings): its YAML key, command-line flag, environment
    variable (a list's separator in it), default and description."""
    separators = {env.name: SEPARATORS[env.sep] for _, field in leaves(AssaySettings)
                  if (env := env_of(field)) is not None and env.sep}
    lines = ["| setting (YAML key) | flag | environment | default | description |", "| --- | --- | --- | --- | --- |"]
    for setting, flag, variable, default, description in setting_rows():
        variable_cell = f"`{variable}`" + (f" ({separators[variable]}-separated)" if variable in separators else "") \
            if variable else ""
        cells = [f"`{setting}`", f"`{flag}`" if flag else "", variable_cell, default, description.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("|  | `--config` |  |  | a YAML file holding the settings above under their YAML keys |")
    return "\n".join(lines)


def fields_table() -> str:
    """Every field a plan condition can test, from the field registry (dsl.fields)."""
    load_capabilities()  # the installed modules install their fields' producers

    def available(spec) -> str:
        return "yes" if missing_producer(spec) is None else f"once {PRODUCERS[spec.producer].split(' (')[0]} " \
                                                            "is installed"

    lines = ["| field | type | operators | available |", "| --- | --- | --- | --- |"]
    for spec in FIELDS.values():
        name = f"`{spec.name}(\"phrase\")`" if spec.needs_arg else f"`{spec.name}`"
        lines.append(f"| {name} | {spec.type}: {spec.description} | {' '.join(f'`{o}`' for o in spec.operators)} | "
                     f"{available(spec)} |")
    for prefix, meaning in PREFIXES.items():
        lines.append(f"| `{prefix}<key>` | {meaning} | any | {available(field_spec(prefix + 'key'))} |")
    return "\n".join(lines)


def outcomes_table() -> str:
    """Every outcome type of the plan language (dsl.outcomes) and whether this version runs it (flows.core.outcomes)."""
    executors = installed_executors()

    lines = ["| outcome `type` | parameters (= default) | what it does | runs in this version |",
             "| --- | --- | --- | --- |"]
    for name, model in OUTCOME_MODELS.items():
        params = []
        for field, info in model.model_fields.items():
            if field in ("type", "when"):
                continue
            default = "" if info.is_required() else f" = {_literal(info.get_default(call_default_factory=True))}"
            params.append(f"`{field}`{default}")
        doc = " ".join((model.__doc__ or "").split())
        lines.append(f"| `{name}` | {', '.join(params)}; `when` | {doc} | "
                     f"{'yes' if name in executors else 'no (refused at validation)'} |")
    return "\n".join(lines)


def permissions_table() -> str:
    """The guarded server's permissions (store/access.py) and the roles that hold each."""
    lines = ["| permission | what it allows | viewer | editor | admin |", "| --- | --- | --- | --- | --- |"]
    for name, what in PERMISSIONS.items():
        marks = " | ".join("yes" if name in ROLES[role] else "" for role in ("viewer", "editor", "admin"))
        lines.append(f"| `{name}` | {what} | {marks} |")
    return "\n".join(lines)


def generate(section: str) -> str:
    return {"tools": tools_table, "resources": resources_table, "settings": settings_table, "fields": fields_table,
            "outcomes": outcomes_table, "permissions": permissions_table}[section]()


def replace_sections(text: str, sections: dict[str, str]) -> str:
    for name, body in sections.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"no {begin} / {end} markers found")
        text = pattern.sub(lambda m: f"{begin}\n{body}\n{end}", text)  # noqa: B023 (re.sub calls it now)
    return text


def extract_section(text: str, name: str) -> str | None:
    match = re.search(rf"<!-- {name}:begin -->\n(.*?)\n?<!-- {name}:end -->", text, re.S)
    return match.group(1) if match else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="README", help="update the marked sections of this file in place")
    args = parser.parse_args(argv)
    sections = {name: generate(name) for name in SECTIONS}
    if args.write:
        with open(args.write, encoding="utf-8") as fh:
            text = replace_sections(fh.read(), sections)  # fails before the file is touched if a marker is missing
        with open(args.write, "w", encoding="utf-8") as fh:
            fh.write(text)
        return 0
    for name, body in sections.items():
        sys.stdout.write(f"<!-- {name}:begin -->\n{body}\n<!-- {name}:end -->\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The README's reference tables, generated from the live server so they cannot drift from it.

``python -m mcp_server.docs`` prints them; ``python -m mcp_server.docs --write README.md`` replaces the text between
each ``<!-- NAME:begin -->`` / ``<!-- NAME:end -->`` marker pair; tests/test_readme.py fails when the README differs.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import tempfile
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

SECTIONS = ("tools", "resources", "settings", "fields", "outcomes")

# Every setting: (command-line flag, environment variable, YAML key, default, meaning). tests/test_readme.py checks
# each flag against the parser, each variable and key against load_settings (the documents capability's variables
# against flows.documents.settings.DocumentSettings.from_env, which reads them).
SETTINGS: list[tuple[str, str, str, str, str]] = [
    ("--transport", "", "server.transport", "stdio", "stdio, or http (Streamable HTTP at /mcp)"),
    ("--host", "", "server.host", "127.0.0.1", "address the HTTP server binds"),
    ("--port", "", "server.port", "3000", "port of the HTTP server"),
    ("", "CORS_ORIGINS", "server.cors_origins", "loopback origins only",
     "origins browsers may call from, besides http(s)://localhost, 127.0.0.1 and [::1] on any port (comma-separated "
     "in the env); * allows any, with a warning"),
    ("--allowed-hosts", "ASSAY_ALLOWED_HOSTS", "server.allowed_hosts", "loopback names only",
     "Host header values accepted besides localhost, 127.0.0.1 and [::1] (comma-separated); required when --host "
     "is not a loopback address; * allows any"),
    ("", "", "server.cors_credentials", "true", "send Access-Control-Allow-Credentials"),
    ("", "ASSAY_PUBLIC_URL", "server.public_url", "http://HOST:PORT",
     "the HTTP server's address as clients reach it (behind a proxy); artifact URLs (/api/content) start with it"),
    ("--root", "ASSAY_ROOTS", "roots", "your home directory",
     "directories callers may touch (repeat the flag; os.pathsep-separated in the env)"),
    ("--data-dir", "ASSAY_DATA_DIR", "data_dir", "~/.assay", "store, Prefect home and caches"),
    ("--database-url", "ASSAY_DATABASE_URL", "database.url", "SQLite in the data dir",
     "SQLAlchemy URL of the store, e.g. postgresql+psycopg://user@host/assay"),
    ("", "ASSAY_STATEMENT_TIMEOUT", "database.statement_timeout", "30",
     "seconds a store statement may run before it is stopped with QUERY_TIMEOUT (0: no limit)"),
    ("--tool-groups", "ASSAY_TOOL_GROUPS", "tools.groups", "all",
     "tool groups to list (fewer tools, less of an agent's context)"),
    ("--plans-dir", "ASSAY_PLANS_DIR", "plans.dir", "none",
     "directory of plan files (YAML, JSON, DSL .plan): loaded at start, reloaded on change, written back"),
    # the documents capability's settings (flows/documents/settings.py), read from the environment only
    ("", "ASSAY_DOCUMENT_MAX_BYTES", "", "52428800",
     "files larger than this many bytes are not extracted (FILTER_FAILED, with the reason)"),
    ("", "ASSAY_DOCUMENT_TIMEOUT", "", "120", "seconds one file's text extraction may take before it is stopped"),
    ("", "ASSAY_OCR", "", "on", "on or off: read pages without a text layer, and images of text, with Tesseract"),
    ("", "ASSAY_OCR_LANGUAGE", "", "eng", "Tesseract language(s) for OCR, e.g. eng+deu"),
    ("", "ASSAY_MAX_DOCUMENT_READ_CHARS", "", "100000",
     "read_document returns at most this many characters (then truncated: true)"),
    ("", "ASSAY_SEARCH_TIMEOUT", "", "30", "seconds a document search may take before SEARCH_TIMEOUT"),
    ("", "ASSAY_ALLOW_SYMLINKS", "", "off",
     "on: the document tools follow symbolic links inside the roots (else SYMLINK_NOT_ALLOWED)"),
    ("", "ASSAY_DOCUMENTS_PLAN", "", "on",
     "off: do not install the built-in \"documents\" plan (text of every document under the roots, kept current) "
     "at server start"),
    # the semantic index's settings (flows/semantic/settings.py, paths.py), read from the environment only
    ("", "ASSAY_EMBED_MODEL", "", "all-MiniLM-L6-v2",
     "the sentence-transformers model: the packaged one by name, or a model directory (never downloaded)"),
    ("", "ASSAY_EMBED_BACKEND", "", "openvino",
     "torch, onnx, onnx-int8 or openvino: the fastest within 1% of torch's retrieval quality by default "
     "(bench/semantic_backends.py); recorded per collection"),
    ("", "ASSAY_EMBED_BATCH", "", "64", "chunks per encode call"),
    ("", "ASSAY_EMBED_DEVICE", "", "cpu", "cpu, or cuda / mps (GPU_NOT_AVAILABLE when asked for and absent)"),
    ("", "ASSAY_EMBED_THREADS", "", "every core", "threads the model runs on (else OMP_NUM_THREADS when set)"),
    ("", "ASSAY_SEARCH_EF", "", "128", "hnswlib ef at query time (higher: better recall, slower)"),
    ("", "ASSAY_MODEL_CACHE", "", "data dir/models",
     "where the ONNX / OpenVINO exports of the model are built once and kept"),
    ("--config", "", "", "", "YAML file holding the settings above under their YAML keys"),
]


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


def _app():
    from mcp_server.app import AssayApp
    from mcp_server.config import Settings

    data = tempfile.mkdtemp(prefix="assay-docs-")
    return AssayApp.create(Settings(data_dir=data, roots=[data], use_prefect=False))


def tools_table() -> str:
    from mcp_server.app import GROUP_MODULES
    from mcp_server.tools.common import ToolSet

    app = _app()
    try:
        lines = ["| group | tool | parameters (= default) | what it does |", "| --- | --- | --- | --- |"]
        for group, module_name in GROUP_MODULES.items():
            tools = ToolSet()
            importlib.import_module(f"mcp_server.tools.{module_name}").register(tools, app)
            for t in anyio.run(MCPServer("docs", tools=tools.list()).list_tools):
                lines.append(f"| {group} | `{t.name}` | {_parameters(t.input_schema)} | "
                             f"{_first_sentence(t.description)} |")
        return "\n".join(lines)
    finally:
        app.close()


def resources_table() -> str:
    from mcp_server.app import build_server

    app = _app()
    try:
        mcp = build_server(app)
        lines = ["| URI | what it holds |", "| --- | --- |"]
        for r in anyio.run(mcp.list_resources):
            lines.append(f"| `{r.uri}` | {_first_sentence(r.description)} |")
        for r in anyio.run(mcp.list_resource_templates):
            lines.append(f"| `{r.uri_template}` | {_first_sentence(r.description)} |")
        return "\n".join(lines)
    finally:
        app.close()


def settings_table() -> str:
    lines = ["| flag | environment | YAML key | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for flag, env, key, default, meaning in SETTINGS:
        cells = [f"`{flag}`" if flag else "", f"`{env}`" if env else "", f"`{key}`" if key else "",
                 default, meaning]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fields_table() -> str:
    """Every field a plan condition can test, from the field registry (dsl.fields)."""
    from dsl.fields import FIELDS, PREFIXES, PRODUCERS, field_spec, missing_producer
    from flows.capabilities import load_capabilities

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
    """Every outcome type of the plan language (dsl.outcomes) and whether this version runs it (flows.outcomes)."""
    from dsl.outcomes import OUTCOME_MODELS
    from flows.outcomes import installed_executors

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


def generate(section: str) -> str:
    return {"tools": tools_table, "resources": resources_table, "settings": settings_table, "fields": fields_table,
            "outcomes": outcomes_table}[section]()


def replace_sections(text: str, sections: dict[str, str]) -> str:
    for name, body in sections.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"no {begin} / {end} markers found")
        text = pattern.sub(lambda m: f"{begin}\n{body}\n{end}", text)
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

"""The README cannot drift: its reference tables equal what the server generates, its settings table matches the
parser and load_settings, its two commands exist, and its transcript runs against a real server."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from mcp_server import docs
from mcp_server.cli import build_parser
from mcp_server.config import ConfigFile, load_settings
from tests.conftest import ToolFailed, call

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("section", docs.SECTIONS)
def test_readme_reference_tables_match_the_server(section):
    body = docs.extract_section(README, section)
    assert body is not None, f"README.md lacks the <!-- {section}:begin/end --> markers"
    assert body == docs.generate(section), (
        f"README.md's {section} table is stale: run `.venv/bin/python -m mcp_server.docs --write README.md`")


def test_every_setting_in_the_readme_is_accepted_where_it_says(tmp_path, monkeypatch):
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    flags = {opt for action in serve._actions for opt in action.option_strings}
    for flag, env, key, _default, _meaning in docs.SETTINGS:
        if flag:
            assert flag in flags, f"README names {flag}, which `assay serve` does not accept"
        if key:
            section = {}
            cursor = section
            parts = key.split(".")
            for part in parts[:-1]:
                cursor = cursor.setdefault(part, {})
            cursor[parts[-1]] = None
            ConfigFile.model_validate(section)  # raises on a key the config file does not know
    from flows.documents.settings import DocumentSettings

    defaults = load_settings({}, env={}).model_dump()
    documents = {"ASSAY_DOCUMENT_MAX_BYTES": "1000", "ASSAY_DOCUMENT_TIMEOUT": "5", "ASSAY_OCR": "off",
                 "ASSAY_OCR_LANGUAGE": "deu", "ASSAY_MAX_DOCUMENT_READ_CHARS": "500", "ASSAY_SEARCH_TIMEOUT": "3",
                 "ASSAY_ALLOW_SYMLINKS": "on", "ASSAY_DOCUMENTS_PLAN": "off"}
    from flows.semantic import paths
    from flows.semantic.settings import SemanticSettings

    semantic = {"ASSAY_EMBED_MODEL": "/models/other", "ASSAY_EMBED_BACKEND": "torch", "ASSAY_EMBED_BATCH": "8",
                "ASSAY_EMBED_DEVICE": "cuda", "ASSAY_EMBED_THREADS": "1", "ASSAY_SEARCH_EF": "64"}
    for _flag, env, _key, _default, _meaning in docs.SETTINGS:
        if env in documents:  # the documents capability reads these itself
            assert DocumentSettings.from_env({env: documents[env]}) != DocumentSettings(), f"{env} has no effect"
        elif env in semantic:  # and the semantic index these
            assert SemanticSettings.from_env({env: semantic[env]}) != SemanticSettings(), f"{env} has no effect"
        elif env == "ASSAY_MODEL_CACHE":
            monkeypatch.setenv(env, str(tmp_path / "models"))
            assert paths.model_cache_dir() == tmp_path / "models"
        elif env:
            value = {"ASSAY_ROOTS": str(tmp_path), "ASSAY_DATA_DIR": str(tmp_path / "d"),
                     "ASSAY_DATABASE_URL": "sqlite:////tmp/x.db", "CORS_ORIGINS": "http://a.example",
                     "ASSAY_TOOL_GROUPS": "indexing", "ASSAY_PLANS_DIR": str(tmp_path / "plans"),
                     "ASSAY_ALLOWED_HOSTS": "assay.lan", "ASSAY_STATEMENT_TIMEOUT": "5",
                     "ASSAY_PUBLIC_URL": "https://assay.example"}[env]
            assert load_settings({}, env={env: value}).model_dump() != defaults, f"{env} has no effect"


def test_the_two_commands_exist_and_ci_runs_the_test_command():
    commands = re.findall(r"^(\./scripts/\w+|make \w+)\s", README, re.M)
    assert "./scripts/run" in commands and "./scripts/test" in commands
    for script in ("scripts/run", "scripts/test", "scripts/setup"):
        assert os.access(ROOT / script, os.X_OK), f"{script} is missing or not executable"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci or "make test" in ci


def test_readme_client_configurations_are_valid_json():
    blocks = re.findall(r"```json\n(.*?)```", README, re.S)
    configs = [json.loads(b) for b in blocks if "mcpServers" in b]
    assert len(configs) == 2
    stdio = configs[0]["mcpServers"]["assay"]
    assert stdio["args"][0] == "serve"
    assert configs[1]["mcpServers"]["assay"]["url"].endswith("/mcp")


def test_readme_yaml_example_is_a_valid_config(tmp_path):
    block = re.search(r"```yaml\n# assay.yaml\n(.*?)```", README, re.S).group(1)
    data = yaml.safe_load(block)
    data["roots"] = [str(tmp_path)]
    ConfigFile.model_validate(data)


def transcript_steps() -> list[tuple[str, dict, dict | None, str | None]]:
    """(tool, arguments, expected fields or None, expected error text or None) for each `→` line of the transcript."""
    body = docs.extract_section(README, "transcript") or ""
    steps = []
    lines = body.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^→ ([\w-]+) (\{.*\})$", line)
        if not m:
            continue
        expected, error = None, None
        if i + 1 < len(lines):
            nxt = lines[i + 1]
            if nxt.startswith("← error: "):
                error = nxt.removeprefix("← error: ")
            elif nxt.startswith("← "):
                expected = json.loads(nxt.removeprefix("← "))
        steps.append((m.group(1), json.loads(m.group(2)), expected, error))
    return steps


def _swap(value, old: str, new: str):
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    return value


def _contains(actual, expected, where="response"):
    """Every key / item of ``expected`` is in ``actual`` with an equal value (lists: expected items in order)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}: no field {key!r} in {actual!r}"
            _contains(actual[key], value, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) >= len(expected), f"{where}: {actual!r} vs {expected!r}"
        for i, value in enumerate(expected):
            _contains(actual[i], value, f"{where}[{i}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


async def replay_transcript(client, tree) -> None:
    steps = transcript_steps()
    assert len(steps) >= 8, "the README transcript is missing"
    for tool, args, expected, error in steps:
        args = _swap(args, "/home/user", str(tree))
        if error is not None:
            with pytest.raises(ToolFailed) as err:
                await call(client, tool, args)
            assert error in _swap(str(err.value), str(tree), "/home/user"), f"{tool}: {err.value}"
            continue
        result = await call(client, tool, args)
        if expected is not None:
            _contains(_swap(result, str(tree), "/home/user"), expected, tool)


async def test_readme_transcript_runs_against_the_server(client, tree):
    await replay_transcript(client, tree)

"""The README cannot drift: its reference tables equal what the server generates (the settings table too: see
tests/mcp_server/test_settings_docs.py for what each of its rows sets), its two commands exist, and its transcript
runs against a real server."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from mcp_server import docs
from mcp_server.config import ConfigFile
from tests.conftest import ToolFailed, call

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("section", docs.SECTIONS)
def test_readme_reference_tables_match_the_server(section):
    body = docs.extract_section(README, section)
    assert body is not None, f"README.md lacks the <!-- {section}:begin/end --> markers"
    assert body == docs.generate(section), (
        f"README.md's {section} table is stale: run `.venv/bin/python -m mcp_server.docs --write README.md`")


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
    assert len(configs) == 3
    stdio = configs[0]["mcpServers"]["assay"]
    assert stdio["args"][0] == "serve"
    assert configs[1]["mcpServers"]["assay"]["url"].endswith("/mcp")
    guarded = configs[2]["mcpServers"]["assay"]  # a client of the guarded server sends its token
    assert guarded["url"].endswith("/mcp") and guarded["headers"]["Authorization"].startswith("Bearer assay_")


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

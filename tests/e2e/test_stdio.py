"""A real MCP client in this process, `assay serve` over stdio in another: the session works and stdout is protocol."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from tests.e2e.conftest import exercise

pytestmark = pytest.mark.e2e


def assert_stdout_is_only_json_rpc(server) -> None:
    lines = server.stdout_lines()
    assert lines, "the server wrote nothing to stdout"
    for line in lines:
        try:
            message = json.loads(line)
        except ValueError:
            pytest.fail(f"non-JSON line on stdout: {line[:200]!r}\nstderr:\n{server.stderr()[-2000:]}")
        assert message.get("jsonrpc") == "2.0", line[:200]


async def test_stdio_session_without_prefect(stdio_server, tree):
    server = stdio_server(prefect=False)
    async with Client(server.params) as client:
        job = await exercise(client, tree)
        assert job["flowRunId"] is None
    assert_stdout_is_only_json_rpc(server)
    assert "assay serving over stdio" in server.stderr()  # our logging goes to stderr


async def test_stdio_session_with_prefect_keeps_stdout_clean(stdio_server, tree):
    server = stdio_server(prefect=True)
    async with Client(server.params) as client:
        job = await exercise(client, tree)
        assert job["flowRunId"]  # the scan ran as a Prefect flow run
    assert_stdout_is_only_json_rpc(server)
    assert "flow run" in server.stderr().lower()  # Prefect logged, to stderr

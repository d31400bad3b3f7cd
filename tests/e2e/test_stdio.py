"""A real MCP client in this process, `assay serve` over stdio in another: the session works and stdout is protocol."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceTemplateReference

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


# how the Python SDK 2.x client connects: "auto" asks server/discover and speaks the stateless 2026-07-28 revision;
# "legacy" does the initialize handshake of the earlier revisions (as the TypeScript SDK 1.x does)
GENERATIONS = [pytest.param("auto", "2026-07-28", id="stateless-2026-07-28"),
               pytest.param("legacy", "2025-11-25", id="initialize-2025-11-25")]


async def exercise_refusals(client, tree) -> None:
    """What a client must be able to read in both protocol generations: a tool error (code and message as text,
    the reference's error object as JSON, no structured content), a refused resource read (invalid params, -32602),
    a completion, and progress for a synchronous index."""
    refused = await client.call_tool("resource-set-get", {"name": "ghost"})
    assert refused.is_error and refused.structured_content is None
    assert refused.content[0].text.startswith("NOT_FOUND: resource-set 'ghost' not found")
    assert json.loads(refused.content[1].text)["error"]["data"]["type"] == "NOT_FOUND"
    with pytest.raises(MCPError, match="outside the allowed roots") as err:
        await client.read_resource("synthesis://nodes/etc/passwd")
    assert err.value.error.code == -32602
    names = await client.complete(ResourceTemplateReference(uri="synthesis://nodes/{+path}"),
                                  {"name": "path", "value": str(tree).lstrip("/") + "/Vid"})
    assert names.completion.values == [str(tree).lstrip("/") + "/Videos"]
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    done = await client.call_tool("index", {"root": str(tree), "async": False, "force": True},
                                  progress_callback=on_progress)
    assert not done.is_error and seen and seen[-1] == 100 and seen == sorted(seen)


@pytest.mark.parametrize("mode, version", GENERATIONS)
async def test_stdio_session_without_prefect(stdio_server, tree, mode, version):
    server = stdio_server(prefect=False)
    async with Client(server.params, mode=mode) as client:
        assert client.protocol_version == version
        job = await exercise(client, tree)
        assert job["flowRunId"] is None
        await exercise_refusals(client, tree)
    assert_stdout_is_only_json_rpc(server)
    assert "assay serving over stdio" in server.stderr()  # our logging goes to stderr


async def test_stdio_session_with_prefect_keeps_stdout_clean(stdio_server, tree):
    server = stdio_server(prefect=True)
    async with Client(server.params) as client:
        job = await exercise(client, tree)
        assert job["flowRunId"]  # the scan ran as a Prefect flow run
    assert_stdout_is_only_json_rpc(server)
    assert "flow run" in server.stderr().lower()  # Prefect logged, to stderr

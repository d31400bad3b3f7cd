"""A full disk reaches a resource's reader as NO_SPACE (mcp_server/resources/common.py), as it reaches a tool's caller:
whoever noticed it (NoSpace from the store or the flows, an OSError ENOSPC from a file the read wrote, MuPDF's words
for it), an internal error (-32603, the server's trouble, not the request's) whose message is NO_SPACE's and whose
data says its type. Our other errors stay invalid params; any other failure stays a crash that names only the URI."""

from __future__ import annotations

import errno
from typing import Callable

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from mcp_server.resources.common import Content, json_resource, mixed_resource
from store.errors import InvalidInput, NoSpace


def server_raising(exc: BaseException) -> MCPServer:
    """A server with one JSON resource and one mixed resource, both raising ``exc`` when read."""
    mcp: MCPServer = MCPServer("no-space")

    def fail() -> dict:
        raise exc

    def fail_mixed(name: str) -> Content:
        raise exc

    mcp.resource("test://json")(json_resource(fail))
    mcp.resource("test://mixed/{name}")(mixed_resource(fail_mixed))
    return mcp


async def read_error(mcp: MCPServer, uri: str) -> MCPError:
    async with Client(mcp) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource(uri)
    return raised.value


FULL_DISKS: list[tuple[BaseException, str]] = [
    (NoSpace("the disk holding the store is full: the last write was rolled back"), "the disk holding the store"),
    (OSError(errno.ENOSPC, "No space left on device", "/data/cache/ab/cd/x.png"), "/data/cache/ab/cd/x.png"),
    (RuntimeError("code=2: cannot fwrite: No space left on device"), "the disk written to"),
]


@pytest.mark.parametrize("uri", ["test://json", "test://mixed/thumbnail"])
@pytest.mark.parametrize("exc, names", FULL_DISKS, ids=["NoSpace", "ENOSPC", "MuPDF"])
async def test_a_full_disk_is_a_no_space_internal_error(exc, names, uri):
    error = (await read_error(server_raising(exc), uri)).error
    assert error.code == INTERNAL_ERROR
    assert error.message.startswith("NO_SPACE: ") and "is full" in error.message and names in error.message
    assert error.data == {"type": "NO_SPACE", "field": None}


async def test_our_other_errors_stay_invalid_params():
    error = (await read_error(server_raising(InvalidInput("limit must be a whole number", field="limit")),
                              "test://json")).error
    assert error.code == INVALID_PARAMS and error.message == "INVALID_PARAMS: limit must be a whole number"
    assert error.data == {"type": "INVALID_PARAMS", "field": "limit"}


@pytest.mark.parametrize("make", [lambda: OSError(errno.EIO, "Input/output error"), lambda: ValueError("boom")],
                         ids=["EIO", "ValueError"])
async def test_any_other_failure_stays_a_crash_naming_only_the_uri(make: Callable[[], Exception]):
    error = (await read_error(server_raising(make()), "test://json")).error
    assert error.code == INTERNAL_ERROR and "test://json" in error.message and "NO_SPACE" not in error.message
    assert "Input/output" not in error.message and "boom" not in error.message

"""A full disk reaches a tool's caller as NO_SPACE (mcp_server/tools/common.py), whoever noticed it: NoSpace from the
store or the flows, an OSError ENOSPC from a file the tool wrote, MuPDF's words for it; under JSON-RPC's internal
error code (the server's trouble, not the call's). Any other unexpected failure stays a crash."""

from __future__ import annotations

import errno
import json
from typing import Any, Callable

import pytest
from mcp_types import INTERNAL_ERROR

from mcp_server.tools.common import WRITES, ToolSet, tool
from store.errors import NoSpace


def registered(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` registered as a tool the way every tool group registers its tools; the function the SDK would call."""
    tools = ToolSet()
    tool(tools, "write-something", WRITES)(fn)
    return tools.list()[0].fn


def _raise(exc: BaseException) -> Callable[[], None]:
    def write_something() -> None:
        """Writes something."""
        raise exc

    return write_something


@pytest.mark.parametrize("exc", [
    NoSpace("the disk holding the store is full: the last write was rolled back"),
    OSError(errno.ENOSPC, "No space left on device", "/data/plans/p.yaml"),
    RuntimeError("code=2: cannot fwrite: No space left on device"),
], ids=["NoSpace", "ENOSPC", "MuPDF"])
def test_a_full_disk_is_a_no_space_tool_error(exc):
    result = registered(_raise(exc))()
    assert result.is_error
    text, detail = result.content[0].text, json.loads(result.content[1].text)["error"]
    assert text.startswith("NO_SPACE: ") and "is full" in text
    assert detail["code"] == INTERNAL_ERROR and detail["data"]["type"] == "NO_SPACE"


async def test_a_coroutine_tool_on_a_full_disk_is_no_space_too():
    async def write_later() -> None:
        """Writes something later."""
        raise OSError(errno.ENOSPC, "No space left on device")

    result = await registered(write_later)()
    assert result.is_error and result.content[0].text.startswith("NO_SPACE: ")


def test_any_other_failure_is_raised_for_the_server_to_report_as_a_crash():
    with pytest.raises(OSError, match="Input/output error"):
        registered(_raise(OSError(errno.EIO, "Input/output error")))()

"""A real MCP client in this process, `assay serve --transport http` in another, at http://127.0.0.1:PORT/mcp."""

from __future__ import annotations

import httpx
import pytest
from mcp import Client

from tests.e2e.conftest import exercise

pytestmark = pytest.mark.e2e


async def test_http_session_without_prefect(http_server, tree):
    server = http_server()
    async with Client(server.url) as client:
        await exercise(client, tree)
    assert "assay serving over http at http://127.0.0.1:" in server.output()


async def test_http_preflight_from_a_browser_origin(http_server):
    server = http_server(extra=["--host", "127.0.0.1"])
    res = httpx.options(server.url, headers={"Origin": "http://localhost:5173",
                                             "Access-Control-Request-Method": "POST"})
    assert res.status_code == 204
    assert res.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert res.headers["access-control-max-age"] == "86400"

"""A real MCP client in this process, `assay serve --transport http` in another, at http://127.0.0.1:PORT/mcp."""

from __future__ import annotations

import httpx
import pytest
from mcp import Client

from tests.e2e.conftest import exercise
from tests.e2e.test_stdio import GENERATIONS, exercise_refusals

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mode, version", GENERATIONS)
async def test_http_session_without_prefect(http_server, tree, mode, version):
    server = http_server()
    async with Client(server.url, mode=mode) as client:
        assert client.protocol_version == version
        await exercise(client, tree)
        await exercise_refusals(client, tree)
    assert "assay serving over http at http://127.0.0.1:" in server.output()


async def test_http_preflight_from_a_browser_origin(http_server):
    server = http_server(extra=["--host", "127.0.0.1"])
    res = httpx.options(server.url, headers={"Origin": "http://localhost:5173",
                                             "Access-Control-Request-Method": "POST"})
    assert res.status_code == 204
    assert res.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert res.headers["access-control-max-age"] == "86400"


async def test_http_plan_written_as_dsl_runs_as_a_prefect_flow_and_is_saved_to_the_plans_dir(http_server, tree,
                                                                                             tmp_path):
    plans = tmp_path / "plans"
    server = http_server(prefect=True, extra=["--plans-dir", str(plans)])
    dsl = (f"plan photos\nsource home index {tree} into home\n"
           "rule jpgs when extension = .jpg and size >= 3KB\n  do selection_set big-jpgs\n")
    async with Client(server.url) as client:
        bad = await client.call_tool("plan-validate", {"text": dsl.replace("extension", "extensio")})
        assert bad.structured_content["valid"] is False
        assert bad.structured_content["problems"][0]["line"] == 3
        created = await client.call_tool("plan-create", {"text": dsl})
        assert not created.is_error, created.content[0].text
        done = await client.call_tool("plan-execute", {"name": "photos", "wait": True})
        assert not done.is_error, done.content[0].text
        row = done.structured_content
        assert row["status"] == "success" and row["entries_matched"] == 2 and row["flow_run_id"]
        got = await client.call_tool("resource-set-get", {"name": "big-jpgs", "include_entries": True})
        assert sorted(e["name"] for e in got.structured_content["entries"]) == ["beach.jpg", "photo.jpg"]
    assert "name: photos" in (plans / "photos.yaml").read_text()

"""The cluster-status tool (group "cluster") through an in-process MCP client, on SQLite and PostgreSQL: read-only,
typed, and saying where plans run; the pool itself against a real Prefect server is
tests/flows/core/test_cluster_status.py's subject."""

from __future__ import annotations

import pytest
from mcp import Client

from flows.core.cluster_status import IN_PROCESS
from mcp_server.app import AssayServer
from mcp_server.tools import cluster
from mcp_server.tools.common import ToolSet
from store import batches as store_batches
from store import jobs as store_jobs
from tests.conftest import call


@pytest.fixture
async def cluster_client(app):
    """A server with the cluster group alone (registered as build_server registers every group)."""
    tools = ToolSet()
    cluster.register(tools, app)
    async with Client(AssayServer(app, tools)) as c:
        yield c


async def test_cluster_status_is_read_only_and_says_its_result_shape(cluster_client):
    (listed,) = (await cluster_client.list_tools()).tools
    assert listed.name == "cluster-status"
    assert listed.annotations.read_only_hint is True
    assert {"mode", "message", "pool", "workers", "runs", "batches_in_flight"} <= set(
        listed.output_schema["properties"])


async def test_without_a_pool_it_says_plans_run_in_process(cluster_client):
    status = await call(cluster_client, "cluster-status")
    assert (status["mode"], status["pool"], status["message"]) == ("in-process", None, IN_PROCESS)
    assert status["prefect"] == {"api_url": None, "reachable": None, "error": None}


async def test_a_batch_in_flight_is_shown_with_the_worker_holding_it(cluster_client, app):
    job_id = store_jobs.create_job(app.engine, root="/data", kind="plan")
    (batch_id,) = store_batches.create(app.engine, job_id=job_id, execution_id=3, position=1, ranges=[("", None, 25)])
    store_batches.claim(app.engine, batch_id, worker="host-a-11", task_run_id=None)
    status = await call(cluster_client, "cluster-status")
    (batch,) = status["batches_in_flight"]
    assert (batch["batch_id"], batch["execution_id"], batch["worker"], batch["attempt"]) == (batch_id, 3,
                                                                                             "host-a-11", 1)


async def test_it_takes_no_arguments(cluster_client):
    result = await cluster_client.call_tool("cluster-status", {"pool": "other"})
    assert result.is_error and "unknown parameter(s) 'pool'" in result.content[0].text

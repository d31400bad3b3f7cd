"""Indexing as a real Prefect flow (Prefect's ephemeral API, started once per test session)."""

from __future__ import annotations

import time
import uuid

from flows.core.runner import JobRunner
from flows.index.service import run_index, start_index_job
from store import entries


def prefect_runs(flow_run_id: str):
    import anyio
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    async def fetch():
        async with get_client() as client:
            flow_run = await client.read_flow_run(uuid.UUID(flow_run_id))
            task_runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[uuid.UUID(flow_run_id)])),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC, limit=50,
            )
            flow = await client.read_flow(flow_run.flow_id)
            return flow, flow_run, task_runs

    return anyio.run(fetch)


def test_index_job_runs_as_a_prefect_flow_with_a_named_scan_task(engine, tree, data_dir):
    runner = JobRunner(engine, str(engine.url), use_prefect=True)
    try:
        job = run_index(runner, root=str(tree))
    finally:
        runner.shutdown()
    assert job["status"] == "completed" and job["files"] == 10
    assert entries.count_subtree(engine, root=str(tree)) == 19
    assert job["flow_run_id"]
    for _ in range(100):  # task-run states reach Prefect's API as events, a moment after the flow returns
        flow, flow_run, task_runs = prefect_runs(job["flow_run_id"])
        if task_runs and task_runs[0].state is not None and task_runs[0].state.is_final():
            break
        time.sleep(0.1)
    assert flow.name == "index"
    assert flow_run.name == f"index {tree}"
    assert flow_run.state.is_completed()
    assert [t.name for t in task_runs] == [f"scan {tree}"]
    assert task_runs[0].state.is_completed()


def test_async_index_job_through_prefect_completes_in_the_background(engine, tree):
    runner = JobRunner(engine, str(engine.url), use_prefect=True)
    try:
        job_id = start_index_job(runner, root=str(tree))
        job = runner.wait(job_id, timeout=120)
    finally:
        runner.shutdown()
    assert job["status"] == "completed"
    assert job["flow_run_id"]

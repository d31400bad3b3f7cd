"""A plan's schedule runs it: `assay serve` deploys the plan with its schedule, Prefect's scheduler makes the runs,
the server's runner executes them (executions with trigger ``prefect``); plan-update with status paused pauses the
deployment and no run follows; a plan whose schedule is removed leaves its deployment without one.

Prefect's scheduler looks for work every 60 s by default; the server here looks every second."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Running, Scheduled

from flows.core.deployments import cancel_waiting_runs
from tests.e2e.conftest import server_env
from tests.e2e.prefect_serve import Served, call, serving

pytestmark = pytest.mark.e2e

INTERVAL = 10  # seconds between scheduled runs (each a flow-run process: shorter piles them up on a busy machine)
LIVE = ("SCHEDULED", "PENDING", "RUNNING")
# Prefect 3.8's scheduler inserts runs with a key its ORM maps to a hybrid property; SQLAlchemy 2.1 refuses that
SCHEDULER_BROKEN = ("please supply a bulk_dml decorated function",
                    "Prefect's scheduler cannot insert scheduled runs under SQLAlchemy 2.1 (it needs 2.0.x)")


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("schedules")
    tree = tmp / "home"
    (tree / "notes").mkdir(parents=True)
    for i in range(3):
        (tree / "notes" / f"n{i}.txt").write_text(f"note {i}\n")
    env = server_env(tmp, prefect=True)
    env.update(PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS="1",
               PREFECT_SERVER_SERVICES_SCHEDULER_RECENT_DEPLOYMENTS_LOOP_SECONDS="1")
    with serving(tmp, tree, env) as served:
        yield served


def plan_text(served: Served, *lines: str) -> str:
    return "\n".join(["plan nightly", *lines, f"source s index {served.tree / 'notes'}",
                      "rule t when extension = .txt", "  do selection_set nightly-notes"]) + "\n"


async def scheduled_executions(served: Served) -> list[dict[str, Any]]:
    plan = await call(served, "plan-get", {"name": "nightly", "execution_limit": 1000})
    return [e for e in plan["executions"] if e["trigger"] == "prefect"]


def runs_of(served: Served, deployment_id: str) -> list[dict[str, Any]]:
    return served.post("/flow_runs/filter", {"deployments": {"id": {"any_": [deployment_id]}}, "limit": 200})


async def test_a_scheduled_plan_runs_on_its_schedule_until_it_is_paused(served: Served) -> None:
    await call(served, "plan-create", {"text": plan_text(served, f"schedule every {INTERVAL}s")})
    deployment = served.deployment("nightly")
    (schedule,) = deployment["schedules"]
    assert schedule["active"] and schedule["schedule"]["interval"] == INTERVAL and not deployment["paused"]

    deadline = time.monotonic() + 120
    while len(done := [e for e in await scheduled_executions(served) if e["status"] == "success"]) < 2:
        assert SCHEDULER_BROKEN[0] not in served.log.read_text(), SCHEDULER_BROKEN[1]
        assert time.monotonic() < deadline, f"fewer than two scheduled runs:\n{served.log.read_text()[-3000:]}"
        time.sleep(1)
    for execution in done:  # runs Prefect's scheduler made, not anyone's Run
        run = served.get(f"/flow_runs/{execution['flow_run_id']}")
        assert run["auto_scheduled"] and run["deployment_id"] == deployment["id"]
        assert execution["entries_matched"] == 3

    await call(served, "plan-update", {"name": "nightly", "status": "paused"})
    deployment = served.deployment("nightly")
    assert deployment["paused"] and len(deployment["schedules"]) == 1  # kept, to run again once active
    deadline = time.monotonic() + 120
    while live := [r for r in runs_of(served, deployment["id"]) if r["state"]["type"] in LIVE]:
        assert time.monotonic() < deadline, f"runs of a paused plan go on: {live}"  # those started before the pause
        time.sleep(1)
    before = (len(await scheduled_executions(served)), len(runs_of(served, deployment["id"])))
    time.sleep(2 * INTERVAL)  # two intervals in which the schedule would have fired
    assert (len(await scheduled_executions(served)), len(runs_of(served, deployment["id"]))) == before

    await call(served, "plan-update", {"name": "nightly", "text": plan_text(served, "status paused")})
    assert served.deployment("nightly")["schedules"] == []  # the schedule went with the plan's


@flow(name="assay-test-unserved")
def unserved() -> None:
    """A flow whose deployment no runner serves: its runs wait until someone moves them."""


def test_cancelling_a_paused_plans_waiting_runs_takes_late_and_future_ones_and_leaves_running_ones(served: Served):
    # Prefect, pausing a deployment, deletes only its future runs; a run already due would still start
    with temporary_settings(updates={PREFECT_API_URL: served.api}), get_client(sync_client=True) as client:
        flow_id = client.create_flow(unserved)
        deployment_id = client.create_deployment(flow_id=flow_id, name="waiting", paused=True)
        now = datetime.now(timezone.utc)
        late, future, running = (client.create_flow_run_from_deployment(deployment_id, state=state).id for state in
                                 (Scheduled(scheduled_time=now - timedelta(minutes=5)),
                                  Scheduled(scheduled_time=now + timedelta(hours=1)), Running()))
        assert cancel_waiting_runs(deployment_id, "plan waiting is paused") == 2
        states = {run: client.read_flow_run(run).state for run in (late, future, running)}
        assert cancel_waiting_runs(deployment_id, "again") == 0
    assert [states[r].type.value for r in (late, future, running)] == ["CANCELLED", "CANCELLED", "RUNNING"]
    assert states[late].message == "plan waiting is paused"

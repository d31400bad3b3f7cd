"""cluster_status against a real Prefect server (`prefect server start` on a loopback port, the one
tests/e2e/test_prefect_server.py starts) and a real store: the pool, its workers, its runs in flight and the store's
batches, as `assay status` and the cluster-status tool show them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.states import Running, Scheduled

from flows.core.cluster_status import IN_PROCESS, cluster_status
from store import batches as store_batches
from store import jobs as store_jobs
from tests.e2e import test_prefect_server as prefect_server
from tests.e2e.conftest import free_port

prefect_api = prefect_server.prefect_api  # the module's Prefect server, started once


@contextmanager
def prefect_client(url: str) -> Iterator[SyncPrefectClient]:
    with temporary_settings(updates={PREFECT_API_URL: url}):
        with get_client(sync_client=True) as client:
            yield client


def make_pool(url: str, name: str) -> None:
    with prefect_client(url) as client:
        client.create_work_pool(WorkPoolCreate(name=name, type="process"))


def held_batch(engine, *, worker: str, done: bool = False) -> int:
    """A batch of a fresh run, claimed by ``worker`` (and finished by it with ``done``); its id."""
    job_id = store_jobs.create_job(engine, root="/data", kind="plan")
    (batch_id,) = store_batches.create(engine, job_id=job_id, execution_id=7, position=2,
                                       ranges=[("", None, 40)])
    attempt = store_batches.claim(engine, batch_id, worker=worker, task_run_id=None)
    assert attempt == 1
    if done:
        assert store_batches.finish(engine, batch_id, attempt, {"done": 40})
    return batch_id


def test_with_no_pool_the_plans_run_in_process_and_that_is_said(engine):
    status = cluster_status(engine, None, api_url=None)
    assert status["mode"] == "in-process"
    assert status["pool"] is None
    assert status["message"] == IN_PROCESS
    assert (status["workers"], status["runs"], status["batches_in_flight"]) == ([], [], [])


def test_a_pool_with_no_workers_shows_the_pool_and_no_workers(prefect_api, engine):
    make_pool(prefect_api, "empty-pool")
    status = cluster_status(engine, "empty-pool", api_url=prefect_api)
    assert status["mode"] == "pool"
    assert status["prefect"] == {"api_url": prefect_api, "reachable": True, "error": None}
    assert status["pool"] == {"name": "empty-pool", "type": "process", "paused": False, "status": "NOT_READY"}
    assert status["workers"] == [] and status["runs"] == []
    assert "0 of 0 worker(s) online, 0 run(s) and 0 outcome batch(es) in flight" in status["message"]


def test_a_worker_that_heartbeats_is_listed_online_with_its_last_heartbeat(prefect_api, engine):
    make_pool(prefect_api, "beating-pool")
    with prefect_client(prefect_api) as client:
        client.send_worker_heartbeat("beating-pool", "host-a-101", heartbeat_interval_seconds=30)
    status = cluster_status(engine, "beating-pool", api_url=prefect_api)
    (worker,) = status["workers"]
    assert (worker["name"], worker["status"]) == ("host-a-101", "ONLINE")
    assert datetime.fromisoformat(worker["last_heartbeat"]).tzinfo is not None
    assert worker["seconds_since_heartbeat"] >= 0
    assert status["pool"]["status"] == "READY"
    assert "1 of 1 worker(s) online" in status["message"]


def test_running_and_due_flow_runs_are_shown_with_their_deployment_worker_and_job_not_future_ones(prefect_api,
                                                                                                   engine):
    make_pool(prefect_api, "busy-pool")
    with prefect_client(prefect_api) as client:
        flow_id = client.create_flow_from_name("assay-plan")
        deployment_id = client.create_deployment(flow_id, "photos", work_pool_name="busy-pool")
        running = client.create_flow_run_from_deployment(deployment_id, name="photos-now")
        client.set_flow_run_state(running.id, Running(), force=True)
        client.update_flow_run_labels(running.id, {"prefect.worker.name": "host-b-202"})
        due = client.create_flow_run_from_deployment(deployment_id, name="photos-waiting")  # scheduled for now
        later = datetime.now(timezone.utc) + timedelta(days=1)
        client.create_flow_run_from_deployment(deployment_id, name="photos-tomorrow",
                                               state=Scheduled(scheduled_time=later))
    job_id = store_jobs.create_job(engine, root="/data", kind="plan")
    store_jobs.set_flow_run(engine, job_id=job_id, flow_run_id=str(running.id))

    status = cluster_status(engine, "busy-pool", api_url=prefect_api)
    run, waiting = status["runs"]
    assert run["flow_run_id"] == str(running.id)
    assert (run["name"], run["state"], run["deployment"]) == ("photos-now", "Running", "photos")
    assert (run["worker"], run["job_id"]) == ("host-b-202", job_id)
    assert (waiting["flow_run_id"], waiting["deployment"], waiting["worker"]) == (str(due.id), "photos", None)
    assert "2 run(s)" in status["message"]


def test_a_batch_held_by_a_worker_is_in_flight_and_a_finished_one_counts_for_its_worker(prefect_api, engine):
    make_pool(prefect_api, "batch-pool")
    held = held_batch(engine, worker="host-c-303")
    held_batch(engine, worker="host-d-404", done=True)
    status = cluster_status(engine, "batch-pool", api_url=prefect_api)
    (batch,) = status["batches_in_flight"]
    assert batch["batch_id"] == held
    assert {k: batch[k] for k in ("execution_id", "position", "k", "entries", "worker", "attempt")} == {
        "execution_id": 7, "position": 2, "k": 1, "entries": 40, "worker": "host-c-303", "attempt": 1}
    assert batch["seconds_since_heartbeat"] >= 0
    assert status["batches_done_last_hour"] == {"host-d-404": 1}
    assert "1 outcome batch(es) in flight" in status["message"]


def test_a_pool_prefect_does_not_have_yet_is_said_to_be_made_by_serve_or_worker(prefect_api, engine):
    status = cluster_status(engine, "no-such-pool", api_url=prefect_api)
    assert status["pool"]["status"] == "not found"
    assert "does not exist" in status["message"] and "assay worker --pool no-such-pool" in status["message"]


def test_a_prefect_that_does_not_answer_is_said_and_the_stores_batches_still_shown(engine):
    held_batch(engine, worker="host-e-505")
    url = f"http://127.0.0.1:{free_port()}/api"
    status = cluster_status(engine, "any-pool", api_url=url)
    assert status["prefect"]["reachable"] is False and "ConnectError" in status["prefect"]["error"]
    assert f"Prefect's API at {url} does not answer" in status["message"]
    assert status["workers"] == [] and [b["worker"] for b in status["batches_in_flight"]] == ["host-e-505"]


def test_a_pool_with_no_prefect_api_configured_says_to_set_one(engine, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        status = cluster_status(engine, "any-pool", api_url=None)
    assert status["prefect"]["reachable"] is None
    assert "no Prefect API is configured" in status["message"] and "PREFECT_API_URL" in status["message"]

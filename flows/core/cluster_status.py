"""The state of a work pool, as `assay status` and the ``cluster-status`` tool show it: the pool and its workers (with
their last heartbeat) and the flow runs in flight on it, from Prefect's API; the outcome batches in flight and the
batches each worker finished in the last hour, from the store (``store.batches``), which every machine of the pool
shares.

Prefect knows the workers and the plan executions (flow runs); only the store knows the batches, which run as
background task runs of no work pool. A pool that Prefect cannot be asked about (no API configured, the API not
answering, the pool not made yet) is said in ``message``, beside what the store still tells; with no pool configured
the plans run inside `assay serve` (``mode: in-process``), which is said in a sentence, not raised.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

import httpx
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.filters import (DeploymentFilter, DeploymentFilterId, FlowRunFilter,
                                            FlowRunFilterExpectedStartTime, FlowRunFilterState,
                                            FlowRunFilterStateType, WorkPoolFilter, WorkPoolFilterName)
from prefect.client.schemas.objects import FlowRun, StateType, Worker
from prefect.client.schemas.sorting import DeploymentSort, FlowRunSort
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL, PREFECT_CLIENT_MAX_RETRIES, temporary_settings
from sqlalchemy.engine import Engine

from store import batches as store_batches
from store import jobs as store_jobs

__all__ = ["IN_PROCESS", "cluster_status"]

log = logging.getLogger(__name__)

IN_PROCESS = ("No work pool is configured: plan executions run in-process, inside `assay serve` (give it "
              "--work-pool NAME, or set cluster.work_pool, to run them on a Prefect work pool's workers).")
TIMEOUT_SECONDS = 5.0  # each call to Prefect's API: a status that hangs is worse than one that says "not answering"
WORKERS_SHOWN = 200  # the pool's workers listed (Prefect's API wants a limit)
RUNS_SHOWN = 100  # flow runs in flight listed (the oldest first)
BATCHES_SHOWN = 100  # batches in flight listed (the oldest first)
DONE_WINDOW_SECONDS = 3600.0  # "batches done per worker" counts those finished within the last hour
ACTIVE = [StateType.RUNNING, StateType.PENDING, StateType.CANCELLING, StateType.PAUSED]
WORKER_LABEL = "prefect.worker.name"  # the label a Prefect worker gives the flow runs it starts


def cluster_status(engine: Engine, pool: str | None, *, api_url: str | None) -> dict[str, Any]:
    """The pool ``pool`` (None: none configured) as Prefect's API at ``api_url`` (None: this process's
    ``PREFECT_API_URL``, from its environment or Prefect's settings) and the store behind ``engine`` see it:
    ``mode`` (``pool`` | ``in-process``), ``pool``, ``prefect`` (the API asked and whether it answered),
    ``workers``, ``runs``, ``batches_in_flight``, ``batches_done_last_hour`` and a one-sentence ``message``."""
    now = time.time()
    status: dict[str, Any] = {
        "mode": "pool" if pool else "in-process",
        "pool": None,
        "prefect": {"api_url": None, "reachable": None, "error": None},
        "workers": [],
        "runs": [],
        "batches_in_flight": _batches_in_flight(engine, now),
        "batches_done_last_hour": store_batches.by_worker(engine, since=now - DONE_WINDOW_SECONDS),
        "message": IN_PROCESS,
    }
    if not pool:
        return status
    url = api_url or os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value() or None
    status["prefect"]["api_url"] = url
    status["pool"] = {"name": pool, "type": None, "paused": None, "status": "unknown"}
    if url is None:
        status["message"] = (f"Work pool {pool}: no Prefect API is configured here (set PREFECT_API_URL to the API "
                             "the pool's server and workers use), so its workers and runs are unknown; the store's "
                             "batches are shown.")
        return status
    try:
        status.update(_from_prefect(engine, pool, url, now, batches=len(status["batches_in_flight"])))
        status["prefect"]["reachable"] = True
    except httpx.HTTPStatusError as exc:  # it answered, with an error (PrefectHTTPStatusError is one)
        log.warning("Prefect's API at %s refused a status call: %s", url, exc)
        status["prefect"].update(reachable=True, error=f"{type(exc).__name__}: {exc}")
        status["message"] = (f"Work pool {pool}: Prefect's API at {url} answered {exc.response.status_code} "
                             f"{exc.response.reason_phrase}, so its workers and runs are unknown; the store's batches "
                             "are shown.")
    except httpx.HTTPError as exc:  # refused, unresolvable, timed out
        log.info("Prefect's API at %s did not answer: %s", url, exc)
        status["prefect"].update(reachable=False, error=f"{type(exc).__name__}: {exc}")
        status["message"] = (f"Work pool {pool}: Prefect's API at {url} does not answer ({type(exc).__name__}), so "
                             "its workers and runs are unknown; the store's batches are shown.")
    return status


def _from_prefect(engine: Engine, pool: str, url: str, now: float, *, batches: int) -> dict[str, Any]:
    """What Prefect says of the pool: the pool, its workers, its runs in flight, and the sentence saying it (with
    the store's count of ``batches`` in flight)."""
    with temporary_settings(updates={PREFECT_API_URL: url, PREFECT_CLIENT_MAX_RETRIES: 0}):
        with get_client(sync_client=True, httpx_settings={"timeout": TIMEOUT_SECONDS}) as client:
            try:
                found = client.read_work_pool(pool)
            except ObjectNotFound:
                return {"pool": {"name": pool, "type": None, "paused": None, "status": "not found"},
                        "message": f"Work pool {pool} does not exist on Prefect at {url} yet: `assay serve "
                                   f"--work-pool {pool}` or `assay worker --pool {pool}` makes it when it starts."}
            listed = client.read_workers_for_work_pool(pool, offset=0, limit=WORKERS_SHOWN)  # the API refuses None
            workers = [_worker(w, now) for w in listed]
            runs = _runs(client, engine, pool)
    paused = bool(found.is_paused)
    state = found.status.value if found.status is not None else "unknown"
    described = {"name": found.name, "type": found.type, "paused": paused, "status": state}
    online = sum(1 for w in workers if w["status"] == "ONLINE")
    message = (f"Work pool {found.name} ({found.type}, {state.lower().replace('_', ' ')}"
               f"{', paused' if paused else ''}): {online} of {len(workers)} worker(s) online, {len(runs)} run(s) "
               f"and {batches} outcome batch(es) in flight.")
    return {"pool": described, "workers": workers, "runs": runs, "message": message}


def _worker(worker: Worker, now: float) -> dict[str, Any]:
    beat: datetime | None = worker.last_heartbeat_time
    return {"name": worker.name, "status": worker.status.value if worker.status is not None else "UNKNOWN",
            "last_heartbeat": beat.astimezone(timezone.utc).isoformat() if beat is not None else None,
            "seconds_since_heartbeat": round(max(0.0, now - beat.timestamp()), 1) if beat is not None else None}


def _runs(client: SyncPrefectClient, engine: Engine, pool: str) -> list[dict[str, Any]]:
    """The pool's flow runs in flight: running, pending (a worker is starting them), cancelling, paused, and the
    scheduled ones already due (waiting for a worker; a schedule's future runs are not in flight)."""
    on_pool = WorkPoolFilter(name=WorkPoolFilterName(any_=[pool]))
    active = client.read_flow_runs(
        work_pool_filter=on_pool, sort=FlowRunSort.START_TIME_ASC, limit=RUNS_SHOWN,
        flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=FlowRunFilterStateType(any_=ACTIVE))))
    due = client.read_flow_runs(
        work_pool_filter=on_pool, sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=RUNS_SHOWN,
        flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])),
            expected_start_time=FlowRunFilterExpectedStartTime(before_=datetime.now(timezone.utc))))
    flow_runs = [*active, *due][:RUNS_SHOWN]
    ids = list({r.deployment_id for r in flow_runs if r.deployment_id is not None})
    names: dict[UUID, str] = {}
    if ids:
        names = {d.id: d.name for d in client.read_deployments(  # a limit and a sort: the API refuses none
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=ids)), limit=len(ids),
            sort=DeploymentSort.NAME_ASC)}
    return [_run(r, names, engine) for r in flow_runs]


def _run(run: FlowRun, deployments: dict[UUID, str], engine: Engine) -> dict[str, Any]:
    """One flow run: its state, its plan's deployment, the worker that took it (Prefect's label) and the process it
    runs in (``host:pid``), and the store's run of it (its job, progress and stage), once the run recorded itself."""
    job = store_jobs.find_by_flow_run(engine, flow_run_id=str(run.id))
    state = run.state
    return {"flow_run_id": str(run.id), "name": run.name,
            "state": (state.name or state.type.value) if state is not None else "unknown",
            "deployment": deployments.get(run.deployment_id) if run.deployment_id is not None else None,
            "worker": (run.labels or {}).get(WORKER_LABEL), "process": run.infrastructure_pid,
            "job_id": job["id"] if job else None, "progress": job["progress"] if job else None,
            "stage": job["current_path"] if job else None}


def _batches_in_flight(engine: Engine, now: float) -> list[dict[str, Any]]:
    """The batches running now (any execution, oldest first), with the worker holding each and its lease's age."""
    return [{"batch_id": b["id"], "execution_id": b["execution_id"], "job_id": b["job_id"],
             "position": b["position"], "k": b["k"], "entries": b["entries"], "worker": b["worker"],
             "attempt": b["attempt"],
             "seconds_since_heartbeat": round(max(0.0, now - b["heartbeat_at"]), 1)
             if b["heartbeat_at"] is not None else None}
            for b in store_batches.in_flight(engine, limit=BATCHES_SHOWN)]

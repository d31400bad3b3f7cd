"""Cluster tools: cluster-status, the work pool that runs the plans (its workers, their last heartbeat, the runs in
flight) and where each outcome batch runs (flows.core.cluster_status; `assay status` prints the same)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from flows.core.cluster_status import cluster_status as read_cluster_status
from mcp_server.tools.common import READ_ONLY, ToolSet, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class PoolInfo(BaseModel):
    name: str = Field(description="the Prefect work pool the plans run on")
    type: str | None = Field(description="its worker type (process); null when Prefect could not be asked")
    paused: bool | None = Field(description="whether the pool is paused in Prefect (no new runs start)")
    status: str = Field(description="READY (a worker is online), NOT_READY, PAUSED, 'not found' (not made yet) or "
                                    "'unknown' (Prefect not asked or not answering)")


class PrefectApi(BaseModel):
    api_url: str | None = Field(description="the Prefect API asked; null with no pool or none configured")
    reachable: bool | None = Field(description="whether it answered; null when it was not asked")
    error: str | None = Field(description="what went wrong asking it, if anything")


class WorkerInfo(BaseModel):
    name: str = Field(description="the worker's name in the pool (`assay worker --name`, default <host>-<pid>)")
    status: str = Field(description="ONLINE or OFFLINE (no heartbeat for a while)")
    last_heartbeat: str | None = Field(description="its last heartbeat, ISO 8601 in UTC")
    seconds_since_heartbeat: float | None


class RunInfo(BaseModel):
    flow_run_id: str
    name: str = Field(description="the flow run's name in Prefect's UI")
    state: str = Field(description="Running, Pending, Cancelling, Paused, or Scheduled/Late (due, waiting for a "
                                   "worker)")
    deployment: str | None = Field(description="the plan's deployment the run is of")
    worker: str | None = Field(description="the worker that took it, when Prefect knows")
    process: str | None = Field(description="where it runs: host:pid, when its worker started it")
    job_id: int | None = Field(description="the store's run (job) of it, once it recorded itself (job-progress)")
    progress: float | None = Field(description="its progress in percent, from the store")
    stage: str | None = Field(description="what it is doing now, from the store")


class BatchInfo(BaseModel):
    batch_id: int
    execution_id: int = Field(description="the plan execution (plan-get) the batch belongs to")
    job_id: int
    position: int = Field(description="the outcome's position in the plan")
    k: int = Field(description="the batch's number within its outcome, from 1")
    entries: int = Field(description="entries in the batch")
    worker: str | None = Field(description="the worker holding it")
    attempt: int = Field(description="1, or more when it was handed to another worker (its first worker died or "
                                     "stopped)")
    seconds_since_heartbeat: float | None = Field(description="age of its lease; past cluster.lease_seconds it is "
                                                              "handed to another worker")


class ClusterStatus(BaseModel):
    mode: Literal["pool", "in-process"] = Field(
        description="pool: plan executions run on a Prefect work pool's workers; in-process: inside this server")
    message: str = Field(description="the state in one sentence")
    pool: PoolInfo | None = Field(description="the work pool; null in-process")
    prefect: PrefectApi
    workers: list[WorkerInfo] = Field(description="the pool's workers, as Prefect knows them")
    runs: list[RunInfo] = Field(description="plan executions (flow runs) in flight on the pool")
    batches_in_flight: list[BatchInfo] = Field(description="outcome batches running now, with the worker on each "
                                                           "(from the store, oldest first)")
    batches_done_last_hour: dict[str, int] = Field(description="outcome batches each worker finished in the last "
                                                               "hour")


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "cluster-status", READ_ONLY)
    def cluster_status() -> ClusterStatus:
        """Show where plans run: the Prefect work pool (cluster.work_pool; none: inside this server), its workers
        with their last heartbeat, the plan executions in flight on it, the outcome batches running now and the
        worker on each, and the batches each worker finished in the last hour. Read-only."""
        return ClusterStatus.model_validate(read_cluster_status(app.engine, app.settings.cluster.work_pool,
                                                                api_url=None))

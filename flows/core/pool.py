"""A Prefect work pool that runs the plans' executions: the pool itself (made when missing, of type ``process``),
the plans' deployments on it, and the runs handed to it.

With ``cluster.work_pool`` set, ``assay serve`` deploys each plan on the pool instead of serving it in-process
(:class:`WorkPool` has the ``add``/``remove``/``deployment_id`` of :class:`flows.core.deployments.Deployments`), so
a run pressed in Prefect's UI, a schedule's run and an agent's ``plan-execute`` are all flow runs that a worker of the
pool (``assay worker``) picks up. An agent's run is handed over by :meth:`WorkPool.run`: a flow run of the plan's
deployment, Scheduled, with the run's id (never the store's URL, which may hold a password: the workers have their
own); then the caller waits on the run's row in the store, which the worker keeps current, forwarding its progress,
and a Cancel sets the row's cancel flag, which the worker's flow reads. A flow run that Prefect reports crashed,
failed or cancelled while the row still says running ends the row (its worker died before it could).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Callable, Iterator, Sequence
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.deployments.runner import EntrypointType, RunnerDeployment
from prefect.exceptions import ObjectNotFound
from prefect.schedules import Schedule
from prefect.states import Cancelled, Crashed
from prefect.utilities.asyncutils import run_coro_as_sync
from prefect.workers.process import ProcessWorker
from sqlalchemy.engine import Engine

from store import jobs as store_jobs

log = logging.getLogger(__name__)

WAIT_SECONDS = 0.2  # how often a waiting caller reads the run's row (one indexed SELECT)
STATE_EVERY = 25  # ... and every this many reads (5 s), the flow run's state in Prefect
RESUBMISSIONS = 2  # a run whose flow run crashed (its worker stopped, its machine lost) is handed out this often again
PROGRESS = Callable[[dict[str, Any]], None]
# a worker pipes its flow runs' output through itself by default: a flow run then dies of a broken pipe when its
# worker does, though its batches could go on elsewhere. Not streamed, it outlives its worker; its logs are in Prefect
JOB_VARIABLES = {"stream_output": False}


def ensure_pool(name: str) -> None:
    """Make work pool ``name`` (type process, Prefect's default job template) unless it exists."""
    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(name)
            return
        except ObjectNotFound:
            pass
        template = ProcessWorker.get_default_base_job_template()
        client.create_work_pool(WorkPoolCreate(name=name, type="process", base_job_template=template,
                                               description="assay: plan executions and their outcome batches"))
        log.info("made work pool %s (type process)", name)


class WorkPool:
    """The plans' deployments on work pool ``name`` and the runs handed to it."""

    def __init__(self, name: str, *, lease_seconds: float = 4.0) -> None:
        self.name = name
        self.lease = lease_seconds
        self._ids: dict[str, UUID] = {}
        self._lock = threading.Lock()

    def start(self, initial: list[Any]) -> None:
        ensure_pool(self.name)
        for spec in initial:
            self.add(*spec)

    def stop(self) -> None:
        """Nothing runs here: the pool's runs go on on its workers."""

    def add(self, flow: Any, name: str, parameters: dict[str, Any], description: str, paused: bool = False,
            schedules: Sequence[Schedule] = ()) -> UUID:
        """Create (or update) deployment ``name`` of ``flow`` on the pool."""
        deployment = RunnerDeployment.from_flow(
            flow, name=name, parameters=parameters, description=description, paused=paused,
            schedules=list(schedules), work_pool_name=self.name, entrypoint_type=EntrypointType.MODULE_PATH,
            enforce_parameter_schema=False, job_variables=JOB_VARIABLES)
        deployment_id = run_coro_as_sync(deployment.aapply(work_pool_name=self.name))
        assert deployment_id is not None
        with self._lock:
            self._ids[f"{flow.name}/{name}"] = deployment_id
        return deployment_id

    def remove(self, flow: Any, name: str) -> None:
        with self._lock:
            deployment_id = self._ids.pop(f"{flow.name}/{name}", None)
        if deployment_id is None:
            return
        try:
            with get_client(sync_client=True) as client:
                client.delete_deployment(deployment_id)
        except Exception:  # noqa: BLE001 (the deployment stays in the UI; runs of it find no plan)
            log.warning("deleting deployment %s failed", name, exc_info=True)

    def deployment_id(self, flow: Any, name: str) -> UUID | None:
        with self._lock:
            return self._ids.get(f"{flow.name}/{name}")

    def run(self, engine: Engine, job: dict[str, Any], flow: Any, name: str, parameters: dict[str, Any], *,
            cancel: threading.Event, on_progress: PROGRESS | None,
            finish_failed: Callable[[Engine, int, str], None]) -> None:
        """Hand run ``job`` to the pool as a flow run of deployment ``name`` and wait until its row is finished."""
        deployment_id = self.deployment_id(flow, name)
        if deployment_id is None:
            raise RuntimeError(f"no deployment {name!r} on work pool {self.name}")
        job_id = job["id"]
        store_jobs.set_runs_on(engine, job_id=job_id, runs_on=f"pool:{self.name}")
        for attempt in range(1 + RESUBMISSIONS):
            with get_client(sync_client=True) as client:
                flow_run = client.create_flow_run_from_deployment(deployment_id, parameters=parameters)
            store_jobs.set_flow_run(engine, job_id=job_id, flow_run_id=str(flow_run.id))
            log.info("run %s handed to work pool %s as flow run %s%s", job_id, self.name, flow_run.id,
                     f" (again: attempt {attempt + 1})" if attempt else "")
            if not self._wait(engine, job_id, flow_run.id, cancel, on_progress, finish_failed,
                              last=attempt == RESUBMISSIONS):
                return

    def _wait(self, engine: Engine, job_id: int, flow_run_id: UUID, cancel: threading.Event,
              on_progress: PROGRESS | None, finish_failed: Callable[[Engine, int, str], None], *,
              last: bool) -> bool:
        """Follow the run's row until it is finished; True when its flow run crashed (its worker was stopped or
        its machine lost, not a Cancel) and the run should be handed to the pool again."""
        seen: tuple[Any, ...] = ()
        reads = 0
        cancelled_in_prefect = False
        while True:
            job = store_jobs.get_job(engine, job_id=job_id)
            if job["status"] not in store_jobs.ACTIVE:
                return not last and job["status"] == "cancelled" and not job["cancel_requested"] \
                    and not cancel.is_set() and _crashed_in_prefect(flow_run_id)
            if on_progress is not None and (job["progress"], job["current_path"]) != seen:
                seen = (job["progress"], job["current_path"])
                on_progress({"stage": job["current_path"] or "waiting for a worker", "percent": job["progress"]})
            reads += 1
            if job["status"] == "running" and job["heartbeat_at"] is not None \
                    and time.time() - job["heartbeat_at"] > self.lease and not last and not cancel.is_set():
                # the flow's machine is gone (or its process): Prefect would show it Running for good
                _mark_crashed(flow_run_id, f"its worker stopped renewing the run's heartbeat for {self.lease:g} s")
                if store_jobs.reopen_lost(engine, job_id=job_id):
                    return True
            if cancel.is_set() and not cancelled_in_prefect:
                cancelled_in_prefect = _cancel_if_not_started(flow_run_id)
            if reads % STATE_EVERY == 0:
                ended = _ended_in_prefect(flow_run_id)
                if ended is not None and store_jobs.get_job(engine, job_id=job_id)["status"] in store_jobs.ACTIVE:
                    if not last and not cancel.is_set() and _crashed_in_prefect(flow_run_id, wait=0):
                        return True
                    finish_failed(engine, job_id, ended)
                    return False
            time.sleep(WAIT_SECONDS)


def _mark_crashed(flow_run_id: UUID, why: str) -> None:
    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(flow_run_id, Crashed(message=why), force=True)
    except Exception:  # noqa: BLE001 (only the UI's view of the lost run lags)
        log.warning("marking flow run %s crashed failed", flow_run_id, exc_info=True)


@contextlib.contextmanager
def heartbeat(engine: Engine, job_id: int, every: float) -> Iterator[None]:
    """While the block runs, renew run ``job_id``'s heartbeat every ``every`` seconds (a flow on a pool's worker:
    the process that handed it over hands it out again when it stops)."""
    stop = threading.Event()

    def renew() -> None:
        while True:
            try:
                store_jobs.heartbeat(engine, job_id=job_id)
            except Exception:  # noqa: BLE001 (the store away for a moment: the next renewal tries again)
                log.warning("renewing the heartbeat of run %s failed", job_id, exc_info=True)
            if stop.wait(every):
                return

    thread = threading.Thread(target=renew, name=f"assay-run-heartbeat-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _crashed_in_prefect(flow_run_id: UUID, wait: float = 15.0) -> bool:
    """Whether the flow run ended Crashed (its process stopped under it), waiting up to ``wait`` seconds for it to
    be marked final."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with get_client(sync_client=True) as client:
                state = client.read_flow_run(flow_run_id).state
        except Exception:  # noqa: BLE001 (Prefect away: not known to have crashed)
            return False
        if state is not None and state.is_final():
            return state.is_crashed()
        if time.monotonic() > deadline:
            return False
        time.sleep(WAIT_SECONDS)


def _cancel_if_not_started(flow_run_id: UUID) -> bool:
    """A run no worker took yet is cancelled in Prefect (one running reads the row's cancel flag)."""
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
            if state is not None and (state.is_scheduled() or state.is_pending()):
                client.set_flow_run_state(flow_run_id, Cancelled(message="cancelled through assay"), force=True)
        return True
    except Exception:  # noqa: BLE001 (Prefect away for a moment: tried again on the next read)
        log.warning("cancelling flow run %s failed", flow_run_id, exc_info=True)
        return False


def _ended_in_prefect(flow_run_id: UUID) -> str | None:
    """Why the flow run ended without finishing its row (crashed, failed, cancelled), or None while it may still."""
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
    except Exception:  # noqa: BLE001 (Prefect away for a moment: the row is what counts)
        return None
    if state is None or not state.is_final() or state.is_completed():
        return None
    how = (state.name or state.type.value).lower()
    return f"the flow run on the work pool ended {how}: {state.message or 'no message'}"

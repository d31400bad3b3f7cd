"""Deployments of assay's flows, served from the ``assay serve`` process, so that a person can run, retry and cancel
them from Prefect's UI.

A Prefect :class:`~prefect.runner.Runner` runs in a thread of its own (with its own event loop): it creates the
deployments (one per plan, named after it, and one for index and classify jobs), polls Prefect for their scheduled
runs — a Run pressed in the UI, a Retry of a failed run, a schedule — and runs each in a *spawned* subprocess
(Prefect's ``run_flow_in_subprocess``: never a fork of this threaded process), which it owns: it kills it on a
cancel from the UI and when the server stops. Such a run finds everything else in the store, through the settings
this process exported to its environment (data dir, store URL, roots), so it does what the same run does when an
agent starts it.

A Cancel of a run the Runner started (the UI's, or the Runner's own as the server stops): the Runner sends the
subprocess SIGTERM (SIGKILL after a 30 s grace), and once it is gone runs the flow's ``on_cancellation`` hooks here
and marks the run Cancelled. The store's rows are finished by whoever can first, never by two at once: the
subprocess itself, where the SIGTERM arrives as Prefect's ``TerminationSignal`` (the plan flow ends the execution as
cancelled with what it counted, and ends its worker processes rather than wait for them: flows/plans/flow.py); then
the hook, here, which finishes what a subprocess killed after the grace (or crashed) left running. A flow's own poll
of its run's state (``flows.core.prefect.cancel_requested_in_prefect``) is for the runs executed in this process,
which no Runner watches; in a subprocess it may see the Cancel first, to the same end.

A run an agent starts is a flow run of the plan's deployment too (``flow_run_for``), executed in this process: the UI
shows it under the deployment, and a Retry of it, once failed, is run by the Runner from its parameters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.deployments.runner import EntrypointType
from prefect.client.schemas.filters import (
    DeploymentFilter, DeploymentFilterId, FlowRunFilter, FlowRunFilterState, FlowRunFilterStateType)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.client.schemas.sorting import FlowRunSort
from prefect.client.schemas.responses import SetStateStatus
from prefect.runner import Runner
from prefect.schedules import Schedule
from prefect.states import Cancelled, Pending

log = logging.getLogger(__name__)


class DeploymentSpec(NamedTuple):
    """One deployment of a flow, in the order :meth:`Deployments.add` (and a work pool's ``add``) takes it; a plain
    5-tuple (flow, name, parameters, description, paused) is one without schedules."""

    flow: Any
    name: str
    parameters: dict[str, Any]
    description: str
    paused: bool = False
    # Prefect's schedules of the deployment; none clears the ones it had (a plan whose schedule was removed)
    schedules: tuple[Schedule, ...] = ()


class DeploymentTarget(Protocol):
    """Where deployments are made and served: this process's Runner (:class:`Deployments`) or a work pool's
    workers (``flows.core.pool.WorkPool``)."""

    def add(self, flow: Any, name: str, parameters: dict[str, Any], description: str, paused: bool = False,
            schedules: Sequence[Schedule] = ()) -> UUID | None: ...

    def remove(self, flow: Any, name: str) -> None: ...

    def deployment_id(self, flow: Any, name: str) -> UUID | None: ...


def cancel_waiting_runs(deployment_id: UUID, reason: str) -> int:
    """Cancel the runs of ``deployment_id`` that are scheduled and not started, late ones included; how many.

    Prefect, pausing a deployment, deletes only its runs scheduled in the future: runs already due (late, on a busy
    machine or behind a short interval) would still start. A run taken meanwhile refuses the Cancel or ends at
    once; either way nothing new starts."""
    cancelled = 0
    with get_client(sync_client=True) as client:
        while True:  # a page at a time: a cancelled run leaves the filter
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id])),
                flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                    type=FlowRunFilterStateType(any_=[StateType.SCHEDULED]))),
                sort=FlowRunSort.EXPECTED_START_TIME_ASC, limit=200)
            accepted = sum(client.set_flow_run_state(run.id, Cancelled(message=reason)).status
                           == SetStateStatus.ACCEPT for run in runs)
            cancelled += accepted
            if len(runs) < 200 or not accepted:
                break
    return cancelled


START_TIMEOUT = 120.0  # seconds for the Runner to create its first deployments on a busy machine
STOP_TIMEOUT = 5.0  # seconds for it to stop polling and kill the runs it started


class Deployments:
    """The Runner thread and the deployments it serves; ``add``/``remove`` may be called from any thread."""

    def __init__(self, *, name: str | None = None) -> None:
        self.name = name or f"assay-{os.getpid()}"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: Runner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._ids: dict[str, UUID] = {}
        self._pending: list[DeploymentSpec] = []  # added before the Runner was up: created when it is
        self._lock = threading.Lock()

    # -- life --

    def start(self, initial: Iterable[tuple[Any, ...]]) -> None:
        """Start the Runner with ``initial`` deployments (each a :class:`DeploymentSpec` or the tuple of its first
        fields); returns once they exist."""
        specs = [DeploymentSpec(*spec) for spec in initial]
        self._thread = threading.Thread(target=self._main, args=(specs,), name="assay-deployments", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise RuntimeError(f"Prefect's runner did not start within {START_TIMEOUT:.0f} s")
        if self._failed is not None:
            raise RuntimeError(f"serving deployments failed: {self._failed}") from self._failed

    def _main(self, initial: list[DeploymentSpec]) -> None:
        try:
            asyncio.run(self._serve(initial))
        except asyncio.CancelledError:
            pass  # stopped
        except BaseException as exc:  # noqa: BLE001 (reported to start(), or logged when it happens later)
            if not self._ready.is_set():
                self._failed = exc
                self._ready.set()
            else:
                log.exception("Prefect's runner stopped")

    async def _serve(self, initial: list[DeploymentSpec]) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._runner = Runner(name=self.name, pause_on_shutdown=False, query_seconds=2)
        for spec in initial:
            await self._add(*spec)
        while True:
            with self._lock:
                pending, self._pending = self._pending, []
                if not pending:
                    self._ready.set()
                    break
            for spec in pending:
                await self._add(*spec)
        await self._runner.start()

    async def _add(self, flow: Any, name: str, parameters: dict[str, Any], description: str,
                   paused: bool = False, schedules: tuple[Schedule, ...] = ()) -> UUID:
        assert self._runner is not None
        # schedules given even when empty: Prefect then replaces the deployment's schedules (clears them)
        deployment_id = await self._runner.aadd_flow(
            flow, name=name, parameters=parameters, description=description, paused=paused,
            schedules=list(schedules), entrypoint_type=EntrypointType.MODULE_PATH, enforce_parameter_schema=False)
        with self._lock:
            self._ids[f"{flow.name}/{name}"] = deployment_id
        return deployment_id

    def add(self, flow: Any, name: str, parameters: dict[str, Any], description: str,
            paused: bool = False, schedules: Sequence[Schedule] = ()) -> UUID | None:
        """Create (or update) deployment ``name`` of ``flow`` with ``schedules`` (none: it has none) and serve it;
        before the Runner is up, it is created when the Runner starts (None then)."""
        spec = DeploymentSpec(flow, name, parameters, description, paused, tuple(schedules))
        with self._lock:
            if not self._ready.is_set():
                self._pending.append(spec)
                return None
        if self._loop is None:
            return None
        future = asyncio.run_coroutine_threadsafe(self._add(*spec), self._loop)
        return future.result(timeout=60)

    def flow_run(self, flow: Any, name: str, parameters: dict[str, Any]) -> FlowRun | None:
        """A flow run of deployment ``name`` with ``parameters``, created Pending (so the Runner leaves it alone)
        for this process to execute: the UI lists it under the deployment and can retry it from its parameters.
        None when there is no such deployment (a command-line process serves none)."""
        deployment_id = self.deployment_id(flow, name)
        if deployment_id is None:
            return None
        with get_client(sync_client=True) as client:
            return client.create_flow_run_from_deployment(deployment_id, parameters=parameters, state=Pending())

    def remove(self, flow: Any, name: str) -> None:
        """Delete deployment ``name`` of ``flow`` (a deleted plan's)."""
        with self._lock:
            deployment_id = self._ids.pop(f"{flow.name}/{name}", None)
        if deployment_id is None or self._loop is None:
            return

        async def delete() -> None:
            async with get_client() as client:
                await client.delete_deployment(deployment_id)

        try:
            asyncio.run_coroutine_threadsafe(delete(), self._loop).result(timeout=30)
        except Exception:  # noqa: BLE001 (the deployment stays in the UI; runs of it find no plan)
            log.warning("deleting deployment %s failed", name, exc_info=True)

    def deployment_id(self, flow: Any, name: str) -> UUID | None:
        with self._lock:
            return self._ids.get(f"{flow.name}/{name}")

    def stop(self) -> None:
        """Stop polling, cancel the runs the Runner started (it kills their subprocesses) and end the thread; a
        Runner that does not finish its own clean-up in time is left to end with the process (its thread is a
        daemon), so a server never hangs on its way out."""
        if self._loop is not None and self._runner is not None and self._runner.started:
            try:
                asyncio.run_coroutine_threadsafe(self._runner.astop(), self._loop).result(timeout=STOP_TIMEOUT)
            except Exception:  # noqa: BLE001 (shutting down: what could not stop is logged)
                log.warning("stopping Prefect's runner failed", exc_info=True)
        if self._loop is not None and self._task is not None:  # a stop that came before the Runner's loops began
            self._loop.call_soon_threadsafe(self._task.cancel)
        if self._thread is not None:
            self._thread.join(timeout=STOP_TIMEOUT)
            if self._thread.is_alive():
                log.warning("Prefect's runner did not stop within %.0f s; it ends with the process", STOP_TIMEOUT)

"""Prefect's process worker, starting its flow runs warm: each flow run is a fork of the worker's warm starter
(:mod:`flows.core.warm_starter`, Prefect and assay imported once) reached through a tiny launcher
(:mod:`flows.core.warm_launch`), instead of a fresh ``python -m prefect.engine`` that spends 3-5 s importing before
the plan's run begins. Everything else is Prefect's: the worker's polling and heartbeats, the flow run's states, the
Runner's cancel (its SIGTERM reaches the flow run through the launcher), a crashed run's report.

A deployment's own ``command`` job variable is left alone (the flow run starts as it says); so is every flow run when
the starter could not start (the launcher then becomes ``python -m prefect.engine``, a cold start).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

from prefect.utilities.processutils import command_to_string
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker

from flows.core.warm_launch import SOCKET_ENV

log = logging.getLogger(__name__)

READY_SECONDS = 60.0  # how long the starter may take to import what it preloads


class WarmJobConfiguration(ProcessJobConfiguration):
    """A flow run's job: the launcher as its command, unless the deployment set one, or no starter runs."""

    def prepare_for_flow_run(self, flow_run: Any, deployment: Any = None, flow: Any = None, work_pool: Any = None,
                             worker_name: str | None = None, worker_id: Any = None) -> None:
        if self.command is None and os.environ.get(SOCKET_ENV):
            self.command = command_to_string([sys.executable, "-m", "flows.core.warm_launch"])
        super().prepare_for_flow_run(flow_run, deployment, flow, work_pool, worker_name, worker_id=worker_id)


class WarmProcessWorker(ProcessWorker):
    """A ``process`` worker (the pool's type) whose flow runs start warm."""

    job_configuration = WarmJobConfiguration

    @classmethod
    def __dispatch_key__(cls) -> str | None:
        return "assay-warm-process"  # Prefect's registry of worker types keeps ``process`` for its own worker


@contextlib.contextmanager
def warm_starter(preload: Sequence[str]) -> Iterator[Path | None]:
    """While the block runs, a warm starter with ``preload`` imported, its socket in ``ASSAY_WARM_SOCKET`` (which
    the flow runs' environment inherits); yields the socket's path, or None when the starter failed to start (the
    flow runs then start cold, and the log says why)."""
    with tempfile.TemporaryDirectory(prefix="assay-warm-") as folder:
        path = Path(folder) / "starter.sock"
        proc = subprocess.Popen([sys.executable, "-m", "flows.core.warm_starter", str(path), str(os.getpid()),
                                 *preload], env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
                                stdin=subprocess.DEVNULL)
        started = time.monotonic()
        while not path.exists() and proc.poll() is None and time.monotonic() - started < READY_SECONDS:
            time.sleep(0.05)
        if not path.exists():
            log.warning("the warm starter did not start (exit %s); flow runs start cold", proc.poll())
            _stop(proc)
            yield None
            return
        log.info("warm starter ready in %.1f s: flow runs start as forks of it", time.monotonic() - started)
        os.environ[SOCKET_ENV] = str(path)
        try:
            yield path
        finally:
            os.environ.pop(SOCKET_ENV, None)
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""`assay worker`: one machine's share of a work pool's work — the plan executions the pool's deployments start, and
the outcome batches the executions spread.

One process runs two of Prefect's own workers side by side, in one event loop:

- a process worker on the pool (Prefect's ``ProcessWorker``, :class:`flows.core.warm_worker.WarmProcessWorker`):
  it heartbeats to Prefect (the UI and `assay status` list it), picks up the flow runs of the plans' deployments — an
  agent's plan-execute, a schedule's run, a Run pressed in the UI — and runs each in a process that inherits this
  process's environment (the store's URL, the cache folder, the pool's name: the flow run's parameters carry none of
  them). That process is a fork of a warm starter that imported Prefect and assay once, so a run begins within
  milliseconds, not after 3-5 s of imports (``--cold-starts``: a fresh interpreter per run, as Prefect's own);
- a task worker (``prefect.task_worker.TaskWorker``) serving the task ``assay-batches``: the shares of outcome
  batches an execution on any worker hands out as background task runs (:mod:`flows.plans.spread`), one at a time
  here; a share does the execution's pending batches one after another.

`prefect worker start --pool NAME --type process` alone would run the executions but never their batches: they need
the task worker, which only assay can serve. On SIGTERM (or Ctrl-C) the worker stops taking batches, ends the one in
hand between two pieces and hands it back (another worker takes it at once), then exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from typing import Any

from prefect.context import refresh_global_settings_context
from prefect.task_worker import TaskWorker

from flows.core.pool import ensure_pool
from flows.core.settings import export_for_runs
from flows.core.warm_worker import WarmProcessWorker, warm_starter
from flows.plans.spread import STOPPING, share_task
from flows.workers import spawn_only
from mcp_server.cli.common import ERROR, OK
from mcp_server.cli.settings import settings_from
from mcp_server.config import prepare_environment
from store.engine import get_engine

log = logging.getLogger("assay")

# what a flow run of a plan's deployment imports (seen in one: its engine, the plan flow, handing out batches,
# the store's driver), so a forked run imports nothing (1.4 s here when these were left to the run)
PRELOAD = ("prefect.flow_engine", "prefect.task_engine", "prefect.task_worker", "prefect.concurrency.sync",
           "prefect.utilities.visualization", "flows.plans.flow", "psycopg", "sqlalchemy.dialects.postgresql.psycopg",
           "store.migrate", "store.migrations.baseline", "anyio._backends._asyncio", "encodings.idna")
GRACE_SECONDS = 30.0  # a batch in hand gets this long to reach the end of a piece and hand itself back


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    worker = sub.add_parser("worker", help=summary, description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    worker.add_argument("--pool", required=True, metavar="NAME", help="the Prefect work pool (as `assay serve "
                                                                       "--work-pool NAME`); made when missing")
    worker.add_argument("--name", metavar="NAME", help="this worker's name in the pool (default: <host>-<pid>)")
    worker.add_argument("--cache-dir", metavar="DIR", help="the artifact cache every machine of the pool shares "
                                                           "(default: cache/ in the data dir: one machine only)")
    worker.add_argument("--cold-starts", action="store_true",
                        help="start each flow run in a fresh interpreter, as `prefect worker` does (default: a fork "
                             "of a process that has Prefect and assay imported: 3-5 s sooner)")
    worker.add_argument("--batches", type=int, default=1, metavar="N",
                        help="outcome batches this worker runs at once (default 1: a batch uses its own pool of "
                             "processes, one per core it may use)")
    common(worker)
    return worker


def run(args: argparse.Namespace) -> int:
    spawn_only()
    if not os.environ.get("PREFECT_API_URL"):
        print("assay worker: set PREFECT_API_URL to the Prefect server every machine of the pool uses, e.g. "
              "PREFECT_API_URL=http://prefect-host:4200/api", file=sys.stderr)
        return ERROR
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    os.environ["ASSAY_WORKER_NAME"] = name  # the flow runs this worker starts say where they ran
    os.environ["ASSAY_WORK_POOL"] = args.pool
    settings = settings_from(args, work_pool=args.pool, cache_dir=args.cache_dir)
    prepare_environment(settings)
    export_for_runs(data_dir=settings.data_dir, store_url=settings.db_url, roots=settings.effective_roots)
    os.environ.setdefault("PREFECT_WORKER_QUERY_SECONDS", "1")  # a plan's run starts within 1 s, not Prefect's 10
    refresh_global_settings_context()  # Prefect read its settings when this module imported it: read them again
    get_engine(settings.db_url).dispose()  # the store answers (and has its tables) before anything is taken
    if settings.cluster.cache_dir is None:
        log.warning("no --cache-dir: thumbnails and batch parameters stay on this machine (one machine only)")
    ensure_pool(args.pool)
    log.info("assay worker %s on pool %s; store %s; cache %s", name, args.pool, _safe(settings.db_url),
             settings.cluster.cache_dir or settings.data_dir / "cache")
    with contextlib.ExitStack() as stack:
        if not args.cold_starts:
            stack.enter_context(warm_starter(PRELOAD))
        try:
            asyncio.run(_serve(args.pool, name, max(1, args.batches)))
        except KeyboardInterrupt:
            pass
    return OK


def _safe(url: str) -> str:
    """The store's URL without its password (for the log)."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, credentials = head.partition("://")
    return f"{scheme}://{credentials.split(':')[0]}:***@{tail}"


async def _serve(pool: str, name: str, batches: int) -> None:
    class BatchWorker(TaskWorker):
        def handle_sigterm(self, signum: int, frame: object) -> None:  # Prefect's own exits at once
            stop()

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def stop(*_: Any) -> None:
        STOPPING.set()
        loop.call_soon_threadsafe(stopping.set)

    tasks = BatchWorker(share_task, limit=batches)
    process = WarmProcessWorker(work_pool_name=pool, name=name)
    running = [asyncio.create_task(tasks.astart(), name="task worker"),
               asyncio.create_task(process.start(), name="process worker")]
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    await stopping.wait()
    log.info("assay worker %s stopping: no more batches taken; the one in hand ends between two pieces", name)
    running[0].cancel()  # the task worker: its subscription ends, the batch in hand finishes or is handed back
    await asyncio.wait([running[0]], timeout=GRACE_SECONDS)
    running[1].cancel()  # the process worker: the flow runs it started end with it, and are handed out again
    await asyncio.gather(*running, return_exceptions=True)

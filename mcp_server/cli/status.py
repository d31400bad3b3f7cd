"""`assay status`: where the plans run, as the ``cluster-status`` tool shows it (flows.core.cluster_status) — the
work pool and its workers with their last heartbeat, the runs in flight on it, the outcome batches running now and
the worker on each, the batches each worker finished in the last hour — printed as short tables (``--json``: the
raw result).

It needs the store and Prefect's API, not the application: the store from the settings (``--database-url``, the
environment, ``--config``), the pool from ``--work-pool`` or ``cluster.work_pool``, the API from ``PREFECT_API_URL``
or else the one a server on this data dir recorded. Exit status 0 when Prefect answered (or no pool is configured),
1 when the store failed or Prefect could not tell of the pool (not answering, the pool not made yet).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from flows.core.cluster_status import cluster_status
from flows.core.prefect import recorded_api
from mcp_server.cli.common import NOTHING, OK, out, say
from mcp_server.cli.settings import settings_from
from mcp_server.cli.users import table
from store.engine import get_engine

EPILOG = """examples:
  assay status                                  # the pool of cluster.work_pool / ASSAY_WORK_POOL, if any
  PREFECT_API_URL=http://prefect-host:4200/api assay status --work-pool assay \\
      --database-url postgresql+psycopg://assay:assay@db-host/assay
  assay status --json                           # the raw result, as the cluster-status tool returns it"""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    status = sub.add_parser("status", help=summary, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                            description="Show the work pool the plans run on, its workers and their last heartbeat, "
                                        "the runs in flight on it and where each outcome batch runs.")
    status.add_argument("--work-pool", metavar="NAME", help="the pool to show (default: cluster.work_pool)")
    status.add_argument("--json", action="store_true", help="print the result as JSON")
    common(status)
    return status


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args, work_pool=args.work_pool)
    api_url = os.environ.get("PREFECT_API_URL") or recorded_api(settings.data_dir)
    try:
        engine = get_engine(settings.db_url)
        try:
            status = cluster_status(engine, settings.cluster.work_pool, api_url=api_url)
        finally:
            engine.dispose()
    except SQLAlchemyError as exc:
        say(f"assay: the store failed: {exc.__class__.__name__}: {getattr(exc, 'orig', None) or exc}")
        return NOTHING
    out(json.dumps(status, indent=2) if args.json else render(status))
    known = status["mode"] == "in-process" or (status["prefect"]["reachable"] and not status["prefect"]["error"]
                                               and status["pool"]["status"] != "not found")
    return OK if known else NOTHING


def render(status: dict[str, Any]) -> list[str]:
    """The status as a person reads it: its sentence, then a table for each of workers, runs and batches that has
    rows."""
    lines = [status["message"]]
    done = status["batches_done_last_hour"]
    if status["workers"]:
        lines += ["", *table(("WORKER", "STATUS", "LAST HEARTBEAT", "AGO", "BATCHES/1H"),
                             [(w["name"], w["status"], w["last_heartbeat"] or "-", _ago(w["seconds_since_heartbeat"]),
                               str(done.get(w["name"], 0))) for w in status["workers"]])]
    others = sorted(set(done) - {w["name"] for w in status["workers"]})
    if others:  # workers Prefect does not list (gone, or no pool asked) that finished batches in the last hour
        lines += ["", *table(("WORKER (BATCHES ONLY)", "BATCHES/1H"), [(name, str(done[name])) for name in others])]
    if status["runs"]:
        lines += ["", *table(("RUN", "STATE", "DEPLOYMENT", "WORKER", "JOB", "PROGRESS", "STAGE"),
                             [(r["name"], r["state"], r["deployment"] or "-", r["worker"] or r["process"] or "-",
                               _or_dash(r["job_id"]), _percent(r["progress"]), r["stage"] or "-")
                              for r in status["runs"]])]
    if status["batches_in_flight"]:
        lines += ["", *table(("BATCH", "EXECUTION", "OUTCOME", "K", "ENTRIES", "WORKER", "ATTEMPT", "LEASE AGE"),
                             [(str(b["batch_id"]), str(b["execution_id"]), str(b["position"]), str(b["k"]),
                               str(b["entries"]), b["worker"] or "-", str(b["attempt"]),
                               _ago(b["seconds_since_heartbeat"])) for b in status["batches_in_flight"]])]
    return lines


def _ago(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f} s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)

"""The soak (issue 25): one ``assay serve --transport http`` under concurrent MCP clients for a set time, a watcher's
folder changing all along; what the calls got back, and whether the server stayed the same size and sound.

    .venv/bin/python bench/soak.py [--seconds 600] [--clients 20] [--warm-up 60] [--database-url URL]
                                   [--prefect | --no-prefect] [--only SLOTS] [--quick] [--work DIR]
                                   [--out bench/out/soak.md]
                                   [--json FILE]

1. A small tree is generated fresh under the work dir (bench/soak_corpus.py: topic documents as Markdown, text and
   PDFs, pictures, a folder per client, the watched folder), and ``assay serve --transport http`` starts on it with a
   data dir of its own (SQLite; ``--database-url``: that PostgreSQL database, which should be empty).
2. Set-up over MCP (timed, not in the load's figures): ``index`` of the tree, ``index_files`` of the documents (the
   semantic collection), each client's plan and set, the continuous plan on the watched folder run once.
3. The load (bench/soak_load.py): ``--clients`` MCP sessions over Streamable HTTP, as asyncio tasks, each cycling
   reads, searches, a plan run, set changes and file moves of its own, opening a new session every
   ``--calls-per-session`` calls; a thread adds a text to the watched folder or deletes one every ``--drop-every``
   seconds. The server's resident memory, threads and open file descriptors (/proc/PID/status, /proc/PID/fd) are
   read after ``--warm-up`` seconds of load ("start") and when the load stops ("end"), and every few seconds between.
4. Checks once the load stopped: the watched set against the folder (after it settles), the moved files on disk and
   in the index, ``db-diagnose`` (integrity ok, no orphans) and ``check_integrity`` (the text and vector indexes
   against the store); errors in the server's log.
Progress goes to stderr; stdout gets the table only.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import anyio  # noqa: E402

from bench.common import bench_logging, publish, render  # noqa: E402
from bench.soak_checks import final_checks  # noqa: E402
from bench.soak_corpus import make_corpus  # noqa: E402
from bench.soak_load import MIX, ClientState, Dropper, drive  # noqa: E402
from bench.soak_report import log_errors, machine_facts, table_rows, tool_table  # noqa: E402
from bench.soak_server import ProcTrace, serving, wait_until_up  # noqa: E402
from bench.soak_setup import prepare  # noqa: E402
from mcp_server.tools import group_modules  # noqa: E402

log = logging.getLogger("bench.soak")

DEBOUNCE_MS = 300


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/soak.py", description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short: 30 s, 4 clients, 10 s of warm-up, no Prefect")
    p.add_argument("--seconds", type=float, help="how long the load runs, warm-up included (default 600; quick 30)")
    p.add_argument("--clients", type=int, help="concurrent MCP clients (default 20; quick 4)")
    p.add_argument("--warm-up", type=float, help="seconds of load before the server's start figures are read "
                                                 "(default: a tenth of --seconds, at most 60; quick 10)")
    p.add_argument("--calls-per-session", type=int, help="a client opens a new session after this many calls "
                                                         "(default 200; quick 40)")
    p.add_argument("--min-calls", type=int, help="each client goes on past --seconds until it made this many calls "
                                                 "(default 0; quick: one session and one call more, so every kind "
                                                 "of call is made and a second session opened however slow the "
                                                 "machine)")
    p.add_argument("--pause", type=float, default=0.05, help="seconds a client waits between its calls (0.05)")
    p.add_argument("--drop-every", type=float, default=0.5,
                   help="seconds between the dropper's changes to the watched folder (0.5)")
    p.add_argument("--only", help="a part of the clients' cycle, to tell which calls make the server grow "
                                  "(comma-separated, from: " + ", ".join(dict.fromkeys(MIX)) + ")")
    p.add_argument("--database-url", help="a PostgreSQL store (an empty database) instead of SQLite in the data dir")
    p.add_argument("--prefect", action=argparse.BooleanOptionalAction, default=None,
                   help="run jobs as Prefect flows, as a server does by default (default: on; quick: off)")
    p.add_argument("--model-cache", help="where the embedding model's exports are kept (default: ASSAY_MODEL_CACHE, "
                                         "else models/ in the work dir, so they are built once)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench"),
                   help="the run's scratch dir (tree, data dir, logs) is made here and removed at the end")
    p.add_argument("--keep", action="store_true", help="keep the scratch dir (the tree, the data dir, the log)")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "soak.md"), help="where to write the table")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    quick = args.quick
    args.seconds = args.seconds or (30.0 if quick else 600.0)
    args.clients = args.clients or (4 if quick else 20)
    args.calls_per_session = args.calls_per_session or (40 if quick else 200)
    args.min_calls = args.min_calls if args.min_calls is not None else (args.calls_per_session + 1 if quick else 0)
    args.warm_up = args.warm_up if args.warm_up is not None else (10.0 if quick else min(60.0, args.seconds / 10))
    args.prefect = (not quick) if args.prefect is None else args.prefect
    if not 0 <= args.warm_up < args.seconds:
        p.error("--warm-up must be shorter than --seconds")
    only = args.only.split(",") if args.only else list(MIX)
    if unknown := sorted(set(only) - set(MIX)):
        p.error(f"--only: unknown calls {', '.join(unknown)}; known: {', '.join(dict.fromkeys(MIX))}")
    args.mix = tuple(slot for slot in MIX if slot in only)
    return args


def soak(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    corpus = make_corpus(scratch / "root", clients=args.clients)
    states = [ClientState(files, args.mix) for files in corpus.clients]
    model_cache = args.model_cache or os.environ.get("ASSAY_MODEL_CACHE") or str(Path(args.work) / "models")
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ASSAY_MODEL_CACHE": model_cache,
           "ASSAY_TOOL_GROUPS": ",".join(group_modules())}  # the admin group too: check_integrity at the end
    fig: dict[str, Any] = {"clients": args.clients, "seconds": args.seconds, "warm_up": args.warm_up,
                           "prefect": args.prefect, "backend": "postgresql" if args.database_url else "sqlite",
                           "pause": args.pause, "calls_per_session": args.calls_per_session,
                           "mix": list(args.mix)}
    with serving(scratch, roots=[corpus.root], database_url=args.database_url, prefect=args.prefect,
                 env=env) as server:
        fig["server_up"] = wait_until_up(server)
        log.info("assay serve is up (%.1f s); setting up: index, index_files, %d plans and sets", fig["server_up"],
                 args.clients)
        fig["setup"] = anyio.run(lambda: prepare(server.url, corpus, states, debounce_ms=DEBOUNCE_MS))
        log.info("load: %d clients for %g s (%g s of warm-up first)", args.clients, args.seconds, args.warm_up)
        with ProcTrace(server.pid, every=max(1.0, args.seconds / 120)) as trace, \
                Dropper(corpus.drop, every=args.drop_every) as dropper:
            result = anyio.run(lambda: drive(server.url, states, corpus, pid=server.pid, seconds=args.seconds,
                                             warm_up=args.warm_up, per_session=args.calls_per_session,
                                             pause=args.pause, min_calls=args.min_calls))
        fig["dropper"] = {"added": dropper.added, "deleted": dropper.deleted}
        log.info("load done: %d calls, %d failed; checking what it left", len(result.calls),
                 sum(not c.ok for c in result.calls))
        fig["checks"] = anyio.run(lambda: final_checks(server.url, states, dropper.on_disk(), settle=60.0))
        fig["after_checks"] = trace.samples[-1] if trace.samples else None
    fig["log_errors"] = log_errors(server.log)
    fig["exit_code"] = server.process.returncode
    fig["load"] = {"sessions": result.sessions, "wall": result.wall, "client_cpu": result.client_cpu,
                   "server_cpu": result.server_cpu, "start": result.start, "end": result.end,
                   "peak_rss": trace.peak_rss(since=result.origin + args.warm_up), "fd_kinds": result.fds,
                   "trace": trace.as_rows(result.origin)}
    fig["calls"] = result.calls
    return fig


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging("mcp", "httpx2", "uvicorn", "alembic")
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="soak-", dir=work))
    facts = machine_facts()
    started = time.monotonic()
    try:
        fig = soak(args, scratch)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    fig["machine"] = facts
    fig["total_seconds"] = time.monotonic() - started
    fig["load_end"] = os.getloadavg()[0]
    rows, notes, summary = table_rows(fig, args)
    table = render(facts, rows, notes, tool_table(fig))
    publish(table, args.out, summary, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

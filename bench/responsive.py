"""How responsive ``assay serve`` on its SQLite store stays while it indexes a large tree (issue 25, section 2): the
latency of ``navigate`` over MCP HTTP during a 100,000-file index, next to the same calls on the idle server.

    .venv/bin/python bench/responsive.py [--files 100000] [--rounds 5] [--quick] [--prefect] [--work DIR]
                                         [--out bench/out/responsive.md] [--json FILE]

Each round starts ``assay serve --transport http`` with a fresh data dir over two generated trees (bench/tree.py,
generated once under the work dir and reused): a small one (2,000 files) indexed first, whose folders the calls
navigate, and the large one (``--files``). One MCP session calls ``navigate`` on the small tree's folders one call
after another (as an agent browses) and, between two navigates, sends an MCP ping (answered by the server's event loop
without the store: whether the loop itself is held up). The calls run: on the idle server before the index; while
the large tree is indexed (``index`` with async=true, through the server's own job runner: the walk in a thread,
the rows written by its SQLite writer; a second session follows the job with job-progress); on the idle server
after, with the large tree's rows in the store. Goal: p99 of navigate during the index < 100 ms.
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
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.shared.exceptions import MCPDeprecationWarning  # noqa: E402

from bench.common import bench_logging, percentile, publish, render  # noqa: E402
from bench.guard_load import http_client, session  # noqa: E402
from bench.soak_load import answer_of, error_text  # noqa: E402
from bench.soak_report import machine_facts, ms, yes_no  # noqa: E402
from bench.soak_server import serving, wait_until_up  # noqa: E402
from bench.tree import TreeSpec, ensure_tree, sample_dirs  # noqa: E402

log = logging.getLogger("bench.responsive")

GOAL = 0.100  # seconds: p99 of navigate during the index
SMALL_TREE = 2000
SLOW = 0.100  # a call slower than this is listed with its time into the index


@dataclass
class Phase:
    """The calls of one phase: navigate and ping latencies (seconds) and, for navigate, when each started (seconds
    from the phase's start)."""

    navigate: list[float] = field(default_factory=list)
    ping: list[float] = field(default_factory=list)
    at: list[float] = field(default_factory=list)
    seconds: float = 0.0


async def _navigate(client: Client, folder: str) -> float:
    started = time.perf_counter()
    result = await client.call_tool("navigate", {"path": folder, "limit": 100})
    elapsed = time.perf_counter() - started
    if result.is_error:
        raise RuntimeError(f"navigate {folder} failed: {error_text(result)}")
    return elapsed


async def _ping(client: Client) -> float:
    """An MCP ping's round trip (the SDK deprecates ping for the next protocol version; the legacy mode, which these
    sessions use, still has it)."""
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.send_ping()
    return time.perf_counter() - started


async def calls(client: Client, folders: list[str], count: int) -> Phase:
    """``count`` navigates (and as many pings between them) on the idle server."""
    phase = Phase()
    origin = time.monotonic()
    for i in range(count):
        phase.at.append(time.monotonic() - origin)
        phase.navigate.append(await _navigate(client, folders[i % len(folders)]))
        phase.ping.append(await _ping(client))
    phase.seconds = time.monotonic() - origin
    return phase


async def during_index(url: str, client: Client, folders: list[str], root: Path) -> tuple[Phase, dict[str, Any]]:
    """Start the index of ``root`` and navigate (and ping) without a pause until its job has ended."""
    phase = Phase()
    async with http_client(None) as http, session(url, http) as follower:
        started = answer_of(await follower.call_tool("index", {"root": str(root), "async": True, "force": True}))
        job_id = started["jobId"]
        origin = time.monotonic()
        job: dict[str, Any] = {}
        done = anyio.Event()

        async def follow() -> None:
            while True:
                job.update(answer_of(await follower.call_tool("job-progress", {"jobId": job_id})))
                if job.get("status") not in ("pending", "running"):
                    job["seconds"] = time.monotonic() - origin
                    done.set()
                    return
                await anyio.sleep(0.25)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            i = 0
            while not done.is_set():
                phase.at.append(time.monotonic() - origin)
                phase.navigate.append(await _navigate(client, folders[i % len(folders)]))
                phase.ping.append(await _ping(client))
                i += 1
        phase.seconds = time.monotonic() - origin
    if job.get("status") != "completed":
        raise RuntimeError(f"the index job ended {job.get('status')}: {job.get('error')}")
    return phase, {"job_id": job_id, "files": job.get("files"), "directories": job.get("directories"),
                   "seconds": job["seconds"], "job_ms": job.get("durationMs")}


async def one_round(url: str, small: Path, big: Path, folders: list[str], idle_calls: int) -> dict[str, Any]:
    async with http_client(None) as http, session(url, http) as client:
        answer = answer_of(await client.call_tool("index", {"root": str(small), "async": False, "force": True}))
        if answer.get("status") != "completed":
            raise RuntimeError(f"indexing the small tree ended {answer.get('status')}: {answer.get('error')}")
        await calls(client, folders, 20)  # warm: the server's first calls, the connection pool
        before = await calls(client, folders, idle_calls)
        index, job = await during_index(url, client, folders, big)
        after = await calls(client, folders, idle_calls)
    return {"before": asdict(before), "during": asdict(index), "after": asdict(after), "job": job}


def run_rounds(args: argparse.Namespace, work: Path, scratch: Path) -> list[dict[str, Any]]:
    small, small_spec, _ = ensure_tree(work, SMALL_TREE)
    big, _, _ = ensure_tree(work, args.files)
    folders = sample_dirs(small, small_spec, 40)
    rounds = []
    for n in range(args.rounds):
        interval = args.switch_interval / 1000 if args.switch_interval else None
        with serving(scratch, roots=[small, big], prefect=args.prefect, name=f"round-{n}",
                     switch_interval=interval) as server:
            up = wait_until_up(server)
            log.info("round %d/%d: the server is up (%.1f s); navigate idle, during the index of %s files, idle",
                     n + 1, args.rounds, up, f"{args.files:,}")
            result = anyio.run(lambda: one_round(server.url, small, big, folders, args.idle_calls))
        log.info("  index: %.1f s, %s navigate calls during it", result["job"]["seconds"],
                 len(result["during"]["navigate"]))
        rounds.append(result)
        shutil.rmtree(server.data, ignore_errors=True)
    return rounds


# --- the table -------------------------------------------------------------------------------------------------------

def pooled(rounds: list[dict[str, Any]], phase: str, key: str) -> list[float]:
    return [x for r in rounds for x in r[phase][key]]


def spread(samples: list[float]) -> str:
    return " / ".join(ms(percentile(samples, q)) for q in (50, 95, 99)) + f" / {ms(max(samples))}"


def slow_calls(rounds: list[dict[str, Any]]) -> list[str]:
    """The navigates during the index slower than SLOW: their latency and when in the index they started."""
    out = []
    for n, r in enumerate(rounds):
        d = r["during"]
        out += [f"round {n + 1}: {ms(s)} at {at:.1f} s of {r['job']['seconds']:.1f} s"
                for s, at in zip(d["navigate"], d["at"]) if s > SLOW]
    return out


def table(fig: dict[str, Any], args: argparse.Namespace) -> tuple[list[tuple[str, ...]], list[str]]:
    rounds = fig["rounds"]
    during, after, before = (pooled(rounds, p, "navigate") for p in ("during", "after", "before"))
    p99 = percentile(during, 99)
    idle99 = percentile(after, 99)
    index_s = [r["job"]["seconds"] for r in rounds]
    slow = slow_calls(rounds)
    label = f"navigate of a folder of the {SMALL_TREE:,}-file tree, p50 / p95 / p99 / max"
    rows: list[tuple[str, ...]] = [
        (f"{label}: during the index of {args.files:,} files ({len(during):,} calls in {len(rounds)} round(s))",
         spread(during), f"idle after: p99 {ms(idle99)}", f"{p99 / idle99:.1f}× idle at p99",
         f"p99 < {ms(GOAL)}", yes_no(p99 < GOAL)),
        (f"{label}: the idle server before the index ({len(before):,} calls)", spread(before), "—", "—", "—", "—"),
        (f"{label}: the idle server after the index, its rows in the store ({len(after):,} calls)", spread(after),
         "—", "—", "—", "—"),
        ("MCP ping (the event loop alone, no store), p50 / p95 / p99 / max: during the index / idle after",
         f"{spread(pooled(rounds, 'during', 'ping'))} // {spread(pooled(rounds, 'after', 'ping'))}", "—", "—",
         "—", "—"),
        (f"navigates during the index slower than {ms(SLOW)}", f"{len(slow)} of {len(during):,}" + (
            ": " + "; ".join(slow[:6]) if slow else ""), "—", "—", "—", "—"),
        (f"the index of {args.files:,} files through the server's index tool (async; job started → ended, as "
         "job-progress saw it), per round", " / ".join(f"{s:.1f} s" for s in index_s),
         f"{rounds[0]['job']['files']:,} files, {rounds[0]['job']['directories']:,} folders", "—", "—", "—"),
    ]
    notes = [
        f"Trees: bench/tree.py, {SMALL_TREE:,} files (navigated) and {args.files:,} files (indexed), generated once "
        f"under {args.work} and reused; a fresh data dir (SQLite) each round; Prefect {'on' if args.prefect else 'off'}"
        " (--prefect)" + (f"; the server's GIL switch interval {args.switch_interval:g} ms (--switch-interval; "
                          "Python's default 5 ms)" if args.switch_interval else "") + ".",
        "Calls: one MCP session over Streamable HTTP (mode='legacy'), navigate (limit 100) of 40 folders of the "
        "small tree in turn, each followed by an MCP ping, no pause; the index is followed from a second session "
        "(job-progress every 0.25 s). Idle phases: "
        f"{args.idle_calls} calls each, after 20 to warm.",
        f"Load average at the start / end: {fig['machine'].rsplit(' ', 1)[-1]} / {fig['load_end']:.2f}. Timings on "
        "a shared 2-core machine are noisy.",
    ]
    return rows, notes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/responsive.py", description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="10,000 files, one round, 100 idle calls")
    p.add_argument("--files", type=int, help="files in the indexed tree (default 100000; quick 10000)")
    p.add_argument("--rounds", type=int, help="servers started, one index each (default 5; quick 1)")
    p.add_argument("--idle-calls", type=int, help="navigate calls on the idle server before and after (default "
                                                  "300; quick 100)")
    p.add_argument("--prefect", action="store_true", help="run the index as a Prefect flow (the server's default; "
                                                         "off here: the index's own cost is measured)")
    p.add_argument("--switch-interval", type=float, help="an experiment: the server's sys.setswitchinterval in ms "
                                                         "(Python's default: 5)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench"),
                   help="where the trees are generated once and reused; scratch data dirs go here too")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "responsive.md"), help="where to write the table")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    args.files = args.files or (10_000 if args.quick else 100_000)
    args.rounds = args.rounds or (1 if args.quick else 5)
    args.idle_calls = args.idle_calls or (100 if args.quick else 300)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging("mcp", "httpx2", "uvicorn", "alembic")
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="responsive-", dir=work))
    fig: dict[str, Any] = {"machine": machine_facts(), "files": args.files,
                           "tree": asdict(TreeSpec.for_files(args.files))}
    try:
        fig["rounds"] = run_rounds(args, work, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    fig["load_end"] = os.getloadavg()[0]
    rows, notes = table(fig, args)
    publish(render(fig["machine"], rows, notes), args.out, fig, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

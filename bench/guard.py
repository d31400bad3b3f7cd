"""The guarded server's benchmark (issue 23): what authentication, the permission filter, rate limiting and the audit
log cost per call, and a guarded server under load from many clients of several users.

    .venv/bin/python bench/guard.py [--files 5000] [--calls 500] [--clients 50] [--per-client 200]
                                    [--rate-read 600] [--rate-write 60] [--client-procs 1] [--quick] [--work DIR]
                                    [--out bench/out/guard.md] [--json FILE]

1. One tree (bench/tree.py), indexed once (``assay index --no-prefect``) into a data dir that also gets the users and
   their API tokens (store/users.py) and two resource sets; each server below runs on a copy of it.
2. Overhead: ``navigate`` of one leaf folder (50 files), --calls times after a warm-up, over Streamable HTTP to
   ``assay serve --transport http`` subprocesses that run side by side, the calls interleaved (one to each server in
   turn, the order rotating), so the machine's load falls on all alike: (a) no auth (loopback: the local operator;
   the guard's middleware runs, but checks no token and limits no rate), audit off; (a2) the same with the audit log
   on; (c) ``--auth`` with a viewer's API token (token verified, permission filter, rate limit set high enough never
   to refuse), audit off; (b) the same with the audit log on. And (d) the floor: the same call in-process through
   ``Client(build_server(app))``, no HTTP. p50 / p95 / p99 of each; the goal: (b) / (a) <= 1.15x at p50.
3. Load: one ``assay serve --transport http --auth`` subprocess; 5 users (2 viewers, 2 editors, 1 admin) with
   tokens; --clients clients (as many per user), each a session of its own making --per-client calls of its role's
   mix (bench/guard_load.py): navigate, inspect, resource-search, session-info, plan-list, a resource read; editors
   and the admin also writes (query-create / query-delete, resource-set-modify), the admin list_users; viewers one
   call in ten that they may not make (query-create: -32002 expected). The rate limits are set low enough to be hit.
   Checked: no failure other than rate-limit refusals (-32003) and the expected -32002; per user and category, no 60 s
   window holds more accepted calls than the limit and no refusal came below it (from the clients' timestamps and
   from the audit log's); after the server closed its audit log (which writes everything queued), exactly one record
   per call made, by user and outcome. Latency of the accepted calls, calls per second, CPU of the server and of the
   clients, the server's memory.
Progress goes to stderr; stdout gets the table only.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
from mcp import Client  # noqa: E402
from sqlalchemy import select  # noqa: E402

from bench.common import bench_logging, percentile, publish, render, server_env  # noqa: E402
from bench.guard_load import (  # noqa: E402
    EDIT_SET, USERS, WARM_USER, WINDOW, ClientSpec, Targets, audit_completeness, audit_window_check,
    RssTrace, client_window_check, cpu_seconds, http_client, memory, read_audit, run_load, session, summary,
    user_table,
)
from bench.run_index import assay_command  # noqa: E402
from bench.sampling import available_cores  # noqa: E402
from bench.tree import (  # noqa: E402
    FILE_WORDS, TreeSpec, ensure_tree, file_facts, files_in_leaf, leaf_parts, sample_dirs,
)
from mcp_server.app import AssayApp, build_server  # noqa: E402
from mcp_server.config import Settings  # noqa: E402
from store import sets as store_sets  # noqa: E402
from store import users as store_users  # noqa: E402
from store.engine import dispose_engines, get_engine  # noqa: E402
from store.entries import T as ENTRIES  # noqa: E402

log = logging.getLogger("bench.guard")

OVERHEAD_USER = ("overhead", "viewer")
SEARCH_SET = "bench-all"  # every entry of the store: what resource-search searches
UNLIMITED = 10_000_000  # a rate limit no run reaches (0 would switch the limiter off; we want it counting)


# --- the set-up ------------------------------------------------------------------------------------------------------

@dataclass
class Prepared:
    root: Path
    spec: TreeSpec
    data: Path  # the indexed data dir every server gets a copy of
    tokens: dict[str, str]  # user -> API token
    targets: Targets
    folder: str  # the overhead's navigate folder


def sample_files(root: Path, spec: TreeSpec, count: int) -> list[str]:
    """``count`` files spread over the leaves (the first file of every so many leaves)."""
    step = max(1, spec.leaves // count)
    out = []
    for leaf in range(0, spec.leaves, step):
        numbers = files_in_leaf(spec, leaf)
        if len(numbers):
            out.append(str(root.joinpath(*leaf_parts(spec, leaf), file_facts(numbers[0])[0])))
    return out[:count]


def search_params() -> list[dict[str, Any]]:
    """resource-search arguments, varied: kind and extension, sizes, names, folders, sorts."""
    filters: list[dict[str, Any]] = [
        {"kind": "file", "extension": ".jpg"}, {"min_size": 1024, "max_size": 4096},
        *({"name_contains": word} for word in FILE_WORDS[:4]), {"kind": "directory"},
        {"extension": [".md", ".txt"], "sort_by": "size", "sort_desc": True}, {"path_contains": "docs-0"}]
    return [{"name": SEARCH_SET, "limit": 50, "sort_by": ("size", "name", "mtime")[i % 3], **f}
            for i, f in enumerate(filters)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prepare(work: Path, scratch: Path, files: int) -> Prepared:
    root, spec, _ = ensure_tree(work, files)
    data = scratch / "data"
    log.info("indexing %s files (assay index --no-prefect, not timed)", f"{files:,}")
    subprocess.run(assay_command() + ["index", str(root), "--no-prefect", "--data-dir", str(data), "--root",
                                      str(root), "--log-level", "WARNING"],
                   cwd=REPO, env=server_env(scratch), stdout=subprocess.DEVNULL, check=True)
    engine = get_engine(f"sqlite:///{data / 'assay.db'}")
    store_sets.create_set(engine, name=SEARCH_SET, description="every entry (benchmark)")
    store_sets.create_set(engine, name=EDIT_SET, description="the load's editors add and remove members")
    with engine.begin() as conn:
        store_sets.add_members_from(conn, set_id=store_sets.require_set(conn, name=SEARCH_SET)["id"],
                                    entry_ids=select(ENTRIES.c.id))
    tokens = {}
    for name, role in (*USERS, WARM_USER, OVERHEAD_USER):
        store_users.create_user(engine, name, role=role)
        tokens[name] = store_users.create_token(engine, name)[0]
    dispose_engines()  # the copies below are whole files (WAL checkpointed)
    targets = Targets(dirs=sample_dirs(root, spec, 40), files=sample_files(root, spec, 40), searches=search_params())
    folder = str(root.joinpath(*leaf_parts(spec, spec.leaves // 2)))
    return Prepared(root, spec, data, tokens, targets, folder)


@dataclass
class Served:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    token: str | None


@contextlib.contextmanager
def serving(prep: Prepared, scratch: Path, name: str, *, auth: bool, audit: bool, rate_read: int,
            rate_write: int) -> Iterator[Served]:
    """``assay serve --transport http`` on a copy of the prepared data dir, until the block ends (SIGTERM: the
    server closes its audit log, writing everything queued)."""
    data = scratch / f"data-{name}"
    shutil.copytree(prep.data, data)
    port = free_port()
    env = server_env(scratch, ASSAY_AUDIT="true" if audit else "false", ASSAY_RATE_READ=str(rate_read),
                     ASSAY_RATE_WRITE=str(rate_write))
    command = assay_command() + ["serve", "--transport", "http", "--port", str(port), "--data-dir", str(data),
                                 "--root", str(prep.root), "--no-prefect", "--log-level", "WARNING"]
    with open(scratch / f"serve-{name}.log", "w") as server_log:
        process = subprocess.Popen(command + (["--auth"] if auth else []), cwd=REPO, env=env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=server_log)
        try:
            yield Served(name, f"http://127.0.0.1:{port}/mcp", process, None)
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_up(servers: list[Served], timeout: float = 600.0) -> None:
    """Wait for each server to take connections; generous: the suite runs this beside its tests at nice 19."""
    deadline = time.monotonic() + timeout
    for s in servers:
        port = int(s.url.rsplit(":", 1)[1].split("/")[0])
        while True:
            if s.process.poll() is not None:
                raise RuntimeError(f"assay serve ({s.name}) exited ({s.process.returncode}); see serve-{s.name}.log")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"assay serve ({s.name}) did not answer within {timeout:g} s") from None
                time.sleep(0.1)


# --- overhead --------------------------------------------------------------------------------------------------------

async def _interleaved(servers: list[Served], app: AssayApp, folder: str, calls: int,
                       warm: int) -> dict[str, list[float]]:
    arguments = {"path": folder, "limit": 100}
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        for s in servers:
            http = await stack.enter_async_context(http_client(s.token))
            clients[s.name] = await stack.enter_async_context(session(s.url, http))
        clients["d"] = await stack.enter_async_context(Client(build_server(app), mode="legacy"))
        names = list(clients)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for i in range(warm + calls):
            for name in names[i % len(names):] + names[:i % len(names)]:
                started = time.perf_counter()
                result = await clients[name].call_tool("navigate", arguments)
                elapsed = time.perf_counter() - started
                if result.is_error:
                    raise RuntimeError(f"navigate on ({name}) failed: {result.content[0].text}")  # type: ignore[union-attr]
                if i >= warm:
                    samples[name].append(elapsed)
    return samples


def overhead(prep: Prepared, scratch: Path, calls: int, warm: int) -> dict[str, Any]:
    """(a), (a2), (b), (c) over HTTP and (d) in-process, interleaved (see the module docstring)."""
    configs = {"a": (False, False), "a2": (False, True), "c": (True, False), "b": (True, True)}
    shutil.copytree(prep.data, scratch / "data-d")
    app = AssayApp.create(Settings(data_dir=scratch / "data-d", roots=[str(prep.root)], use_prefect=False,
                                   guard={"audit": False}))
    try:
        with contextlib.ExitStack() as stack:
            servers = [stack.enter_context(serving(prep, scratch, name, auth=auth, audit=audit, rate_read=UNLIMITED,
                                                   rate_write=UNLIMITED))
                       for name, (auth, audit) in configs.items()]
            for s in servers:
                s.token = prep.tokens[OVERHEAD_USER[0]] if configs[s.name][0] else None
            wait_until_up(servers)
            log.info("overhead: navigate %d times (after %d to warm) on each of (a) (a2) (c) (b) and in-process",
                     calls, warm)
            samples = anyio.run(_interleaved, servers, app, prep.folder, calls, warm)
            rss = {s.name: memory(s.process.pid)["hwm"] for s in servers}
    finally:
        app.close()
        app.engine.dispose()
    return {"samples": samples, "server_hwm": rss, "folder": prep.folder, "calls": calls}


# --- load ------------------------------------------------------------------------------------------------------------

def load(prep: Prepared, scratch: Path, args: argparse.Namespace) -> dict[str, Any]:
    limits = {"read": args.rate_read, "write": args.rate_write}
    users = [USERS[i % len(USERS)] for i in range(args.clients)]  # as many clients per user
    specs = [ClientSpec(user, role, prep.tokens[user], i, args.per_client) for i, (user, role) in enumerate(users)]
    with serving(prep, scratch, "load", auth=True, audit=True, rate_read=args.rate_read,
                 rate_write=args.rate_write) as server:
        wait_until_up([server])
        pid = server.process.pid
        log.info("load: %d clients of %d users x %d calls, %d client process(es); rate limits %s per %g s",
                 args.clients, len(USERS), args.per_client, args.client_procs, limits, WINDOW)
        with RssTrace(pid) as trace:
            result = run_load(server.url, specs, prep.targets, procs=args.client_procs,
                              warm_token=prep.tokens[WARM_USER[0]], scratch=scratch,
                              on_start=lambda: {"cpu": cpu_seconds(pid), **memory(pid)})
            after = {"cpu": cpu_seconds(pid), **memory(pid)}
        started, wall = result["started"], result["wall"]
        rss_half = trace.at(started + wall / 2)
    data = scratch / "data-load"
    rows = read_audit(f"sqlite:///{data / 'audit.db'}", [u for u, _ in USERS] + [WARM_USER[0]])
    calls = result["calls"]
    fig = {"limits": limits, "clients": args.clients, "per_client": args.per_client, "procs": result["procs"],
           "wall": result["wall"], "client_cpu": result["client_cpu"],
           "server_cpu": after["cpu"] - result["server_before"]["cpu"],
           "server_rss_start": result["server_before"]["rss"], "server_rss_half": rss_half,
           "server_rss_end": after["rss"],
           "server_hwm": after["hwm"], **summary(calls),
           "client_check": client_window_check(calls, limits),
           "audit_check": audit_window_check([r for r in rows if r["user"] != WARM_USER[0]], limits),
           "audit": audit_completeness([*result["warm"], *calls], rows),
           "warm_failures": [f"{c.name}: {c.outcome}: {c.detail}" for c in result["warm"] if c.outcome != "ok"]}
    fig["users"] = user_table(calls, rows, dict(USERS))
    return fig


# --- the table -------------------------------------------------------------------------------------------------------

def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms" if x < 10 else f"{x:.1f} s"


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def spread(samples: list[float]) -> str:
    return " / ".join(ms(percentile(samples, q)) for q in (50, 95, 99))


OVERHEAD_LABELS = {
    "d": "(d) in-process floor: `Client(build_server(app))`, no HTTP (local operator, audit off)",
    "a": "(a) HTTP, no auth: the local operator on loopback (guard middleware runs; no token check, no rate limit), "
         "audit off",
    "a2": "(a2) HTTP, no auth, audit on",
    "c": "(c) HTTP, --auth, a viewer's API token (verified each call; permission filter, rate limit counting), "
         "audit off",
    "b": "(b) HTTP, --auth, a viewer's API token, audit on: the whole guard",
}


def overhead_rows(fig: dict[str, Any]) -> list[tuple[str, ...]]:
    o = fig["overhead"]
    s = o["samples"]
    p50 = {name: percentile(samples, 50) for name, samples in s.items()}
    rows: list[tuple[str, ...]] = [("cores this run could get (a busy loop per core, CPU / wall), at the start / end",
             f"{fig['cores_start']:.2f} / {fig['cores_end']:.2f}", f"{os.cpu_count()} cores", "—", "—", "—")]
    for name in ("d", "a", "a2", "c", "b"):
        label = f"navigate of a 50-file folder, p50 / p95 / p99 ({o['calls']} calls): {OVERHEAD_LABELS[name]}"
        if name == "d":
            rows.append((label, spread(s[name]), "—", "—", "—", "—"))
        elif name == "a":
            rows.append((label, spread(s[name]), f"(d): {ms(p50['d'])}", f"{p50['a'] / p50['d']:.2f}× (d) at p50",
                         "—", "—"))
        else:
            goal = name == "b"
            rows.append((label, spread(s[name]), f"(a): {ms(p50['a'])}", f"{p50[name] / p50['a']:.2f}× (a) at p50",
                         "≤ 1.15×" if goal else "—", yes_no(p50["b"] <= 1.15 * p50["a"]) if goal else "—"))
    rows.append(("  of the guard's cost at p50: token check + permission filter + rate limit (c − a) / audit (b − c)",
                 f"{ms(p50['c'] - p50['a'])} / {ms(p50['b'] - p50['c'])}", "—", "—", "—", "—"))
    rows.append(("  peak RSS of the servers (VmHWM): (a) / (a2) / (c) / (b)",
                 " / ".join(mb(o["server_hwm"][n]) for n in ("a", "a2", "c", "b")), "—", "—", "—", "—"))
    return rows


def load_rows(fig: dict[str, Any]) -> list[tuple[str, ...]]:
    f = fig["load"]
    made, out = f["made"], f["outcomes"]
    ok, limited, hidden = out.get("ok", 0), out.get("rate_limited", 0), out.get("hidden", 0)
    others = made - ok - limited - hidden + len(f["warm_failures"])
    lim = f["limits"]
    head = (f"load: {f['clients']} clients ({f['clients'] // len(USERS)} per user) of {len(USERS)} users (2 viewers, "
            f"2 editors, 1 admin) × {f['per_client']} mixed calls, one `assay serve --auth` subprocess; rate limits "
            f"read {lim['read']}/min, write {lim['write']}/min per user")
    acc = f["accepted_seconds"]
    cc, ac = f["client_check"], f["audit_check"]

    def windows(check: dict[str, Any]) -> str:
        most = check["max_in_window"]
        per = "; ".join(f"{cat}: max {max((v for k, v in most.items() if k.endswith('/' + cat)), default=0)} "
                        f"(limit {lim[cat]})" for cat in ("read", "write"))
        return f"{per}; refusals below the limit: {check['early_refusals']}"

    audit = f["audit"]
    rows: list[tuple[str, ...]] = [
        (head + ": calls made (wall, calls/s)", f"{made:,} in {f['wall']:.1f} s = {made / f['wall']:,.0f}/s", "—",
         "—", "—", "—"),
        ("  answered (accepted, no error)", f"{ok:,} = {ok / f['wall']:,.0f}/s", "—", "—", "—", "—"),
        ("  refused by the rate limit (-32003)", f"{limited:,}", "—", "—", "> 0 (limits hit)", yes_no(limited > 0)),
        ("  refused as hidden (-32002): the viewers' calls of a tool they may not see", f"{hidden:,}",
         f"{f['forbidden']:,} such calls made", "—", "all", yes_no(hidden == f["forbidden"])),
        ("  other failures (tool errors, other codes, transport; the warm-up's included)", f"{others:,}" + (
            ": " + "; ".join([*f["warm_failures"], *f["failures"]][:5]) if others else ""), "—", "—", "0",
         yes_no(others == 0)),
        ("  latency of the answered calls, p50 / p99", f"{ms(percentile(acc, 50))} / {ms(percentile(acc, 99))}"
         if acc else "—", "—", "—", "—", "—"),
        (f"  rate limits exact, from the clients' timestamps: accepted calls certainly inside one {WINDOW:g} s "
         "window, per user and category", windows(cc), "the limits", "—", "≤ limit, 0 early", yes_no(cc["exact"])),
        (f"  rate limits exact, from the audit log's times: accepted calls in any {WINDOW:g} s window",
         windows(ac), "the limits", "—", "≤ limit, 0 early", yes_no(ac["exact"])),
        ("  audit log after the server closed it: records (tool calls, resource reads) / calls made (with the "
         "warm-up's), by user and outcome", f"{audit['records']:,} / {audit['calls']:,}" + (
             f"; differ: {audit['differences']}" if audit["differences"] else ": equal"), "—", "—", "equal",
         yes_no(audit["complete"])),
        (f"  CPU during the calls: the server (and its children) / the clients ({f['procs']} process(es))",
         f"{f['server_cpu'] / f['wall']:.2f} / {f['client_cpu'] / f['wall']:.2f} cores", f"{os.cpu_count()} cores",
         "—", "—", "—"),
        ("  the server's RSS when the calls started / half of the calls' time / ended; its peak (VmHWM)",
         f"{mb(f['server_rss_start'])} / {mb(f['server_rss_half'])} / {mb(f['server_rss_end'])}; "
         f"{mb(f['server_hwm'])}", "—", f"{f['server_rss_end'] / max(1, f['server_rss_half']):.2f}× (end / half)",
         "flat in the second half (≤ 1.1×)", yes_no(f["server_rss_end"] <= 1.1 * f["server_rss_half"])),
    ]
    return rows


def notes(fig: dict[str, Any], args: argparse.Namespace) -> list[str]:
    o, f = fig["overhead"], fig["load"]
    return [
        f"Tree: {args.files:,} files (bench/tree.py), indexed once with `assay index --no-prefect`; every server runs "
        "on a copy of that data dir, with ASSAY_DOCUMENTS_PLAN=off and --no-prefect.",
        "Servers: `assay serve --transport http` subprocesses on loopback (the clients' CPU does not take the "
        "server's GIL); the overhead's four run side by side and get one call each in turn (the order rotating), "
        f"after {args.warm} calls to warm; navigate of {o['folder']} (limit 100).",
        "Sessions: the MCP Python SDK's Client in the 2025-11-25 mode (`mode='legacy'`: initialize once, then "
        "one POST per call on the session), the way desktop clients call; one HTTP connection per session.",
        f"Load: {f['clients']} clients as asyncio tasks in {f['procs']} spawned process(es); each client's role mix "
        "(bench/guard_load.py) cycles navigate, inspect, resource-search, session-info, plan-list, a read of "
        "synthesis://resource-sets; editors and the admin write (query-create, query-delete of a query they made, "
        "resource-set-modify), the admin calls list_users; viewers try query-create once in ten calls. A refused "
        "client goes straight on to its next call (no back-off: a runaway agent). A warm-up user makes one call of "
        "each kind first (audited, not in the load's figures).",
        "Exactness: the limiter counts a call when it admits it, between the client's send and receive; from the "
        "clients' side only calls sent and answered inside a window are certainly in it (and a refusal needs the "
        "limit of accepted calls possibly in its window); from the audit log, a call's admission is its record's "
        "time less its duration (10 ms of slack between the wall and monotonic clocks).",
        f"Load average at the start and end: {fig['machine'].rsplit(' ', 1)[-1]} / {fig['load_end']:.2f}. "
        "Timings on a shared 2-core machine are noisy.",
    ]


# --- main ------------------------------------------------------------------------------------------------------------

def machine_facts() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{os.cpu_count()} cores, {mem:.1f} GB RAM, {platform.system()} {platform.release()}; Python "
            f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}; load average at start "
            f"{os.getloadavg()[0]:.2f}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/guard.py", description=(__doc__ or "").split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny: a small tree, 50 navigate calls, 10 clients x 20 calls")
    p.add_argument("--files", type=int, help="files in the tree (default 5000; quick 500)")
    p.add_argument("--calls", type=int, help="navigate calls per server for the overhead (default 500; quick 50)")
    p.add_argument("--clients", type=int, help="concurrent clients of the load, spread over the 5 users (default 50; "
                                               "quick 10)")
    p.add_argument("--per-client", type=int, help="calls each client makes (default 200; quick 20)")
    p.add_argument("--rate-read", type=int, help="read calls per user per minute (default 600; quick 25)")
    p.add_argument("--rate-write", type=int, help="write calls per user per minute (default 60; quick 3)")
    p.add_argument("--client-procs", type=int, default=1, help="processes the load's clients run in (default 1)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench"),
                   help="where the tree is generated once and reused; scratch data dirs go here too")
    p.add_argument("--keep", action="store_true", help="keep the scratch data dirs and the servers' logs")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "guard.md"), help="where to write the table")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    quick = args.quick
    args.files = args.files or (500 if quick else 5000)
    args.calls = args.calls or (50 if quick else 500)
    args.clients = args.clients or (10 if quick else 50)
    args.per_client = args.per_client or (20 if quick else 200)
    args.rate_read = args.rate_read or (25 if quick else 600)
    args.rate_write = args.rate_write or (3 if quick else 60)
    args.warm = 5 if quick else 20
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging("mcp", "httpx2", "uvicorn")
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="guard-", dir=work))
    fig: dict[str, Any] = {"machine": machine_facts(), "files": args.files}
    try:
        fig["cores_start"] = available_cores()
        prep = prepare(work, scratch, args.files)
        fig["overhead"] = overhead(prep, scratch, args.calls, args.warm)
        fig["load"] = load(prep, scratch, args)
        fig["cores_end"] = available_cores()
        fig["load_end"] = os.getloadavg()[0]
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    table = render(fig["machine"], overhead_rows(fig) + load_rows(fig), notes(fig, args), fig["load"]["users"])
    publish(table, args.out, fig, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

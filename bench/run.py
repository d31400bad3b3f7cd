"""The benchmark: `index` against GNU find on generated trees, peak RSS, and MCP latency of navigate/resource-search.

    .venv/bin/python bench/run.py [--sizes 100000,1000000] [--quick] [--out bench/out/results.md] [--work DIR]
    .venv/bin/python bench/run.py --documents [--quick]    # the documents benchmark instead (bench/documents.py)
    .venv/bin/python bench/run.py --semantic [--quick]     # the semantic benchmark instead (bench/semantic.py)
    .venv/bin/python bench/run.py --citations [--quick]    # the citations benchmark instead (bench/citations.py)

For each size: time ``find ROOT -printf '%s %T@ %p\\n'`` (best of --repeat), then index the same tree through the code
``assay index`` runs, in a fresh process with a fresh data dir (store and Prefect home), with Prefect; the one-time
Prefect start (the first flow run of that process) is timed apart, before the index. The same process then indexes
the unchanged tree again into the same store. Then, over the store nearest 100k entries, ``assay serve --transport
http`` runs in a subprocess and an MCP client times navigate and resource-search calls, next to the same functions
called in-process and a trivial tool call (the transport's floor). Progress goes to stderr; stdout gets the table only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.tree import TreeSpec, ensure_tree, sample_dirs  # noqa: E402

log = logging.getLogger("bench.run")

FIND_FORMAT = "%s %T@ %p\n"
GOAL_INDEX_RATIO = 4.0
GOAL_RSS_RATIO = 1.5
GOAL_REINDEX_SHARE = 0.25  # re-index of an unchanged tree, as a share of the first index
GOAL_NAVIGATE_P50_MS = 20.0
LATENCY_SIZE = 100_000
SET_NAME = "bench-all"


# --- measuring --------------------------------------------------------------------------------------------------

def drop_caches() -> bool:
    """Drop the page cache (needs root outside a container); False when refused."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def time_find(root: Path, *, repeat: int, cold: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        if cold:
            drop_caches()
        started = time.perf_counter()
        subprocess.run(["find", str(root), "-printf", FIND_FORMAT], stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - started)
    return best


def _status_kb(pid: int | str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children() -> list[tuple[int, str]]:
    pids: list[int] = []
    for children in Path("/proc/self/task").glob("*/children"):
        pids += [int(p) for p in children.read_text().split()]
    out = []
    for pid in pids:
        try:
            out.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except OSError:
            pass
    return out


class _ChildPeaks:
    """Samples the peak RSS (VmHWM) of this process's children whose command line holds ``needle``, on a thread.

    ru_maxrss of the children is no use for the writer: a child that forks and execs from a big parent is charged the
    parent's resident set at exec, so the writer's own peak is read from /proc while it runs."""

    def __init__(self, needle: str, every: float = 0.02) -> None:
        import threading

        self.needle, self.every, self.peak_kb = needle, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pid, cmd in _children():
                if self.needle in cmd:
                    self.peak_kb = max(self.peak_kb, _status_kb(pid, "VmHWM"))
            self._stop.wait(self.every)

    def __enter__(self) -> "_ChildPeaks":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def index_driver(argv: list[str]) -> int:
    """Run in a fresh process: start Prefect once, then ``assay index ROOT`` twice (fresh store, then unchanged
    tree) through ``mcp_server.cli.main``, and write the timings and peak RSS to a JSON file."""
    data_dir, root, out = argv
    from mcp_server.config import load_settings, prepare_environment

    prepare_environment(load_settings({"roots": [root], "data_dir": data_dir}))
    started = time.perf_counter()
    from flows.core import prefect as prefect_support

    prefect_support.configure(Path(data_dir))
    with prefect_support.flow_settings():  # the Prefect API exactly as `assay index` starts it (a child process)
        from prefect import flow

        @flow(name="bench-warm-up", persist_result=False)
        def warm_up() -> int:
            return 1

        warm_up()
    prefect_start = time.perf_counter() - started
    from mcp_server import cli
    from store import jobs as store_jobs
    from store.engine import get_engine

    base_kb = _status_kb("self", "VmRSS")
    argv_index = ["index", root, "--data-dir", data_dir, "--root", root, "--log-level", "WARNING"]
    runs = []
    for _ in range(2):
        with _ChildPeaks("store.sqlite_writer") as writer:
            started = time.perf_counter()
            code = cli.main(argv_index)
            elapsed = time.perf_counter() - started
        engine = get_engine(f"sqlite:///{Path(data_dir) / 'assay.db'}")
        job = store_jobs.list_jobs(engine, limit=1)[0][0]
        runs.append({"code": code, "seconds": elapsed, "status": job["status"], "files": job["files"],
                     "directories": job["directories"], "job_seconds": job["completed_at"] - job["started_at"],
                     "main_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                     "writer_peak_kb": writer.peak_kb})
    server_kb = max([_status_kb(pid, "VmHWM") for pid, cmd in _children()
                     if "prefect.server" in cmd or "prefect_server" in cmd] or [0])
    Path(out).write_text(json.dumps({"prefect_start": prefect_start, "base_kb": base_kb,
                                     "first": runs[0], "again": runs[1], "prefect_server_kb": server_kb}))
    return 0


def _child_env() -> dict[str, str]:
    """The environment without the caller's Prefect/assay settings, so each run gets a fresh Prefect home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env["PYTHONPATH"] = str(REPO)
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"  # a loaded machine starts Prefect's server slowly
    return env


def run_index(root: Path, scratch: Path) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="index-", dir=scratch))
    out = data_dir / "result.json"
    code = "import sys; from bench.run import index_driver; sys.exit(index_driver(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, str(data_dir), str(root), str(out)], cwd=REPO,
                          env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"the index driver failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(out.read_text())
    for run in ("first", "again"):
        if result[run]["status"] != "completed":
            raise RuntimeError(f"index {run} ended {result[run]['status']}: {proc.stdout}{proc.stderr[-2000:]}")
    result["data_dir"] = str(data_dir)
    return result


def assay_command() -> list[str]:
    script = Path(sys.executable).parent / "assay"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcp_server.cli"]


def time_whole_command(root: Path, scratch: Path) -> float:
    data_dir = Path(tempfile.mkdtemp(prefix="cli-", dir=scratch))
    started = time.perf_counter()
    subprocess.run(assay_command() + ["index", str(root), "--data-dir", str(data_dir), "--root", str(root),
                                      "--log-level", "WARNING"],
                   cwd=REPO, env=_child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - started
    shutil.rmtree(data_dir, ignore_errors=True)
    return elapsed


# --- latency ------------------------------------------------------------------------------------------------------

def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def search_params(count: int, spec: TreeSpec) -> list[dict]:
    """resource-search arguments (reference 000's parameters), varied: kind, extension, sizes, names, sorts."""
    from bench.tree import DIR_WORDS, EXTENSIONS, FILE_WORDS

    variants = []
    for i in range(count):
        p: dict = {"name": SET_NAME, "limit": 50, "sort_by": ("size", "name", "mtime")[i % 3],
                   "sort_desc": i % 2 == 0}
        pick = i % 6
        if pick == 0:
            p.update(kind="file", extension="." + (EXTENSIONS[i % 11] or "txt"))
        elif pick == 1:
            p.update(min_size=1024 * (i % 7), max_size=8192)
        elif pick == 2:
            p.update(name_contains=FILE_WORDS[i % len(FILE_WORDS)])
        elif pick == 3:
            p.update(path_contains=f"{DIR_WORDS[i % len(DIR_WORDS)]}-0{i % 10}")
        elif pick == 4:
            p.update(kind="directory")
        else:
            p.update(min_mtime="2022-01-01", max_mtime="2023-01-01", extension=[".jpg", ".png"])
        variants.append(p)
    return variants


def navigate_params(root: Path, spec: TreeSpec, count: int) -> list[dict]:
    return [{"path": d, "sort": ("name", "size", "mtime")[i % 3], "desc": i % 4 == 3}
            for i, d in enumerate(sample_dirs(root, spec, count))]


def prepare_set(db_url: str) -> int:
    """A resource set holding every entry of the store (through the store's own functions)."""
    from sqlalchemy import func, select

    from store import sets
    from store.engine import get_engine

    engine = get_engine(db_url)
    if not any(s["name"] == SET_NAME for s in sets.list_sets(engine)):
        sets.create_set(engine, name=SET_NAME, description="every entry (benchmark)")
    with engine.begin() as conn:
        set_id = sets.require_set(conn, name=SET_NAME)["id"]
        sets.add_members_from(conn, set_id=set_id, entry_ids=select(sets.T.c.id))
        return conn.execute(select(func.count()).select_from(sets.M).where(sets.M.c.set_id == set_id)).scalar_one()


def in_process_latency(db_url: str, root: Path, nav: list[dict], search: list[dict]) -> dict[str, list[float]]:
    from flows.index.navigation import navigate_dir
    from flows.core.roots import Roots
    from store import set_queries
    from store.engine import get_engine
    from store.filters import EntryFilter

    engine, roots = get_engine(db_url), Roots.of([str(root)])
    out: dict[str, list[float]] = {"navigate": [], "search": []}
    for p in nav[:10]:
        navigate_dir(engine, roots, **p)  # warm the connection pool and SQLite's cache
    for p in nav:
        started = time.perf_counter()
        navigate_dir(engine, roots, **p)
        out["navigate"].append(time.perf_counter() - started)
    filter_keys = set(EntryFilter.model_fields)
    for p in search:
        started = time.perf_counter()
        with engine.connect() as conn:
            set_queries.search(conn, name=p["name"], filters=EntryFilter(**{k: v for k, v in p.items()
                                                                            if k in filter_keys}),
                               sort_by=p["sort_by"], sort_desc=p["sort_desc"], limit=p["limit"])
        out["search"].append(time.perf_counter() - started)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _mcp_latency(url: str, nav: list[dict], search: list[dict], pings: int) -> dict[str, list[float]]:
    from mcp import Client

    out: dict[str, list[float]] = {"ping": [], "navigate": [], "search": []}
    async with Client(url) as client:
        for p in nav[:10]:
            await client.call_tool("navigate", p)
        for _ in range(pings):  # the server answers no MCP ping; a tool call that does next to nothing instead
            started = time.perf_counter()
            await client.call_tool("resource-set-list", {})
            out["ping"].append(time.perf_counter() - started)
        for key, tool, calls in (("navigate", "navigate", nav), ("search", "resource-search", search)):
            for p in calls:
                started = time.perf_counter()
                result = await client.call_tool(tool, p)
                out[key].append(time.perf_counter() - started)
                if result.is_error:
                    raise RuntimeError(f"{tool} {p} failed: {result.content[0].text}")
    return out


def mcp_latency(data_dir: str, root: Path, nav: list[dict], search: list[dict], scratch: Path) -> dict:
    import anyio

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server_log = open(scratch / "serve.log", "w")
    server = subprocess.Popen(assay_command() + ["serve", "--transport", "http", "--port", str(port), "--data-dir",
                                                data_dir, "--root", str(root), "--no-prefect",
                                                "--log-level", "WARNING"],
                              cwd=REPO, env=_child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=server_log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"assay serve exited ({server.returncode}); see {server_log.name}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"assay serve did not answer on port {port} within 120 s") from None
                time.sleep(0.1)
        return anyio.run(_mcp_latency, url, nav, search, len(nav))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server_log.close()


# --- the table ----------------------------------------------------------------------------------------------------

def secs(x: float) -> str:
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def mb(kb: int) -> str:
    return f"{kb / 1024:.0f} MB"


def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def machine_facts(modes: list[str]) -> str:
    find_version = subprocess.run(["find", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    mem_kb = _status_kb_meminfo()
    load = os.getloadavg()
    cache = ("cold cache (page cache dropped before each find and index run) and " if "cold" in modes else "") + \
        ("warm cache (one warm-up walk first)" if "cold" in modes else
         "warm cache only (dropping the page cache was refused or not asked for; one warm-up walk first)")
    return (f"{os.cpu_count()} cores, {mem_kb / 1024 / 1024:.1f} GB RAM, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}; SQLite {sqlite3.sqlite_version}; {find_version}; {cache}; "
            f"load average at start {load[0]:.2f}")


def _status_kb_meminfo() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def timing_rows(n: int, cache: str, find_s: float, runs: list[dict]) -> list[tuple]:
    best = min(runs, key=lambda r: r["first"]["seconds"])
    first, again = best["first"], min((r["again"] for r in runs), key=lambda a: a["seconds"])
    index_s = first["seconds"]
    label = f"{n:,} files, {cache}"
    return [
        (f"`find -printf` over {label} (best of its runs)", secs(find_s),
         "physical limit: the same walk and stat, no store", "1.00×", "—"),
        (f"`index` {label}: fresh store, Prefect flow (best of {len(runs)})", secs(index_s),
         f"goal ≤ {GOAL_INDEX_RATIO:g}× find = {secs(GOAL_INDEX_RATIO * find_s)}", f"{index_s / find_s:.2f}× find",
         yes_no(index_s <= GOAL_INDEX_RATIO * find_s)),
        ("  of which walk + write (job row started → completed)", secs(first["job_seconds"]), "find",
         f"{first['job_seconds'] / find_s:.2f}× find", yes_no(first["job_seconds"] <= GOAL_INDEX_RATIO * find_s)),
        ("  of which flow-run overhead (call − job row)", secs(index_s - first["job_seconds"]), "—", "—", "—"),
        (f"`index` rate, {label}", f"{first['files'] / index_s:,.0f} files/s",
         f"find: {n / find_s:,.0f} files/s", f"{find_s / index_s:.2f}× find's rate", "—"),
        (f"re-index of the unchanged tree, same store, same process ({n:,} files, then warm)",
         secs(again["seconds"]), f"goal ≤ {GOAL_REINDEX_SHARE:.0%} of the first index = "
                                 f"{secs(GOAL_REINDEX_SHARE * index_s)}",
         f"{again['seconds'] / index_s:.0%} of the first index; {again['seconds'] / find_s:.2f}× find",
         yes_no(again["seconds"] <= GOAL_REINDEX_SHARE * index_s)),
        ("  of which walk + compare (job row started → completed; unchanged entries are not written)",
         secs(again["job_seconds"]), "find", f"{again['job_seconds'] / find_s:.2f}× find", "—"),
    ]


def once_rows(n: int, runs: list[dict], whole_s: float | None) -> list[tuple]:
    label = f"{n:,} files"
    main_kb = max(r["first"]["main_peak_kb"] for r in runs)
    writer_kb = max(r["first"]["writer_peak_kb"] for r in runs)
    rows = [("Prefect start, one-time (first flow run, fresh Prefect home; excluded above)",
             secs(min(r["prefect_start"] for r in runs)), "reported separately", "—", "—")]
    if whole_s is not None:
        rows.append((f"`assay index` whole command, {label}, warm (new process + store, imports, Prefect start)",
                     secs(whole_s), "—", "—", "—"))
    rows += [
        (f"peak RSS, main process (walker + Prefect client), {label}", mb(main_kb),
         f"before the index: {mb(min(r['base_kb'] for r in runs))}", "—", "—"),
        (f"peak RSS, SQLite writer child, {label}", mb(writer_kb), "—", "—", "—"),
        (f"peak RSS, main + writer, {label}", mb(main_kb + writer_kb), "—", "—", "—"),
        (f"peak RSS, Prefect ephemeral API server (child; one-time, not summed), {label}",
         mb(max(r["prefect_server_kb"] for r in runs)), "—", "—", "—"),
    ]
    return rows


def latency_rows(n_entries: int, set_entries: int, mcp: dict, local: dict) -> list[tuple]:
    nav50, nav95 = percentile(mcp["navigate"], 50), percentile(mcp["navigate"], 95)
    loc50, loc95 = percentile(local["navigate"], 50), percentile(local["navigate"], 95)
    s50, s95 = percentile(mcp["search"], 50), percentile(mcp["search"], 95)
    ls50, ls95 = percentile(local["search"], 50), percentile(local["search"], 95)
    ping50 = percentile(mcp["ping"], 50)
    store = f"store of {n_entries:,} entries"
    return [
        (f"trivial tool call (resource-set-list) p50 over MCP HTTP ({len(mcp['ping'])} calls)", ms(ping50),
         "transport floor", "—", "—"),
        (f"navigate p50 over MCP HTTP, {store} ({len(mcp['navigate'])} calls)", ms(nav50),
         f"goal < {GOAL_NAVIGATE_P50_MS:g} ms", f"{nav50 * 1000 / GOAL_NAVIGATE_P50_MS:.2f}× goal",
         yes_no(nav50 * 1000 < GOAL_NAVIGATE_P50_MS)),
        ("navigate p95 over MCP HTTP", ms(nav95), f"trivial call p95 {ms(percentile(mcp['ping'], 95))}", "—", "—"),
        ("navigate p50 / p95 in-process (flows.index.navigation.navigate_dir)", f"{ms(loc50)} / {ms(loc95)}",
         "MCP p50", f"{loc50 / nav50:.2f} of MCP p50", "—"),
        (f"resource-search p50 over MCP HTTP, set of {set_entries:,} entries ({len(mcp['search'])} calls)",
         ms(s50), "in-process p50", f"{s50 / ls50:.2f}× in-process", "—"),
        ("resource-search p95 over MCP HTTP", ms(s95), "in-process p95", f"{s95 / ls95:.2f}× in-process", "—"),
        ("resource-search p50 / p95 in-process (store.set_queries.search)", f"{ms(ls50)} / {ms(ls95)}", "—", "—",
         "—"),
    ]


def render(facts: str, rows: list[tuple], notes: list[str]) -> str:
    lines = [f"Machine: {facts}", "", "| measure | value | reference | ratio | goal met? |",
             "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


# --- main ---------------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", help="comma-separated file counts (default 100000,1000000; --quick: 20000)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 20k files, one index run, fewer calls")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "results.md"), help="where to write the table")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench"),
                   help="trees (kept and reused) and scratch stores (removed at the end)")
    p.add_argument("--repeat", type=int, help="find runs per size, best taken (default 3)")
    p.add_argument("--index-runs", type=int, help="fresh-store index runs per size, best taken (default 2; quick 1)")
    p.add_argument("--calls", type=int, help="navigate and resource-search calls each (default 200; quick 40)")
    p.add_argument("--cache", choices=["auto", "cold", "warm", "both"],
                   help="page cache for find/index: auto (default) = cold and warm where dropping it is allowed, "
                        "else warm; --quick: warm")
    p.add_argument("--no-whole-command", action="store_true", help="skip timing the whole `assay index` command")
    p.add_argument("--keep", action="store_true", help="keep the scratch stores")
    p.add_argument("--documents", action="store_true",
                   help="run the documents benchmark instead (bench/documents.py with its defaults, --quick passed "
                        "on; its own options: bench/documents.py --help)")
    p.add_argument("--semantic", action="store_true",
                   help="run the semantic benchmark instead (python -m bench.semantic with its defaults, --quick "
                        "passed on; its own options: python -m bench.semantic --help)")
    p.add_argument("--citations", action="store_true",
                   help="run the citations benchmark instead (python -m bench.citations with its defaults, --quick "
                        "passed on; its own options: python -m bench.citations --help)")
    args = p.parse_args(argv)
    args.sizes = [int(s.replace("_", "")) for s in (args.sizes or ("20000" if args.quick else "100000,1000000"))
                  .split(",") if s.strip()]
    args.cache = args.cache or ("warm" if args.quick else "auto")
    args.repeat = args.repeat or 3
    args.index_runs = args.index_runs or (1 if args.quick else 2)
    args.calls = args.calls or (40 if args.quick else 200)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.documents:
        from bench import documents

        return documents.main(["--quick"] if args.quick else [])
    if args.semantic:
        from bench import semantic

        return semantic.main(["--quick"] if args.quick else [])
    if args.citations:
        from bench import citations

        return citations.main(["--quick"] if args.quick else [])
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    for name in ("bench",):  # our progress only; libraries keep Python's default (warnings and up, on stderr)
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
        logging.getLogger(name).propagate = False
    work = Path(args.work).expanduser().resolve()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="runs-", dir=work))
    can_drop = drop_caches()
    if args.cache == "auto":
        modes = ["cold", "warm"] if can_drop else ["warm"]
    elif args.cache == "both":
        modes = ["cold", "warm"]
    else:
        modes = [args.cache]
    if "cold" in modes and not can_drop:
        log.warning("dropping the page cache was refused; running warm only")
        modes = ["warm"]
    facts = machine_facts(modes)
    log.info("%s", facts)
    rows: list[tuple] = []
    rss: dict[int, int] = {}
    latency_size = min(args.sizes, key=lambda n: abs(n - LATENCY_SIZE))
    latency_store = None
    try:
        for n in args.sizes:
            root, spec, _ = ensure_tree(work, n)
            all_runs: list[dict] = []
            for cache in modes:
                cold = cache == "cold"
                if not cold:
                    log.info("warm-up walk of %s", root)
                    time_find(root, repeat=1, cold=False)
                find_s = time_find(root, repeat=args.repeat, cold=cold)
                log.info("find over %s files (%s): %.3f s", f"{n:,}", cache, find_s)
                runs = []
                for i in range(args.index_runs):
                    if cold:
                        drop_caches()
                    runs.append(run_index(root, scratch))
                    log.info("index run %d (%s): %.3f s (job %.3f s), re-index %.3f s, Prefect start %.1f s", i + 1,
                             cache, runs[-1]["first"]["seconds"], runs[-1]["first"]["job_seconds"],
                             runs[-1]["again"]["seconds"], runs[-1]["prefect_start"])
                rows += timing_rows(n, f"{cache} cache", find_s, runs)
                all_runs += runs
            whole_s = None if args.no_whole_command else time_whole_command(root, scratch)
            rows += once_rows(n, all_runs, whole_s)
            rss[n] = max(r["first"]["main_peak_kb"] + r["first"]["writer_peak_kb"] for r in all_runs)
            if n == latency_size:
                first = all_runs[-1]["first"]
                latency_store = (root, spec, all_runs[-1]["data_dir"], first["files"] + first["directories"])
            kept = latency_store[2] if latency_store else None
            for r in all_runs:
                if r["data_dir"] != kept and not args.keep:
                    shutil.rmtree(r["data_dir"], ignore_errors=True)
        if len(rss) >= 2:
            small, big = min(rss), max(rss)
            ratio = rss[big] / rss[small]
            rows.append((f"peak RSS main + writer, {big:,} / {small:,} files", f"{mb(rss[big])} / {mb(rss[small])}",
                         f"goal ≤ {GOAL_RSS_RATIO:g}×", f"{ratio:.2f}×", yes_no(ratio <= GOAL_RSS_RATIO)))
        root, spec, data_dir, n_entries = latency_store
        db_url = f"sqlite:///{Path(data_dir) / 'assay.db'}"
        set_entries = prepare_set(db_url)
        nav = navigate_params(root, spec, args.calls)
        search = search_params(args.calls, spec)
        log.info("latency over %s entries: in-process, then over MCP HTTP", f"{n_entries:,}")
        local = in_process_latency(db_url, root, nav, search)
        from store.engine import dispose_engines

        dispose_engines()
        mcp = mcp_latency(data_dir, root, nav, search, scratch)
        rows += latency_rows(n_entries, set_entries, mcp, local)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    notes = [
        f"Sizes {', '.join(f'{n:,}' for n in args.sizes)}; trees generated by bench/tree.py under {work}.",
        "find: best of its runs. index: a fresh process per run running `mcp_server.cli.main(['index', ...])` "
        "(what `assay index` runs) with a fresh data dir (SQLite store + Prefect home), after one trivial flow run "
        "that starts Prefect (timed apart); the re-index runs in the same process on the same store.",
        "Peak RSS: main = ru_maxrss of the indexing process; writer = VmHWM of the SQLite writer child, sampled from "
        "/proc every 20 ms while it runs; the Prefect API server (VmHWM) is a separate, long-lived child.",
        "Latency: `assay serve --transport http --no-prefect` in a subprocess, the mcp Client over Streamable HTTP; "
        f"navigate over folders at every level, resource-search over a set '{SET_NAME}' holding every entry.",
        f"Timings are noisy: {os.cpu_count()} cores, shared with other processes (load average at the end "
        f"{os.getloadavg()[0]:.2f}).",
    ]
    table = render(facts, rows, notes)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    sys.stdout.write(table)
    log.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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

The figures are measured by bench/run_index.py (find, the index runs, peak RSS) and bench/run_latency.py (navigate and
resource-search latency); this file holds the command and its table.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import percentile  # noqa: E402
from bench.run_index import drop_caches, run_index, time_find, time_whole_command  # noqa: E402
from bench.run_latency import (  # noqa: E402
    SET_NAME, in_process_latency, mcp_latency, navigate_params, prepare_set, search_params,
)
from bench.tree import ensure_tree  # noqa: E402

log = logging.getLogger("bench.run")

GOAL_INDEX_RATIO = 4.0
GOAL_RSS_RATIO = 1.5
GOAL_REINDEX_SHARE = 0.25  # re-index of an unchanged tree, as a share of the first index
GOAL_NAVIGATE_P50_MS = 20.0
LATENCY_SIZE = 100_000


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
             secs(min(r["prefect_start"] for r in runs)), "reported separately", "—", "—"),
            ("the index command's modules, one-time (loaded on its first call; excluded above)",
             secs(min(r["imports"] for r in runs)), "reported separately", "—", "—")]
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

"""The soak's table: the figure rows (bench.common.render's columns: ours, baseline, ratio, goal, met?), the notes, the
per-tool latency table, and the figures as one JSON-ready dict; and the errors found in the server's log."""

from __future__ import annotations

import argparse
import os
import platform
import re
import sqlite3
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import percentile
from bench.soak_load import MIX, Call
from bench.soak_server import ProcStats

RSS_GOAL = 1.10  # the end's resident memory at most this times the start's
LOG_ERROR = re.compile(r"\b(ERROR|CRITICAL)\b|Traceback \(most recent call last\)")


def machine_facts() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{os.cpu_count()} cores, {mem:.1f} GB RAM, {platform.system()} {platform.release()}; Python "
            f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}; load average at start "
            f"{os.getloadavg()[0]:.2f}")


def log_errors(path: Path) -> dict[str, Any]:
    """Lines of the server's log (stderr, level WARNING and up) that report an error or a traceback."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"count": 0, "samples": [], "unreadable": str(path)}
    hits = [line.strip()[:300] for line in lines if LOG_ERROR.search(line)]
    return {"count": len(hits), "samples": hits[:5]}


def ms(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 10 else f"{x:.1f} s"


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _spread(seconds: list[float]) -> str:
    return f"{ms(percentile(seconds, 50))} / {ms(percentile(seconds, 99))}" if seconds else "—"


def by_tool(calls: list[Call], warm_up: float) -> dict[str, dict[str, Any]]:
    """Per tool: calls and failures (all), p50 / p99 / max seconds of the calls that started after the warm-up."""
    out: dict[str, dict[str, Any]] = {}
    for tool in sorted({c.tool for c in calls}):
        mine = [c for c in calls if c.tool == tool]
        steady = [c.seconds for c in mine if c.at >= warm_up]
        out[tool] = {"calls": len(mine), "failures": sum(not c.ok for c in mine),
                     "p50": percentile(steady, 50) if steady else None,
                     "p99": percentile(steady, 99) if steady else None, "max": max(steady, default=None)}
    return out


def summary(fig: dict[str, Any]) -> dict[str, Any]:
    """The figures as JSON-ready values: the calls reduced to counts, failures (the first 20) and latencies."""
    calls: list[Call] = fig["calls"]
    failed = [c for c in calls if not c.ok]
    load = fig["load"]
    start: ProcStats = load["start"]
    end: ProcStats = load["end"]
    out = {k: v for k, v in fig.items() if k not in ("calls", "load", "after_checks")}
    out.update(
        calls=len(calls), failures=len(failed),
        failure_samples=[f"client {c.client} call {c.seq} at {c.at:.1f} s, {c.tool}: {c.detail}" for c in failed[:20]],
        by_tool=by_tool(calls, fig["warm_up"]),
        slowest=[f"{c.tool} {ms(c.seconds)} (client {c.client} call {c.seq} at {c.at:.1f} s)"
                 for c in sorted(calls, key=lambda c: -c.seconds)[:10]],
        steady_seconds=[c.seconds for c in calls if c.at >= fig["warm_up"]],
        sessions=load["sessions"], wall=load["wall"], client_cpu=load["client_cpu"], server_cpu=load["server_cpu"],
        server={"start": asdict(start), "end": asdict(end), "peak_rss": load["peak_rss"],
                "rss_ratio": end.rss / start.rss if start.rss else None},
        fds_first_half=first_half_peak(load["trace"], "fds", fig["warm_up"], load["wall"]),
        threads_first_half=first_half_peak(load["trace"], "threads", fig["warm_up"], load["wall"]),
        trace=load["trace"], diagnose_ok=fig["checks"]["diagnose_ok"], fd_kinds=load["fd_kinds"],
        fd_growth=fd_growth(load["fd_kinds"]["start"], load["fd_kinds"]["end"]))
    return out


def first_half_peak(trace: list[dict[str, Any]], key: str, warm_up: float, wall: float) -> int:
    """The most of ``key`` (fds, threads) the trace saw in the first half of the load after its warm-up: a leak
    grows past it by the end, a count that moves up and down with the work (the text index's segments, sessions,
    worker threads) does not."""
    middle = warm_up + (wall - warm_up) / 2
    return max((int(r[key]) for r in trace if warm_up <= r["at"] <= middle), default=0)


def fd_growth(start: dict[str, int], end: dict[str, int]) -> dict[str, int]:
    """The kinds of file descriptor whose count changed between the two looks, by how much (most first)."""
    delta = {k: end.get(k, 0) - start.get(k, 0) for k in set(start) | set(end)}
    return dict(sorted(((k, v) for k, v in delta.items() if v), key=lambda kv: -abs(kv[1])))


def table_rows(fig: dict[str, Any], args: argparse.Namespace) -> tuple[list[tuple[str, ...]], list[str],
                                                                         dict[str, Any]]:
    """The rows, the notes and the JSON figures of a finished soak."""
    s = summary(fig)
    start, end = s["server"]["start"], s["server"]["end"]
    checks, diag = fig["checks"], fig["checks"]["diagnose"]
    cache = diag.get("artifact_cache") or {}
    wall, busy = s["wall"], s["wall"] - fig["warm_up"]
    steady = s["steady_seconds"]
    backend = "PostgreSQL" if fig["backend"] == "postgresql" else "SQLite"
    failures = s["failures"]
    ratio = s["server"]["rss_ratio"] or 0.0
    watched, movers, integrity = checks["watched"], checks["movers"], checks["integrity"]
    orphaned_records = sum((diag.get("orphaned_records") or {}).values())
    setup = fig["setup"]
    errors = fig["log_errors"]
    kinds = Counter(_kind(c.tool) for c in fig["calls"])
    rows: list[tuple[str, ...]] = [
        (f"soak: {fig['clients']} MCP clients over Streamable HTTP × {fig['seconds']:g} s (the first "
         f"{fig['warm_up']:g} s the warm-up), one `assay serve` ({backend}, Prefect "
         f"{'on' if fig['prefect'] else 'off'}): calls made (until the last call in flight at the end returned)",
         f"{s['calls']:,} in {wall:,.0f} s = {s['calls'] / wall:,.1f}/s", "—",
         "—", "—", "—"),
        ("  of which reads / searches / plan runs / set changes / file moves",
         " / ".join(f"{kinds.get(k, 0):,}" for k in ("read", "search", "plan run", "set change", "move")),
         "—", "—", "—", "—"),
        (f"  sessions opened (a new one every {fig['calls_per_session']} calls of a client)", f"{s['sessions']:,}",
         "—", "—", "—", "—"),
        ("  failures (tool errors, JSON-RPC and transport errors, answers saying something was not done; the "
         "warm-up's included)", f"{failures:,}" + (": " + "; ".join(s["failure_samples"][:5]) if failures else ""),
         "—", "—", "0", yes_no(failures == 0)),
        ("  latency of every call after the warm-up, p50 / p99 (per tool below); the slowest calls",
         f"{_spread(steady)}; " + "; ".join(s["slowest"][:3]), "—", "—", "—", "—"),
        ("the server's RSS after the warm-up / at the end; its peak after the warm-up",
         f"{mb(start['rss'])} / {mb(end['rss'])}; {mb(s['server']['peak_rss'])}", "after the warm-up",
         f"{ratio:.2f}×", f"≤ {RSS_GOAL:.2f}×", yes_no(0 < ratio <= RSS_GOAL)),
        ("  its child processes (SQLite writer, extraction and classifier workers, Prefect's API): count and RSS, "
         "after the warm-up / at the end", f"{start['children']}, {mb(start['children_rss'])} / {end['children']}, "
         f"{mb(end['children_rss'])}", "—", "—", "—", "—"),
        ("open file descriptors of the server (/proc/PID/fd), after the warm-up / at the end (what changed)",
         f"{start['fds']} / {end['fds']}" + (" (" + ", ".join(f"{_short(k)} {v:+d}" for k, v in list(
             s["fd_growth"].items())[:4]) + ")" if s["fd_growth"] else ""),
         f"most in the first half: {s['fds_first_half']}", f"{end['fds'] - start['fds']:+d}",
         "no growth: end ≤ first half's most", yes_no(end["fds"] <= s["fds_first_half"])),
        ("threads of the server (/proc/PID/status), after the warm-up / at the end",
         f"{start['threads']} / {end['threads']}", f"most in the first half: {s['threads_first_half']}",
         f"{end['threads'] - start['threads']:+d}", "no growth: end ≤ first half's most",
         yes_no(end["threads"] <= s["threads_first_half"])),
        ("CPU after the warm-up: the server with its children / the clients and the dropper (this process)",
         f"{s['server_cpu'] / busy:.2f} / {s['client_cpu'] / busy:.2f} cores", f"{os.cpu_count()} cores", "—",
         "—", "—"),
        (f"watched folder: texts added / deleted by the dropper (one change every {args.drop_every:g} s); the "
         "watched plan's set equals the folder once settled", f"{fig['dropper']['added']:,} / "
         f"{fig['dropper']['deleted']:,}; {watched['members']} members for {watched['on_disk']} files after "
         f"{watched['waited']:.1f} s", "—", "—", "equal", yes_no(watched["match"])),
        (f"moved files where their clients last put them, once, on disk and in the index ({movers['files']} files)",
         "yes" if movers["ok"] else "; ".join(movers["problems"][:3]), "—", "—", "all", yes_no(movers["ok"])),
        ("db-diagnose at the end: integrity / orphaned entries / rows pointing at nothing / cache files orphaned, "
         "missing", f"{diag.get('integrity_check')} / {diag.get('orphaned_entries')} / {orphaned_records} / "
         f"{cache.get('orphan_files')}, {cache.get('missing_files')}", "—", "—", "ok / 0 / 0 / 0, 0",
         yes_no(checks["diagnose_ok"])),
        ("check_integrity at the end: the store, the text index and the vector index against the store (once "
         "the indexes caught up)", ("healthy" if integrity["healthy"] else "; ".join(integrity["problems"][:3]))
         + f" after {integrity['waited']:.1f} s" + (f" (first: {'; '.join(integrity['first_problems'][:2])})"
                                                    if integrity["first_problems"] else ""), "—", "—", "healthy",
         yes_no(bool(integrity["healthy"]))),
        ("errors in the server's log (ERROR, CRITICAL, tracebacks)", f"{errors['count']}" + (
            ": " + " | ".join(errors["samples"][:2]) if errors["count"] else ""), "—", "—", "0",
         yes_no(errors["count"] == 0)),
        (f"set-up (not in the load): index of the tree ({setup['index']['files']} files) / index_files "
         f"({setup['index_files']['chunks']} chunks, the model loaded) / {setup['plans_and_sets']['plans']} plans "
         "and sets", f"{setup['index']['seconds']:.1f} / {setup['index_files']['seconds']:.1f} / "
         f"{setup['plans_and_sets']['seconds']:.1f} s", "—", "—", "—", "—"),
    ]
    notes = [
        "Tree: generated fresh for the run (bench/soak_corpus.py): 24 topic documents (Markdown), 24 texts, 4 PDFs "
        "(PyMuPDF), 12 pictures (Pillow), and per client a folder its plan reads (a note, a text, a picture; a PDF "
        "for every fourth) and two folders it moves two files between.",
        f"Clients: asyncio tasks in this process, each with its own HTTP connection and MCP session (mode='legacy'), "
        f"{fig['pause']:g} s between calls; the cycle of {len(fig['mix'])} calls (bench/soak_load.py"
        f"{'' if tuple(fig['mix']) == MIX else ', --only'}: {', '.join(fig['mix'])}) starts at "
        "an offset per client; everything a client changes is its own (its set, its plan and files, its moved "
        "files), so a failure is the server's.",
        "Plan runs: the client's plan (a classifier outcome on its picture, extract_text on its texts), with "
        "wait=true; the client rewrites its text, and every other time its picture, just before, so each run "
        "has work. The watched plan (continuous, filesystem.watch, debounce 300 ms) puts each settled text in "
        "the folder into a set and extracts it.",
        f"\"After the warm-up\" is {fig['warm_up']:g} s into the load (first calls: the classifier's and "
        "extraction's worker processes start, caches fill); latencies per tool are of the calls started after it, "
        "failures of all calls. The server's memory is its own process's VmRSS; its children are listed apart. "
        "Descriptors and threads move with the work (the text index's segments come and go, sessions open and "
        "close, worker threads start and idle out), so growth is judged against the most seen in the first half of "
        "the load after the warm-up: a leak passes it by the end. Every sample is in the JSON (trace).",
        f"Wall time of the whole run (set-up, load, checks): {fig['total_seconds']:.0f} s; the server came up in "
        f"{fig['server_up']:.1f} s and exited with {fig['exit_code']} on SIGTERM. Load average at the end: "
        f"{fig['load_end']:.2f}. Timings on a shared 2-core machine are noisy.",
    ]
    return rows, notes, s


def _short(kind: str) -> str:
    """A file's descriptor kind by the last two parts of its path (the rest is the run's scratch dir)."""
    return "/".join(kind.split("/")[-2:]) if kind.startswith("/") else kind


def _kind(tool: str) -> str:
    if tool in ("search", "search_documents", "search_documents (semantic)"):
        return "search"
    if tool == "plan-execute":
        return "plan run"
    if tool in ("resource-set-modify", "resource-set-create", "resource-set-delete"):
        return "set change"
    if tool == "move-files":
        return "move"
    return "session" if tool == "session" else "read"


def tool_table(fig: dict[str, Any]) -> str:
    """Per tool: calls, failures, and p50 / p99 / max of the calls after the warm-up."""
    lines = ["Per tool (latency of the calls started after the warm-up):", "",
             "| tool | calls | failures | p50 | p99 | max |", "| --- | --- | --- | --- | --- | --- |"]
    for tool, t in by_tool(fig["calls"], fig["warm_up"]).items():
        cells = [ms(t[k]) if t[k] is not None else "—" for k in ("p50", "p99", "max")]
        lines.append(f"| {tool} | {t['calls']:,} | {t['failures']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

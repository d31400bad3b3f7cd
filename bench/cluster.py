"""The work-pool benchmark: the same plans run in one process on one core, on a pool with one worker, and on a pool
with two, every "machine" a worker pinned to a core of its own with ``taskset``, all sharing one PostgreSQL store.

    .venv/bin/python bench/cluster.py [--images 500] [--videos 20] [--docs 2000] [--work DIR] [--quick]
                                      [--json FILE] [--table-from FILE]

1. The corpora: bench/media.py's photos (2-12 MP with EXIF) and videos (10-60 s), bench/documents_corpus.py's
   documents (PDFs, Markdown, text). Generated once under --work and reused.
2. A throw-away PostgreSQL cluster and a Prefect server on loopback (bench/cluster_parts.py), shared by every run;
   each configuration gets a fresh database, so every run does all the work.
3. Two plans: "media" (thumbnails and metadata of every photo and video: two classifier outcomes) and "docs" (the
   text of every document: extract_text).
4. Baseline: `assay plan run` of each plan pinned to core 0 (`taskset -c 0`), a Prefect flow in one process, its
   pools one process wide (the worker pools size themselves to the cores the process may use).
5. Pool: `assay serve --work-pool` (unpinned: it only hands runs over) and one worker pinned to core 0, then two
   pinned to cores 0 and 1; each plan run through MCP's plan-execute (wait=true), timed from the call to the answer.
6. A killed worker: a fresh media run on two workers, SIGKILL of the worker holding a batch; the time from the kill
   to the end of that batch's redo, against the median batch.
7. Prefect's cost: the task runs it ran (each a worker's share, which claims batch after batch in the store), and
   on each worker the gap between finishing one batch and claiming the next, summed against the run; and the same
   with ~3x as many batches.
8. The physical limit: the CPU seconds of the two workers and of PostgreSQL, Prefect's server and assay serve
   during the 2-worker run, over the 2 cores they share.

Figures go to stdout as a table (--out, --json keep them); progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psutil
from mcp import Client
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import documents_corpus, media  # noqa: E402
from bench.cluster_parts import REPO, assay_env, assay_serve, assay_worker, postgres, prefect_server  # noqa: E402
from bench.common import publish, render, secs  # noqa: E402

log = logging.getLogger("bench.cluster")
POOL = "bench"
WORKER_ARGS: list[str] = []  # `assay worker` flags of every worker (--cold-starts)


def plans(media_root: Path, docs_root: Path) -> dict[str, str]:
    return {
        "media": (f"plan media\nsource files index {media_root}\nrule media when media_type in [image, video]\n"
                  "  do classifier generate_thumbnail maxWidth=256 maxHeight=256\n"
                  "  do classifier extract_metadata\n"),
        "docs": f"plan docs\nsource files index {docs_root}\nrule docs when media_type in [document, text]\n"
                "  do extract_text\n",
    }


def fresh_database(admin_url: str, name: str) -> str:
    engine = create_engine(admin_url.rsplit("/", 1)[0] + "/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name


def baseline(work: Path, db_admin: str, api: str, cache: Path, plan_files: dict[str, Path], roots: list[Path],
             name: str) -> dict[str, float]:
    """Each plan through `assay plan run`, pinned to core 0: seconds per plan."""
    db = fresh_database(db_admin, f"bench_{name}")
    env, data = assay_env(work, name, db, api, cache)
    out: dict[str, float] = {}
    for plan, path in plan_files.items():
        log.info("baseline: assay plan run %s on one core", plan)
        started = time.perf_counter()
        proc = subprocess.run(["taskset", "-c", "0", sys.executable, "-m", "mcp_server.cli", "plan", "run", str(path),
                               "--data-dir", str(data), "--database-url", db,
                               *[a for r in roots for a in ("--root", str(r))]],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=7200)
        out[plan] = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"assay plan run {plan} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return out


async def execute(url: str, plan: str) -> dict[str, Any]:
    async with Client(url) as client:
        result = await client.call_tool("plan-execute", {"name": plan, "wait": True})
    if result.is_error:
        raise RuntimeError(f"plan-execute {plan}: {result.content}")
    return result.structured_content or {}


async def create(url: str, plan_text: str) -> None:
    async with Client(url) as client:
        result = await client.call_tool("plan-create", {"text": plan_text})
    if result.is_error:
        raise RuntimeError(f"plan-create: {result.content}")


def batch_rows(db: str, execution_id: int) -> list[dict[str, Any]]:
    engine = create_engine(db)
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(text(
            "SELECT id, k, position, status, worker, attempt, history_json, created_at, started_at, finished_at "
            "FROM outcome_batches WHERE execution_id = :e ORDER BY started_at"), {"e": execution_id})]
    engine.dispose()
    return rows


def dispatch_gaps(rows: list[dict[str, Any]]) -> list[float]:
    """Per worker, the seconds between finishing a batch and claiming its next (outcome by outcome)."""
    gaps: list[float] = []
    by: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        if row["status"] == "done" and row["started_at"] is not None:
            by.setdefault((row["worker"], row["position"]), []).append(row)
    for batches in by.values():
        batches.sort(key=lambda r: r["started_at"])
        gaps += [b["started_at"] - a["finished_at"] for a, b in zip(batches, batches[1:])
                 if b["started_at"] >= a["finished_at"]]
    return gaps


@contextlib.contextmanager
def pool_cluster(work: Path, db_admin: str, api: str, cache: Path, roots: list[Path], name: str, cores: list[str],
                 extra_env: dict[str, str] | None = None):
    db = fresh_database(db_admin, f"bench_{name}")
    with contextlib.ExitStack() as stack:
        workers = [stack.enter_context(assay_worker(work, f"{name}-w{i + 1}", pool=POOL, database_url=db,
                                                    api_url=api, cache_dir=cache, cores=core,
                                                    extra_env=extra_env, args=WORKER_ARGS))
                   for i, core in enumerate(cores)]
        server = stack.enter_context(assay_serve(work, pool=POOL, database_url=db, api_url=api, cache_dir=cache,
                                                 roots=roots, name=f"{name}-server"))
        yield db, server, workers


def support_cpu(pids: list[int]) -> float:
    """CPU seconds so far of PostgreSQL's processes and of the given processes with their children."""
    total = 0.0
    procs = [p for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("postgres")]
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(pid)
            procs += [parent, *parent.children(recursive=True)]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def share_runs(api: str, plan: str, since: float) -> int:
    """How many task runs (workers' shares of batches) Prefect ran for plan ``plan`` since ``since``."""
    with httpx.Client(base_url=api, timeout=30) as client:
        runs = client.post("/task_runs/filter", json={"limit": 200, "sort": "EXPECTED_START_TIME_DESC",
                                                      "task_runs": {"name": {"like_": f"{plan} [share"}}}).json()
    return sum(1 for r in runs if datetime.fromisoformat(r["created"]).timestamp() >= since)


def tree_cpu(pids: list[int]) -> float:
    """CPU seconds so far of the given processes with their children."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(pid)
            for proc in (parent, *parent.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    times = proc.cpu_times()
                    total += times.user + times.system
    return total


def rss_mb(pids: list[int]) -> float:
    """Resident memory of the given processes with their children (MB)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            parent = psutil.Process(pid)
            for proc in (parent, *parent.children(recursive=True)):
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
    return total / 1e6


def pool_run(work: Path, db_admin: str, api: str, cache: Path, roots: list[Path], texts: dict[str, str],
             name: str, cores: list[str], prefect_pid: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with pool_cluster(work, db_admin, api, cache, roots, name, cores) as (db, server, workers):
        out["rss_mb"] = [rss_mb([w.proc.pid for w in workers])]
        for plan, plan_text in texts.items():
            asyncio.run(create(server.url, plan_text))
            log.info("%s: plan-execute %s", name, plan)
            support = [prefect_pid, server.proc.pid]
            cpu_before, workers_before = support_cpu(support), tree_cpu([w.proc.pid for w in workers])
            since = time.time()
            started = time.perf_counter()
            row = asyncio.run(execute(server.url, plan))
            seconds = time.perf_counter() - started
            answered = time.time()
            support_s = support_cpu(support) - cpu_before
            workers_s = tree_cpu([w.proc.pid for w in workers]) - workers_before
            if row.get("status") not in ("success", "partial"):
                raise RuntimeError(f"{name} {plan}: {row}")
            rows = batch_rows(db, row["execution_id"])
            work_s = [r["finished_at"] - r["started_at"] for r in rows if r["status"] == "done"]
            gaps = dispatch_gaps(rows)
            spread = (max(r["finished_at"] for r in rows) - min(r["started_at"] for r in rows)) if rows else 0.0
            out[plan] = {"seconds": seconds, "applied": row["outcomes_applied"], "status": row["status"],
                         "batches": len(rows), "workers": sorted({r["worker"] for r in rows}), "spread": spread,
                         "batch_median": statistics.median(work_s) if work_s else 0.0,
                         "gap_median": statistics.median(gaps) if gaps else 0.0, "gap_sum": sum(gaps),
                         "work_sum": sum(work_s), "support_cpu": support_s, "workers_cpu": workers_s,
                         "shares": share_runs(api, plan, since),
                         "startup": (min(r["started_at"] for r in rows) - since) if rows else 0.0,
                         "tail": (answered - max(r["finished_at"] for r in rows)) if rows else 0.0}
            out["rss_mb"].append(rss_mb([w.proc.pid for w in workers]))
    return out


def kill_run(work: Path, db_admin: str, api: str, cache: Path, roots: list[Path], plan_text: str,
             files: int) -> dict[str, Any]:
    """A media run on two workers in 16 batches; the worker holding a batch is killed once two batches are done."""
    with pool_cluster(work, db_admin, api, cache, roots, "kill", ["0", "1"],
                      extra_env={"ASSAY_BATCH_ENTRIES": str(max(1, files // 16))}) as (db, server, workers):
        asyncio.run(create(server.url, plan_text))

        async def start() -> dict[str, Any]:
            async with Client(server.url) as client:
                result = await client.call_tool("plan-execute", {"name": "media", "wait": False})
            return result.structured_content or {}

        execution_id = asyncio.run(start())["execution_id"]
        victim = None
        deadline = time.monotonic() + 600
        while victim is None:  # a batch that started just now: the kill lands in its middle
            if time.monotonic() > deadline:
                raise RuntimeError("no batch ran after two were done: nothing to kill")
            rows = batch_rows(db, execution_id)
            fresh = [r for r in rows if r["status"] == "running" and time.time() - r["started_at"] < 0.5]
            done = [r for r in rows if r["status"] == "done"]
            victim = fresh[0] if fresh and len(done) >= 2 else None
            time.sleep(0.02)
        part = next(w for w in workers if w.name == victim["worker"])
        os.kill(part.proc.pid, signal.SIGKILL)
        killed = time.time()
        log.info("killed worker %s holding batch %s", part.name, victim["k"])
        engine = create_engine(db)
        while True:
            with engine.connect() as conn:
                status = conn.execute(text("SELECT status FROM plan_executions WHERE id = :e"),
                                      {"e": execution_id}).scalar()
            if status != "running":
                break
            time.sleep(0.5)
        engine.dispose()
        rows = batch_rows(db, execution_id)
        redone = next(r for r in rows if r["id"] == victim["id"])
        normal = [r["finished_at"] - r["started_at"] for r in rows if r["status"] == "done" and r["attempt"] == 1]
        lost_at = next(h["at"] for h in json.loads(redone["history_json"]) if h["outcome"] == "lost")
        return {"status": status, "victim": victim["worker"], "redo_s": redone["finished_at"] - killed,
                "batch_median": statistics.median(normal), "redone_by": redone["worker"],
                "attempt": redone["attempt"], "detected_s": lost_at - killed,
                "waited_s": redone["started_at"] - lost_at, "again_s": redone["finished_at"] - redone["started_at"]}


def memory_run(work: Path, db_admin: str, api: str, cache: Path, roots: list[Path], plan_text: str,
               runs: int) -> list[float]:
    """The media plan on two workers ``runs`` times, each time at another thumbnail size (new work for every photo
    and video): the workers' RSS (with their pools) after each run."""
    out: list[float] = []
    with pool_cluster(work, db_admin, api, cache, roots, "memory", ["0", "1"]) as (_, server, workers):
        for i in range(runs):
            asyncio.run(create(server.url, plan_text.replace("plan media", f"plan media{i}")
                               .replace("maxWidth=256", f"maxWidth={200 + 8 * i}")))
            row = asyncio.run(execute(server.url, f"media{i}"))
            if row.get("status") not in ("success", "partial"):
                raise RuntimeError(f"memory run {i + 1}: {row}")
            out.append(rss_mb([w.proc.pid for w in workers]))
            log.info("memory run %d: workers' RSS %.0f MB", i + 1, out[-1])
    return out


def overhead_run(work: Path, db_admin: str, api: str, cache: Path, roots: list[Path], plan_text: str,
                 entries: int, name: str) -> dict[str, Any]:
    """The docs plan on two workers with ``entries`` per batch: its run and its dispatch gaps."""
    out: dict[str, Any] = {}
    with pool_cluster(work, db_admin, api, cache, roots, name, ["0", "1"],
                      extra_env={"ASSAY_BATCH_ENTRIES": str(entries)}) as (db, server, _):
        asyncio.run(create(server.url, plan_text))
        since = time.time()
        started = time.perf_counter()
        row = asyncio.run(execute(server.url, "docs"))
        seconds = time.perf_counter() - started
        rows = batch_rows(db, row["execution_id"])
        gaps = dispatch_gaps(rows)
        out = {"seconds": seconds, "batches": len(rows), "gap_median": statistics.median(gaps) if gaps else 0.0,
               "gap_sum": sum(gaps), "shares": share_runs(api, "docs", since)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, help="photos (default 500; --quick 16)")
    p.add_argument("--videos", type=int, help="videos (default 20; --quick 2)")
    p.add_argument("--docs", type=int, help="documents (default 2000; --quick 40)")
    p.add_argument("--work", default=str(REPO / "bench" / ".work" / "cluster"), help="corpora and scratch")
    p.add_argument("--quick", action="store_true", help="tiny corpora: a smoke run of every row")
    p.add_argument("--skip-kill", action="store_true", help="leave out the killed-worker run")
    p.add_argument("--memory-runs", type=int, default=None, help="media runs on two workers for the memory row "
                                                                "(default 6; --quick 2; 0 leaves the row out)")
    p.add_argument("--cold-starts", action="store_true",
                   help="workers start flow runs in a fresh interpreter (`assay worker --cold-starts`)")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "cluster.md"), help="where to write the table")
    p.add_argument("--json", help="write every figure here too")
    p.add_argument("--table-from", metavar="JSON", help="print the table of figures a run kept (--json) and stop")
    args = p.parse_args()
    if args.table_from:
        print(table(json.loads(Path(args.table_from).read_text())))
        return
    if args.cold_starts:
        WORKER_ARGS.append("--cold-starts")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    images = args.images if args.images is not None else (16 if args.quick else 500)
    videos = args.videos if args.videos is not None else (2 if args.quick else 20)
    docs = args.docs if args.docs is not None else (40 if args.quick else 2000)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = media.ensure_corpus(work, images=images, videos=videos, pdfs=0, quick=args.quick, long_seconds=None)
    doc_corpus = documents_corpus.ensure_corpus(work, docs=docs, scale=0.2 if args.quick else 1.0)
    roots = [corpus.root, doc_corpus.folder]
    texts = plans(corpus.root, doc_corpus.folder)
    scratch = work / f"run-{os.getpid()}"
    scratch.mkdir()
    plan_files = {}
    for name, body in texts.items():
        plan_files[name] = scratch / f"{name}.plan"
        plan_files[name].write_text(body)
    fig: dict[str, Any] = {"corpus": {"images": len(corpus.images), "videos": len(corpus.videos),
                                      "docs": len(doc_corpus.docs)}, "starts": "cold" if args.cold_starts else "warm"}
    try:
        with postgres() as db_admin, prefect_server(scratch) as prefect:
            cache = scratch / "cache"
            cache.mkdir()
            fig["baseline"] = baseline(scratch, db_admin, prefect.url, cache, plan_files, roots, "baseline")
            fig["one"] = pool_run(scratch, db_admin, prefect.url, cache, roots, texts, "one", ["0"], prefect.proc.pid)
            fig["two"] = pool_run(scratch, db_admin, prefect.url, cache, roots, texts, "two", ["0", "1"],
                                  prefect.proc.pid)
            if not args.skip_kill:
                fig["kill"] = kill_run(scratch, db_admin, prefect.url, cache, roots, texts["media"],
                                       len(corpus.images) + len(corpus.videos))
            memory_runs = args.memory_runs if args.memory_runs is not None else (2 if args.quick else 6)
            if memory_runs:
                fig["memory"] = memory_run(scratch, db_admin, prefect.url, cache, roots, texts["media"], memory_runs)
            fig["overhead"] = overhead_run(scratch, db_admin, prefect.url, cache, roots, texts["docs"],
                                           max(1, docs // 64), "many")
    finally:
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    publish(table(fig), args.out, fig, args.json)


def table(fig: dict[str, Any]) -> str:
    rows: list[tuple] = []
    made = fig["corpus"]
    labels = {"media": f"thumbnails + metadata of {made['images']} photos and {made['videos']} videos",
              "docs": f"text extraction of {made['docs']} documents"}
    for plan, label in labels.items():
        base, one, two = fig["baseline"][plan], fig["one"][plan]["seconds"], fig["two"][plan]["seconds"]
        rows.append((f"{label}: one process on one core (`assay plan run`, taskset -c 0)", secs(base), "—", "—",
                     "—", "—"))
        rows.append((f"{label}: pool, 1 worker on one core", secs(one), secs(base), f"{base / one:.2f}x",
                     ">= 0.9x", "yes" if base / one >= 0.9 else "**no**"))
        rows.append((f"{label}: pool, 2 workers on a core each, end to end", secs(two), secs(one),
                     f"{one / two:.2f}x", ">= 1.8x", "yes" if one / two >= 1.8 else "**no**"))
        t1, t2 = fig["one"][plan]["spread"], fig["two"][plan]["spread"]
        rows.append((f"{label}: the batches' phase (first batch's start to last batch's end), 2 workers / 1",
                     secs(t2), secs(t1), f"{t1 / t2:.2f}x", ">= 1.8x", "yes" if t1 / t2 >= 1.8 else "**no**"))
        two_fig = fig["two"][plan]
        floor = (two_fig["workers_cpu"] + two_fig["support_cpu"]) / 2
        rows.append((f"{label}: the physical limit of the 2-worker run: its CPU seconds (workers + PostgreSQL, "
                     "Prefect and assay serve) over 2 cores; the run against it",
                     f"{two_fig['workers_cpu']:.1f} + {two_fig['support_cpu']:.1f} CPU s / 2 = {secs(floor)}",
                     secs(two), f"{floor / two:.2f}", "—", "—"))
        rows.append((f"{label}: the speed-up the two shared cores allow (the 1-worker batches' phase over that "
                     "limit); the batches' phase against it", f"{t1 / floor:.2f}x",
                     f"{t1 / t2:.2f}x", f"{(t1 / t2) / (t1 / floor):.0%}", "—", "—"))
        t, o = fig["two"][plan], fig["one"][plan]
        if "startup" in o:
            rows.append((f"{label}: the serial part, 1 worker / 2 workers: the call to the first batch (hand-over, "
                         f"a worker's poll, the flow run's start ({fig.get('starts', 'cold')}), scan, match, cut); "
                         "the last batch to the answer", f"{secs(o['startup'])}; {secs(o['tail'])}",
                         f"{secs(t['startup'])}; {secs(t['tail'])}", "—", "—", "—"))
        rows.append((f"{label}: batches / workers that took them / median batch", f"{t['batches']} / "
                     f"{', '.join(t['workers'])} / {secs(t['batch_median'])}", "—", "—", "—", "—"))
        ratio = t["work_sum"] / max(1e-9, o["work_sum"])
        rows.append((f"{label}: the batches' time summed (each on its own core), 2 workers / 1 worker",
                     f"{t['work_sum']:.1f} s", f"{o['work_sum']:.1f} s", f"{ratio:.2f}x", "—", "—"))
        rows.append((f"{label}: CPU seconds of PostgreSQL, Prefect's server and assay serve during the run, 2 workers "
                     "/ 1 worker", f"{t['support_cpu']:.1f} s", f"{o['support_cpu']:.1f} s", "—", "—", "—"))
        share = t["gap_sum"] / max(1e-9, t["gap_sum"] + t["work_sum"])
        rows.append((f"{label}: Prefect's task runs (workers' shares) for its {t['batches']} batches; a worker's gap "
                     "between two batches (the next claimed in the store), median; the gaps' share of the workers' "
                     "time", f"{t['shares']}; {t['gap_median'] * 1000:.0f} ms; {share:.1%}", "—", "—", "< 5%",
                     "yes" if share < 0.05 else "**no**"))
    rss = fig["two"]["rss_mb"]
    rows.append(("RSS of the two workers (with their pools): started / after the media run / after the documents run",
                 " / ".join(f"{x:.0f} MB" for x in rss), "—", "—", "flat", "—"))
    if fig.get("memory"):
        mem = fig["memory"]
        growth = mem[-1] / max(1e-9, mem[0])
        rows.append((f"RSS of the two workers over {len(mem)} media runs (each at a new thumbnail size): after the "
                     "first / each next", " / ".join(f"{x:.0f}" for x in mem) + " MB", f"{mem[0]:.0f} MB",
                     f"{growth:.2f}x", "flat (<= 1.10x)", "yes" if growth <= 1.10 else "**no**"))
    o, d = fig["overhead"], fig["two"]["docs"]
    rows.append((f"the docs plan in {o['batches']} batches on 2 workers: Prefect's task runs; the gap between "
                 "batches, median; all gaps", f"{o['shares']}; {o['gap_median'] * 1000:.0f} ms; {secs(o['gap_sum'])}",
                 f"{d['shares']}; {d['gap_median'] * 1000:.0f} ms at {d['batches']} batches", "—", "flat",
                 "yes" if o["gap_median"] <= 2 * max(0.01, d["gap_median"]) and o["shares"] <= 2 * d["shares"]
                 else "**no**"))
    if "kill" in fig:
        k = fig["kill"]
        ratio = k["redo_s"] / max(1e-9, k["batch_median"])
        rows.append(("a killed worker's batch: from the SIGKILL to the end of its redo / the median batch",
                     f"{secs(k['redo_s'])} (redone by {k['redone_by']}, attempt {k['attempt']})",
                     secs(k["batch_median"]), f"{ratio:.2f}x", "<= 2x", "yes" if ratio <= 2 else "**no**"))
        rows.append(("the same: the kill to the batch handed back; the wait for a free worker; the redo",
                     f"{secs(k['detected_s'])}; {secs(k['waited_s'])}; {secs(k['again_s'])}", "—", "—", "—", "—"))
    facts = (f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, PostgreSQL store, Prefect server on loopback; "
             "workers pinned with taskset")
    notes = ["Times are from the plan-execute call to its answer (the hand-over to the pool and a worker's pick-up "
             "included); the baseline is `assay plan run` from the command to its exit.",
             "The server, Prefect's server and PostgreSQL are not pinned: on this 2-core machine they share the "
             "workers' cores."]
    return render(facts, rows, notes)


if __name__ == "__main__":
    main()

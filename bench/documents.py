"""The documents benchmark: text extraction + indexing through a plan run, and search_documents / search_multiple
through an MCP client, next to the plain PyMuPDF loop and ripgrep over the same text, measured in the same run.

    .venv/bin/python bench/documents.py [--docs 10000] [--scale 1] [--quick] [--work DIR] [--calls 20]
                                        [--rg-runs 5] [--no-prefect] [--one-mode] [--out bench/out/documents.md]
                                        [--json FILE]

1. The corpus (bench/documents_corpus.py): PDFs of several pages, Markdown and plain text from a Zipf vocabulary
   (about 620 MB of text for 10,000 documents), generated once under --work and reused; every file is read once
   before timing (warm page cache for everyone).
2. Prefect (one trivial flow), the extraction pool and a first extract_text plan run over three documents of their own
   are started once and timed apart, as in a server that has been up a while.
3. Extraction + indexing: a plan whose rule matches the corpus's PDFs, Markdown and text files with the outcome
   ``extract_text`` (flows.plans.service.PlanService.execute(wait=True, scan=False), as a Prefect flow and as plain
   functions) over a fresh SQLite store with the corpus indexed first (not timed), against a one-core loop:
   ``pymupdf.open(p)`` + ``page.get_text()`` per page for the PDFs, a plain read + UTF-8 decode for the rest
   (goal: ours >= 0.9x its rate, MB of text per second). Peak RSS of this process + the extraction workers sampled
   every 20 ms.
4. The stored text is written out as one text file per document (untimed): ripgrep's corpus.
5. ``assay serve`` over stdio on that store (built-in plan off, no Prefect), the Python SDK's client: for each query of
   documents_corpus.QUERIES (single terms rare / uncommon / common, AND, OR, NOT, a phrase, a mix), --calls
   ``search_documents`` calls (global scope, context 5, max 20) -> p50 / p95, against the query's rg pipeline over
   the text files (``rg -i -F``, AND as a pipe into the next rg, NOT as ``rg -v``), --rg-runs runs -> p50 / p95
   (goal: ours >= 10x faster at p50). Our total_matches must equal rg's line count (a mismatch row says otherwise).
   ``search_multiple`` with 10 queries against the same 10 as single calls one after the other.
6. Index size: the FTS5 tables and the segments table (dbstat) against the text's size; peak RSS of the server.
Progress goes to stderr; stdout gets the table only.
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import bench_logging, hwm_kb, payload, publish, render, secs, server_env, server_pid  # noqa: E402
from bench.classify import ProcessSampler, available_cores, read_all, start_prefect  # noqa: E402
from bench.documents_corpus import QUERIES, DocCorpus, Query, ensure_corpus, word  # noqa: E402
from bench.run import percentile  # noqa: E402

log = logging.getLogger("bench.documents")

GOAL_EXTRACT = 0.9  # ours / the one-core loop, MB of text per second
GOAL_SEARCH = 10.0  # rg p50 / ours p50
RG_TIMEOUT = 600
EXTENSIONS = (".pdf", ".md", ".txt")
MULTI = [q.text for q in QUERIES] + [word(100), word(1500)]  # search_multiple's 10 queries


# --- baselines -----------------------------------------------------------------------------------------------------

def baseline_extract(corpus: DocCorpus) -> dict:
    """The plain loop, one core: PyMuPDF ``get_text`` of every page of every PDF, a read + UTF-8 decode of every
    other file. Returns seconds and the characters of text it got."""
    import pymupdf

    chars = 0
    started = time.perf_counter()
    for p in corpus.docs:
        if p.suffix == ".pdf":
            with pymupdf.open(p) as doc:
                for page in doc:
                    chars += len(page.get_text())
        else:
            chars += len(p.read_bytes().decode("utf-8"))
    return {"seconds": time.perf_counter() - started, "chars": chars}


def rg_command(stage: tuple[str, ...], first: bool) -> list[str]:
    """One stage of a query's rg pipeline: the first searches the folder (cwd) and prints ``path:line:text``, the
    next ones filter the previous stage's output."""
    cmd = ["rg", "--no-config", "-i", "-F"]
    if first:
        cmd += ["-n", "--no-heading", "--with-filename", *stage, "."]
    else:
        cmd += list(stage)
    return cmd


def run_rg(query: Query, folder: Path) -> tuple[float, int]:
    """The query's rg pipeline over ``folder`` (cwd, relative paths); returns (seconds, lines out)."""
    started = time.perf_counter()
    procs: list[subprocess.Popen] = []
    stdin = None
    for k, stage in enumerate(query.stages):
        proc = subprocess.Popen(rg_command(stage, k == 0), cwd=folder, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        if stdin is not None:
            stdin.close()  # the next stage owns the pipe now
        stdin = proc.stdout
        procs.append(proc)
    lines = 0
    assert stdin is not None
    while chunk := stdin.read(1 << 20):
        lines += chunk.count(b"\n")
    for proc in procs:
        proc.wait(timeout=RG_TIMEOUT)
        if proc.returncode not in (0, 1):  # 1: nothing matched
            raise RuntimeError(f"{proc.args} exited {proc.returncode}")
    return time.perf_counter() - started, lines


# --- ours: the plan run ----------------------------------------------------------------------------------------------

def extract_plan(name: str, folder: Path, ocr: bool = False):
    from dsl.model import Plan

    exts = ", ".join(EXTENSIONS)
    return Plan.from_object({"name": name, "sources": [
        {"name": "corpus", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [{"name": name, "when": f"extension in [{exts}]",
                   "outcomes": [{"type": "extract_text", "ocr": ocr}]}]})


class Stores:
    """Fresh SQLite stores under ``scratch``, each with ``folders`` indexed (not timed)."""

    def __init__(self, scratch: Path, roots: list[Path]) -> None:
        self.scratch, self.roots, self.made = scratch, roots, 0

    def fresh(self, label: str, folders: list[Path], *, use_prefect: bool):
        from flows.index.flow import run_index_job
        from flows.plans.service import PlanService
        from flows.core.roots import Roots
        from store import jobs as store_jobs
        from store.engine import make_engine

        self.made += 1
        data = self.scratch / f"{self.made:02d}-{label}"
        data.mkdir(parents=True)
        engine = make_engine(f"sqlite:///{data / 'assay.db'}")
        for folder in folders:
            run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(folder)), root=str(folder))
        service = PlanService(engine, Roots.of([str(r) for r in self.roots]), use_prefect=use_prefect)
        return engine, service, data


def run_plan(service, plan, *, use_prefect: bool, sampler: ProcessSampler | None = None) -> dict:
    """Run ``plan`` to its end; returns seconds, the CPU each part used and the outcome's counters."""
    service.save(plan, create=None)
    cpu0 = sampler.cpu_seconds() if sampler else {}
    started = time.perf_counter()
    row = service.execute(plan, wait=True, scan=False, use_prefect=use_prefect)
    seconds = time.perf_counter() - started
    cpu = {k: v - cpu0[k] for k, v in sampler.cpu_seconds().items()} if sampler else {}
    if row["status"] not in ("success", "partial"):
        raise RuntimeError(f"plan {plan.name} ended {row['status']}: {row['error_message']}")
    outcome = row["summary"]["rules"][plan.rules[0].name]["outcomes"][0]
    ours = cpu.get("main", 0.0) + cpu.get("workers", 0.0)
    return {"seconds": seconds, "cores": ours / seconds if seconds else 0.0, "cpu": cpu, "status": row["status"],
            "matched": row["entries_matched"], "applied": outcome["applied"], "errors": outcome["errors"],
            "error_samples": outcome["error_samples"]}


def stored_counts(engine) -> dict:
    """What the store holds after a run: documents by status, their lines, characters and segments."""
    from sqlalchemy import text

    with engine.connect() as conn:
        by_status = dict(conn.execute(text("SELECT status, count(*) FROM documents GROUP BY status")).all())
        lines, chars = conn.execute(text("SELECT coalesce(sum(lines), 0), coalesce(sum(chars), 0) FROM documents "
                                         "WHERE status = 'ok'")).one()
        segments = conn.execute(text("SELECT count(*) FROM document_segments")).scalar_one()
    return {"ok": by_status.get("ok", 0), "error": by_status.get("error", 0), "lines": int(lines),
            "chars": int(chars), "segments": int(segments)}


def index_size(db: Path) -> dict:
    """Bytes of the full-text tables (document_fts and its shadow tables), of document_segments with its indexes,
    and of the whole database file, read with SQLite's dbstat."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        seg_names = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE tbl_name = 'document_segments'")}
        fts = seg = 0
        for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
            if name.startswith("document_fts"):
                fts += size
            elif name in seg_names:
                seg += size
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    finally:
        conn.close()
    return {"fts": fts, "segments": seg, "file": page_size * pages}


def pool_extract(corpus: DocCorpus) -> dict:
    """Extraction alone: every document through the extraction pool (flows.documents.worker.run_extractions, the
    plan's own options with OCR off), results counted and dropped: no store. Returns seconds, characters, errors."""
    from flows.documents.settings import current
    from flows.documents.worker import run_extractions

    chars = errors = 0
    started = time.perf_counter()
    for _, extracted in run_extractions(((i, str(p)) for i, p in enumerate(corpus.docs)),
                                        current().extract_options()):
        chars += sum(len(page.text) for page in extracted.pages)
        errors += not extracted.ok
    return {"seconds": time.perf_counter() - started, "chars": chars, "errors": errors}


def fts_floor(engine, target: Path, tx_chars: int = 4_000_000) -> dict:
    """The index's own floor: the stored segments, folded, inserted into a bare contentless FTS5 trigram table (the
    store's definition, no segment rows, no triggers) in a fresh file with the store's pragmas, in transactions of
    about ``tx_chars`` characters. Only the inserts are timed (reading the segments back is not)."""
    from sqlalchemy import text

    from store.fold import fold

    conn = sqlite3.connect(target)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "temp_store=MEMORY", "cache_size=-65536"):
        conn.execute(f"PRAGMA {pragma}")
    conn.execute("CREATE VIRTUAL TABLE fts USING fts5(text, content='', tokenize='trigram case_sensitive 1')")
    seconds, chars, batch, size = 0.0, 0, [], 0

    def flush() -> float:
        started = time.perf_counter()
        with conn:
            conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", batch)
        return time.perf_counter() - started

    with engine.connect() as source:
        for seg_id, seg_text in source.execute(text("SELECT id, text FROM document_segments ORDER BY id")):
            batch.append((seg_id, fold(seg_text)))
            size += len(seg_text)
            chars += len(seg_text)
            if size >= tx_chars:
                seconds += flush()
                batch, size = [], 0
    if batch:
        seconds += flush()
    conn.close()
    return {"seconds": seconds, "chars": chars}


def export_text(engine, folder: Path, out: Path) -> int:
    """Write each stored document's text (its pages joined by newlines: the document's lines, numbered as search
    numbers them) to ``out``/<path relative to folder>.txt, one document at a time. Returns the bytes written."""
    from sqlalchemy import text

    from store.documents import read_pages

    with engine.connect() as conn:
        rows = conn.execute(text("SELECT e.id, e.path FROM documents d JOIN entries e ON e.id = d.entry_id "
                                 "WHERE d.status = 'ok' ORDER BY e.path")).all()
    total = 0
    for entry_id, path in rows:
        target = out / (os.path.relpath(path, folder) + ".txt")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            for k, (_, page_text, _) in enumerate(read_pages(engine, entry_id, None)):
                total += fh.write(("\n" if k else "") + page_text)
            total += fh.write("\n")
    return total


# --- ours: MCP calls -------------------------------------------------------------------------------------------------

def _payload(result) -> dict:
    """A search tool's answer (list_collections' structured content is not what the figures read)."""
    return payload(result, keys=("matches", "results"))


async def _mcp_session(params, calls: int) -> dict:
    from mcp import Client

    global_scope = {"type": "global"}
    out: dict = {"ping": [], "queries": {}, "multi": [], "singles": [], "server_kb": 0}
    async with Client(params) as client:
        for _ in range(max(3, calls)):  # the transport's floor: a call that does next to nothing
            started = time.perf_counter()
            _payload(await client.call_tool("list_collections", {"path": ""}))
            out["ping"].append(time.perf_counter() - started)
        for q in QUERIES:
            args = {"query": q.text, "scope": global_scope, "context_lines": 5, "max_results": 20}
            samples: list[float] = []
            try:  # a query that fails (SEARCH_TIMEOUT, ...) is reported in its row; the others go on
                first = _payload(await client.call_tool("search_documents", args))
                for _ in range(calls):
                    started = time.perf_counter()
                    _payload(await client.call_tool("search_documents", args))
                    samples.append(time.perf_counter() - started)
            except RuntimeError as exc:
                out["queries"][q.label] = {"samples": samples, "error": str(exc)[:300], "total_matches": None}
                continue
            log.info("search_documents %s: %s matches, p50 %.3f s", q.label, first.get("total_matches"),
                     percentile(samples, 50))
            out["queries"][q.label] = {"samples": samples, "total_matches": first.get("total_matches"),
                                       "returned": len(first.get("matches", [])),
                                       "truncated": first.get("truncated")}
        multi_args = {"queries": MULTI, "scope": global_scope, "context_lines": 5, "max_results_per_query": 20}
        try:
            for _ in range(max(1, calls // 4)):
                started = time.perf_counter()
                multi = _payload(await client.call_tool("search_multiple", multi_args))
                out["multi"].append(time.perf_counter() - started)
                out["multi_completed"] = multi.get("queries_completed")
                out["multi_failed"] = multi.get("queries_failed")
                started = time.perf_counter()
                for text_ in MULTI:
                    _payload(await client.call_tool("search_documents", {"query": text_, "scope": global_scope,
                                                                         "context_lines": 5, "max_results": 20}))
                out["singles"].append(time.perf_counter() - started)
        except RuntimeError as exc:
            out["multi_error"] = str(exc)[:300]
        out["server_kb"] = hwm_kb(server_pid())
    return out


def mcp_searches(folder: Path, data_dir: Path, scratch: Path, calls: int) -> dict:
    import anyio
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server.cli", "serve", "--root", str(folder), "--data-dir", str(data_dir), "--no-prefect",
              "--log-level", "WARNING"],
        env=server_env(scratch), cwd=str(REPO))
    started = time.perf_counter()
    out = anyio.run(_mcp_session, params, calls)  # the server's stderr is ours: its errors show in the log
    out["session_seconds"] = time.perf_counter() - started
    return out


# --- the table -------------------------------------------------------------------------------------------------------

def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms" if x < 10 else f"{x:.1f} s"


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e7 else f"{n / 1e6:,.1f} MB"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def machine_facts() -> str:
    import pymupdf

    rg = subprocess.run(["rg", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{os.cpu_count()} cores, {mem:.1f} GB RAM, {platform.system()} {platform.release()}; Python "
            f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}; PyMuPDF {pymupdf.__version__} (MuPDF "
            f"{pymupdf.VersionFitz}); {rg}; load average at start {os.getloadavg()[0]:.2f}")


def extraction_rows(fig: dict) -> list[tuple]:
    c, base = fig["corpus"], fig["extract_base"]
    n = c["docs"]
    text_bytes = fig["stored"]["chars"]
    rows = [
        ("cores this run could get (a busy loop per core, CPU / wall), at the start / end",
         f"{fig['cores_start']:.2f} / {fig['cores_end']:.2f}", f"{os.cpu_count()} cores", "—", "—", "—"),
        ("Prefect start, one-time (first flow run; excluded below)", secs(fig["prefect_start"]), "—", "—", "—",
         "—"),
        ("first plan runs, one-time (a flow and plain, 3 documents; pool start and plan flow; excluded below)",
         secs(fig["first_plan_runs"]), "—", "—", "—", "—"),
    ]
    base_rate = base["chars"] / 1e6 / base["seconds"]
    for key, label in (("extract", fig["mode"]), ("extract_other", fig.get("other_mode"))):
        if key not in fig:
            continue
        r = fig[key]
        rate = text_bytes / 1e6 / r["seconds"]
        main = key == "extract"
        rows.append(((f"extraction + indexing of {n:,} documents ({c['kinds']['pdf']:,} PDFs, "
                      f"{c['kinds']['markdown']:,} Markdown, {c['kinds']['text']:,} text; {mb(text_bytes)} of text): "
                      f"plan run (extract_text), {label}") if main else f"  the same plan run as {label}",
                     f"{secs(r['seconds'])} = {rate:,.1f} MB/s = {n / r['seconds']:,.1f} docs/s",
                     (f"one-core loop PyMuPDF `get_text` per page + plain read: {secs(base['seconds'])} = "
                      f"{base_rate:,.1f} MB/s = {n / base['seconds']:,.1f} docs/s") if main else "the loop",
                     f"{rate / base_rate:.2f}×", f"≥ {GOAL_EXTRACT:g}×" if main else "—",
                     yes_no(rate / base_rate >= GOAL_EXTRACT) if main else "—"))
        ours_cpu = r["cpu"].get("main", 0) + r["cpu"].get("workers", 0)
        rows.append(("  cores kept busy; CPU seconds: this process with its extraction workers (reaped ones "
                     "included) / Prefect's API server",
                     f"{r['cores']:.2f}; {ours_cpu:.1f} / {r['cpu'].get('prefect', 0):.1f}",
                     "the loop: 1 core", "—", "—", "—"))
    pool = fig["extract_pool"]
    pool_rate = pool["chars"] / 1e6 / pool["seconds"]
    rows.append(("  extraction alone through the pool (run_extractions, results dropped: no store)",
                 f"{secs(pool['seconds'])} = {pool_rate:,.1f} MB/s", "the loop",
                 f"{pool_rate / base_rate:.2f}×", "—", "—"))
    floor = fig["fts_floor"]
    r = fig["extract"]
    floor_rate = floor["chars"] / 1e6 / floor["seconds"]
    rows.append(("  the index's floor: the same segments, folded, into a bare contentless FTS5 trigram table "
                 "(one thread, ~4 MB transactions, inserts alone)", secs(r["seconds"]),
                 f"{secs(floor['seconds'])} = {floor_rate:,.1f} MB/s",
                 f"{floor['seconds'] / r['seconds']:.2f}× (floor / ours)", "—", "—"))
    return rows


def search_rows(fig: dict) -> list[tuple]:
    s, rg = fig["search"], fig["rg"]
    text_bytes = fig["exported_bytes"]
    ping = s["ping"]
    rows = [(f"trivial tool call (list_collections) p50 over MCP stdio ({len(ping)} calls)",
             ms(percentile(ping, 50)), "the transport's floor", "—", "—", "—")]
    for q in QUERIES:
        ours = s["queries"][q.label]
        if ours.get("error"):
            rows.append((f"search_documents `{q.text}`: {q.label}", f"**failed**: {ours['error']}", "—", "—",
                         f"≥ {GOAL_SEARCH:g}×", "**no**"))
            continue
        o50, o95 = percentile(ours["samples"], 50), percentile(ours["samples"], 95)
        r = rg[q.label]
        r50, r95 = percentile(r["samples"], 50), percentile(r["samples"], 95)
        pipeline = " | ".join(" ".join(["rg -i -F", *st]) for st in q.stages)  # render escapes the "|"
        rows.append((f"search_documents `{q.text}`: {q.label}; {ours['total_matches']:,} matching lines "
                     f"(p50 / p95, {len(ours['samples'])} calls)", f"{ms(o50)} / {ms(o95)}",
                     f"`{pipeline}` over {mb(text_bytes)} of text files: {ms(r50)} / {ms(r95)}",
                     f"{r50 / o50:.2f}× (rg / ours)", f"≥ {GOAL_SEARCH:g}×",
                     yes_no(r50 >= GOAL_SEARCH * o50)))
    done = [q for q in QUERIES if not s["queries"][q.label].get("error")]
    all_ours = [x for q in done for x in s["queries"][q.label]["samples"]]
    all_rg = [x for q in done for x in rg[q.label]["samples"]]
    o50, r50 = percentile(all_ours, 50), percentile(all_rg, 50)
    rows.append((f"search_documents, all {len(done)} queries that ran, together (p50 / p95)",
                 f"{ms(o50)} / {ms(percentile(all_ours, 95))}", f"rg: {ms(r50)} / {ms(percentile(all_rg, 95))}",
                 f"{r50 / o50:.2f}× (rg / ours)", f"≥ {GOAL_SEARCH:g}×", yes_no(r50 >= GOAL_SEARCH * o50)))
    if s.get("multi_error") or not s["singles"]:
        rows.append((f"search_multiple with {len(MULTI)} queries, one call", f"**failed**: {s.get('multi_error')}",
                     "—", "—", "> 1×", "**no**"))
        return rows
    m50, s50 = percentile(s["multi"], 50), percentile(s["singles"], 50)
    rows.append((f"search_multiple with {len(MULTI)} queries, one call (p50 of {len(s['multi'])}; "
                 f"{s.get('multi_completed')} completed, {s.get('multi_failed')} failed)", ms(m50),
                 f"the same {len(MULTI)} as single search_documents calls one after the other: {ms(s50)}",
                 f"{s50 / m50:.2f}× (singles / multiple)", "> 1×", yes_no(m50 < s50)))
    return rows


def size_rows(fig: dict) -> list[tuple]:
    size, text_bytes = fig["index_size"], fig["stored"]["chars"]
    st = fig["stored"]
    return [
        ("index size: FTS5 trigram tables (document_fts*)", mb(size["fts"]), f"text: {mb(text_bytes)}",
         f"{size['fts'] / text_bytes:.2f}× the text", "—", "—"),
        (f"  document_segments ({st['segments']:,} segments, the text itself + folded copy on PostgreSQL) "
         "with its indexes", mb(size["segments"]), f"text: {mb(text_bytes)}",
         f"{size['segments'] / text_bytes:.2f}× the text", "—", "—"),
        ("  FTS + segments together; whole store file", f"{mb(size['fts'] + size['segments'])}; {mb(size['file'])}",
         f"text: {mb(text_bytes)}", f"{(size['fts'] + size['segments']) / text_bytes:.2f}× the text", "—", "—"),
    ]


def rss_rows(fig: dict) -> list[tuple]:
    r = fig["rss"]
    return [
        ("peak RSS during the extraction plan run: this process + extraction workers (sampled together, 20 ms)",
         mb(r["sum"]), "—", "—", "flat", "—"),
        ("  peak RSS, this process (plan engine, store writes, Prefect client)", mb(r["main"]), "—", "—", "—",
         "—"),
        ("  peak RSS, the largest extraction worker", mb(r["worker"]), "—", "—", "—", "—"),
        ("  peak RSS, Prefect's API server (a long-lived child, not summed)", mb(r["prefect"]), "—", "—", "—",
         "—"),
        ("peak RSS of `assay serve` (VmHWM) after all the searches", mb(fig["search"]["server_kb"] * 1024), "—",
         "—", "flat", "—"),
    ]


def mismatch_rows(fig: dict) -> list[tuple]:
    """Rows that say when ours did not do the work its baseline did, or found other lines than rg."""
    out = []
    n = fig["corpus"]["docs"]
    st = fig["stored"]
    if st["ok"] != n:
        out.append(("**mismatch**: documents extracted ok", f"{st['ok']:,} ({st['error']} errors)",
                    f"expected {n:,}", "—", "—", "**no**"))
    for key in ("extract", "extract_other"):
        if key in fig and fig[key]["errors"]:
            out.append((f"**errors** in the {key} run", str(fig[key]["errors"]),
                        "; ".join(fig[key]["error_samples"][:2]), "—", "—", "**no**"))
    if "search" in fig:
        for q in QUERIES:
            ours, lines = fig["search"]["queries"][q.label]["total_matches"], fig["rg"][q.label]["lines"]
            if ours is not None and ours != lines:
                out.append((f"**mismatch**: `{q.text}` total_matches", f"{ours:,}", f"rg: {lines:,} lines", "—",
                            "equal", "**no**"))
        if fig["search"].get("multi_failed"):
            out.append(("**errors** in search_multiple", str(fig["search"]["multi_failed"]), "—", "—", "—",
                        "**no**"))
    return out


def notes(fig: dict, corpus: DocCorpus, args: argparse.Namespace) -> list[str]:
    c = fig["corpus"]
    return [
        f"Corpus: {corpus.folder} ({c['docs']:,} documents: {c['kinds']['pdf']:,} PDFs, {c['kinds']['markdown']:,} "
        f"Markdown, {c['kinds']['text']:,} text; {mb(c['bytes'])} on disk, {mb(fig['stored']['chars'])} of text, "
        f"{fig['stored']['lines']:,} lines), generated by bench/documents_corpus.py once and reused; read once "
        "before timing (warm page cache).",
        f"Ours: a plan run through flows.plans.service.PlanService ({fig['mode']}; scan=False: the corpus is indexed "
        "first, not timed) with the outcome extract_text (OCR off: the corpus has a text layer), over a fresh "
        "SQLite store; the timing is the whole `execute(wait=True)` call: selection, the extraction pool, the "
        "segment and full-text writes.",
        f"Search: `assay serve --no-prefect` over stdio with ASSAY_DOCUMENTS_PLAN=off on that store, the Python SDK's "
        f"client; each query once to warm, then {args.calls} calls (global scope, context_lines 5, max_results "
        f"20). rg: {args.rg_runs} runs of each pipeline over the stored text written out as one file per document "
        "(the same lines), output counted by this process; `-F` fixed strings, `-i` case folded.",
        f"Load average at the start and end: {fig['machine'].rsplit(' ', 1)[-1]} / {fig['load_end']:.2f}. "
        "Timings on a shared 2-core machine are noisy.",
    ]


# --- main ------------------------------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/documents.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--docs", type=int, help="documents in the corpus (default 10000; --quick 30)")
    p.add_argument("--scale", type=float, help="multiplies each document's pages and lines (default 1; quick 0.1)")
    p.add_argument("--quick", action="store_true", help="a tiny corpus and few calls (the smoke test)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench-documents"),
                   help="where the corpus is generated once and reused; scratch stores go here too")
    p.add_argument("--calls", type=int, help="search_documents calls per query (default 20; quick 3)")
    p.add_argument("--rg-runs", type=int, help="runs of each rg pipeline (default 5; quick 2)")
    p.add_argument("--no-prefect", action="store_true", help="the measured plan run as plain functions")
    p.add_argument("--one-mode", action="store_true", help="skip the plan run in the other mode (Prefect / plain)")
    p.add_argument("--keep", action="store_true", help="keep the scratch store and text files")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "documents.md"), help="where to write the table")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    args.docs = args.docs if args.docs is not None else (30 if args.quick else 10_000)
    args.scale = args.scale if args.scale is not None else (0.1 if args.quick else 1.0)
    args.calls = args.calls or (3 if args.quick else 20)
    args.rg_runs = args.rg_runs or (2 if args.quick else 5)
    return args


def warm_documents(corpus: DocCorpus, target: Path) -> Path:
    """Three documents (one of each kind) copied to a folder of their own, for the one-time first plan runs."""
    target.mkdir(parents=True, exist_ok=True)
    for kind in ("pdf", "markdown", "text"):
        src = corpus.by_kind(kind)[0]
        shutil.copy2(src, target / src.name)
    return target


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging("mcp")
    work = Path(args.work).resolve()
    corpus = ensure_corpus(work, docs=args.docs, scale=args.scale)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    (scratch / "prefect").mkdir()
    os.environ.update(PREFECT_HOME=str(scratch / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_LOGGING_LEVEL="WARNING", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
                      ASSAY_DATA_DIR=str(scratch / "data"), ASSAY_OCR="off", ASSAY_DOCUMENTS_PLAN="off")
    use_prefect = not args.no_prefect
    fig: dict = {"corpus": {"root": str(corpus.root), **corpus.manifest},
                 "mode": "Prefect flow" if use_prefect else "plain functions"}
    if not args.one_mode:
        fig["other_mode"] = "plain functions" if use_prefect else "a Prefect flow"
    try:
        fig["machine"] = machine_facts()
        log.info("reading the corpus once (%s) so every measurement sees a warm page cache",
                 mb(corpus.manifest["bytes"]))
        read_all(corpus.docs)
        import flows.documents  # noqa: F401  (registers the extract_text outcome)

        started = time.perf_counter()
        start_prefect()
        fig["prefect_start"] = time.perf_counter() - started
        warm = warm_documents(corpus, scratch / "warm-docs")
        stores = Stores(scratch, [corpus.folder, warm])
        started = time.perf_counter()
        for prefect in (True, False):
            _, service, _ = stores.fresh("warm-up", [warm], use_prefect=prefect)
            first = run_plan(service, extract_plan("warm-up", warm), use_prefect=prefect)
            service.shutdown()
            if first["errors"]:
                raise RuntimeError(f"the warm-up plan run failed: {first['error_samples']}")
        fig["first_plan_runs"] = time.perf_counter() - started
        fig["cores_start"] = available_cores()

        log.info("extraction: the one-core PyMuPDF / read loop over %d documents", len(corpus.docs))
        fig["extract_base"] = baseline_extract(corpus)
        log.info("the loop: %.1f s, %s of text", fig["extract_base"]["seconds"], mb(fig["extract_base"]["chars"]))
        log.info("extraction alone through the pool (no store)")
        fig["extract_pool"] = pool_extract(corpus)
        log.info("the pool alone: %.1f s", fig["extract_pool"]["seconds"])
        sampler = ProcessSampler().start()
        plan = extract_plan("documents-bench", corpus.folder)
        log.info("extraction: plan run (%s)", fig["mode"])
        engine, service, data = stores.fresh("extract", [corpus.folder], use_prefect=use_prefect)
        fig["extract"] = run_plan(service, plan, use_prefect=use_prefect, sampler=sampler)
        service.shutdown()
        sampler.stop()
        fig["rss"] = {"sum": sampler.peak_sum, "main": sampler.peak_main, "worker": sampler.peak_worker,
                      "prefect": sampler.peak_prefect}
        fig["stored"] = stored_counts(engine)
        log.info("plan run: %.1f s (%.2f cores), %s", fig["extract"]["seconds"], fig["extract"]["cores"],
                 fig["stored"])
        if not args.one_mode:
            log.info("extraction: plan run (%s)", fig["other_mode"])
            other_engine, other_service, other_data = stores.fresh("extract-other", [corpus.folder],
                                                                   use_prefect=not use_prefect)
            other_sampler = ProcessSampler().start()
            fig["extract_other"] = run_plan(other_service, plan, use_prefect=not use_prefect,
                                            sampler=other_sampler)
            other_sampler.stop()
            other_service.shutdown()
            other_engine.dispose()
            shutil.rmtree(other_data, ignore_errors=True)
        fig["index_size"] = index_size(data / "assay.db")
        log.info("the index's floor: the same segments into a bare FTS5 trigram table")
        fig["fts_floor"] = fts_floor(engine, scratch / "fts-floor.db")
        log.info("bare FTS5 inserts: %.1f s", fig["fts_floor"]["seconds"])
        (scratch / "fts-floor.db").unlink()

        log.info("writing the stored text out as files for rg")
        text_dir = scratch / "text"
        fig["exported_bytes"] = export_text(engine, corpus.folder, text_dir)
        engine.dispose()
        read_all(sorted(p for p in text_dir.rglob("*.txt")))
        fig["rg"] = {}
        for q in QUERIES:
            samples, lines = [], 0
            for _ in range(args.rg_runs + 1):  # the first run warms, like our first call
                seconds, lines = run_rg(q, text_dir)
                samples.append(seconds)
            fig["rg"][q.label] = {"samples": samples[1:], "lines": lines}
            log.info("rg %s: %d lines, p50 %.3f s", q.label, lines, percentile(samples[1:], 50))
        log.info("search: assay serve over stdio, %d calls per query", args.calls)
        fig["search"] = mcp_searches(corpus.folder, data, scratch, args.calls)
        fig["cores_end"] = available_cores()
        fig["load_end"] = os.getloadavg()[0]
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)

    rows = extraction_rows(fig) + search_rows(fig) + size_rows(fig) + rss_rows(fig) + mismatch_rows(fig)
    table = render(fig["machine"], rows, notes(fig, corpus, args))
    publish(table, args.out, fig, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

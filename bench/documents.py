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
6. Index size: the text engine's files and the segments table (dbstat) against the text's size; peak RSS of the
   server.
Progress goes to stderr; stdout gets the table only.

The extraction figures are measured by bench/documents_extract.py, the search figures by bench/documents_search.py;
this file holds the command and its table.
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

from bench.common import bench_logging, percentile, publish, render, secs  # noqa: E402
from bench.documents_corpus import QUERIES, DocCorpus, ensure_corpus  # noqa: E402
from bench.documents_extract import (  # noqa: E402
    Stores, baseline_extract, engine_floor, export_text, extract_plan, index_size, pool_extract, stored_counts,
)
from bench.documents_search import MULTI, mcp_searches, run_rg  # noqa: E402
from bench.plan_runs import run_plan  # noqa: E402
from bench.sampling import ProcessSampler, available_cores  # noqa: E402
from bench.warm_up import read_all, start_prefect  # noqa: E402
from flows.documents.text_index import (  # noqa: E402
    close_text_indexes, text_index, text_index_dir,
)

log = logging.getLogger("bench.documents")

GOAL_EXTRACT = 0.9  # ours / the one-core loop, MB of text per second
GOAL_SEARCH = 10.0  # rg p50 / ours p50
GOAL_MULTI = 1.6  # 10 single calls / one search_multiple of the same 10


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
    floor = fig["engine_floor"]
    r = fig["extract"]
    floor_rate = floor["chars"] / 1e6 / floor["seconds"]
    rows.append(("  of which: the text index still catching up after the plan run ended (counted above)",
                 secs(r.get("index_tail", 0.0)), "—", "—", "—", "—"))
    rows.append(("  the text engine alone: the stored text indexed from scratch (read back from the store, "
                 f"tokenised, {floor['segments']} segments written; one thread)",
                 f"{secs(floor['seconds'])} = {floor_rate:,.1f} MB/s", "the loop",
                 f"{floor_rate / base_rate:.2f}×", "—", "—"))
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
                     "—", "—", f"≥ {GOAL_MULTI:g}×", "**no**"))
        return rows
    m50, s50 = percentile(s["multi"], 50), percentile(s["singles"], 50)
    rows.append((f"search_multiple with {len(MULTI)} queries, one call (p50 of {len(s['multi'])}; "
                 f"{s.get('multi_completed')} completed, {s.get('multi_failed')} failed)", ms(m50),
                 f"the same {len(MULTI)} as single search_documents calls one after the other: {ms(s50)}",
                 f"{s50 / m50:.2f}× (singles / multiple)", f"≥ {GOAL_MULTI:g}×", yes_no(s50 >= GOAL_MULTI * m50)))
    return rows


def size_rows(fig: dict) -> list[tuple]:
    size, text_bytes = fig["index_size"], fig["stored"]["chars"]
    st = fig["stored"]
    postings = size["engine"] - size["engine_text"]
    return [
        ("index size: the text engine's live segments (postings + vocabulary + its copy of the lines)",
         mb(size["engine"]),
         f"text: {mb(text_bytes)}", f"{size['engine'] / text_bytes:.2f}× the text", "≤ 1.5×",
         yes_no(size["engine"] <= 1.5 * text_bytes)),
        ("  of which postings and vocabulary / the copy of the lines", f"{mb(postings)} / {mb(size['engine_text'])}",
         f"text: {mb(text_bytes)}", f"{postings / text_bytes:.2f}× / {size['engine_text'] / text_bytes:.2f}×", "—",
         "—"),
        ("  the index directory on disk (segments a merge replaced stay a minute for searches still reading them)",
         mb(size.get("engine_disk", size["engine"])), "—", "—", "—", "—"),
        (f"  the store's text: document_segments ({st['segments']:,} segments) with its indexes",
         mb(size["segments"]), f"text: {mb(text_bytes)}", f"{size['segments'] / text_bytes:.2f}× the text", "—",
         "—"),
        ("  whole store file", mb(size["file"]), "—", "—", "—", "—"),
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
        text_index(engine).start()  # as a server does: the text engine follows the store while the plan runs
        fig["extract"] = run_plan(service, plan, use_prefect=use_prefect, sampler=sampler)
        started = time.perf_counter()
        text_index(engine).sync(None)  # the rest of the text indexed: searchable from here on
        tail = time.perf_counter() - started
        fig["extract"]["index_tail"] = tail
        fig["extract"]["seconds"] += tail
        log.info("the text index caught up %.1f s after the plan run ended", tail)
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
        fig["index_size"] = index_size(data / "assay.db", text_index_dir(engine))
        close_text_indexes()  # the server started below is the index's writer
        log.info("the engine's floor: the stored text indexed from scratch, alone")
        fig["engine_floor"] = engine_floor(engine, scratch / "engine-floor")
        log.info("the engine alone: %.1f s", fig["engine_floor"]["seconds"])
        shutil.rmtree(scratch / "engine-floor", ignore_errors=True)

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

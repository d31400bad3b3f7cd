"""The semantic benchmark's ANN figures: exact top-k by brute-force cosine and recall@k against it, and the hnswlib
index alone on synthetic clustered vectors (build time, size, recall, query p50), with flows.semantic.vectors'
parameters.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np

from bench.common import percentile

log = logging.getLogger("bench.semantic")

TOPK = 10
DIM = 384


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

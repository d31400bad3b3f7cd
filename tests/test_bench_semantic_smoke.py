"""The semantic benchmark runs end to end on tiny sizes (the real model, a real plan run, a real `assay serve`) and
prints every row of its table (not the numbers): the plan run embedded every chunk the raw baseline encoded, the
store held every cached vector, and every search call returned hits."""

from __future__ import annotations

import json

EXPECTED_ROWS = [
    "Prefect start, one-time", "first plan runs, one-time", "extraction plan run (extract_text, 3 documents",
    "embedding: plan run (embed, Prefect flow), ", "raw encode by batch size",
    "index_files end to end (3 files", "index_files as chunks/s (",
    "store load: 100 chunks (100 with their own real embeddings)", "hnswlib index build over 100 vectors",
    "index file size; whole store file", "recall@10 of the index vs brute-force cosine (100 vectors)",
    "index query alone, p50", "first call over MCP stdio, one-time",
    "search_documents (semantic shape) p50 / p95 over MCP stdio, 5 queries, 100 chunks",
    "search (hybrid) p50 / p95 over MCP stdio, 5 queries, 100 chunks",
    "search_documents (semantic shape): share of top-10 hits on the question's topic",
    "search (hybrid): share of top-10 hits on the question's topic", "peak RSS of `assay serve`",
    "synthetic 5,000 vectors", "synthetic: index size", "synthetic: recall@10 vs brute force",
    "synthetic: query p50", "peak RSS of the benchmark process",
]


def test_semantic_benchmark_prints_every_row(bench_runs):
    proc = bench_runs.result("semantic")
    out, figures = proc.work / "semantic.md", proc.work / "semantic.json"
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert out.read_text() == proc.stdout
    data = json.loads(figures.read_text())
    assert data["embed"]["chunks"] > 0 and data["embed"]["raw"]["chunks"] == data["embed"]["chunks"]
    assert data["embed"]["plan"]["applied"] == 3
    assert data["index_files"]["files"] == 3 and data["index_files"]["chunks"] == data["embed"]["chunks"]
    assert data["search"]["index_count"] == 100 and data["search"]["load"]["docs"] == 10
    assert 0.0 <= data["search"]["recall"] <= 1.0 and 0.0 <= data["synthetic"]["recall"] <= 1.0
    for tool in ("search_documents", "search"):
        assert data["mcp"][tool]["returned"] > 0, tool
    assert not list(proc.work.glob("run-*")), "the scratch store was left behind"

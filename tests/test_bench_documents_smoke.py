"""The documents benchmark runs end to end on a tiny corpus and prints every row of its table (not the numbers):
every document was extracted without errors, and each query's total_matches equals the lines rg found in the same
stored text (the benchmark writes a mismatch row otherwise)."""

from __future__ import annotations

import json
import shutil

import pytest

from bench.documents_corpus import QUERIES

EXPECTED_ROWS = [
    "cores this run could get", "Prefect start, one-time", "first plan runs, one-time",
    "extraction + indexing of 30 documents (12 PDFs, 9 Markdown, 9 text;",
    "plan run (extract_text), Prefect flow", "the same plan run as plain functions", "cores kept busy",
    "extraction alone through the pool (run_extractions, results dropped: no store)",
    "the text index still catching up after the plan run ended", "the text engine alone: the stored text indexed",
    "trivial tool call (list_collections) p50 over MCP stdio",
    *[f"search_documents `{q.text}`: {q.label};" for q in QUERIES],
    "search_documents, all 8 queries that ran, together", "search_multiple with 10 queries, one call",
    "index size: the text engine's live segments", "of which postings and vocabulary / the copy of the lines",
    "the index directory on disk",
    "the store's text: document_segments (", "whole store file",
    "peak RSS during the extraction plan run", "peak RSS, the largest extraction worker",
    "peak RSS, Prefect's API server", "peak RSS of `assay serve`",
]


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed (./scripts/setup installs it)")
def test_documents_benchmark_prints_every_row(bench_runs):
    proc = bench_runs.result("documents")
    out, figures = proc.work / "documents.md", proc.work / "documents.json"
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row.replace("|", "\\|") in proc.stdout, row  # the table escapes "|" in its cells
    assert "mismatch" not in proc.stdout and "**errors**" not in proc.stdout, proc.stdout
    assert out.read_text() == proc.stdout
    data = json.loads(figures.read_text())
    assert data["stored"]["ok"] == 30 and data["stored"]["error"] == 0
    assert data["extract"]["applied"] == data["extract_other"]["applied"] == 30
    assert all(data["search"]["queries"][q.label]["total_matches"] == data["rg"][q.label]["lines"] for q in QUERIES)
    assert sum(data["rg"][q.label]["lines"] for q in QUERIES) > 0, "the queries found nothing at all"
    assert data["search"]["multi_completed"] == 10
    assert not list(proc.work.glob("run-*")), "the scratch store was left behind"

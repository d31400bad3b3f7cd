"""The citations benchmark runs end to end on tiny generated media (a real store, a real `assay serve`, the real
ffmpeg and PyMuPDF) and prints every row of its table (not the numbers): the outline map has a node per outline entry,
every excerpt has the pages asked for, every clip lasts at least as long as asked, a first resolve is a cache miss and
the same resolve again a hit."""

from __future__ import annotations

import json

EXPECTED_ROWS = [
    "media: 20-page PDF, 14-entry nested outline", "media: 24 s 320x240 video, 6 segments of 4 s",
    "map: outline of the PDF, build_map(strategy outline), 14 nodes", "pymupdf get_toc(), 14 entries",
    "map: scene cuts of the video, build_map(strategy scenes)", "ffmpeg scene filter alone",
    "trivial tool call (list_collections of the two-file folder) p50 / p95 over MCP stdio (10 calls",
    "listResources p50 / p95 (2 resources, 10 calls)",
    "getStructure of the PDF's 14-node map p50 / p95", "of which the client's check of the answer",
    "getNode p50 / p95 (random nodes of that map, 10 calls)",
    "resolve virtual p50 / p95 (random nodes, 10 calls)", "first physical resolves, one-time",
    "resolve: 3-page excerpt of the 20-page PDF, new range each time, p50 / p95 (2 ranges)",
    "pymupdf open + insert_pdf + save", "resolve: 4-second clip of the 24-second video (stream copy)",
    "ffmpeg -ss S -i V -t 4 -c copy", "resolve: the same excerpts again, from the cache",
    "resolve: the same clips again, from the cache", "clip lengths: ours / raw ffmpeg",
    "peak RSS of `assay serve`", "peak RSS of the benchmark process",
]


def test_citations_benchmark_prints_every_row(bench_runs):
    proc = bench_runs.result("citations")
    out, figures = proc.work / "citations.md", proc.work / "citations.json"
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert "mismatch" not in proc.stdout, proc.stdout
    assert out.read_text() == proc.stdout
    data = json.loads(figures.read_text())
    assert data["outline"]["nodes"] == data["toc"]["entries"] == 14
    assert data["scene_filter"]["cuts"] == 5 and data["scenes"]["nodes"] >= 2
    m = data["mcp"]
    assert sorted(m["resources"]) == sorted([data["outline"]["resource_id"], data["scenes"]["resource_id"]])
    assert m["pdf"]["pages"] == [3, 3] and not any(m["pdf"]["flags"]) and all(m["pdf"]["cached_flags"])
    assert all(d >= 3.9 for d in m["video"]["durations"]) and not any(m["video"]["flags"])
    assert all(m["video"]["cached_flags"])
    assert not list(proc.work.glob("run-*")), "the scratch store was left behind"

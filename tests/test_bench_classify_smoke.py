"""The classification benchmark runs end to end on a tiny corpus and prints every row of its table (not the numbers):
every plan run did all the work its baseline did, with no errors, and the JSON figures match the table's counts."""

from __future__ import annotations

import json

import pytest

from examples.mediagen import HAVE_FFMPEG

EXPECTED_ROWS = [
    "cores this run could get", "Prefect start, one-time", "worker pool start, one-time",
    "first plan runs, one-time (a flow and plain: the 3 PDFs' metadata",
    "thumbnails of 12 photos", "cores kept busy", "CPU seconds in that run: this process / pool workers / Prefect's",
    "the same plan run as plain functions",
    "the same plan run with the thread pool (ASSAY_CLASSIFY_POOL=thread)", "process pool vs thread pool",
    "metadata + content hash of 17 files (12 photos, 2 videos, 3 PDFs)",
    "against the same loop plus the xxhash library's hash",
    "timeline: 5 frames spread over a 20 s 720p video", "the same through rerun-classifier's job function",
    "the worker's timeline alone",
    "hashing 17 files", "against the xxhash library's own streaming loop",
    "re-run of the thumbnail plan on the unchanged files (nothing redone: 0 applied)",
    "re-run of the metadata plan on the unchanged files (nothing redone: 0 applied)",
    "re-run of the timeline plan on the unchanged files (nothing redone: 0 applied)",
    "peak RSS, this process + pool workers", "peak RSS, the largest pool worker", "peak RSS, Prefect's API server",
]


@pytest.mark.skipif(not HAVE_FFMPEG, reason="ffmpeg is not installed (./scripts/setup installs it)")
def test_classify_benchmark_prints_every_row(bench_runs):
    proc = bench_runs.result("classify")
    out, figures = proc.work / "classify.md", proc.work / "classify.json"
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert "mismatch" not in proc.stdout and "**errors**" not in proc.stdout
    assert out.read_text() == proc.stdout
    data = json.loads(figures.read_text())
    assert data["thumbs"]["made"] == 12 and data["meta"]["made"] == data["meta"]["hashed"] == 17
    assert len(data["timeline"]["timestamps"]) == 5
    assert data["thumbs_rerun"]["applied"] == data["meta_rerun"]["applied"] == 0
    assert not list(proc.work.glob("run-*")), "the scratch stores were left behind"

"""The plans benchmark runs end to end on a tiny tree and prints every row of its table (not the numbers)."""

from __future__ import annotations


EXPECTED_ROWS = [
    "index the tree once", "Prefect start, one-time", "raw SQL: the same selection",
    "plan run as a Prefect flow", "task runs in that flow run", "Prefect's own cost",
    "plan run as a Prefect flow minus that cost", "plan run as plain functions",
    "watch: file settled → in the plan's set, p50 over 3 files", "watch: p95 / max",
]


def test_plans_benchmark_prints_every_row(bench_runs):
    proc = bench_runs.result("plans")
    out = proc.work / "plans.md"
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert "mismatch" not in proc.stdout
    assert out.read_text() == proc.stdout

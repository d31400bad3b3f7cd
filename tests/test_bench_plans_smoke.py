"""The plans benchmark runs end to end on a tiny tree and prints every row of its table (not the numbers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

EXPECTED_ROWS = [
    "index the tree once", "Prefect start, one-time", "raw SQL: the same selection",
    "plan run as a Prefect flow", "task runs in that flow run", "Prefect's own cost",
    "plan run as a Prefect flow minus that cost", "plan run as plain functions",
    "watch: file settled → in the plan's set, p50 over 3 files", "watch: p95 / max",
]


def test_plans_benchmark_prints_every_row(tmp_path):
    out = tmp_path / "plans.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "plans.py"), "--files", "2000", "--repeat", "1",
                           "--watch-files", "3", "--work", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert "mismatch" not in proc.stdout
    assert out.read_text() == proc.stdout

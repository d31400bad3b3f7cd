"""The benchmark command runs end to end on a tiny tree and prints every row of its table (not the numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest

EXPECTED_ROWS = [
    "`find -printf` over 2,000 files, warm cache",
    "`index` 2,000 files, warm cache: fresh store, Prefect flow",
    "of which walk + write",
    "of which flow-run overhead",
    "`index` rate, 2,000 files",
    "re-index of the unchanged tree",
    "Prefect start, one-time",
    "peak RSS, main process",
    "peak RSS, SQLite writer child",
    "peak RSS, main + writer",
    "peak RSS, Prefect ephemeral API server",
    "trivial tool call (resource-set-list) p50 over MCP HTTP",
    "navigate p50 over MCP HTTP, store of 2,047 entries",
    "navigate p95 over MCP HTTP",
    "navigate p50 / p95 in-process",
    "resource-search p50 over MCP HTTP, set of 2,047 entries",
    "resource-search p95 over MCP HTTP",
    "resource-search p50 / p95 in-process",
]


@pytest.fixture(scope="module")
def bench_run(bench_runs) -> tuple[str, str, Path]:
    proc = bench_runs.result("run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr, proc.work / "run.md"


def test_quick_run_prints_a_row_for_every_measure(bench_run):
    stdout, _, _ = bench_run
    rows = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| measure | value | reference | ratio | goal met? |"
    for expected in EXPECTED_ROWS:
        assert any(expected in row for row in rows), f"no row for {expected!r} in:\n{stdout}"
    assert all(row.count(" | ") == 4 for row in rows), "every row has the five columns"
    assert not any("whole command" in row for row in rows), "--no-whole-command leaves that row out"


def test_header_names_the_machine_and_the_cache(bench_run):
    stdout, _, _ = bench_run
    header = stdout.splitlines()[0]
    assert header.startswith("Machine: ") and "cores" in header and "SQLite" in header
    assert "warm cache" in header


def test_table_is_written_to_out_and_progress_goes_to_stderr(bench_run):
    stdout, stderr, out = bench_run
    assert out.read_text() == stdout
    assert "find over 2,000 files" in stderr
    assert "find over" not in stdout

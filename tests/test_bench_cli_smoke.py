"""The command-line benchmark runs end to end on a tiny folder and prints every row of its table (not the numbers);
every run beside the server was handed to it, and every run outside its roots reported to its Prefect API."""

from __future__ import annotations

EXPECTED_ROWS = [
    "`assay index` of 5 files, `--no-prefect` (the floor)",
    "no server, first run on a fresh data dir",
    "`assay index` of 5 files as a Prefect flow, no server |",
    "`assay serve` running on the same data dir: handed to the server, run there",
    "handed to the server over its socket, no flow run in the command (its hand-off line on every run) | yes",
    "`assay index` of 5 files outside the server's roots: run in the command, on the server's Prefect API",
    "reported to the server's Prefect API (its log line on every run) | yes",
]

def test_cli_benchmark_prints_every_row(bench_runs):
    proc = bench_runs.result("cli")
    out = proc.work / "cli.md"
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert out.read_text() == proc.stdout

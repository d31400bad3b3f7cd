"""The file-operations benchmark runs end to end in its quick form (300 files into 6 dated folders) and prints every
row of its table (not judged on its timings): the plan moved every file and the undo brought every one back, the disk,
the store and the journal agreeing after each, and its scratch folder is gone."""

from __future__ import annotations

import json

EXPECTED_ROWS = [
    "index the tree once: an index-only plan", "re-scan of the unchanged tree",
    "move 300 files into 6 dated folders: the plan (journal + store)", "undo of that execution (journal + store)",
    "files per second", "plan the batches: destinations, conflicts", "content hashes for the journal",
    "journal: the batch's intents, one transaction", "disk: folders made + renames",
    "store: entries moved, sizes, journal rows done, one transaction",
    "the execution's fixed cost (the same plan over an empty folder)",
    "journal read: the execution's operations", "checks per file: still there, unchanged (hash), old place free",
    "of which content hashes", "journal: a batch's intents, one transaction",
    "store: entries moved back, sizes, journal rows done and undone, one transaction",
    "| correct after the move: files in place, store = disk (ids kept), journal done | ok |",
    "| correct after the undo: files in place, store = disk (ids kept), journal undone | ok |",
]


def test_fileops_benchmark_moves_and_undoes_every_file_and_prints_every_row(bench_runs):
    proc = bench_runs.result("fileops")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert "not measured" not in proc.stdout  # every phase's function was found and timed
    assert (proc.work / "fileops.md").read_text() == proc.stdout
    fig = json.loads((proc.work / "fileops.json").read_text())
    run = fig["assay"]["sqlite"]
    assert (fig["files"], fig["folders"]) == (300, 6)
    assert run["checks"] == {"move": [], "undo": []} and not fig["checks_loop"]
    assert (run["applied"], run["undone"], run["refused"]) == (300, 300, 0)
    assert not list(proc.work.glob("fileops-*")), "the scratch folder was left behind"

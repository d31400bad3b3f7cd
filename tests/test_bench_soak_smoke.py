"""The soak runs end to end in its quick form (a few clients for 30 s) and prints every row of its table; judged on
what the calls got back and what the load left, not on its timings: calls were made of every kind in the mix, none
failed, the server's figures were read at the start and the end, the watched plan's set matches its folder, every
moved file is where its client left it, and db-diagnose finds the store sound."""

from __future__ import annotations

import json

from bench.soak_load import MIX

EXPECTED_ROWS = [
    "MCP clients over Streamable HTTP", "of which reads / searches / plan runs / set changes / file moves",
    "sessions opened", "failures (tool errors, JSON-RPC and transport errors", "latency of every call after the "
    "warm-up", "the server's RSS after the warm-up / at the end", "its child processes",
    "open file descriptors of the server", "threads of the server", "CPU after the warm-up",
    "watched folder: texts added / deleted by the dropper", "moved files where their clients last put them",
    "db-diagnose at the end", "check_integrity at the end", "errors in the server's log", "set-up (not in the load)",
    "| tool | calls | failures | p50 | p99 | max |",
]
TOOLS = {"navigate", "inspect", "resource-search", "resource-set-get", "read_document", "get_document_info",
         "plan-list", "resource read", "search_documents", "search_documents (semantic)", "search", "plan-execute",
         "resource-set-modify", "resource-set-create", "move-files"}


def test_soak_makes_every_kind_of_call_without_a_failure_and_leaves_a_sound_store(bench_runs):
    proc = bench_runs.result("soak")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for row in EXPECTED_ROWS:
        assert row in proc.stdout, row
    assert (proc.work / "soak.md").read_text() == proc.stdout
    fig = json.loads((proc.work / "soak.json").read_text())
    assert fig["calls"] > len(MIX) and fig["failures"] == 0, fig["failure_samples"]
    assert TOOLS <= set(fig["by_tool"]), sorted(TOOLS - set(fig["by_tool"]))
    assert fig["sessions"] > fig["clients"]  # the clients came back with new sessions
    start, end = fig["server"]["start"], fig["server"]["end"]
    assert 0 < start["rss"] and 0 < end["rss"] and start["fds"] > 0 and end["threads"] > 0
    checks = fig["checks"]
    assert checks["watched"]["match"] and fig["dropper"]["added"] > 0 and fig["dropper"]["deleted"] > 0
    assert checks["movers"]["ok"], checks["movers"]["problems"]
    diagnosis = checks["diagnose"]
    assert fig["diagnose_ok"] and diagnosis["integrity_check"] == "ok" and diagnosis["orphaned_entries"] == 0, diagnosis
    assert not any(diagnosis["orphaned_records"].values())
    assert checks["integrity"]["healthy"], checks["integrity"]["problems"]
    assert fig["exit_code"] == 0
    assert not list(proc.work.glob("soak-*")), "the scratch dir was left behind"

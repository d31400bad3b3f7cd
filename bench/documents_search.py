"""The documents benchmark's search figures: each query's ripgrep pipeline over the stored text, and
search_documents / search_multiple through the Python SDK's client against ``assay serve`` over stdio.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from pathlib import Path

from bench.common import REPO, hwm_kb, payload, percentile, server_env, server_pid
from bench.documents_corpus import QUERIES, Query, word

log = logging.getLogger("bench.documents")

RG_TIMEOUT = 600
SETTLE_SECONDS = 5.0
MULTI = [q.text for q in QUERIES] + [word(100), word(1500)]  # search_multiple's 10 queries


def rg_command(stage: tuple[str, ...], first: bool) -> list[str]:
    """One stage of a query's rg pipeline: the first searches the folder (cwd) and prints ``path:line:text``, the
    next ones filter the previous stage's output."""
    cmd = ["rg", "--no-config", "-i", "-F"]
    if first:
        cmd += ["-n", "--no-heading", "--with-filename", *stage, "."]
    else:
        cmd += list(stage)
    return cmd


def run_rg(query: Query, folder: Path) -> tuple[float, int]:
    """The query's rg pipeline over ``folder`` (cwd, relative paths); returns (seconds, lines out)."""
    started = time.perf_counter()
    procs: list[subprocess.Popen] = []
    stdin = None
    for k, stage in enumerate(query.stages):
        proc = subprocess.Popen(rg_command(stage, k == 0), cwd=folder, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        if stdin is not None:
            stdin.close()  # the next stage owns the pipe now
        stdin = proc.stdout
        procs.append(proc)
    lines = 0
    assert stdin is not None
    while chunk := stdin.read(1 << 20):
        lines += chunk.count(b"\n")
    for proc in procs:
        proc.wait(timeout=RG_TIMEOUT)
        if proc.returncode not in (0, 1):  # 1: nothing matched
            raise RuntimeError(f"{proc.args} exited {proc.returncode}")
    return time.perf_counter() - started, lines


# --- ours: MCP calls -------------------------------------------------------------------------------------------------

def _payload(result) -> dict:
    """A search tool's answer (list_collections' structured content is not what the figures read)."""
    return payload(result, keys=("matches", "results"))


async def _mcp_session(params, calls: int) -> dict:
    import anyio
    from mcp import Client

    global_scope = {"type": "global"}
    out: dict = {"ping": [], "queries": {}, "multi": [], "singles": [], "server_kb": 0}
    async with Client(params) as client:
        # a server that has just started is still opening its index (checksums), spawning search_multiple's
        # workers and settling its caches: it is given a few seconds, as a server that has been up a while
        await anyio.sleep(SETTLE_SECONDS)
        for _ in range(max(3, calls)):  # the transport's floor: a call that does next to nothing
            started = time.perf_counter()
            _payload(await client.call_tool("list_collections", {"path": ""}))
            out["ping"].append(time.perf_counter() - started)
        for q in QUERIES:
            args = {"query": q.text, "scope": global_scope, "context_lines": 5, "max_results": 20}
            samples: list[float] = []
            try:  # a query that fails (SEARCH_TIMEOUT, ...) is reported in its row; the others go on
                first = _payload(await client.call_tool("search_documents", args))
                for _ in range(calls):
                    started = time.perf_counter()
                    _payload(await client.call_tool("search_documents", args))
                    samples.append(time.perf_counter() - started)
            except RuntimeError as exc:
                out["queries"][q.label] = {"samples": samples, "error": str(exc)[:300], "total_matches": None}
                continue
            log.info("search_documents %s: %s matches, p50 %.3f s", q.label, first.get("total_matches"),
                     percentile(samples, 50))
            out["queries"][q.label] = {"samples": samples, "total_matches": first.get("total_matches"),
                                       "returned": len(first.get("matches", [])),
                                       "truncated": first.get("truncated")}
        multi_args = {"queries": MULTI, "scope": global_scope, "context_lines": 5, "max_results_per_query": 20}
        try:
            _payload(await client.call_tool("search_multiple", multi_args))  # once to warm, as each query above
            for _ in range(max(3, calls // 2)):
                started = time.perf_counter()
                multi = _payload(await client.call_tool("search_multiple", multi_args))
                out["multi"].append(time.perf_counter() - started)
                out["multi_completed"] = multi.get("queries_completed")
                out["multi_failed"] = multi.get("queries_failed")
                started = time.perf_counter()
                for text_ in MULTI:
                    _payload(await client.call_tool("search_documents", {"query": text_, "scope": global_scope,
                                                                         "context_lines": 5, "max_results": 20}))
                out["singles"].append(time.perf_counter() - started)
        except RuntimeError as exc:
            out["multi_error"] = str(exc)[:300]
        out["server_kb"] = hwm_kb(server_pid())
    return out


def mcp_searches(folder: Path, data_dir: Path, scratch: Path, calls: int) -> dict:
    import anyio
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server.cli", "serve", "--root", str(folder), "--data-dir", str(data_dir), "--no-prefect",
              "--log-level", "WARNING"],
        env=server_env(scratch), cwd=str(REPO))
    started = time.perf_counter()
    out = anyio.run(_mcp_session, params, calls)  # the server's stderr is ours: its errors show in the log
    out["session_seconds"] = time.perf_counter() - started
    return out

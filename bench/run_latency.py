"""bench/run.py's latency figures over an indexed store: navigate and resource-search calls over MCP (``assay serve
--transport http`` in a subprocess, the mcp Client over Streamable HTTP) next to the same functions called
in-process, and a trivial tool call as the transport's floor.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from bench.common import REPO
from bench.run_index import assay_command, child_env
from bench.tree import TreeSpec, sample_dirs

SET_NAME = "bench-all"


def search_params(count: int, spec: TreeSpec) -> list[dict]:
    """resource-search arguments (reference 000's parameters), varied: kind, extension, sizes, names, sorts."""
    from bench.tree import DIR_WORDS, EXTENSIONS, FILE_WORDS

    variants = []
    for i in range(count):
        p: dict = {"name": SET_NAME, "limit": 50, "sort_by": ("size", "name", "mtime")[i % 3],
                   "sort_desc": i % 2 == 0}
        pick = i % 6
        if pick == 0:
            p.update(kind="file", extension="." + (EXTENSIONS[i % 11] or "txt"))
        elif pick == 1:
            p.update(min_size=1024 * (i % 7), max_size=8192)
        elif pick == 2:
            p.update(name_contains=FILE_WORDS[i % len(FILE_WORDS)])
        elif pick == 3:
            p.update(path_contains=f"{DIR_WORDS[i % len(DIR_WORDS)]}-0{i % 10}")
        elif pick == 4:
            p.update(kind="directory")
        else:
            p.update(min_mtime="2022-01-01", max_mtime="2023-01-01", extension=[".jpg", ".png"])
        variants.append(p)
    return variants


def navigate_params(root: Path, spec: TreeSpec, count: int) -> list[dict]:
    return [{"path": d, "sort": ("name", "size", "mtime")[i % 3], "desc": i % 4 == 3}
            for i, d in enumerate(sample_dirs(root, spec, count))]


def prepare_set(db_url: str) -> int:
    """A resource set holding every entry of the store (through the store's own functions)."""
    from sqlalchemy import func, select

    from store import sets
    from store.engine import get_engine

    engine = get_engine(db_url)
    if not any(s["name"] == SET_NAME for s in sets.list_sets(engine)):
        sets.create_set(engine, name=SET_NAME, description="every entry (benchmark)")
    with engine.begin() as conn:
        set_id = sets.require_set(conn, name=SET_NAME)["id"]
        sets.add_members_from(conn, set_id=set_id, entry_ids=select(sets.T.c.id))
        return conn.execute(select(func.count()).select_from(sets.M).where(sets.M.c.set_id == set_id)).scalar_one()


def in_process_latency(db_url: str, root: Path, nav: list[dict], search: list[dict]) -> dict[str, list[float]]:
    from flows.index.navigation import navigate_dir
    from flows.core.roots import Roots
    from store import set_queries
    from store.engine import get_engine
    from store.filters import EntryFilter

    engine, roots = get_engine(db_url), Roots.of([str(root)])
    out: dict[str, list[float]] = {"navigate": [], "search": []}
    for p in nav[:10]:
        navigate_dir(engine, roots, **p)  # warm the connection pool and SQLite's cache
    for p in nav:
        started = time.perf_counter()
        navigate_dir(engine, roots, **p)
        out["navigate"].append(time.perf_counter() - started)
    filter_keys = set(EntryFilter.model_fields)
    for p in search:
        started = time.perf_counter()
        with engine.connect() as conn:
            set_queries.search(conn, name=p["name"], filters=EntryFilter(**{k: v for k, v in p.items()
                                                                            if k in filter_keys}),
                               sort_by=p["sort_by"], sort_desc=p["sort_desc"], limit=p["limit"])
        out["search"].append(time.perf_counter() - started)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _mcp_latency(url: str, nav: list[dict], search: list[dict], pings: int) -> dict[str, list[float]]:
    from mcp import Client

    out: dict[str, list[float]] = {"ping": [], "navigate": [], "search": []}
    async with Client(url) as client:
        for p in nav[:10]:
            await client.call_tool("navigate", p)
        for _ in range(pings):  # the server answers no MCP ping; a tool call that does next to nothing instead
            started = time.perf_counter()
            await client.call_tool("resource-set-list", {})
            out["ping"].append(time.perf_counter() - started)
        for key, tool, calls in (("navigate", "navigate", nav), ("search", "resource-search", search)):
            for p in calls:
                started = time.perf_counter()
                result = await client.call_tool(tool, p)
                out[key].append(time.perf_counter() - started)
                if result.is_error:
                    raise RuntimeError(f"{tool} {p} failed: {result.content[0].text}")
    return out


def mcp_latency(data_dir: str, root: Path, nav: list[dict], search: list[dict], scratch: Path) -> dict:
    import anyio

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server_log = open(scratch / "serve.log", "w")
    server = subprocess.Popen(assay_command() + ["serve", "--transport", "http", "--port", str(port), "--data-dir",
                                                data_dir, "--root", str(root), "--no-prefect",
                                                "--log-level", "WARNING"],
                              cwd=REPO, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=server_log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"assay serve exited ({server.returncode}); see {server_log.name}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"assay serve did not answer on port {port} within 120 s") from None
                time.sleep(0.1)
        return anyio.run(_mcp_latency, url, nav, search, len(nav))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server_log.close()

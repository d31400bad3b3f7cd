"""bench/run.py's index figures: GNU find over the tree (the physical limit), and ``assay index`` in a fresh process
with a fresh data dir (store and Prefect home): the one-time Prefect start, the index, the re-index of the unchanged
tree, and the peak RSS of the indexing process and of its SQLite writer child. Also the environment and command of
the child processes bench/run.py starts.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO

FIND_FORMAT = "%s %T@ %p\n"


def drop_caches() -> bool:
    """Drop the page cache (needs root outside a container); False when refused."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def time_find(root: Path, *, repeat: int, cold: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        if cold:
            drop_caches()
        started = time.perf_counter()
        subprocess.run(["find", str(root), "-printf", FIND_FORMAT], stdout=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - started)
    return best


def _status_kb(pid: int | str, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children() -> list[tuple[int, str]]:
    pids: list[int] = []
    for children in Path("/proc/self/task").glob("*/children"):
        pids += [int(p) for p in children.read_text().split()]
    out = []
    for pid in pids:
        try:
            out.append((pid, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()))
        except OSError:
            pass
    return out


class _ChildPeaks:
    """Samples the peak RSS (VmHWM) of this process's children whose command line holds ``needle``, on a thread.

    ru_maxrss of the children is no use for the writer: a child that forks and execs from a big parent is charged the
    parent's resident set at exec, so the writer's own peak is read from /proc while it runs."""

    def __init__(self, needle: str, every: float = 0.02) -> None:
        import threading

        self.needle, self.every, self.peak_kb = needle, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pid, cmd in _children():
                if self.needle in cmd:
                    self.peak_kb = max(self.peak_kb, _status_kb(pid, "VmHWM"))
            self._stop.wait(self.every)

    def __enter__(self) -> "_ChildPeaks":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def index_driver(argv: list[str]) -> int:
    """Run in a fresh process: start Prefect once, then ``assay index ROOT`` twice (fresh store, then unchanged
    tree) through ``mcp_server.cli.main``, and write the timings and peak RSS to a JSON file."""
    data_dir, root, out = argv
    from mcp_server.config import load_settings, prepare_environment

    prepare_environment(load_settings({"roots": [root], "data_dir": data_dir}))
    started = time.perf_counter()
    from flows.core import prefect as prefect_support

    prefect_support.configure(Path(data_dir))
    with prefect_support.flow_settings():  # the Prefect API exactly as `assay index` starts it (a child process)
        from prefect import flow

        @flow(name="bench-warm-up", persist_result=False)
        def warm_up() -> int:
            return 1

        warm_up()
    prefect_start = time.perf_counter() - started
    from mcp_server import cli
    from mcp_server.cli import commands

    # the index command's modules (the command and its local run through the app) load once, on a command's first
    # call: a one-time cost like Prefect's start, timed apart so the figures above are each run's own
    started = time.perf_counter()
    commands.load("index")
    commands.with_app("index")
    imports = time.perf_counter() - started
    from store import jobs as store_jobs
    from store.engine import get_engine

    base_kb = _status_kb("self", "VmRSS")
    argv_index = ["index", root, "--data-dir", data_dir, "--root", root, "--log-level", "WARNING"]
    runs = []
    for _ in range(2):
        with _ChildPeaks("store.sqlite_writer") as writer:
            started = time.perf_counter()
            code = cli.main(argv_index)
            elapsed = time.perf_counter() - started
        engine = get_engine(f"sqlite:///{Path(data_dir) / 'assay.db'}")
        job = store_jobs.list_jobs(engine, limit=1)[0][0]
        runs.append({"code": code, "seconds": elapsed, "status": job["status"], "files": job["files"],
                     "directories": job["directories"], "job_seconds": job["completed_at"] - job["started_at"],
                     "main_peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                     "writer_peak_kb": writer.peak_kb})
    server_kb = max([_status_kb(pid, "VmHWM") for pid, cmd in _children()
                     if "prefect.server" in cmd or "prefect_server" in cmd] or [0])
    Path(out).write_text(json.dumps({"prefect_start": prefect_start, "imports": imports, "base_kb": base_kb,
                                     "first": runs[0], "again": runs[1], "prefect_server_kb": server_kb}))
    return 0


def child_env() -> dict[str, str]:
    """The environment without the caller's Prefect/assay settings, so each run gets a fresh Prefect home."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env["PYTHONPATH"] = str(REPO)
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"  # a loaded machine starts Prefect's server slowly
    return env


def run_index(root: Path, scratch: Path) -> dict:
    data_dir = Path(tempfile.mkdtemp(prefix="index-", dir=scratch))
    out = data_dir / "result.json"
    code = "import sys; from bench.run_index import index_driver; sys.exit(index_driver(sys.argv[1:]))"
    proc = subprocess.run([sys.executable, "-c", code, str(data_dir), str(root), str(out)], cwd=REPO,
                          env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"the index driver failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(out.read_text())
    for run in ("first", "again"):
        if result[run]["status"] != "completed":
            raise RuntimeError(f"index {run} ended {result[run]['status']}: {proc.stdout}{proc.stderr[-2000:]}")
    result["data_dir"] = str(data_dir)
    return result


def assay_command() -> list[str]:
    script = Path(sys.executable).parent / "assay"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcp_server.cli"]


def time_whole_command(root: Path, scratch: Path) -> float:
    data_dir = Path(tempfile.mkdtemp(prefix="cli-", dir=scratch))
    started = time.perf_counter()
    subprocess.run(assay_command() + ["index", str(root), "--data-dir", str(data_dir), "--root", str(root),
                                      "--log-level", "WARNING"],
                   cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    elapsed = time.perf_counter() - started
    shutil.rmtree(data_dir, ignore_errors=True)
    return elapsed

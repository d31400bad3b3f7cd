"""Processes that never outlive assay (nor their control sockets), and command-line calls that reuse a running
server's Prefect API.

Real `assay serve` and `assay index` processes, with Prefect on: each test collects the process tree (psutil) while
the work runs, kills the top process with SIGKILL (not its group: the children must go by themselves), and checks
that no process of the tree survives.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import make_tree
from tests.e2e.conftest import REPO, _stop, free_port, serve_args, server_env

pytestmark = pytest.mark.e2e

STARTUP = 180  # seconds: Prefect's API server on a loaded 2-core machine
PREFECT_SERVER = re.compile(r"prefect[._]server")  # Prefect's API server process, ours or Prefect's own ephemeral one
BAD_LINES = ("Traceback", "Failed to initialize plugins", "Error flushing events", "Error logging to API", " ERROR ")


def big_tree(root: Path, dirs: int = 60, files: int = 500) -> Path:
    """dirs x files empty files: more rows than one write batch, so indexing it uses the writer process."""
    for d in range(dirs):
        folder = root / f"d{d:03}"
        folder.mkdir(parents=True)
        for f in range(files):
            (folder / f"f{f:04}.txt").touch()
    return root


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_server.cli", *args]


def tree_of(pid: int) -> list[psutil.Process]:
    proc = psutil.Process(pid)
    return [proc, *proc.children(recursive=True)]


def cmdlines(procs: list[psutil.Process]) -> list[str]:
    out = []
    for p in procs:
        try:
            out.append(" ".join(p.cmdline()))
        except psutil.Error:
            pass
    return out


def wait_until(predicate, timeout: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f":\n{log.read_text()}" if log else ""))
        time.sleep(0.1)


def survivors(procs: list[psutil.Process], timeout: float = 30) -> list[str]:
    """The processes of ``procs`` still running after ``timeout`` seconds (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return cmdlines(alive)
        time.sleep(0.2)


def kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return server_env(tmp_path, prefect=True)


def start_http(tmp_path: Path, tree: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen, Path]:
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve_args(tree, prefect=True, extra=["--transport", "http", "--port", str(port),
                                                                      *extra]),
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
    return proc, log


def api_record(tmp_path: Path) -> dict | None:
    path = tmp_path / "data" / "prefect-api.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def has_prefect_server(pid: int) -> bool:
    return any(PREFECT_SERVER.search(c) for c in cmdlines(tree_of(pid)[1:]))



def assert_sigkill_leaves_nothing(proc: subprocess.Popen, procs: list, what: str) -> None:
    """SIGKILL the top process only (no chance to clean up), then none of ``procs`` may still run."""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    left = survivors(procs)
    assert not left, f"still running after SIGKILL of {what}: {left}"

def test_sigkill_of_assay_serve_leaves_no_process_behind(tmp_path, env):
    tree = big_tree(tmp_path / "big")
    proc, log = start_http(tmp_path, tree, env, "--index", str(tree))
    try:
        wait_until(lambda: "Prefect is ready" in log.read_text(), STARTUP, "Prefect under the server", log)
        procs = tree_of(proc.pid)
        assert any(PREFECT_SERVER.search(c) for c in cmdlines(procs[1:])), cmdlines(procs)
        assert_sigkill_leaves_nothing(proc, procs, "assay serve")
    finally:
        _stop(proc)
        kill_all(procs if "procs" in locals() else [])


def test_sigkill_of_assay_index_leaves_no_process_behind(tmp_path, env):
    tree = big_tree(tmp_path / "big", dirs=100)
    log = tmp_path / "index.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cli("index", str(tree), "--root", str(tree)), stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=REPO, start_new_session=True)
    seen: list[psutil.Process] = []
    try:
        def writer_running():
            procs = tree_of(proc.pid)
            seen[:] = {p.pid: p for p in [*seen, *procs]}.values()
            lines = cmdlines(procs)
            return any(PREFECT_SERVER.search(c) for c in lines[1:]) and any("store.sqlite_writer" in c for c in lines)

        wait_until(writer_running, STARTUP, "the Prefect API server and the index writer under assay index", log)
        assert_sigkill_leaves_nothing(proc, seen, "assay index")
    finally:
        _stop(proc)
        kill_all(seen)


def test_a_stdio_server_whose_client_went_away_exits_with_its_children(tmp_path, env):
    tree = make_tree(tmp_path / "home" / "user")
    proc = subprocess.Popen(serve_args(tree, prefect=True), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "stdio.err", "wb"), env=env, cwd=REPO, start_new_session=True)
    procs: list[psutil.Process] = []
    try:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "gone", "version": "1"}}}
        proc.stdin.write((json.dumps(init) + "\n").encode())
        proc.stdin.flush()
        assert b'"serverInfo"' in proc.stdout.readline()
        wait_until(lambda: has_prefect_server(proc.pid), STARTUP, "Prefect's API server under the stdio server")
        sock = tmp_path / "data" / "assay.sock"
        wait_until(sock.exists, 60, "the control socket of the stdio server")
        procs = tree_of(proc.pid)
        proc.stdin.close()  # the client went away
        proc.stdout.close()
        proc.wait(timeout=60)
        left = survivors(procs)
        assert not left, f"still running after the stdio client went away: {left}"
        assert not sock.exists()  # command-line calls find no server there any more
    finally:
        _stop(proc)
        kill_all(procs)


def test_assay_index_reuses_the_prefect_api_of_a_server_on_the_same_data_dir(tmp_path, env):
    """A job the server will not take (a path outside its roots; tests/e2e/test_cli_handoff.py has the hand-off of
    the others) runs in the command, reporting to the server's Prefect API."""
    tree = make_tree(tmp_path / "home" / "user")
    outside = make_tree(tmp_path / "elsewhere")
    proc, log = start_http(tmp_path, tree, env)
    try:
        wait_until(lambda: "Prefect is ready" in log.read_text(), STARTUP, "Prefect under the server", log)
        record = api_record(tmp_path)
        assert record and record["url"].startswith("http://127.0.0.1:"), record
        done = subprocess.run(cli("index", str(outside), "--root", str(outside)), capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "completed: 10 files" in done.stdout
        assert "leaves this job to us" in done.stderr and "indexing handed" not in done.stderr
        assert f"using the Prefect API of the assay server on this data dir: {record['url']}" in done.stderr
        assert "starting Prefect's API server" not in done.stderr  # no cold start of its own
        runs = httpx.post(f"{record['url']}/flow_runs/filter",
                          json={"flow_runs": {"name": {"any_": [f"index {outside}"]}}}, timeout=10).json()
        assert [r["state_type"] for r in runs] == ["COMPLETED"]
        assert not [line for line in done.stderr.splitlines() if any(bad in line for bad in BAD_LINES)]

        plan = tmp_path / "big.plan"
        plan.write_text(f"plan big\nsource home index {tree}\nrule r when size > 1KB\n  do selection_set big\n")
        done = subprocess.run(cli("plan", "run", str(plan), "--root", str(tree)), capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr
        assert f"using the Prefect API of the assay server on this data dir: {record['url']}" in done.stderr
        runs = httpx.post(f"{record['url']}/flow_runs/filter",
                          json={"flow_runs": {"name": {"any_": ["big"]}}}, timeout=10).json()
        assert [r["state_type"] for r in runs] == ["COMPLETED"]
    finally:
        _stop(proc)


def test_a_healthy_start_and_stop_print_no_errors(tmp_path, env):
    tree = make_tree(tmp_path / "home" / "user")
    # --index: a job starts Prefect at the same moment as the server's warm-up (two first imports at once)
    proc, log = start_http(tmp_path, tree, env, "--index", str(tree))
    try:
        wait_until(lambda: "Prefect is ready" in log.read_text(), STARTUP, "the warm-up flow run", log)
        wait_until(lambda: "Finished in state Completed" in log.read_text(), 60, "the index flow run", log)
    finally:
        _stop(proc)  # SIGTERM: a clean stop
    output = log.read_text()
    assert proc.returncode == 0, output
    assert not [line for line in output.splitlines() if any(bad in line for bad in BAD_LINES)], output
    assert api_record(tmp_path) is None  # the record goes with the server


def test_a_record_left_by_a_dead_server_is_ignored(tmp_path, env):
    """A server killed with SIGKILL leaves its record behind: `assay index` checks it and starts its own API."""
    tree = make_tree(tmp_path / "home" / "user")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prefect-api.json").write_text(
        json.dumps({"url": f"http://127.0.0.1:{free_port()}/api", "owner": gone.pid, "pid": gone.pid}))
    done = subprocess.run(cli("index", str(tree), "--root", str(tree)), capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "completed: 10 files" in done.stdout
    assert "using the Prefect API of the assay server" not in done.stderr
    assert "starting Prefect's API server at http://127.0.0.1:" in done.stderr

"""End-to-end fixtures: `assay serve` in a separate process, over stdio (behind a tee that records its stdout) or
Streamable HTTP on a free loopback port. Every process is killed with its whole process group in a finalizer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from mcp import StdioServerParameters

from tests.conftest import make_tree

REPO = Path(__file__).resolve().parents[2]

# The reference tools of the groups this server implements (reference 000), each must be listed.
REFERENCE_TOOLS = {
    "index", "job-progress", "list-jobs", "cancel-job", "navigate", "inspect", "rename-files", "delete-files",
    "move-files", "db-diagnose", "query-create", "query-execute", "query-list", "query-get", "query-update",
    "query-delete", "resource-children", "resource-parent", "resource-sum", "resource-time-range",
    "resource-metric-range", "resource-is", "resource-fuzzy-match", "resource-search", "resource-set-create",
    "resource-set-list", "resource-set-get", "resource-set-modify", "resource-set-delete", "resource-set-add-child",
    "resource-set-remove-child", "session-info", "session-set-preferences",
}

# Runs the server with its stdout copied line by line to the client and to a file, its stderr to another file, so a
# test can check that nothing but JSON-RPC reached stdout.
TEE = r"""
import subprocess, sys
out_log, err_log, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(out_log, "wb") as record, open(err_log, "wb") as errors:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors)
    for line in proc.stdout:
        record.write(line); record.flush()
        sys.stdout.buffer.write(line); sys.stdout.buffer.flush()
    sys.exit(proc.wait())
"""


def server_env(tmp: Path, *, prefect: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASSAY_", "CORS_", "PREFECT_"))
           or k in ("ASSAY_MODEL_CACHE", "ASSAY_PREFECT_SEED")}  # exports built once; Prefect migrated once
    env.update(ASSAY_DATA_DIR=str(tmp / "data"), PREFECT_HOME=str(tmp / "prefect"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PYTHONUNBUFFERED="1",
               ASSAY_DOCUMENTS_PLAN="off",  # the document tools' tests turn the built-in plan on
               # Prefect's bare API on any free port: its UI and services are test_prefect_deployments' subject
               ASSAY_PREFECT_UI="0", ASSAY_PREFECT_PORT="0")
    if prefect:
        env["PREFECT_LOGGING_LEVEL"] = "INFO"
    return env


def serve_args(tree: Path, *, prefect: bool, extra: list[str] = ()) -> list[str]:
    args = [sys.executable, "-m", "mcp_server.cli", "serve", "--root", str(tree), *extra]
    return args if prefect else args + ["--no-prefect"]



def wait_listening(proc: subprocess.Popen, port: int, log: Path, timeout: float = 90) -> None:
    """Wait until the server process listens on ``port`` on loopback; fail with its log if it exits or never does."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"assay serve exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"assay serve did not listen on {port}:\n{log.read_text()}") from None
            time.sleep(0.1)

@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "home" / "user")


class StdioServer:
    def __init__(self, tmp: Path, tree: Path, *, prefect: bool) -> None:
        self.stdout_log, self.stderr_log = tmp / "server.stdout", tmp / "server.stderr"
        self.params = StdioServerParameters(
            command=sys.executable,
            args=["-c", TEE, str(self.stdout_log), str(self.stderr_log), *serve_args(tree, prefect=prefect)],
            env=server_env(tmp, prefect=prefect), cwd=str(REPO))

    def stdout_lines(self) -> list[str]:
        return self.stdout_log.read_text().splitlines()

    def stderr(self) -> str:
        return self.stderr_log.read_text() if self.stderr_log.exists() else ""


@pytest.fixture
def stdio_server(tmp_path: Path, tree: Path) -> Callable[..., StdioServer]:
    """Parameters for mcp's stdio client (the SDK kills the tee and the server with their process group)."""

    def make(*, prefect: bool = False) -> StdioServer:
        return StdioServer(tmp_path, tree, prefect=prefect)

    return make


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}/mcp"

    def output(self) -> str:
        return self.log.read_text()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@pytest.fixture
def http_server(tmp_path: Path, tree: Path):
    """Starts `assay serve --transport http` on a free port and waits until the port answers."""
    started: list[subprocess.Popen] = []

    def start(*, prefect: bool = False, extra: list[str] = ()) -> HttpServer:
        port = free_port()
        log = tmp_path / f"http-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                serve_args(tree, prefect=prefect, extra=["--transport", "http", "--port", str(port), *extra]),
                stdout=out, stderr=subprocess.STDOUT, env=server_env(tmp_path, prefect=prefect), cwd=REPO,
                start_new_session=True)
        started.append(proc)
        wait_listening(proc, port, log)
        return HttpServer(proc, port, log)

    yield start
    for proc in started:
        _stop(proc)


async def _call(client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def _read(client, uri: str) -> dict:
    import json

    return json.loads((await client.read_resource(uri)).contents[0].text)


async def exercise(client, tree: Path) -> dict:
    """The session every transport must carry: list tools, index (sync), navigate, inspect, read the job resource."""
    names = {t.name for t in (await client.list_tools()).tools}
    assert REFERENCE_TOOLS <= names, f"missing tools: {sorted(REFERENCE_TOOLS - names)}"

    indexed = await _call(client, "index", {"root": str(tree), "async": False, "maxAge": 300})
    assert indexed["status"] == "completed" and indexed["files"] == 10 and indexed["directories"] == 9
    assert indexed["statusUrl"] == f"synthesis://jobs/{indexed['jobId']}"

    listing = await _call(client, "navigate", {"path": str(tree / "Photos"), "sort": "size", "desc": True})
    assert [(e["name"], e["kind"], e["size"]) for e in listing["entries"]] == [
        ("vacation", "directory", 5000), ("photo.jpg", "file", 5000), ("notes.txt", "file", 10)]
    assert listing["total"] == 3 and listing["hasMore"] is False

    movie = await _call(client, "inspect", {"path": str(tree / "Videos" / "movie.mp4")})
    assert movie["kind"] == "file" and movie["size"] == 40000
    assert movie["resourceUri"] == "synthesis://nodes" + str(tree / "Videos" / "movie.mp4")
    node = await _read(client, movie["resourceUri"])
    assert node["path"] == str(tree / "Videos" / "movie.mp4") and node["size"] == 40000

    job = await _read(client, indexed["statusUrl"])
    assert job["jobId"] == str(indexed["jobId"]) and job["status"] == "completed" and job["progress"] == 100.0
    assert job["files"] == 10 and job["root"] == str(tree)
    return job

"""`assay index` beside a running `assay serve` on the same data dir hands its job to the server over
<data dir>/assay.sock (mcp_server/control.py): real server and command-line processes, Prefect on."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from store import jobs as store_jobs
from store.engine import get_engine
from tests.conftest import make_tree
from tests.e2e.conftest import REPO, _stop, server_env
from tests.e2e.test_process_lifetime import BAD_LINES, STARTUP, api_record, big_tree, cli, start_http, wait_until

pytestmark = pytest.mark.e2e

LISTENING = "listening for command-line calls at "
RESULT = re.compile(r"^(completed|cancelled): \d+ files, \d+ directories, [\d,]+ bytes, \d+ removed, in \d+ ms "
                    r"\(job \d+\)$")


def same_shape(stdout: str) -> str:
    """A result line with its duration and job id blanked: what a local run and a hand-off must print alike."""
    return re.sub(r"in \d+ ms \(job \d+\)", "in N ms (job N)", stdout)


def imported(stderr: str) -> set[str]:
    """Top-level packages named by `python -X importtime` lines."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


class Served:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tree = make_tree(tmp / "home" / "user")
        self.big = big_tree(tmp / "big", dirs=100)  # 50,000 files: a walk long enough to interrupt
        self.env = server_env(tmp, prefect=True)
        self.sock = tmp / "data" / "assay.sock"
        self.proc, self.log = start_http(tmp, self.tree, self.env, "--root", str(self.big))

    def run(self, *args: str, extra_python: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        command = cli(*args)
        command[1:1] = list(extra_python)
        return subprocess.run(command, capture_output=True, text=True, env=self.env, cwd=REPO, timeout=300)

    def job(self, job_id: int) -> dict:
        engine = get_engine(f"sqlite:///{self.tmp / 'data' / 'assay.db'}")
        try:
            return store_jobs.get_job(engine, job_id=job_id)
        finally:
            engine.dispose()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One `assay serve --transport http` with Prefect for the tests of this module, ready for command-line calls."""
    s = Served(tmp_path_factory.mktemp("handoff"))
    try:
        wait_until(lambda: LISTENING in s.log.read_text() and "Prefect is ready" in s.log.read_text(), STARTUP,
                   "the server's control socket and Prefect", s.log)
        yield s
    finally:
        _stop(s.proc)


def job_id_of(stdout: str) -> int:
    return int(re.search(r"\(job (\d+)\)", stdout).group(1))


def test_assay_index_hands_its_job_to_the_server_which_runs_it_as_a_prefect_flow(served):
    tree = served.tree / "Photos"
    done = served.run("index", str(tree), "--root", str(served.tree), "--force", extra_python=("-X", "importtime"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"indexing handed to the assay server at {served.sock} (pid {served.proc.pid})" in done.stderr
    assert RESULT.match(done.stdout.splitlines()[0]) and done.stdout.startswith("completed: 4 files, 2 directories")
    assert "] 100.0%" in done.stderr and "#" * 30 in done.stderr
    # the command itself imported neither Prefect nor the MCP SDK, and ran no flow of its own
    assert not imported(done.stderr) & {"prefect", "mcp", "sqlalchemy"}, sorted(imported(done.stderr))
    assert "Beginning flow run" not in done.stderr and "Prefect API" not in done.stderr

    # the server ran it: its log names the job, the job row carries the flow run, which the server's API completed
    job_id = job_id_of(done.stdout)
    log = served.log.read_text()
    assert f"index of {tree} for a command-line call: completed (job {job_id})" in log
    assert f"Beginning flow run 'index {tree}'" in log
    job = served.job(job_id)
    assert job["status"] == "completed" and job["root"] == str(tree) and job["flow_run_id"]
    url = api_record(served.tmp)["url"]
    run = httpx.get(f"{url}/flow_runs/{job['flow_run_id']}", timeout=10).json()
    assert run["name"] == f"index {tree}" and run["state_type"] == "COMPLETED"
    assert not [line for line in done.stderr.splitlines() if any(bad in line for bad in BAD_LINES)]


def test_a_handed_off_run_prints_what_a_local_run_prints(served):
    tree = served.tree
    handed = served.run("index", str(tree), "--root", str(tree), "--force")
    local = served.run("index", str(tree), "--root", str(tree), "--force", "--no-prefect")
    assert handed.returncode == local.returncode == 0, handed.stderr[-2000:] + local.stderr[-2000:]
    assert "indexing handed to the assay server" in handed.stderr
    assert "indexing handed to the assay server" not in local.stderr
    assert same_shape(handed.stdout) == same_shape(local.stdout)
    assert handed.stdout.startswith("completed: 10 files, 9 directories, 59,638 bytes, 0 removed")
    # a recent scan is skipped with the same sentence; an error reads the same and fails the same way
    handed = served.run("index", str(tree), "--root", str(tree), "--max-age", "600")
    local = served.run("index", str(tree), "--root", str(tree), "--max-age", "600", "--no-prefect")
    assert handed.returncode == local.returncode == 0
    assert re.sub(r"\d+ seconds ago", "N seconds ago", handed.stdout) == \
        re.sub(r"\d+ seconds ago", "N seconds ago", local.stdout)
    assert handed.stdout.startswith("Path was scanned ")
    missing = str(tree / "nope")
    handed = served.run("index", missing, "--root", str(tree))
    local = served.run("index", missing, "--root", str(tree), "--no-prefect")
    assert handed.returncode == local.returncode == 2
    assert "indexing handed to the assay server" in handed.stderr
    assert f"assay: NOT_FOUND: root {missing} does not exist" in handed.stderr
    assert f"assay: NOT_FOUND: root {missing} does not exist" in local.stderr
    assert handed.stdout == local.stdout == ""


def test_ctrl_c_in_the_command_cancels_the_job_in_the_server(served):
    tree = served.big
    proc = subprocess.Popen(cli("index", str(tree), "--root", str(tree), "--force"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=served.env, cwd=REPO,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = b""
    try:
        while b"%" not in seen:  # the first progress line: the server is walking
            chunk = os.read(proc.stderr.fileno(), 4096)
            assert chunk, seen.decode()
            seen += chunk
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    stderr = (seen + err).decode()
    assert proc.returncode == 1, stderr
    assert out.decode().startswith("cancelled: ") and RESULT.match(out.decode().splitlines()[0])
    job_id = job_id_of(out.decode())
    assert f"job {job_id} cancelled: cancelled from the command line" in served.log.read_text()
    job = served.job(job_id)
    assert job["status"] == "cancelled" and job["files"] < 50_000 and job["flow_run_id"]


def test_a_path_outside_the_servers_roots_is_indexed_by_the_command_itself(served):
    other = make_tree(served.tmp / "elsewhere")
    done = served.run("index", str(other), "--root", str(other))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("completed: 10 files, 9 directories")
    assert f"indexing here: the assay server at {served.sock} leaves this job to us: path {other} is outside " \
           "the allowed roots" in done.stderr
    assert "indexing handed to the assay server" not in done.stderr
    # run here, as before the hand-off existed: a flow run of its own, reported to the server's Prefect API
    assert f"using the Prefect API of the assay server on this data dir: {api_record(served.tmp)['url']}" \
           in done.stderr
    assert f"Beginning flow run 'index {other}'" in done.stderr


def test_a_stale_socket_is_ignored_then_replaced_and_the_socket_goes_with_the_server(tmp_path):
    tree = make_tree(tmp_path / "home" / "user")
    env = server_env(tmp_path, prefect=True)
    sock_path = tmp_path / "data" / "assay.sock"
    sock_path.parent.mkdir(parents=True)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(sock_path))  # what a server killed with SIGKILL leaves: the file, and nobody listening
    dead.close()
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)

    done = subprocess.run(cli("index", str(tree), "--root", str(tree), "--log-level", "DEBUG"), capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("completed: 10 files, 9 directories")
    assert f"indexing here: no assay server answers at {sock_path}" in done.stderr
    assert "indexing handed to the assay server" not in done.stderr

    proc, log = start_http(tmp_path, tree, env)
    try:
        wait_until(lambda: LISTENING in log.read_text(), STARTUP, "the server's control socket", log)
        assert f"removed the socket {sock_path} left by a server that is gone" in log.read_text()
        assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600
        done = subprocess.run(cli("index", str(tree), "--root", str(tree), "--force"), capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"indexing handed to the assay server at {sock_path} (pid {proc.pid})" in done.stderr
    finally:
        _stop(proc)  # SIGTERM: a clean stop
    assert proc.returncode == 0
    assert not sock_path.exists()
    assert not [line for line in log.read_text().splitlines() if any(bad in line for bad in BAD_LINES)]


def test_the_socket_protocol_refuses_another_store_and_answers_bad_requests(served):
    """What any client of the socket meets: a job for another store is left to the caller, a malformed request is
    answered with an error, and the server keeps serving."""

    def ask(line: bytes) -> dict:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(30)
            conn.connect(str(served.sock))
            conn.sendall(line)
            return json.loads(conn.makefile("rb").readline())

    other_store = json.dumps({"op": "index", "path": str(served.tree), "store": "sqlite:////elsewhere.db"})
    assert ask(other_store.encode() + b"\n")["refused"]["code"] == "OTHER_STORE"
    assert ask(b'{"op": "erase"}\n')["error"]["code"] == "INVALID_PARAMS"
    done = served.run("index", str(served.tree / "docs"), "--root", str(served.tree), "--force")
    assert done.returncode == 0 and "indexing handed to the assay server" in done.stderr, done.stderr[-3000:]


def test_a_command_that_goes_away_mid_job_has_its_job_cancelled_in_the_server(served):
    request = {"op": "index", "path": str(served.big), "force": True, "maxAge": 0, "prefect": True,
               "store": f"sqlite:///{served.tmp / 'data' / 'assay.db'}"}
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(60)
        conn.connect(str(served.sock))
        conn.sendall(json.dumps(request).encode() + b"\n")
        lines = conn.makefile("rb")
        assert "accepted" in json.loads(lines.readline())
        job_id = json.loads(lines.readline())["job"]
        assert "progress" in json.loads(lines.readline())
        lines.close()
    # closed without a word, as a killed command does
    wait_until(lambda: f"job {job_id} cancelled: the command-line call went away" in served.log.read_text(), 60,
               "the server to cancel the job", served.log)
    wait_until(lambda: served.job(job_id)["status"] == "cancelled", 60, "the job row to say cancelled")


def test_a_server_without_prefect_leaves_prefect_jobs_to_the_command(tmp_path):
    tree = make_tree(tmp_path / "home" / "user")
    env = server_env(tmp_path, prefect=False)
    log = tmp_path / "stdio.err"
    proc = subprocess.Popen([sys.executable, "-m", "mcp_server.cli", "serve", "--root", str(tree), "--no-prefect"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(log, "wb"), env=env, cwd=REPO,
                            start_new_session=True)
    try:
        wait_until(lambda: LISTENING in log.read_text(), 120, "the stdio server's control socket", log)
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(30)
            conn.connect(str(tmp_path / "data" / "assay.sock"))
            conn.sendall(json.dumps({"op": "index", "path": str(tree), "prefect": True,
                                     "store": f"sqlite:///{tmp_path / 'data' / 'assay.db'}"}).encode() + b"\n")
            assert json.loads(conn.makefile("rb").readline())["refused"]["code"] == "NO_PREFECT"
        done = subprocess.run(cli("index", str(tree), "--root", str(tree), "--no-prefect"), capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("completed: 10 files"), done.stderr[-3000:]
        assert "indexing handed" not in done.stderr  # --no-prefect never asks a server
    finally:
        proc.stdin.close()  # the stdio client goes away: the server stops and takes its socket with it
        proc.wait(timeout=60)
        _stop(proc)
    assert not (tmp_path / "data" / "assay.sock").exists()

"""The warm starter and its launcher (flows/core/warm_starter.py, warm_launch.py), as a worker's Runner uses them:
the launcher's pid stands for the flow run's process — its environment, directory, streams and arguments are the
copy's, signals sent to it reach the copy, the copy's exit status is its own — and without a starter it becomes a
cold ``python -m prefect.engine``. The copies run Prefect's real engine; a loopback socket that never answers plays
the Prefect API, so a copy waits there until signalled, and what it asked for shows which environment it ran in."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from flows.core.warm_launch import SOCKET_ENV

PY = sys.executable


class SilentApi:
    """A loopback server that reads requests and never answers (a Prefect API that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/api"
        self.requests: list[bytes] = []
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except OSError:
            return
        self.requests.append(data)

    def wait_request(self, timeout: float = 30.0) -> bytes:
        deadline = time.monotonic() + timeout
        while not self.requests:
            assert time.monotonic() < deadline, "the flow run's process never called the API"
            time.sleep(0.02)
        return self.requests[0]

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture(scope="module")
def starter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    path = tmp_path_factory.mktemp("warm") / "starter.sock"
    proc = subprocess.Popen([PY, "-m", "flows.core.warm_starter", str(path), str(os.getpid()), "prefect.flow_engine"],
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, "the warm starter ended at start"
        assert time.monotonic() < deadline, "the warm starter never listened"
        time.sleep(0.05)
    yield path, proc
    proc.terminate()
    proc.wait(timeout=10)


def launch(starter_path: Path | None, args: list[str], *, api: str = "http://127.0.0.1:9/api", cwd: Path | None = None,
           **kw: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PREFECT_API_URL": api, "PREFECT_API_REQUEST_TIMEOUT": "120"}
    env.pop(SOCKET_ENV, None)
    if starter_path is not None:
        env[SOCKET_ENV] = str(starter_path)
    return subprocess.Popen([PY, "-m", "flows.core.warm_launch", *args], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)  # type: ignore[call-overload]


def copies_of(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children()


def test_the_copy_runs_prefects_engine_with_the_launchers_arguments_and_streams_and_its_status_is_the_launchers(
        starter) -> None:
    path, _ = starter
    proc = launch(path, ["not-a-flow-run-id"])
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert "Invalid flow run id" in err and "not-a-flow-run-id" in err


def test_the_copy_takes_the_launchers_environment_and_directory_and_a_signal_sent_to_the_launcher_reaches_it(
        starter, tmp_path) -> None:
    path, proc_starter = starter
    api = SilentApi()
    run_id = uuid.uuid4()
    try:
        proc = launch(path, [str(run_id)], api=api.url, cwd=tmp_path)
        request = api.wait_request()  # the copy read PREFECT_API_URL from the launcher's environment
        assert f"/api/flow_runs/{run_id}".encode() in request
        (copy,) = copies_of(proc_starter)
        assert Path(copy.cwd()) == tmp_path
        proc.send_signal(signal.SIGINT)  # passed on: the copy's engine is interrupted where it waits, and says so
        _, err = proc.communicate(timeout=60)
        assert "KeyboardInterrupt" in err and "interrupted by base exception" in err
        assert proc.returncode == -signal.SIGINT  # the copy's status, the launcher's own
        assert not copy.is_running() or copy.status() == psutil.STATUS_ZOMBIE
    finally:
        api.close()


def test_a_launcher_killed_takes_its_copy_with_it(starter) -> None:
    path, proc_starter = starter
    api = SilentApi()
    try:
        proc = launch(path, [str(uuid.uuid4())], api=api.url)
        api.wait_request()
        (copy,) = copies_of(proc_starter)
        proc.kill()
        proc.wait()
        copy.wait(timeout=10)  # the starter saw its launcher go and killed the copy, as the Runner meant
        assert copies_of(proc_starter) == []
    finally:
        api.close()


def test_without_a_starter_the_launcher_becomes_a_cold_prefect_engine(tmp_path) -> None:
    proc = launch(None, ["not-a-flow-run-id"])
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "Invalid flow run id" in err
    gone = launch(tmp_path / "no-such.sock", ["not-a-flow-run-id"])  # a starter that is gone: the same
    _, err = gone.communicate(timeout=120)
    assert gone.returncode == 1 and "Invalid flow run id" in err


def test_a_starter_that_stops_leaves_its_copies_running_and_their_launchers_wait_for_them(tmp_path) -> None:
    path = tmp_path / "starter.sock"
    proc_starter = subprocess.Popen([PY, "-m", "flows.core.warm_starter", str(path), str(os.getpid())],
                                    env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    api = SilentApi()
    try:
        while not path.exists():
            assert proc_starter.poll() is None
            time.sleep(0.05)
        proc = launch(path, [str(uuid.uuid4())], api=api.url)
        api.wait_request()
        (copy,) = copies_of(proc_starter)
        proc_starter.terminate()
        proc_starter.wait(timeout=10)
        assert copy.is_running() and proc.poll() is None  # a flow run outlives its worker's starter
        assert not path.exists()
        copy.kill()
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:
        api.close()
        if proc_starter.poll() is None:
            proc_starter.kill()


def test_a_starter_ends_when_its_parent_does(tmp_path) -> None:
    path = tmp_path / "starter.sock"
    parent = subprocess.Popen([PY, "-c", "import sys, subprocess, time; subprocess.Popen([sys.executable, '-m', "
                               f"'flows.core.warm_starter', {str(path)!r}, str(__import__('os').getpid())]); "
                               "time.sleep(60)"])
    try:
        deadline = time.monotonic() + 60
        while not path.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (child,) = psutil.Process(parent.pid).children()
        parent.kill()
        parent.wait()
        child.wait(timeout=10)
        assert not path.exists()
    finally:
        if parent.poll() is None:
            parent.kill()

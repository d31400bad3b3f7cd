"""The parts of a work-pool deployment, each started on loopback as the README's "Running on several machines" says,
for the cluster benchmark (bench/cluster.py) and the end-to-end tests (tests/e2e/test_cluster.py): a throw-away
PostgreSQL cluster, a Prefect server with its UI, `assay serve --work-pool`, and `assay worker` processes (each
with its own data dir, optionally pinned to cores with ``taskset``). Every part is a context manager that stops what
it started."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from flows.core.prefect import seed_home

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server binary: on PATH, or where Debian's postgresql package puts it."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def have_postgres() -> bool:
    return bool(pg_bin("initdb") and pg_bin("pg_ctl"))


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL cluster on loopback with a database ``assay``; its SQLAlchemy URL."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise RuntimeError("PostgreSQL is not installed (./scripts/setup installs it)")
    base = Path(tempfile.mkdtemp(prefix="assay-cluster-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sock, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "check": True, "timeout": 120}
    subprocess.run(prefix + [initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"], **quiet)
    subprocess.run(prefix + [pg_ctl, "-D", str(data), "-w", "-l", str(base / "log"), "-o",
                             f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                             "-c max_connections=200", "start"], **quiet)
    try:
        subprocess.run(prefix + [shutil.which("psql") or "psql", "-h", "127.0.0.1", "-p", str(port), "-U",
                                 "postgres", "-c", "CREATE DATABASE assay"], **quiet)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/assay"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", str(data), "-m", "immediate", "stop"], **{**quiet, "check": False})
        shutil.rmtree(base, ignore_errors=True)


def _base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env.update(PYTHONPATH=str(REPO), PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_CLI_PROMPT="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PREFECT_LOGGING_LEVEL="WARNING")
    for kept in ("ASSAY_MODEL_CACHE", "ASSAY_PREFECT_SEED"):  # the suite's model exports and Prefect seed
        if os.environ.get(kept):
            env[kept] = os.environ[kept]
    return env


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the process exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status < 500:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # what it left behind (flow-run subprocesses)


@dataclass
class Part:
    """A started process: its name, the process, its log file, its data dir."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path | None = None
    url: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def prefect_server(work: Path, *, scheduler_seconds: float = 60.0) -> Iterator[Part]:
    """`prefect server start` on a free loopback port with its own home; its API URL in ``url``."""
    home = work / "prefect-server"
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = _base_env(home)
    env.update(PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS=f"{scheduler_seconds:g}",
               PREFECT_SERVER_SERVICES_LATE_RUNS_LOOP_SECONDS="5", PREFECT_SERVER_UI_ENABLED="true")
    seed_home(home, env)  # the test suite's migrated Prefect database, when it gives one
    log = work / "prefect-server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                 "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        _wait_http(f"{url}/health", proc, log, 180)
        yield Part("prefect", proc, log, url=url)
    finally:
        _stop(proc)


def assay_env(work: Path, name: str, database_url: str, api_url: str, cache_dir: Path) -> tuple[dict[str, str], Path]:
    data = work / f"data-{name}"
    data.mkdir(parents=True, exist_ok=True)
    env = _base_env(data / "prefect")
    env.update(PREFECT_API_URL=api_url, ASSAY_DATA_DIR=str(data), ASSAY_DATABASE_URL=database_url,
               ASSAY_CACHE_DIR=str(cache_dir), ASSAY_DOCUMENTS_PLAN="off", ASSAY_BATCH_LEASE="4")
    return env, data


@contextlib.contextmanager
def assay_worker(work: Path, name: str, *, pool: str, database_url: str, api_url: str, cache_dir: Path,
                 cores: str | None = None, extra_env: dict[str, str] | None = None,
                 prefix: list[str] | None = None, args: list[str] | None = None) -> Iterator[Part]:
    """`assay worker --pool POOL --name NAME [ARGS]` (pinned to ``cores`` with taskset when given); ready once
    Prefect lists it online."""
    env, data = assay_env(work, name, database_url, api_url, cache_dir)
    env.update(extra_env or {})
    command = [*(prefix or []), *(["taskset", "-c", cores] if cores else []), sys.executable, "-m", "mcp_server.cli",
               "worker", "--pool", pool, "--name", name, "--database-url", database_url, "--cache-dir",
               str(cache_dir), "--data-dir", str(data), "--root", "/", *(args or [])]
    log = work / f"worker-{name}.log"
    with open(log, "ab") as out:  # a worker started again under its name adds to its log
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True)
    part = Part(name, proc, log, data_dir=data)
    try:
        wait_worker_online(api_url, pool, name, proc, log)
        yield part
    finally:
        _stop(proc)


def wait_worker_online(api_url: str, pool: str, name: str, proc: subprocess.Popen[bytes], log: Path,
                       timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    body = json.dumps({}).encode()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"worker {name} exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        request = urllib.request.Request(f"{api_url}/work_pools/{pool}/workers/filter", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                workers = json.loads(response.read())
            if any(w.get("name") == name and w.get("status") == "ONLINE" for w in workers):
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"worker {name} did not come online in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def assay_serve(work: Path, *, pool: str | None, database_url: str, api_url: str, cache_dir: Path,
                roots: list[Path], name: str = "server") -> Iterator[Part]:
    """`assay serve --transport http --work-pool POOL` on a free port; its MCP URL in ``url``."""
    env, data = assay_env(work, name, database_url, api_url, cache_dir)
    port = free_port()
    command = [sys.executable, "-m", "mcp_server.cli", "serve", "--transport", "http", "--port", str(port),
               "--database-url", database_url, "--cache-dir", str(cache_dir), "--data-dir", str(data),
               *(["--work-pool", pool] if pool else []), *[arg for r in roots for arg in ("--root", str(r))]]
    log = work / f"serve-{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 180
        while "Prefect is ready" not in log.read_text(errors="replace") or not _answers(port):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"assay serve: Prefect not ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield Part(name, proc, log, data_dir=data, url=url)
    finally:
        _stop(proc)

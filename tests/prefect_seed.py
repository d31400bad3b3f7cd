"""Make the test suite's Prefect seed: ``python -m tests.prefect_seed DIR``.

Each test that starts `assay serve` or a command with Prefect gets a fresh Prefect home, whose server would spend ~12 s
of CPU on Prefect's migrations and block registration (~19 s for a fresh home against ~7.5 s for a seeded one).
scripts/test runs this once: a Prefect server (with its UI and services, as `assay serve` starts it) runs on ``DIR``
as its home until it answers, then stops; its database, checkpointed into one file, and its block-registration memo are
the seed that flows/core/prefect.py copies into a home that has none (``ASSAY_PREFECT_SEED``)."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 300.0  # seconds for the server to answer on a loaded machine


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def make_seed(home: Path) -> Path:
    """Run a Prefect server on ``home`` once and leave its database whole in ``home/prefect.db``; that path."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", ASSAY_PREFECT_UI="1",
               PYTHONPATH=str(REPO))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/api"
        env["PREFECT_UI_API_URL"] = url
        server = subprocess.Popen([sys.executable, "-m", "flows.prefect_server", str(sock.fileno())],
                                  stdin=subprocess.PIPE, pass_fds=(sock.fileno(),), env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not _answers(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"Prefect's server on {home} did not answer (exit status {server.poll()})")
            time.sleep(0.2)
    finally:
        assert server.stdin is not None
        server.stdin.close()  # end-of-file: the server stops
        server.wait(timeout=60)
    database = home / "prefect.db"
    with sqlite3.connect(database) as db:  # the write-ahead log folded into the file: one file to copy
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    return database


if __name__ == "__main__":
    sys.stdout.write(f"{make_seed(Path(sys.argv[1]))}\n")

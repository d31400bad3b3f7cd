"""The worker pools' shared parts (flows/workers.py): a classifier pool worker does not outlive its parent, even
one killed by SIGKILL (no chance to shut its pool down)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[3]

# a parent that starts the process pool, prints its workers' pids, then sleeps until it is killed
PARENT = """
import multiprocessing, os, sys, time
from flows.classify.pool import Pool
pool = Pool(mode="process", workers=2)
executor = pool._get()
list(executor.map(abs, [1, 2, 3, 4]))
print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
time.sleep(600)
"""


def test_pool_workers_end_when_their_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        workers = [psutil.Process(int(pid)) for pid in parent.stdout.readline().split()]
        assert len(workers) == 2 and all(w.is_running() for w in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        _, alive = psutil.wait_procs(workers, timeout=20)
        assert not alive, f"workers left behind their killed parent: {[w.pid for w in alive]}"
    finally:
        if parent.poll() is None:
            parent.kill()

"""The server the soak and the responsiveness benchmark measure: ``assay serve --transport http`` as a subprocess with
its own data dir and roots, and what /proc says about it while it runs (resident memory, threads, open file
descriptors, its children's memory), sampled on a thread.

    with serving(scratch, roots=[root], database_url=None, prefect=False) as server:
        wait_until_up(server)
        ... server.url, proc_stats(server.pid) ...
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import REPO, server_env
from bench.run_index import assay_command

NUMBERED = re.compile(r"[0-9a-f]*[0-9][0-9a-f]*")  # a number or a hex name (seg-12-3fa9.tx: seg-N-N.tx)


@dataclass
class Served:
    """A running ``assay serve``: its MCP endpoint, process, data dir and log file."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    data: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(scratch: Path, *, roots: list[Path], database_url: str | None = None, prefect: bool = False,
            env: dict[str, str] | None = None, name: str = "serve",
            switch_interval: float | None = None) -> Iterator[Served]:
    """``assay serve --transport http`` on loopback with the data dir ``scratch/data-<name>``, until the block ends
    (SIGTERM, then SIGKILL after 60 s). ``env`` is added to bench.common.server_env's environment;
    ``switch_interval`` (seconds) sets the server's ``sys.setswitchinterval`` first (an experiment: how long a thread
    that wants the GIL waits for one that computes)."""
    data = scratch / f"data-{name}"
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    head = assay_command() if switch_interval is None else [
        sys.executable, "-c", f"import sys; sys.setswitchinterval({switch_interval!r}); "
                              "from mcp_server.cli import main; sys.exit(main())"]
    command = head + ["serve", "--transport", "http", "--port", str(port), "--data-dir", str(data),
                                 "--log-level", "WARNING"]
    for root in roots:
        command += ["--root", str(root)]
    if database_url:
        command += ["--database-url", database_url]
    if not prefect:
        command.append("--no-prefect")
    log = scratch / f"{name}.log"
    with open(log, "w") as server_log:
        process = subprocess.Popen(command, cwd=REPO, env=server_env(scratch, **(env or {})),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=server_log)
        try:
            yield Served(f"http://127.0.0.1:{port}/mcp", port, process, data, log)
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_until_up(server: Served, timeout: float = 300.0) -> float:
    """Wait until the server accepts connections; returns the seconds it took. RuntimeError when it exits first or
    does not answer within ``timeout``."""
    started = time.monotonic()
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"assay serve exited ({server.process.returncode}); see {server.log}:\n"
                               f"{tail(server.log)}")
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            return time.monotonic() - started
        except OSError:
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"assay serve did not answer within {timeout:g} s; see {server.log}") from None
            time.sleep(0.1)


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file ('' when it cannot be read)."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


# --- what /proc says -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProcStats:
    """One look at a process: when, its resident memory (bytes), threads, open file descriptors, and its live
    children's count and resident memory (the SQLite writer, extraction and classifier workers, Prefect's API)."""

    at: float  # time.monotonic()
    rss: int
    threads: int
    fds: int
    children: int
    children_rss: int


def _status(pid: int) -> dict[str, int]:
    out = {"VmRSS": 0, "Threads": 0}
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in out:
                value = int(line.split()[1])
                out[key] = value * 1024 if key == "VmRSS" else value
    return out


def _children(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc/PID/task/*/children)."""
    found: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            for child in children.read_text().split():
                found.append(int(child))
                found += _children(int(child))
    return found


def fd_count(pid: int) -> int:
    """Open file descriptors of ``pid`` (entries of /proc/PID/fd; 0 when it cannot be read)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def fd_kinds(pid: int) -> dict[str, int]:
    """What the open file descriptors of ``pid`` are, counted: socket, pipe, anon_inode:[...], or a file's path with
    its numbers masked (so a family of numbered files counts as one; " (deleted)" marks a file unlinked since)."""
    kinds: Counter[str] = Counter()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            plain = target.startswith(("socket:", "pipe:"))
            kinds[target.split(":", 1)[0] if plain else NUMBERED.sub("N", target)] += 1
    return dict(kinds.most_common())


def proc_stats(pid: int) -> ProcStats:
    status = _status(pid)
    children = _children(pid)
    return ProcStats(time.monotonic(), status["VmRSS"], status["Threads"], fd_count(pid), len(children),
                     sum(_status(c)["VmRSS"] for c in children))


class ProcTrace:
    """``proc_stats(pid)`` every ``every`` seconds on a thread, from the block's start to its end."""

    def __init__(self, pid: int, every: float = 2.0) -> None:
        self.pid, self.every = pid, every
        self.samples: list[ProcStats] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-proc-trace", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(proc_stats(self.pid))
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> ProcTrace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak_rss(self, since: float = 0.0) -> int:
        return max((s.rss for s in self.samples if s.at >= since), default=0)

    def as_rows(self, origin: float) -> list[dict[str, Any]]:
        """The samples as JSON rows, their time in seconds from ``origin`` (a time.monotonic())."""
        return [{**asdict(s), "at": round(s.at - origin, 1)} for s in self.samples]

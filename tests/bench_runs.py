"""The benchmark smoke runs, started in the background when the session begins and awaited by their tests.

Each benchmark's quick form is a subprocess of 10-60 s that mostly waits (servers starting, Prefect's API, sockets).
Run one after another at the end of the suite they took four and a half minutes; started at the session's first test,
two at a time and at the lowest CPU priority (`nice -n 19`), they use the time the rest of the suite leaves idle, and
the foreground tests keep the machine first. A test asks for its run by name and waits for it; only the runs whose
tests were collected start (`pytest -k navigate` starts none)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARALLEL = 2
RESULT = "bench-result.json"  # a finished run's exit code and output, in its work dir


@dataclass(frozen=True)
class Bench:
    """A benchmark command: its arguments given its work dir, the environment it keeps, its time limit."""

    name: str  # the smoke test's module is tests/test_bench_<name>_smoke.py (run: tests/test_bench_smoke.py)
    argv: Callable[[Path], list[str]]
    keep_env: Callable[[str], bool]
    timeout: float = 1800  # at nice 19 beside the tests, a benchmark may get little CPU until they end


@dataclass(frozen=True)
class BenchResult:
    """What a benchmark run left: its exit code, output and work dir."""

    returncode: int
    stdout: str
    stderr: str
    work: Path


def _outside_prefect_and_assay(key: str) -> bool:
    """A variable a benchmark keeps: none of Prefect's or assay's, but the suite's Prefect seed (it only saves each
    fresh Prefect home its migrations)."""
    return not key.startswith(("PREFECT_", "ASSAY_")) or key == "ASSAY_PREFECT_SEED"


def _script(name: str, *args: str) -> Callable[[Path], list[str]]:
    return lambda work: [sys.executable, str(REPO / "bench" / f"{name}.py"), *args, "--work", str(work)]


def _quick(name: str, *, module: bool = False) -> Callable[[Path], list[str]]:
    """``--quick`` with the table and the JSON figures written into the work dir."""
    def argv(work: Path) -> list[str]:
        head = ["-m", f"bench.{name}"] if module else [str(REPO / "bench" / f"{name}.py")]
        return [sys.executable, *head, "--quick", "--work", str(work),
                "--out", str(work / f"{name}.md"), "--json", str(work / f"{name}.json")]
    return argv


def _classify(work: Path) -> list[str]:
    return [sys.executable, str(REPO / "bench" / "classify.py"), "--quick", "--corpus", str(work),
            "--out", str(work / "classify.md"), "--json", str(work / "classify.json")]


# longest first, so the last to finish is a short one
BENCHES: dict[str, Bench] = {b.name: b for b in [
    Bench("cli", _script("cli", "--files", "5", "--repeat", "1", "--out", "{out}"), _outside_prefect_and_assay),
    Bench("semantic", _quick("semantic", module=True),
          lambda key: _outside_prefect_and_assay(key) or key == "ASSAY_MODEL_CACHE"),  # the suite's model exports
    Bench("soak", _quick("soak"), lambda key: _outside_prefect_and_assay(key) or key == "ASSAY_MODEL_CACHE"),
    Bench("guard", _quick("guard"), _outside_prefect_and_assay),
    Bench("documents", _quick("documents"), _outside_prefect_and_assay),
    Bench("classify", _classify, _outside_prefect_and_assay),
    Bench("run", _script("run", "--quick", "--sizes", "2000", "--calls", "20", "--repeat", "1", "--no-whole-command",
                         "--out", "{out}"), lambda key: True),
    Bench("plans", _script("plans", "--files", "2000", "--repeat", "1", "--watch-files", "3", "--out", "{out}"),
          lambda key: not key.startswith("PREFECT_")),
    Bench("citations", _quick("citations", module=True), _outside_prefect_and_assay),
    Bench("fileops", _quick("fileops"), _outside_prefect_and_assay),
]}


def module_bench(module_name: str) -> str | None:
    """The benchmark a smoke-test module awaits (``tests.test_bench_cli_smoke`` → ``cli``), or None."""
    stem = module_name.rsplit(".", 1)[-1]
    if stem == "test_bench_smoke":
        return "run"
    if stem.startswith("test_bench_") and stem.endswith("_smoke"):
        name = stem[len("test_bench_"):-len("_smoke")]
        return name if name in BENCHES else None
    return None


class BenchRuns:
    """The selected benchmarks, run ``PARALLEL`` at a time in the background; ``result(name)`` waits for one.

    Under pytest-xdist (scripts/test runs two worker processes) one worker, the ``runner``, runs them and writes each
    result into ``shared`` (a folder every worker of the session sees); a smoke test on another worker waits for that
    file. So each benchmark runs once per session, wherever its test lands."""

    def __init__(self, names: Iterable[str], shared: Path, *, runner: bool = True) -> None:
        self._shared = shared
        self._runner = runner
        self._names = set(names)
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[str]] = set()
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="bench-smoke")
        self._futures: dict[str, Future[BenchResult]] = {
            name: self._pool.submit(self._run, BENCHES[name]) for name in BENCHES if runner and name in self._names}

    def result(self, name: str) -> BenchResult:
        """The run of ``name``, waited for (started now if no process of the session started it at the start)."""
        if not self._runner and name in self._names:
            return self._written(name)
        with self._lock:
            if name not in self._futures:
                self._futures[name] = self._pool.submit(self._run, BENCHES[name])
            future = self._futures[name]
        return future.result()

    def close(self) -> None:
        """Let the runs go: a runner whose results other workers await finishes them; a lone process (every smoke
        test has had its result, or the session was interrupted) stops what still runs."""
        with self._lock:
            self._closed = True
            if self._runner and not _worker():
                for proc in self._procs:
                    _end_group(proc.pid)
        self._pool.shutdown(wait=True, cancel_futures=not _worker())

    def _written(self, name: str) -> BenchResult:
        """The result the runner wrote for ``name``, waited for (it may queue behind the other runs)."""
        done = self._shared / name / RESULT
        deadline = time.monotonic() + sum(BENCHES[n].timeout for n in self._names)
        while not done.is_file():
            if time.monotonic() > deadline:
                return BenchResult(-1, "", f"[bench_runs] no result of {name} was written to {done}", done.parent)
            time.sleep(1)
        data = json.loads(done.read_text())
        return BenchResult(data["returncode"], data["stdout"], data["stderr"], Path(data["work"]))

    def _run(self, bench: Bench) -> BenchResult:
        work = self._shared / bench.name
        work.mkdir(parents=True, exist_ok=True)
        argv = [arg.replace("{out}", str(work / f"{bench.name}.md")) for arg in bench.argv(work)]
        env = {k: v for k, v in os.environ.items() if bench.keep_env(k)}
        out, err = work / "bench-stdout.txt", work / "bench-stderr.txt"
        with self._lock:
            if self._closed:
                return BenchResult(-1, "", "the session ended before this benchmark started", work)
            # output to files, not pipes: a process the benchmark left behind keeps a pipe open for good (a killed
            # guard's server did: the session hung); a session of its own: its whole group is ended afterwards
            with open(out, "w") as stdout_file, open(err, "w") as stderr_file:
                proc = subprocess.Popen(["nice", "-n", "19", *argv], cwd=REPO, env=env, text=True,
                                        stdout=stdout_file, stderr=stderr_file, start_new_session=True)
            self._procs.add(proc)
        note = ""
        try:
            proc.wait(timeout=bench.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            note = f"\n[bench_runs] {bench.name} ran past {bench.timeout:.0f} s and was killed"
        finally:
            with self._lock:
                self._procs.discard(proc)
            _end_group(proc.pid)
        stdout, stderr = out.read_text(errors="replace"), err.read_text(errors="replace") + note
        result = BenchResult(proc.returncode, stdout, stderr, work)
        temp = work / f".{RESULT}.partial"
        temp.write_text(json.dumps({"returncode": result.returncode, "stdout": stdout, "stderr": stderr,
                                    "work": str(work)}))
        temp.rename(work / RESULT)  # whole or absent: another worker reads it
        return result


def _end_group(group: int) -> None:
    """SIGKILL whatever is left of a benchmark's process group (servers, pools, trackers it did not stop)."""
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _worker() -> str | None:
    """This process's pytest-xdist worker id (gw0, gw1, ...), None outside xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def is_runner() -> bool:
    """Whether this process runs the session's benchmarks: the only one, or xdist's first worker."""
    return _worker() in (None, "gw0")

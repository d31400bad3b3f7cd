"""The command-line benchmark: wall time of `assay index` on a small folder, with and without a server running on the
same data dir, next to `--no-prefect` as the floor.

    .venv/bin/python bench/cli.py [--files 30] [--repeat 5] [--work DIR] [--out bench/out/cli.md]

Each measure runs `assay index FOLDER --force` as a separate process, the way a user types it, and times it from
start to exit:

1. `--no-prefect`: the walk as a plain function (the floor: Python start, imports, the store);
2. as a Prefect flow with no server: the first run on a fresh data dir, then runs on that data dir, each starting
   Prefect's API server of its own (flows/core/prefect.py);
3. as a Prefect flow while `assay serve --transport http` runs on the same data dir: the command hands the job to
   the server over <data dir>/assay.sock (mcp_server/control.py), which runs it as a flow in its own process with
   Prefect warm; the command imports no Prefect (checked on each run: the command's hand-off line);
4. the same server, a folder outside its roots: the server leaves the job to the command, which runs the flow itself
   and reports to the server's Prefect API found in <data dir>/prefect-api.json (checked: the log line naming it).

Progress goes to stderr; stdout gets the table only.
"""

from __future__ import annotations

import argparse
import json
import platform
import logging
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.run import render, secs, yes_no  # noqa: E402

log = logging.getLogger("bench.cli")
GOAL_WITH_SERVER_S = 2.0
HANDED = "indexing handed to the assay server at"
REUSED = "using the Prefect API of the assay server on this data dir"


def make_folder(root: Path, files: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"file-{i:04}.txt").write_text(f"file {i}\n")
    return root


def env_for(data_dir: Path) -> dict[str, str]:
    """The user's environment without Prefect or assay settings: Prefect's home goes under the data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_", "CORS_"))}
    env.update(ASSAY_DATA_DIR=str(data_dir), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return env


def index_once(folder: Path, data_dir: Path, *extra: str) -> tuple[float, str]:
    """Seconds from start to exit of one `assay index` (``folder`` is its root), and its stderr."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mcp_server.cli", "index", str(folder), "--root", str(folder),
                           "--force", *extra], capture_output=True, text=True, env=env_for(data_dir), cwd=REPO,
                          timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or not done.stdout.startswith("completed:"):
        raise RuntimeError(f"assay index failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}")
    return elapsed, done.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(folder: Path, data_dir: Path, log_file: Path) -> subprocess.Popen:
    """`assay serve --transport http` on ``data_dir``, returned once its Prefect API is recorded (it answers), its
    control socket is there and its Prefect warm-up has run (a server that has been up a while, as users meet it)."""
    with open(log_file, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mcp_server.cli", "serve", "--transport", "http", "--port",
                                 str(free_port()), "--root", str(folder)], stdout=out, stderr=subprocess.STDOUT,
                                env=env_for(data_dir), cwd=REPO, start_new_session=True)
    record = data_dir / "prefect-api.json"
    deadline = time.monotonic() + 300
    sock = data_dir / "assay.sock"
    while not (record.exists() and sock.exists() and "Prefect is ready" in log_file.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"assay serve did not start its Prefect API:\n{log_file.read_text()[-3000:]}")
        time.sleep(0.2)
    log.info("server ready, Prefect API %s", json.loads(record.read_text())["url"])
    return proc


def stop_server(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def facts(load_at_start: float) -> str:
    return (f"{os.cpu_count()} cores, {platform.system()} {platform.release()}; Python {platform.python_version()}; "
            f"load average at start {load_at_start:.2f}, at end {os.getloadavg()[0]:.2f}")


def spread(samples: list[float]) -> str:
    if len(samples) == 1:
        return secs(samples[0])
    return f"{secs(statistics.median(samples))} (min {secs(min(samples))}, max {secs(max(samples))})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/cli.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=30, help="files in the folder indexed (default 30)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each measure; the median is shown (default 5)")
    p.add_argument("--work", type=Path, help="work directory (default: a temporary one, removed)")
    p.add_argument("--out", type=Path, help="also write the table to this file")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    with tempfile.TemporaryDirectory(prefix="assay-bench-cli-") as tmp:
        work = args.work or Path(tmp)
        folder = make_folder(work / "folder", args.files)
        outside = make_folder(work / "outside", args.files)  # not among the server's roots
        load_at_start = os.getloadavg()[0]

        floor_dir = work / "data-floor"
        index_once(folder, floor_dir, "--no-prefect")  # the store exists before the timed runs
        floor = [index_once(folder, floor_dir, "--no-prefect")[0] for _ in range(args.repeat)]
        log.info("--no-prefect: %s", spread(floor))

        alone_dir = work / "data-alone"
        first = index_once(folder, alone_dir)[0]
        alone = [index_once(folder, alone_dir)[0] for _ in range(args.repeat)]
        log.info("no server: first %.2f s, then %s", first, spread(alone))

        shared_dir = work / "data-shared"
        server = start_server(folder, shared_dir, work / "server.log")
        try:
            runs = [index_once(folder, shared_dir) for _ in range(args.repeat)]
            index_once(outside, shared_dir)  # the store knows the folder before the timed runs, as for the others
            local_runs = [index_once(outside, shared_dir) for _ in range(args.repeat)]
        finally:
            stop_server(server)
        shared = [t for t, _ in runs]
        handed = all(HANDED in err and "Beginning flow run" not in err for _, err in runs)
        log.info("with a server, handed to it: %s (handed over every time: %s)", spread(shared), handed)
        beside = [t for t, _ in local_runs]
        reused = all(REUSED in err and HANDED not in err for _, err in local_runs)
        log.info("with a server, outside its roots: %s (reused its API: %s)", spread(beside), reused)

    median_floor = statistics.median(floor)

    def ratio(samples: list[float]) -> str:
        return f"{statistics.median(samples) / median_floor:.1f}×"

    n = args.files
    rows = [
        (f"`assay index` of {n} files, `--no-prefect` (the floor)", spread(floor), "", "", "the limit"),
        (f"`assay index` of {n} files as a Prefect flow, no server, first run on a fresh data dir", secs(first),
         secs(median_floor), ratio([first]), ""),
        (f"`assay index` of {n} files as a Prefect flow, no server", spread(alone), secs(median_floor),
         ratio(alone), ""),
        (f"`assay index` of {n} files as a Prefect flow, `assay serve` running on the same data dir: handed to the "
         "server, run there", spread(shared), secs(median_floor), ratio(shared),
         f"≤ {GOAL_WITH_SERVER_S:.0f} s: {yes_no(statistics.median(shared) <= GOAL_WITH_SERVER_S)}"),
        ("… handed to the server over its socket, no flow run in the command (its hand-off line on every run)",
         "yes" if handed else "**mismatch**", "", "", ""),
        (f"`assay index` of {n} files outside the server's roots: run in the command, on the server's Prefect API",
         spread(beside), secs(median_floor), ratio(beside), ""),
        ("… reported to the server's Prefect API (its log line on every run)", "yes" if reused else "**mismatch**",
         "", "", ""),
    ]
    notes = [f"{args.repeat} runs of each measure, each a separate `assay index --force` process timed from start "
             "to exit; median (min, max).",
             "Without a server every run starts Prefect's API server of its own and stops it at exit.",
             "With a server the command hands the job over <data dir>/assay.sock and imports no Prefect; a folder "
             "outside the server's roots is indexed by the command itself (Prefect imported, the server's API "
             "reused)."]
    table = render(facts(load_at_start), rows, notes)
    sys.stdout.write(table)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table)
    return 0 if handed and reused else 1


if __name__ == "__main__":
    sys.exit(main())

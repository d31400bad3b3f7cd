"""The kill harness: real `assay serve` (Streamable HTTP, no Prefect) and `assay index` processes, killed with
SIGKILL at points drawn from ``random.Random(seed)`` across each operation's measured length, then restarted and
checked, then the operation is run again to completion and checked for having finished the work without redoing
what was committed.

One data dir and one corpus root per test module; every kill point gets fresh files under the root, so rounds never
share work. The server is started once, then once after every kill of it: each restart is also where the next
round's operations run, so a module with N rounds starts N + 1 servers. The scenarios (in tests/e2e/
test_crash_kills.py) say how to prepare, run and check each operation; this module holds the processes, the kills,
the store as the test reads it (a plain SQLAlchemy engine on the SQLite file, only read) and the checks every kill
shares: db-diagnose, and the text and vector indexes against the store (their files, as the killed process left
them, copied and caught up as a starting server does).

An operation's length is measured once, without a kill, as it runs when killed; a kill's delay is drawn across its
writes (from its first write, which the measurement watches the store for, to its end): before its first write a
kill has nothing to leave half-done.

``ASSAY_KILL_POINTS=N`` (environment) tries N kill points per scenario instead of the fixed set CI runs.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import anyio
import numpy as np
import psutil
from mcp import Client
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

from flows.semantic.vectors import VectorIndex
from store.diagnostics import counter_mismatches
from store.textindex import source as text_source
from store.textindex.index import TextIndex
from tests.e2e.conftest import REPO, free_port, serve_args, server_env, wait_listening

SEED = 25  # the number: round k draws from random.Random(SEED + k)
GRACE = 15.0  # seconds a killed process's children get to go by themselves


def kill_points() -> int:
    """Kill points per scenario: ASSAY_KILL_POINTS, else the one CI runs."""
    return max(1, int(os.environ.get("ASSAY_KILL_POINTS", "1")))


@dataclass
class Kill:
    """One kill point: which operation, drawn how far into its measured length, and whether it was still running
    when the kill came (a point past the end of a run that went faster is still checked)."""

    scenario: str
    seed: int
    delay: float  # seconds after its first write (index) or its start (server operations; < 0: not started)
    length: float
    mid: bool = True
    state: str = ""  # what the store held of its work after the kill


class FirstSeen:
    """When a probe of the store first held during a run (seconds from its start): the moment an operation's
    first write landed. Kills are drawn across an operation's writes, from there to its end: before its first
    write, a kill has nothing to leave half-done."""

    def __init__(self) -> None:
        self.at: float | None = None

    async def watch(self, probe: Callable[[], bool], started: float, period: float = 0.01) -> None:
        while self.at is None:
            if probe():
                self.at = time.monotonic() - started
                return
            await anyio.sleep(period)


def fraction(rng: random.Random, point: int, points: int) -> float:
    """Where kill point ``point`` of ``points`` falls in an operation's writes: spread over them, each in its own
    stretch (not its very ends)."""
    return (point + rng.uniform(0.05, 0.85)) / points


class ToolFailed(AssertionError):
    pass


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tool's structured result; ToolFailed with its text when it is an error."""
    result = await client.call_tool(tool, args or {})
    if result.is_error:
        raise ToolFailed(f"{tool}: {' '.join(getattr(c, 'text', '') for c in result.content)}")
    out: dict[str, Any] = result.structured_content or {}
    return out


def process_tree(pid: int) -> list[psutil.Process]:
    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_now(proc: subprocess.Popen, *, group: bool) -> None:
    """SIGKILL the process (``group``: with its whole process group, as a machine that loses power), then wait until
    every process of its tree is gone: children must go by themselves (their writes end with them)."""
    tree = process_tree(proc.pid)
    if group:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:
        proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + GRACE
    left: list[psutil.Process] = []
    while True:
        left = [p for p in tree[1:] if _alive(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for p in left:
        p.kill()
    assert not left, f"still running {GRACE:.0f} s after SIGKILL of {proc.args!r}: {[p.pid for p in left]}"


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@dataclass
class Server:
    """One life of `assay serve --transport http` on the harness's data dir."""

    proc: subprocess.Popen
    url: str
    log: Path


@dataclass
class Harness:
    """The data dir, the corpus root, the server of the moment, the store as the test reads it, the kills so far."""

    base: Path
    server: Server | None = None
    kills: list[Kill] = field(default_factory=list)
    lives: int = 0
    left: set[str] = field(default_factory=set)  # temporary files killed writers left (see leftovers)

    def __post_init__(self) -> None:
        self.root = self.base / "corpus"
        self.root.mkdir(parents=True, exist_ok=True)
        self.env = server_env(self.base, prefect=False)
        self.db = self.base / "data" / "assay.db"
        self._engine: Engine | None = None

    # --- processes ----------------------------------------------------------------------------------------------

    def start(self) -> Server:
        self.lives += 1
        port = free_port()
        log = self.base / f"serve-{self.lives}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(serve_args(self.root, prefect=False,
                                               extra=["--transport", "http", "--port", str(port)]),
                                    stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=REPO,
                                    start_new_session=True)
        wait_listening(proc, port, log)
        self.server = Server(proc, f"http://127.0.0.1:{port}/mcp", log)
        return self.server

    def kill(self, *, group: bool) -> None:
        assert self.server is not None
        kill_now(self.server.proc, group=group)
        self.server = None

    def stop(self) -> None:
        if self.server is not None:
            proc = self.server.proc
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            self.server = None
        if self._engine is not None:
            self._engine.dispose()

    def cli(self, *args: str) -> subprocess.Popen:
        """`assay ARGS` on the harness's data dir, in its own process group."""
        return subprocess.Popen([sys.executable, "-m", "mcp_server.cli", *args, "--root", str(self.root)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env, cwd=REPO,
                                start_new_session=True)

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        assert self.server is not None, "no server is running"
        async with Client(self.server.url) as c:
            yield c

    # --- the store, read by the test ------------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = create_engine(f"sqlite:///{self.db}", connect_args={"timeout": 60})
        return self._engine

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params))

    def under(self, folder: Path) -> tuple[str, str]:
        """(low, high) bounds of the paths strictly under ``folder``, for ``path > :lo AND path < :hi``."""
        return f"{folder}/", f"{folder}0"

    def entries(self, folder: Path) -> dict[str, Any]:
        """path -> row (id, kind, size, scan_id, scan_error) of the entries at and under ``folder``."""
        lo, hi = self.under(folder)
        return {r.path: r for r in self.rows(
            "SELECT id, path, kind, size, scan_id, scan_error FROM entries WHERE path = :top OR "
            "(path > :lo AND path < :hi)", top=str(folder), lo=lo, hi=hi)}

    # --- what every kill is checked for -----------------------------------------------------------------------------

    async def healthy(self, client: Client, *, wait_sweep: float = 30.0) -> dict[str, Any]:
        """db-diagnose: integrity ok, no orphan entries or records, every counter equal to its rows, no warning.
        The artifact cache's orphans (files a killed classifier wrote, whose rows never landed) are removed by the
        sweep a server runs at start: waited for, within ``wait_sweep`` seconds."""
        deadline = time.monotonic() + wait_sweep
        while True:
            report = await call(client, "db-diagnose")
            cache = report.get("artifact_cache") or {}
            if not cache.get("orphan_files") or time.monotonic() > deadline:
                break
            await anyio.sleep(0.5)
        assert report["integrity_check"] == "ok", report
        assert report["orphaned_entries"] == 0 and report["orphaned_records"] == {}, report
        assert report["healthy"] and report["warnings"] == [], report["warnings"]
        assert counter_mismatches(self.engine) == {}  # asked directly too (the tool's answer is its own model)
        return report

    def text_index_agrees(self) -> int:
        """The text engine's files (as the server left them: copied, then caught up with the store as any server
        does at start) hold exactly the store's searchable entries. Returns how many."""
        directory = Path(f"{self.db}.textindex")
        if not directory.exists():
            return 0
        with tempfile.TemporaryDirectory(prefix="assay-crash-text-") as tmp:
            copy = Path(tmp) / "textindex"
            shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("writer.lock"))
            index = TextIndex(copy, self.engine)
            try:
                index.sync(None)
                held = index.live_entries()
            finally:
                index.close()
        expected = set(text_source.searchable_entries(self.engine))
        assert held == expected, (f"text index holds {len(held)} entries, the store {len(expected)} searchable: "
                                  f"extra {sorted(held - expected)[:5]}, missing {sorted(expected - held)[:5]}")
        return len(held)

    def vectors_agree(self, collection: str) -> int:
        """The collection's hnswlib files (as the server left them: copied, then loaded and caught up as a server
        does) hold exactly its stored chunk ids; no temporary file is left beside them. Returns how many."""
        rows = self.rows("SELECT id, name, model, backend, dim, created_at FROM collections WHERE name = :n",
                         n=collection)
        if not rows:
            return 0
        row = rows[0]._asdict()
        directory = Path(f"{self.db}.vectors")
        stored = np.array(sorted(r[0] for r in self.rows(
            "SELECT id FROM chunks WHERE collection_id = :c", c=row["id"])), dtype=np.int64)
        with tempfile.TemporaryDirectory(prefix="assay-crash-vectors-") as tmp:
            copy = Path(tmp) / "vectors"
            if directory.exists():
                shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("*.lock"))
            else:
                copy.mkdir()
            index = VectorIndex(self.engine, row, copy)
            index.load()
            held = index.live_ids()
        assert np.array_equal(held, stored), (f"vector index of {collection} holds {len(held)} chunks, the store "
                                              f"{len(stored)}")
        return len(held)

    def leftovers(self) -> list[str]:
        """Temporary files a killed writer left in the data dir (reported, not failed: the cache's are
        store/cache.py's)."""
        data = self.base / "data"
        return sorted(str(p.relative_to(data)) for p in data.rglob("*")
                      if p.is_file() and (".tmp" in p.name or p.name.startswith(".tmp")))

    def details(self) -> str:
        lines = [f"  {k.scenario}: seed {k.seed}, killed {k.delay:.3f} s into {k.length:.3f} s"
                 f"{'' if k.mid else ' (not started)' if k.delay < 0 else ' (it had finished)'}: {k.state}"
                 for k in self.kills]
        if self.left:
            lines.append(f"  temporary files left by killed writers: {sorted(self.left)[:5]}")
        return "\n".join(lines)

    def summary(self) -> str:
        mid = sum(k.mid for k in self.kills)
        names = sorted({k.scenario for k in self.kills})
        return (f"crash kills: {len(self.kills)} kill points ({mid} mid-operation) over {len(names)} operations "
                f"({', '.join(names)}), {self.lives} server starts: nothing lost, nothing half-done")


# --- what the scenarios share ---------------------------------------------------------------------------------


INDEX_DIRS, INDEX_FILES = 60, 100  # 6,000 files: three write batches and then some


def write_tree(folder: Path, seed: int) -> int:
    """INDEX_DIRS folders (three levels) of INDEX_FILES small files each; returns the number of files."""
    rng = random.Random(seed)
    for d in range(INDEX_DIRS):
        sub = folder / f"a{d % 6}" / f"b{d}"
        sub.mkdir(parents=True)
        for f in range(INDEX_FILES):
            (sub / f"f{f}.txt").write_bytes(b"x" * rng.randrange(0, 200))
    return INDEX_DIRS * INDEX_FILES


def change_tree(folder: Path, seed: int) -> None:
    """Two thirds of the files grown (spread over the tree, so the walk's batches commit all along it), a folder
    removed, a new one with files: what a re-index has to write."""
    rng = random.Random(seed)
    for k, path in enumerate(sorted(folder.rglob("*.txt"))):
        if k % 3:
            path.write_bytes(b"y" * rng.randrange(200, 400))
    for path in (folder / "a1" / "b1").iterdir():
        path.unlink()
    (folder / "a1" / "b1").rmdir()
    new = folder / "a0" / "new" / "deeper"
    new.mkdir(parents=True)
    for f in range(300):
        (new / f"n{f}.txt").write_bytes(b"n" * f)


def on_disk(folder: Path) -> dict[str, int]:
    """path -> size (0 for folders) of everything at and under ``folder``."""
    out = {str(folder): 0}
    for path in folder.rglob("*"):
        out[str(path)] = 0 if path.is_dir() else path.stat().st_size
    return out


class ServerOp:
    """An operation of the server that one tool call runs to its end; ``prepare`` makes its fresh files (and what
    it needs in the store), ``units`` says what of its work the store holds, each with a stamp that a redo changes."""

    name = ""
    length = 0.0
    first = 0.0  # when its first write landed, in its measured run
    count = 0  # files it works on

    async def prepare(self, h: Harness, client, tag: str) -> dict[str, Any]:
        raise NotImplementedError

    async def run(self, client, ctx: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def units(self, h: Harness, ctx: dict[str, Any]) -> dict[Any, Any]:
        raise NotImplementedError

    def check(self, h: Harness, ctx: dict[str, Any]) -> None:
        """What must hold after a kill and after the run again (beyond db-diagnose)."""

    def progress(self, h: Harness, ctx: dict[str, Any]) -> int:
        """How much of its work the store holds now (what the measured run is watched with)."""
        return len(self.units(h, ctx))

    def total(self, ctx: dict[str, Any]) -> int:
        """How much ``progress`` reaches at its end (0: it has none to watch)."""
        return int(ctx.get("expected") or 0)

    def at_kill(self, ctx: dict[str, Any]) -> str:
        """How far the work was when the kill came (from what ``after_kill`` found), for the summary."""
        return f"{len(ctx['before'])}/{ctx['expected']} done"

    async def after_kill(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        self.check(h, ctx)
        ctx["before"] = self.units(h, ctx)

    async def finish(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        await self.run(client, ctx)
        self.check(h, ctx)
        after = self.units(h, ctx)
        assert len(after) == ctx["expected"], (self.name, len(after), ctx["expected"])
        redone = [k for k, stamp in ctx["before"].items() if after.get(k) != stamp]
        assert not redone, f"{self.name}: work committed before the kill was done again: {redone[:3]}"


class PlanOp(ServerOp):
    """A plan of one rule over ``count`` fresh files, run with plan-execute (wait) as the killed call."""

    outcome = ""

    def __init__(self, count: int | None = None) -> None:
        self.count = count or self.count

    def make(self, folder: Path, seed: int) -> int:
        raise NotImplementedError

    async def prepare(self, h: Harness, client, tag: str) -> dict[str, Any]:
        folder = h.root / f"{self.name}-{tag}"
        expected = self.make(folder, seed=len(tag))
        plan = f"crash-{self.name}-{tag}"
        await call(client, "plan-create", {"format": "dsl", "text": (
            f'plan {plan}\nsource files index "{folder}"\nrule all\n  do {self.outcome.format(tag=tag)}\n')})
        return {"folder": folder, "plan": plan, "expected": expected, "tag": tag}

    async def run(self, client, ctx: dict[str, Any]) -> dict[str, Any]:
        done = await call(client, "plan-execute", {"name": ctx["plan"], "wait": True})
        assert done["status"] == "success", done
        return done

    def joined(self, h: Harness, ctx: dict[str, Any], sql: str, **params: Any) -> list[Any]:
        lo, hi = h.under(ctx["folder"])
        return h.rows(sql + " AND e.path > :lo AND e.path < :hi", lo=lo, hi=hi, **params)


async def measure(h: Harness, client, op: ServerOp) -> None:
    """The operation's length, once, to its end, on fresh files, and when its first write landed."""
    ctx = await op.prepare(h, client, "m")
    seen, started = FirstSeen(), time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(seen.watch, lambda: op.progress(h, ctx) > 0, started)
        await op.run(client, ctx)
        tg.cancel_scope.cancel()
    op.length = time.monotonic() - started
    op.first = seen.at or 0.0

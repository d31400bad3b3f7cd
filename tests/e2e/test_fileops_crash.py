"""kill -9 in the middle of a plan that moves 10,000 files into 100 dated folders (issue 26: "nothing lost on a
crash"), on the crash harness of issue 25 (``crash_harness``): a real `assay serve` runs the plan through
plan-execute, is SIGKILLed while a batch of the move is in flight (its intents in the journal, part of its files
renamed, the store not yet following), and is started again; its start-up recovery (flows/fileops/recovery.py)
settles what the journal left in flight.

Then, checked each time against the disk and the store:

1. after the restart: every file exactly once, at its old place or its planned new one, bytes intact (a checksum
   taken when it was written), nothing anywhere else; no journal row in flight; every entry where its file is, with
   the id it had (so its memberships and metadata are its own), every file and folder under the indexed tree in
   the store; db-diagnose sound;
2. the plan run again finishes the move: it moves only what the killed run left at its old place (its journal has
   no row for a file the killed run moved), nothing twice, no ``name (2)`` (the outcome's conflict mode is
   rename_new, so a file placed twice would show up as one);
3. undo of the killed execution (the MCP tool) brings back exactly what it moved, including what the recovery
   finished; undo of the second brings back the rest: every file at its old place, the store agreeing. Undo does not
   remove the folders the plan made: the dated folders stay, empty, and in the store.

At odd points (ASSAY_KILL_POINTS >= 2) the undo of the second run is killed as well, half-way through its files:
after the restart each file is once at one of its places, exactly the moves whose file went back are marked undone,
and the undo again brings back the rest.

CI tries one kill point; ASSAY_KILL_POINTS=N tries N (each on 10,000 fresh files), drawn across the move's batches.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.e2e.crash_harness import SEED, Harness, Kill, call, fraction, kill_points, on_disk

pytestmark = pytest.mark.e2e

FILES = int(os.environ.get("ASSAY_FILEOPS_CRASH_FILES", "10000"))
MONTHS = 100
BATCH = 500  # the move executor's batch (flows/fileops/placing.py FileOutcomeExecutor.batch_size)


def month_of(k: int) -> tuple[str, float]:
    """Folder name and mtime (the 15th at noon, local time, as templates format it) of month ``k`` from 2000."""
    year, month = 2000 + k // 12, k % 12 + 1
    return f"{year:04d}-{month:02d}", time.mktime((year, month, 15, 12, 0, 0, 0, 0, -1))


class Sorting:
    """One round: FILES fresh files in ``<top>/inbox`` (file i dated in month i * MONTHS // FILES, so each batch of
    the move, taken in name order, makes folders of its own), a plan moving them to ``<top>/sorted/<%Y-%m>/``."""

    def __init__(self, h: Harness, tag: str) -> None:
        self.h = h
        self.tag = tag
        self.top = h.root / f"sort-{tag}"
        self.inbox = self.top / "inbox"
        self.sorted = self.top / "sorted"
        self.plan = f"crash-sort-{tag}"
        self.sums: dict[str, str] = {}  # name -> sha256 of the bytes written
        self.month: dict[str, str] = {}  # name -> its dated folder
        self.ids: dict[str, int] = {}  # name -> entry id before the run
        self.executions: list[int] = []

    def write(self) -> None:
        self.inbox.mkdir(parents=True)
        for i in range(FILES):
            name = f"n{i:05d}.txt"
            body = f"file {i} of round {self.tag}\n".encode() * (1 + i % 4)
            folder, mtime = month_of(i * MONTHS // FILES)
            path = self.inbox / name
            path.write_bytes(body)
            os.utime(path, (mtime, mtime))
            self.sums[name], self.month[name] = hashlib.sha256(body).hexdigest(), folder

    async def prepare(self, client) -> None:
        self.write()
        done = await call(client, "index", {"root": str(self.top), "async": False, "maxAge": 0})
        assert done["status"] == "completed", done
        stored = self.h.entries(self.inbox)
        self.ids = {name: stored[str(self.inbox / name)].id for name in self.sums}
        await call(client, "plan-create", {"format": "dsl", "text": (
            f'plan {self.plan}\nsource files index "{self.inbox}"\nrule all when kind = file\n'
            f'  do move "{self.sorted}/{{mtime:%Y-%m}}/" conflict=rename_new\n')})

    def old(self, name: str) -> Path:
        return self.inbox / name

    def new(self, name: str) -> Path:
        return self.sorted / self.month[name] / name

    # --- what is checked ------------------------------------------------------------------------------------------

    def journal(self, *, execution: int | None = None) -> list[Any]:
        lo, hi = self.h.under(self.top)
        where = "" if execution is None else " AND execution_id = :e"
        return self.h.rows("SELECT id, execution_id, op, src, dst, state, error FROM file_operations "
                           f"WHERE src > :lo AND src < :hi{where} ORDER BY id", lo=lo, hi=hi, e=execution)

    def places(self) -> dict[str, str]:
        """name -> "old" or "new": each file exactly once on disk, at one of its two places, its bytes intact, nothing
        else under the round's folder; the store holding exactly what the disk holds (files and folders), each file
        under the entry id it had; nothing in flight in the journal."""
        disk = on_disk(self.top)
        files = {p for p in disk if os.path.isfile(p)}
        where: dict[str, str] = {}
        for name in self.sums:
            here = [(k, p) for k, p in (("old", self.old(name)), ("new", self.new(name))) if str(p) in files]
            assert len(here) == 1, f"{name} is at {[str(p) for _, p in here] or 'neither place'}"
            kind, path = here[0]
            assert hashlib.sha256(path.read_bytes()).hexdigest() == self.sums[name], f"{path}: its bytes changed"
            where[name] = kind
        placed = {str(self.old(n) if k == "old" else self.new(n)) for n, k in where.items()}
        assert files == placed, f"files elsewhere: {sorted(files - placed)[:5]}"
        stored = self.h.entries(self.top)
        assert set(stored) == set(disk), (f"store without disk: {sorted(set(stored) - set(disk))[:5]}; disk without "
                                          f"store: {sorted(set(disk) - set(stored))[:5]}")
        moved_ids = [n for n, k in where.items()
                     if stored[str(self.old(n) if k == "old" else self.new(n))].id != self.ids[n]]
        assert not moved_ids, f"entries that lost their id: {moved_ids[:5]}"
        wrong = [p for p in files if stored[p].size != os.path.getsize(p)]
        assert not wrong, f"entries with another size than their file: {wrong[:5]}"
        flying = [r for r in self.journal() if r.state in ("intent", "copying")]
        assert not flying, f"{len(flying)} file operations still in flight, e.g. {flying[:2]}"
        return where

    def moved_by(self, execution: int) -> set[str]:
        """The files execution ``execution`` moved, as its journal says (done, or undone since)."""
        return {Path(r.src).name for r in self.journal(execution=execution)
                if r.op == "move" and r.state in ("done", "undone")}


async def run_plan(client, plan: str) -> dict[str, Any]:
    done = await call(client, "plan-execute", {"name": plan, "wait": True})
    assert done["status"] == "success", done
    return done


async def kill_mid_move(h: Harness, s: Sorting, point: int, points: int) -> Kill:
    """plan-execute, then SIGKILL (the server's whole process group) in the batch that holds the drawn file (the
    last but one at the latest): at even points in the middle of its renames (when a drawn file of it reaches its
    new place), at odd points once all its files are renamed (in its store step). A batch is the next 500 files by
    path (what the plan's source reads), so which file marks the point is known before the run: the disk is watched
    for it, not the journal (a batch renames its 500 files in a few milliseconds, quicker than a query)."""
    seed = SEED + 100 + point
    rng = random.Random(seed)
    goal = max(1, int(FILES * fraction(rng, point, points)))
    cut = min(goal - goal % BATCH, max(0, FILES - 2 * BATCH))
    batch = sorted(s.sums)[cut:cut + BATCH]
    first, mark = s.new(batch[0]), s.new(batch[rng.randrange(1, len(batch) - 1)] if point % 2 == 0 else batch[-1])
    started = time.monotonic()
    ended: list[bool] = []

    async def execute() -> None:
        try:
            async with h.client() as client:
                await call(client, "plan-execute", {"name": s.plan, "wait": True})
            ended.append(True)
        except Exception:  # the server died under the call
            ended.append(False)

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        deadline = time.monotonic() + 600
        for watched, period in ((first, 0.001), (mark, 0.0)):  # then a tight loop that still lets the call go on
            while not os.path.lexists(watched):
                assert not ended, f"the plan ended before {watched} was placed (to cut after {cut} files)"
                assert time.monotonic() < deadline, f"the move never got to {watched}"
                await anyio.sleep(period)
        assert h.server is not None
        os.killpg(h.server.proc.pid, signal.SIGKILL)
        into = time.monotonic() - started
        h.kill(group=True)  # reaped, and its process tree seen gone
        with anyio.move_on_after(30):
            while not ended:
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    return Kill("move 10,000 files", seed, into, 0.0, not any(ended))


async def undo_killed_mid_way(h: Harness, s: Sorting, execution: int, point: int) -> Kill:
    """undo of plan execution ``execution`` (the MCP tool), SIGKILLed once a drawn file of it is back at its old
    place; restarted and checked (each file once, the store agreeing, exactly the operations whose file went back
    marked undone), then the undo again finishes the rest (the others refused as undone already)."""
    seed = SEED + 200 + point
    rng = random.Random(seed)
    mark = s.old(rng.choice(sorted(s.moved_by(execution))))
    started = time.monotonic()
    ended: list[bool] = []

    async def execute() -> None:
        try:
            async with h.client() as client:
                await call(client, "undo", {"executionId": execution})
            ended.append(True)
        except Exception:  # the server died under the call
            ended.append(False)

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        deadline = time.monotonic() + 600
        while not os.path.lexists(mark):
            assert not ended, f"the undo ended before {mark} was back"
            assert time.monotonic() < deadline, f"the undo never put {mark} back"
            await anyio.sleep(0.001)
        assert h.server is not None
        os.killpg(h.server.proc.pid, signal.SIGKILL)
        into = time.monotonic() - started
        h.kill(group=True)
        with anyio.move_on_after(30):
            while not ended:
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    kill = Kill("undo of the moves", seed, into, 0.0, not any(ended))
    h.start()
    async with h.client() as client:
        await h.healthy(client)
        back = {n for n, k in s.places().items() if k == "old"}
        ops = {Path(r.src).name: r for r in s.journal(execution=execution) if r.op == "move"}
        undone = {n for n, r in ops.items() if r.state == "undone"}
        assert undone == back & set(ops), "the journal does not say which moves went back"
        kill.state = f"{len(undone)}/{len(ops)} moves undone when killed, settled at the restart"
        again = await call(client, "undo", {"executionId": execution})
        assert (again["undone"], again["refused"]) == (len(ops) - len(undone), len(undone)), again["results"][:3]
        assert {r["reason"] for r in again["results"] if r["status"] == "refused"} <= {"undone already"}
    return kill


async def test_a_plan_moving_10000_files_killed_mid_batch_leaves_each_file_once_and_undo_restores_all(
        harness, record_property):
    h = harness
    durations: dict[str, float] = {}
    for point in range(kill_points()):
        s = Sorting(h, f"r{point}")
        started = time.monotonic()
        async with h.client() as client:
            await s.prepare(client)
        durations["files written and indexed"] = time.monotonic() - started
        kill = await kill_mid_move(h, s, point, kill_points())
        assert kill.mid, "the plan finished before the kill came"
        h.kills.append(kill)
        [[execution]] = h.rows("SELECT DISTINCT execution_id FROM file_operations WHERE src > :lo AND src < :hi",
                               lo=f"{s.inbox}/", hi=f"{s.inbox}0")
        flying = [r for r in s.journal(execution=execution) if r.state == "intent"]
        renamed = sum(1 for r in flying if not os.path.lexists(r.src) and os.path.lexists(r.dst))
        assert flying, "the kill left no operation in flight: nothing for the recovery to settle"

        started = time.monotonic()
        h.start()  # the recovery runs before the server listens
        durations["restart"] = time.monotonic() - started
        async with h.client() as client:
            await h.healthy(client)
            after_kill = s.places()
            moved = {n for n, k in after_kill.items() if k == "new"}
            assert moved == s.moved_by(execution), "the journal does not say what moved"
            assert 0 < len(moved) < FILES
            settled = {r.id: r for r in s.journal(execution=execution)}
            assert all(settled[r.id].state in ("done", "failed") and settled[r.id].error for r in flying)
            kill.state = (f"{len(moved)}/{FILES} moved; {len(flying)} in flight, {renamed} of them renamed on disk "
                          "when killed, settled at the restart")

            started = time.monotonic()
            await run_plan(client, s.plan)
            durations["second run"] = time.monotonic() - started
            [second] = [e for (e,) in h.rows("SELECT DISTINCT execution_id FROM file_operations WHERE src > :lo "
                                             "AND src < :hi AND execution_id != :e", lo=f"{s.inbox}/",
                                             hi=f"{s.inbox}0", e=execution)]
            assert set(s.places().values()) == {"new"}
            assert s.moved_by(second) == set(s.sums) - moved, "the second run moved something the first had moved"
            assert not [r for r in s.journal(execution=second) if r.state != "done"]
            await h.healthy(client)

            started = time.monotonic()
            first_undo = await call(client, "undo", {"executionId": execution})
            durations["undo"] = time.monotonic() - started
            assert first_undo["undone"] == len(moved), first_undo["undone"]
            refused = [r for r in first_undo["results"] if r["status"] == "refused"]
            assert all(r["reason"].startswith("it did not complete") for r in refused), refused[:3]
            back = s.places()
            assert {n for n, k in back.items() if k == "old"} == moved
            if point % 2 == 0:
                second_undo = await call(client, "undo", {"executionId": second})
                assert (second_undo["undone"], second_undo["refused"]) == (FILES - len(moved), 0)
        if point % 2:  # odd points (ASSAY_KILL_POINTS >= 2): the undo of the second run is killed too
            h.kills.append(await undo_killed_mid_way(h, s, second, point))
        async with h.client() as client:
            assert set(s.places().values()) == {"old"}
            left = sorted(p.name for p in s.sorted.iterdir())
            assert len(left) == MONTHS and not any(any(d.iterdir()) for d in s.sorted.iterdir()), \
                "undo leaves the dated folders, empty"
            await h.healthy(client)
    record_property("fileops_kill_points", len(h.kills))
    took = ", ".join(f"{k} {v:.1f} s" for k, v in durations.items())
    points = "".join(f"\n  seed {k.seed}: killed {k.delay:.2f} s into the run: {k.state}" for k in h.kills)
    sys.stdout.write(f"kill -9 mid-move: {len(h.kills)} kill point(s) over {FILES} files: each file once, the store "
                     f"agreeing, the run again finishing the rest, undo restoring all ({took}){points}\n")


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """One data dir, corpus and server for the module."""
    h = Harness(tmp_path_factory.mktemp("fileops-crash"))
    h.start()
    yield h
    h.stop()

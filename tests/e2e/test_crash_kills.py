"""Crash consistency, tested by killing (issue 25, section 2): `assay index` killed mid-walk, and `assay serve` killed
in the middle of a plan run classifying images, one extracting text, one embedding, one building citation maps, a
set modification of thousands of members and a move of hundreds of files, all in flight at once, each at its own
point of its measured length (``crash_harness``). After every kill and restart: db-diagnose is sound (integrity,
orphans, every counter equal to its rows), every file is once on disk and where the store says, the text and vector
indexes hold what the store holds; the operation run again finishes the work without redoing what was committed.

CI tries one kill point per scenario (two for the index: a first index and a re-index of a changed tree);
ASSAY_KILL_POINTS=N tries N, spread across each operation's length. The summary line says how many (``-s``)."""

from __future__ import annotations

import random
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import anyio
import pytest

from examples import mediagen as media
from store.diagnostics import unfinished_documents
from tests.e2e.crash_harness import (SEED, FirstSeen, Harness, Kill, PlanOp, ServerOp, call, change_tree, fraction,
                                     kill_now, kill_points, measure, on_disk, write_tree)

pytestmark = pytest.mark.e2e

SET_PATHS = 3000
MOVED = 100


# --- assay index ------------------------------------------------------------------------------------------------------


class IndexKill:
    """`assay index --no-prefect TREE` killed a drawn delay after its walk's first write (the first index of a tree,
    or the re-index of one changed since), checked with the server still up, then indexed again by the server."""

    def __init__(self, variant: str) -> None:
        self.variant = variant
        self.name = f"index ({variant})"
        self.length = 0.0  # its writes: from the first to the end of the walk

    def written(self, h: Harness, ctx: dict[str, Any]) -> bool:
        """Whether the running index job of the tree has written anything yet."""
        lo, hi = h.under(ctx["folder"])
        return bool(h.rows(
            "SELECT 1 FROM entries WHERE scan_id = (SELECT MAX(id) FROM jobs WHERE kind = 'index' AND root = :r "
            "AND status = 'running') AND (path = :r OR (path > :lo AND path < :hi)) LIMIT 1",
            r=str(ctx["folder"]), lo=lo, hi=hi))

    async def prepare(self, h: Harness, client, tag: str) -> dict[str, Any]:
        folder = h.root / f"index-{self.variant}-{tag}"
        write_tree(folder, seed=zlib.crc32(tag.encode()))
        if self.variant == "reindex":
            await call(client, "index", {"root": str(folder), "async": False, "maxAge": 0})
            change_tree(folder, seed=7)
        return {"folder": folder}

    async def measure(self, h: Harness, client) -> None:
        """The length of the walk's writes, from its first to its end, once (by the server's index tool)."""
        ctx = await self.prepare(h, client, "m")
        seen, started = FirstSeen(), time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(seen.watch, lambda: self.written(h, ctx), started, 0.002)
            done = await call(client, "index", {"root": str(ctx["folder"]), "async": False, "maxAge": 0})
            tg.cancel_scope.cancel()
        assert done["status"] == "completed"
        self.length = time.monotonic() - started - (seen.at or 0.0)

    async def kill(self, h: Harness, ctx: dict[str, Any], seed: int, point: int, points: int) -> None:
        rng = random.Random(seed)
        delay = self.length * fraction(rng, point, points)
        before = h.rows("SELECT COALESCE(MAX(id), 0) AS n FROM jobs")[0].n
        proc = h.cli("index", str(ctx["folder"]), "--no-prefect")
        deadline = time.monotonic() + 120
        while not self.written(h, ctx) and proc.poll() is None:  # the delay counts from the walk's first write
            assert time.monotonic() < deadline, "assay index never started writing"
            await anyio.sleep(0.002)
        job = h.rows("SELECT id FROM jobs WHERE id > :n AND kind = 'index' AND root = :r", n=before,
                     r=str(ctx["folder"]))
        assert job, f"assay index ended (status {proc.returncode}) before its job ran"
        await anyio.sleep(delay)
        mid = proc.poll() is None
        kill_now(proc, group=rng.random() < 0.5)
        ctx["job"], ctx["kill"] = job[0].id, len(h.kills)
        h.kills.append(Kill(self.name, seed, delay, self.length, mid))

    async def after_kill(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        await h.healthy(client)
        stored = h.entries(ctx["folder"])
        holes = [p for p in stored if p != str(ctx["folder"]) and str(Path(p).parent) not in stored]
        assert not holes, f"{len(holes)} entries stored without their folder, e.g. {holes[:3]}"
        ctx["written"] = {p for p, r in stored.items() if r.scan_id == ctx["job"] and r.kind == "file"}
        h.kills[ctx["kill"]].state = f"{len(ctx['written'])} files written"

    async def finish(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        done = await call(client, "index", {"root": str(ctx["folder"]), "async": False, "maxAge": 0})
        assert done["status"] == "completed", done
        stored = h.entries(ctx["folder"])
        disk = on_disk(ctx["folder"])
        assert set(stored) == set(disk), (sorted(set(stored) ^ set(disk))[:5])
        assert all(r.size == disk[p] for p, r in stored.items() if r.kind == "file")
        assert not [p for p, r in stored.items() if r.scan_error]
        kept = {p for p, r in stored.items() if r.scan_id == ctx["job"] and r.kind == "file"}
        assert kept == ctx["written"], "files the killed walk had written were written again"


async def test_assay_index_killed_mid_walk_leaves_a_store_the_next_index_finishes(harness, record_property):
    h = harness
    scenarios = [IndexKill("first"), IndexKill("reindex")]
    async with h.client() as client:
        for scenario in scenarios:
            await scenario.measure(h, client)
        for point in range(kill_points()):
            ctxs = [await s.prepare(h, client, f"r{point}") for s in scenarios]
            async with anyio.create_task_group() as tg:
                for i, (s, ctx) in enumerate(zip(scenarios, ctxs)):
                    tg.start_soon(s.kill, h, ctx, (SEED + point) * 10 + i, point, kill_points())
            for s, ctx in zip(scenarios, ctxs):
                await s.after_kill(h, client, ctx)
            for s, ctx in zip(scenarios, ctxs):
                await s.finish(h, client, ctx)
        await h.healthy(client)
    index_kills = [k for k in h.kills if k.scenario.startswith("index")]
    line = (f"crash kills of assay index: {len(index_kills)} kill points "
            f"({sum(k.mid for k in index_kills)} mid-walk): nothing lost, nothing walked twice")
    record_property("index_kill_points", len(index_kills))
    sys.stdout.write(line + "\n" + h.details() + "\n")
    assert len(index_kills) == 2 * kill_points()


# --- assay serve ------------------------------------------------------------------------------------------------


class Classify(PlanOp):
    """Thumbnails and metadata of generated JPEGs (the classifier's worker pool, the artifact cache)."""

    name, outcome, count = "classify", "classifier all", 60

    def make(self, folder: Path, seed: int) -> int:
        for i in range(self.count):
            media.jpeg(folder / f"p{i:02}.jpg", (320, 240), seed=seed * 100 + i)
        return 2 * self.count  # a thumbnail and a metadata record each

    def units(self, h: Harness, ctx: dict[str, Any]) -> dict[Any, Any]:
        return {(r.path, r.type): (r.id, r.created_at) for r in self.joined(
            h, ctx, "SELECT e.path, a.type, a.id, a.created_at FROM artifacts a JOIN entries e ON e.id = a.entry_id "
                    "WHERE a.type IN ('thumbnail', 'metadata')")}

    def check(self, h: Harness, ctx: dict[str, Any]) -> None:
        files = [r.cache_path for r in self.joined(
            h, ctx, "SELECT a.cache_path FROM artifacts a JOIN entries e ON e.id = a.entry_id "
                    "WHERE a.cache_path IS NOT NULL")]
        missing = [f for f in files if not (h.base / "data" / f).is_file()]
        assert not missing, f"artifacts whose cache file is missing: {missing[:3]}"


class Extract(PlanOp):
    """The text of generated text files, Markdown notes and PDFs (the extraction pool, the text engine)."""

    name, outcome, count = "extract", "extract_text", 100

    def make(self, folder: Path, seed: int) -> int:
        for i in range(self.count):
            if i % 50 == 49:
                media.pdf(folder / f"book{i}.pdf", pages=6, title=f"Book {seed} {i}")
            else:
                media.text(folder / f"t{i:03}.{'md' if i % 2 else 'txt'}", lines=40 + i)
        return self.count

    def units(self, h: Harness, ctx: dict[str, Any]) -> dict[Any, Any]:
        return {r.path: (r.work_key, r.extracted_at) for r in self.joined(
            h, ctx, "SELECT e.path, d.work_key, d.extracted_at FROM documents d JOIN entries e ON e.id = d.entry_id "
                    "WHERE d.status = 'ok'")}


class Embed(PlanOp):
    """Generated notes embedded into a collection of their own (the model, the writer thread, the hnswlib file)."""

    name, outcome, count = "embed", "embed crash_{tag} chunk_size=400 overlap=40", 8  # short notes: a chunk each

    def make(self, folder: Path, seed: int) -> int:
        words = ("river", "garden", "engine", "harbour", "bread", "planet", "invoice", "violin")
        for i in range(self.count):
            body = " ".join(f"{words[(i + k) % 8]} note {k} of file {i} seed {seed}." for k in range(8))
            media.prepare(folder / f"n{i:02}.md").write_text(f"# Note {i}\n\n{body}\n")
        return self.count

    def units(self, h: Harness, ctx: dict[str, Any]) -> dict[Any, Any]:
        return {r.path: (r.work_key, r.updated_at) for r in self.joined(
            h, ctx, "SELECT e.path, ce.work_key, ce.updated_at FROM collection_entries ce "
                    "JOIN collections c ON c.id = ce.collection_id JOIN entries e ON e.id = ce.entry_id "
                    "WHERE c.name = :c AND ce.status = 'ok'", c=f"crash_{ctx['tag']}")}

    def check(self, h: Harness, ctx: dict[str, Any]) -> None:
        h.vectors_agree(f"crash_{ctx['tag']}")


class Maps(PlanOp):
    """Citation maps of generated Markdown notes, by their headings."""

    name, outcome, count = "map", "map headings", 150

    def make(self, folder: Path, seed: int) -> int:
        for i in range(self.count):
            text = "".join(f"# Part {k}\n\nText {k} of note {i}.\n## Detail {k}\n\nMore.\n" for k in range(4))
            media.prepare(folder / f"m{i:03}.md").write_text(text)
        return self.count

    def units(self, h: Harness, ctx: dict[str, Any]) -> dict[Any, Any]:
        return {r.path: (r.id, r.updated_at) for r in self.joined(
            h, ctx, "SELECT e.path, m.id, m.updated_at FROM resource_maps m JOIN entries e ON e.id = m.entry_id "
                    "WHERE m.origin != 'none'")}

    def check(self, h: Harness, ctx: dict[str, Any]) -> None:
        bare = self.joined(h, ctx, "SELECT e.path FROM resource_maps m JOIN entries e ON e.id = m.entry_id WHERE "
                                   "m.origin != 'none' AND NOT EXISTS (SELECT 1 FROM map_nodes n "
                                   "WHERE n.map_id = m.id)")
        assert not bare, f"maps without their nodes: {bare[:3]}"


class SetModify(ServerOp):
    """resource-set-modify of SET_PATHS indexed files in one call: added to a fresh set (even points) or removed
    from a full one (odd points), all or nothing."""

    name = "set"

    def __init__(self, pool: list[str]) -> None:
        self.pool = pool  # indexed files the sets draw their members from

    async def prepare(self, h: Harness, client, tag: str) -> dict[str, Any]:
        name = f"crash-set-{tag}"
        await call(client, "resource-set-create", {"name": name})
        operation = "remove" if tag.endswith(("1", "3", "5", "7", "9")) else "add"
        if operation == "remove":
            await call(client, "resource-set-modify", {"name": name, "operation": "add", "paths": self.pool})
        return {"name": name, "operation": operation, "expected": SET_PATHS if operation == "add" else 0}

    async def run(self, client, ctx: dict[str, Any]) -> dict[str, Any]:
        return await call(client, "resource-set-modify", {"name": ctx["name"], "operation": ctx["operation"],
                                                          "paths": self.pool})

    def members(self, h: Harness, ctx: dict[str, Any]) -> int:
        return h.rows("SELECT COUNT(*) AS n FROM set_members m JOIN resource_sets s ON s.id = m.set_id "
                      "WHERE s.name = :n", n=ctx["name"])[0].n

    async def after_kill(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        n = self.members(h, ctx)
        assert n in (0, SET_PATHS), f"a set modification left half its members: {n} of {SET_PATHS}"
        ctx["committed"] = n == ctx["expected"]

    def at_kill(self, ctx: dict[str, Any]) -> str:
        return f"{ctx['operation']} of {SET_PATHS} {'committed' if ctx['committed'] else 'rolled back'}"

    def progress(self, h: Harness, ctx: dict[str, Any]) -> int:
        return 0  # one transaction: all of it at the end, so kills are drawn across the whole call

    def total(self, ctx: dict[str, Any]) -> int:
        return 0

    async def finish(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        done = await self.run(client, ctx)
        assert done["added" if ctx["operation"] == "add" else "removed"] == (0 if ctx["committed"] else SET_PATHS)
        assert self.members(h, ctx) == ctx["expected"]


class MoveFiles(ServerOp):
    """move-files of MOVED files into folders it makes, a tenth of them in a set: each file once on disk, where
    the store says, with its entry id and membership, whatever the kill cut."""

    name = "move"

    async def prepare(self, h: Harness, client, tag: str) -> dict[str, Any]:
        src, dst = h.root / f"move-{tag}" / "src", h.root / f"move-{tag}" / "dst"
        src.mkdir(parents=True)
        for i in range(MOVED):
            (src / f"f{i:03}.txt").write_bytes(b"m" * (i + 1))
        await call(client, "index", {"root": str(src.parent), "async": False, "maxAge": 0})
        name = f"crash-move-{tag}"
        await call(client, "resource-set-create", {"name": name})
        members = [str(src / f"f{i:03}.txt") for i in range(0, MOVED, 10)]
        await call(client, "resource-set-modify", {"name": name, "operation": "add", "paths": members})
        ids = {f"f{i:03}.txt": h.entries(src / f"f{i:03}.txt")[str(src / f"f{i:03}.txt")].id for i in range(MOVED)}
        return {"src": src, "dst": dst, "set": name, "ids": ids, "members": {Path(p).name for p in members}}

    def target(self, ctx: dict[str, Any], name: str) -> Path:
        return ctx["dst"] / f"g{int(name[1:4]) % 8}" / name

    async def run(self, client, ctx: dict[str, Any], names: list[str] | None = None) -> dict[str, Any]:
        names = sorted(ctx["ids"]) if names is None else names
        done = await call(client, "move-files", {"moves": [
            {"from": str(ctx["src"] / n), "to": str(self.target(ctx, n))} for n in names]})
        assert done["errorCount"] == 0, done["results"][:3]
        return done

    def places(self, h: Harness, ctx: dict[str, Any]) -> dict[str, Path]:
        """Where each file is: on disk exactly once, the store agreeing (same entry id, none at the other place)."""
        stored = {**h.entries(ctx["src"]), **h.entries(ctx["dst"])}
        out = {}
        for name, entry_id in ctx["ids"].items():
            old, new = ctx["src"] / name, self.target(ctx, name)
            here = [p for p in (old, new) if p.exists()]
            assert len(here) == 1, f"{name} is at {here or 'neither place'}"
            assert here[0].stat().st_size == int(name[1:4]) + 1
            assert stored.get(str(here[0])) is not None and stored[str(here[0])].id == entry_id, \
                f"the store does not have {name} at {here[0]} (under id {entry_id})"
            gone = old if here[0] == new else new
            assert str(gone) not in stored, f"the store still has {gone}"
            out[name] = here[0]
        in_set = {r.path for r in h.rows("SELECT e.path FROM set_members m JOIN resource_sets s ON s.id = m.set_id "
                                         "JOIN entries e ON e.id = m.entry_id WHERE s.name = :n", n=ctx["set"])}
        assert {Path(p).name for p in in_set} == ctx["members"], "set memberships were lost in the move"
        in_flight = h.rows("SELECT id FROM file_operations WHERE state IN ('intent', 'copying')")
        assert not in_flight, "a move is still in flight after the restart"
        return out

    async def after_kill(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        places = self.places(h, ctx)
        ctx["left"] = sorted(n for n, p in places.items() if p.parent == ctx["src"])

    def at_kill(self, ctx: dict[str, Any]) -> str:
        return f"{MOVED - len(ctx['left'])}/{MOVED} moved"

    def progress(self, h: Harness, ctx: dict[str, Any]) -> int:
        return len(h.entries(ctx["dst"]))  # the files moved (and the folders made for them)

    def total(self, ctx: dict[str, Any]) -> int:
        return MOVED

    async def finish(self, h: Harness, client, ctx: dict[str, Any]) -> None:
        if ctx["left"]:
            await self.run(client, ctx, ctx["left"])
        places = self.places(h, ctx)
        assert all(p.parent.parent == ctx["dst"] for p in places.values())


async def killed_round(h: Harness, ops: list[ServerOp], point: int, points: int) -> None:
    """Prepare every operation on fresh files, start them all (as they were measured), kill the server once,
    restart, check each, run each again to its end and check it finished the rest. One operation paces the kill (a
    different one each point): the kill comes when it has written its drawn share of its work, or at its drawn delay
    (timings drift with the machine's load; its progress does not). The others are cut wherever they are; one
    shorter than that delay starts later, so that its own drawn delay ends at the kill."""
    seed = SEED + point
    rng = random.Random(seed)
    async with h.client() as client:
        ctxs = [await op.prepare(h, client, f"r{point}") for op in ops]
    delays = [op.first + (op.length - op.first) * fraction(rng, point, points) for op in ops]
    paced = sorted((i for i, (op, ctx) in enumerate(zip(ops, ctxs)) if op.total(ctx)), key=lambda i: -ops[i].length)
    pacer = paced[point % len(paced)]  # the longest first: the others run within it
    goal = max(1, int(ops[pacer].total(ctxs[pacer]) * fraction(rng, point, points)))
    kill_at = delays[pacer]
    starts = [kill_at - d if op.length < kill_at else 0.0 for op, d in zip(ops, delays)]
    finished: dict[str, bool] = {}
    started = time.monotonic()

    async def one(op: ServerOp, ctx: dict[str, Any], start: float) -> None:
        await anyio.sleep(start)
        try:
            async with h.client() as client:
                await op.run(client, ctx)
            finished[op.name] = True
        except Exception:  # the server died under the call
            finished[op.name] = False

    async with anyio.create_task_group() as tg:
        for op, ctx, start in zip(ops, ctxs, starts):
            tg.start_soon(one, op, ctx, start)
        with anyio.move_on_after(kill_at):
            while ops[pacer].progress(h, ctxs[pacer]) < goal:
                await anyio.sleep(0.01)
        killed = time.monotonic() - started
        h.kill(group=rng.random() < 0.5)
        with anyio.move_on_after(30):
            while len(finished) < sum(start <= killed for start in starts):
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    for op, start in zip(ops, starts):
        into = killed - start
        h.kills.append(Kill(op.name, seed, into, op.length, into > 0 and not finished.get(op.name, False)))
    h.start()
    async with h.client() as client, anyio.create_task_group() as warming:
        # the model loads in the new server (a search of the measured collection) while the kill is checked
        warming.start_soon(call, client, "search", {"query": "garden", "collection": "crash_m"})
        await h.healthy(client)
        assert not h.rows("SELECT id FROM plan_executions WHERE status = 'running'")
        h.text_index_agrees()
        h.left.update(h.leftovers())
        for op, ctx, kill in zip(ops, ctxs, h.kills[-len(ops):]):
            await op.after_kill(h, client, ctx)
            kill.state = op.at_kill(ctx)
        async with anyio.create_task_group() as tg:
            for op, ctx in zip(ops, ctxs):
                tg.start_soon(op.finish, h, client, ctx)
        await h.healthy(client)
        assert unfinished_documents(h.engine) == 0  # an extraction the kill cut is replaced by the run again
        h.text_index_agrees()


async def test_assay_serve_killed_mid_operations_loses_nothing_and_the_run_again_finishes_the_rest(
        harness, record_property):
    h = harness
    async with h.client() as client:
        pool_folder = h.root / "index-first-m"  # made and indexed by the index test, or here
        if not pool_folder.exists():
            write_tree(pool_folder, seed=1)
        await call(client, "index", {"root": str(pool_folder), "async": False, "maxAge": 3600})
        pool = sorted(p for p, r in h.entries(pool_folder).items() if r.kind == "file")[:SET_PATHS]
    ops: list[ServerOp] = [Classify(), Extract(), Embed(), Maps(), SetModify(pool), MoveFiles()]
    await warm_up(h)
    async with h.client() as client, anyio.create_task_group() as tg:
        for op in ops:  # all at once, as they run when killed (each is slower so than alone)
            tg.start_soon(measure, h, client, op)
    for point in range(kill_points()):
        await killed_round(h, ops, point, kill_points())
    kills = [k for k in h.kills if not k.scenario.startswith("index")]
    record_property("serve_kill_points", len(kills))
    sys.stdout.write(f"crash kills of assay serve: {len(kills)} kill points ({sum(k.mid for k in kills)} "
                     f"mid-operation) over {len(ops)} operations: nothing lost, nothing redone\n{h.details()}\n")
    assert len(kills) == len(ops) * kill_points()


# --- the module's harness -----------------------------------------------------------------------------------------


async def warm_up(h: Harness) -> None:
    """The model loaded and the worker pools up (a tiny run of each), so the operations are measured warm."""
    warm = [Classify(1), Extract(1), Embed(1)]
    async with h.client() as client:
        ctxs = [await op.prepare(h, client, "w") for op in warm]
        async with anyio.create_task_group() as tg:
            for op, ctx in zip(warm, ctxs):
                tg.start_soon(op.run, client, ctx)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """One data dir, corpus and server for the module."""
    h = Harness(tmp_path_factory.mktemp("crash"))
    h.start()
    yield h
    h.stop()
    sys.stdout.write(h.summary() + "\n")


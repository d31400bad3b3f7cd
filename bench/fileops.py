"""The file-operations benchmark: a plan that moves N files into dated folders, and the undo of that execution, next
to a plain Python loop of ``os.makedirs`` + ``os.rename`` doing the same on a copy of the same tree.

    .venv/bin/python bench/fileops.py [--files 10000] [--folders 100] [--quick] [--postgres] [--work DIR]
                                      [--out bench/out/fileops.md] [--json FILE]

1. N small files (a few hundred bytes, each its own content) are written into one flat folder, their mtimes spread
   over --folders distinct months, so ``{mtime:%Y-%m}`` makes that many folders. The same tree is written twice: one
   copy for the loop, one for assay.
2. The loop (the physical limit): for each file, ``os.makedirs(its month's folder, exist_ok=True)`` then
   ``os.rename``, the destinations worked out before the clock starts; then the reverse loop (the undo's baseline).
3. assay, in-process on a fresh SQLite store (and PostgreSQL with --postgres): the tree is indexed by an index-only
   plan (not in the ratio), then ``plan sort; source files index HOME; rule all when kind = file;
   do move "Dated/{mtime:%Y-%m}/"`` is executed over the indexed tree (no re-scan: the scan's cost is shown on its
   own row), then ``undo(execution_id=...)`` of that execution. Journal writes, content hashes and store updates are
   all in those times. After each, the disk, the store and the journal are checked: every file at its place, the
   store's paths equal the disk's (moved entries keep their ids), the journal's rows all done, then all undone.
4. Where the time goes: the functions of flows/fileops each phase runs in are wrapped with timers for the run (a few
   perf_counter calls per file; flows/ is not changed), and the execution's fixed cost is an execution of the same
   plan over an empty folder (best of 3).

Exit status 1 when a correctness check failed (the table says which); a missed performance goal is reported, not an
error. Progress goes to stderr; stdout gets the table only. The scratch folder is removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import logging
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sqlalchemy import select  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402

from bench.cluster_parts import postgres  # noqa: E402
from bench.common import bench_logging, publish, render, secs  # noqa: E402
from bench.run import machine_facts, yes_no  # noqa: E402
from dsl.model import Plan  # noqa: E402
from dsl.parse import parse_plan_text  # noqa: E402
from flows.core.roots import Roots  # noqa: E402
from flows.fileops import destinations, placing  # noqa: E402
from flows.fileops import disk as diskops  # noqa: E402
from flows.fileops import undo as undo_module  # noqa: E402
from flows.plans.service import PlanService  # noqa: E402
from store import file_journal  # noqa: E402
from store.engine import make_engine  # noqa: E402
from store.entries import T  # noqa: E402

log = logging.getLogger("bench.fileops")
GOAL_RATIO = 0.5  # loop seconds / assay seconds, for the move and for the undo
FIXED_REPEAT = 3
PROFILE_TOP = 15
MOVE_PLAN = 'plan {name}\nsource files index {source}\nrule all when kind = file\n  do move "Dated/{{mtime:%Y-%m}}/"\n'

# what each phase runs in: (label, module, function); a phase whose function is gone is reported as unmeasured
MOVE_PHASES = [
    ("plan the batches: destinations, conflicts", destinations, "plan"),
    ("content hashes for the journal (files read)", placing, "content_hash"),
    ("journal: the batch's intents, one transaction", file_journal, "begin_many"),
    ("disk: folders made + renames", placing, "_change_disk"),
    ("store: entries moved, sizes, journal rows done, one transaction", placing, "_follow"),
]
UNDO_PHASES = [
    ("journal read: the execution's operations", undo_module, "operations_to_undo"),
    ("checks per file: still there, unchanged (hash), old place free", undo_module, "_why_not"),
    ("  of which content hashes (files read)", undo_module, "hash_file"),
    ("journal: a batch's intents, one transaction", file_journal, "begin_many"),
    ("disk: folders made + renames", None, ""),  # make_parents + rename_noreplace, summed below
    ("store: entries moved back, sizes, journal rows done and undone, one transaction", undo_module, "_follow_back"),
]
UNDO_PARTS = [("parents", diskops, "make_parents"), ("rename", diskops, "rename_noreplace")]


@dataclass
class Phases:
    """Seconds spent in the named functions while the context is open: each module attribute is swapped for a timing
    wrapper and put back after (callers that look the function up through its module see the wrapper)."""

    targets: list[tuple[str, Any, str]]
    seconds: dict[str, float | None] = field(default_factory=dict)

    @contextlib.contextmanager
    def timing(self) -> Iterator[Phases]:
        saved: list[tuple[Any, str, Any]] = []
        for label, module, name in self.targets:
            original = getattr(module, name, None) if module is not None else None
            if original is None:
                self.seconds[label] = None
                if module is not None:
                    log.warning("phase %r: %s.%s is gone; not measured", label, module.__name__, name)
                continue
            self.seconds[label] = 0.0
            saved.append((module, name, original))
            setattr(module, name, self._wrap(label, original))
        try:
            yield self
        finally:
            for module, name, original in reversed(saved):
                setattr(module, name, original)

    def _wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] = (self.seconds[label] or 0.0) + time.perf_counter() - started
        return timed


def month_of(index: int) -> tuple[str, float]:
    """The folder name and an mtime (the 15th at noon, local time) of month ``index`` counted from January 2000."""
    year, month = 2000 + index // 12, index % 12 + 1
    return f"{year:04d}-{month:02d}", time.mktime((year, month, 15, 12, 0, 0, 0, 0, -1))


def generate(inbox: Path, files: int, folders: int) -> dict[str, str]:
    """``files`` files in ``inbox``, file i dated in month i mod ``folders``; returns name -> its month's folder."""
    inbox.mkdir(parents=True)
    expected: dict[str, str] = {}
    for i in range(files):
        folder, mtime = month_of(i % folders)
        name = f"note-{i:06d}.txt"
        path = inbox / name
        path.write_bytes((f"assay file-operations benchmark, file {i:06d} of {files}\n" * 6).encode())
        os.utime(path, (mtime, mtime))
        expected[name] = folder
    return expected


def loop_move(base: Path, expected: dict[str, str]) -> tuple[float, float]:
    """The plain loop: makedirs + rename into the dated folders, then the reverse loop; their (seconds, seconds)."""
    pairs = [(str(base / "inbox" / name), str(base / "Dated" / folder), str(base / "Dated" / folder / name))
             for name, folder in sorted(expected.items())]
    started = time.perf_counter()
    for src, folder, dst in pairs:
        os.makedirs(folder, exist_ok=True)
        os.rename(src, dst)
    moved = time.perf_counter() - started
    inbox = str(base / "inbox")
    started = time.perf_counter()
    for src, _folder, dst in reversed(pairs):
        os.makedirs(inbox, exist_ok=True)
        os.rename(dst, src)
    back = time.perf_counter() - started
    return moved, back


def disk_problems(home: Path, expected: dict[str, str], *, moved: bool) -> list[str]:
    """What differs from every file at its month's folder (``moved``) or back in the inbox."""
    problems = []
    for name, folder in expected.items():
        where = home / "Dated" / folder / name if moved else home / "inbox" / name
        if not where.is_file():
            problems.append(f"{where} is missing")
    left = list((home / "inbox").iterdir()) if moved else list((home / "Dated").rglob("*.txt"))
    if left:
        problems.append(f"{len(left)} files left behind, e.g. {left[0]}")
    return problems[:5]


def on_disk(home: Path) -> dict[str, str]:
    """Every path under ``home`` -> file or directory."""
    found: dict[str, str] = {}
    for folder, dirs, files in os.walk(home):
        found.update({os.path.join(folder, d): "directory" for d in dirs})
        found.update({os.path.join(folder, f): "file" for f in files})
    return found


def in_store(engine: Engine, home: Path) -> dict[str, tuple[int, str]]:
    """Every entry under ``home`` -> (its id, its kind)."""
    top = str(home) + "/"
    with engine.connect() as conn:
        rows = conn.execute(select(T.c.path, T.c.id, T.c.kind).where(T.c.path > top, T.c.path < str(home) + "0"))
        return {path: (entry_id, kind) for path, entry_id, kind in rows}


def store_problems(engine: Engine, home: Path, ids_by_name: dict[str, int]) -> list[str]:
    """What differs between the store and the disk under ``home``, and files whose entry changed its id."""
    disk, store = on_disk(home), in_store(engine, home)
    problems = [f"on disk, not in the store: {p}" for p in sorted(set(disk) - set(store))[:3]]
    problems += [f"in the store, not on disk: {p}" for p in sorted(set(store) - set(disk))[:3]]
    problems += [f"{p}: the store says {store[p][1]}, the disk {kind}" for p, kind in disk.items()
                 if p in store and store[p][1] != kind][:3]
    changed = [p for p, (entry_id, kind) in store.items()
               if kind == "file" and ids_by_name.get(os.path.basename(p), entry_id) != entry_id]
    problems += [f"{p}: its entry's id changed" for p in changed[:3]]
    if len(disk) != len(store):
        problems.append(f"{len(disk)} paths on disk, {len(store)} in the store")
    return problems


def journal_problems(engine: Engine, execution_id: int, files: int, state: str) -> list[str]:
    ops = file_journal.history(engine, execution_id=execution_id, limit=max(1, files) * 2)
    states = {o["state"] for o in ops}
    if len(ops) != files or states - {state}:
        return [f"execution {execution_id}'s journal: {len(ops)} operations (expected {files}), states "
                f"{sorted(states)} (expected {state})"]
    return []


@contextlib.contextmanager
def profiled(fig: dict[str, Any], step: str, on: bool) -> Iterator[None]:
    """With ``on``, the block under cProfile; its top functions by cumulative time go to ``fig["profile"][step]``."""
    if not on:
        yield
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()
        listings = []
        for order, restriction in (("cumulative", r"/(store|flows/fileops)/"), ("tottime", "")):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(restriction, PROFILE_TOP)
            text = out.getvalue().split("\n\n", 1)[-1].strip().replace(f"{REPO}/.venv/lib/", "")
            listings.append(text.replace(f"{REPO}/", ""))
        fig.setdefault("profile", {})[step] = listings
        if os.environ.get("ASSAY_BENCH_CALLERS"):  # who calls a function (a pstats restriction): for digging
            pstats.Stats(profiler).sort_stats("tottime").print_callers(os.environ["ASSAY_BENCH_CALLERS"])


def run_assay(url: str, home: Path, expected: dict[str, str], *, profile: bool = False) -> dict[str, Any]:
    """Index, fixed cost, the timed move and the timed undo on the store at ``url``; the figures and the checks
    (with ``profile``, the move and the undo run under cProfile)."""
    engine = make_engine(url)
    (home / "empty").mkdir()
    service = PlanService(engine, Roots.of([str(home)]), use_prefect=False)
    fig: dict[str, Any] = {"checks": {}}
    try:
        scan = Plan.from_object({"name": "scan", "sources": [{"name": "files", "type": "filesystem.index",
                                                              "config": {"path": str(home)}}]})
        service.save(scan, create=None)
        log.info("indexing %s", home)
        fig["index_s"], _ = timed(lambda: finished(service.execute(scan, wait=True)))
        fig["rescan_s"], _ = timed(lambda: finished(service.execute(scan, wait=True)))
        ids_by_name = {os.path.basename(p): i for p, (i, kind) in in_store(engine, home).items() if kind == "file"}

        empty = parse_plan_text(MOVE_PLAN.format(name="sort-empty", source=home / "empty"), "dsl")
        service.save(empty, create=None)
        finished(service.execute(empty, wait=True, scan=False), empty=True)  # warm-up: one-time costs
        fig["fixed_s"] = min(timed(lambda: finished(service.execute(empty, wait=True, scan=False), empty=True))[0]
                             for _ in range(FIXED_REPEAT))

        plan = parse_plan_text(MOVE_PLAN.format(name="sort", source=home), "dsl")
        service.save(plan, create=None)
        log.info("moving %d files", len(expected))
        move_phases = Phases(MOVE_PHASES)
        with move_phases.timing(), profiled(fig, "move", profile):
            fig["move_s"], row = timed(lambda: finished(service.execute(plan, wait=True, scan=False)))
        fig["move_phases"] = move_phases.seconds
        fig["applied"], execution_id = row["outcomes_applied"], row["execution_id"]
        fig["checks"]["move"] = (disk_problems(home, expected, moved=True) +
                                 store_problems(engine, home, ids_by_name) +
                                 journal_problems(engine, execution_id, len(expected), "done"))

        log.info("undoing execution %d", execution_id)
        undo_phases, parts = Phases(UNDO_PHASES), Phases(UNDO_PARTS)
        with undo_phases.timing(), parts.timing(), profiled(fig, "undo", profile):
            fig["undo_s"], result = timed(lambda: undo_module.undo(
                engine, service.roots, origin=file_journal.Origin.for_tool("undo"), execution_id=execution_id))
        fig["undo_phases"] = undo_phases.seconds | split_reverse(undo_phases.seconds, parts.seconds)
        fig["undone"], fig["refused"] = result["undone"], result["refused"]
        refused = [f"undo refused {r['from']}: {r['reason']}" for r in result["results"] if r["status"] != "undone"]
        fig["checks"]["undo"] = (refused[:3] + disk_problems(home, expected, moved=False) +
                                 store_problems(engine, home, ids_by_name) +
                                 journal_problems(engine, execution_id, len(expected), "undone"))
    finally:
        service.shutdown()
        engine.dispose()
    return fig


def split_reverse(phases: dict[str, float | None], parts: dict[str, float | None]) -> dict[str, float | None]:
    """The undo's disk share: its folders made and renames."""
    disk_label = UNDO_PHASES[4][0]
    if None in (parts["parents"], parts["rename"]):
        return {disk_label: None}
    return {disk_label: (parts["parents"] or 0.0) + (parts["rename"] or 0.0)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def finished(row: dict[str, Any], *, empty: bool = False) -> dict[str, Any]:
    """``row`` once its execution succeeded (over an empty folder: ended "partial", as nothing matched)."""
    if row["status"] != "success" and not (empty and row["status"] == "partial"):
        raise RuntimeError(f"plan execution {row['execution_id']} ended {row['status']}: {row.get('error_message')}")
    return row


def ratio_rows(what: str, n: int, ours: float, loop: float, phases: dict[str, float | None], fixed: float,
               label: str, rest_is: str) -> list[tuple[str, ...]]:
    """The goal row of a move or an undo, its files per second, and where its time went."""
    ratio = loop / ours if ours else float("inf")
    rows: list[tuple[str, ...]] = [
        (f"{what}{label}", secs(ours), f"{secs(loop)} (the loop)", f"{ratio:.2f}×", f"≥ {GOAL_RATIO:g}×",
         yes_no(ratio >= GOAL_RATIO)),
        ("  files per second", f"{n / ours:,.0f}", f"{n / loop:,.0f}", "—", "—", "—")]
    known = 0.0
    for phase, seconds in phases.items():
        if seconds is None:
            rows.append((f"  {phase}", "not measured", "—", "—", "—", "—"))
            continue
        if not phase.startswith("  "):
            known += seconds
        rows.append((f"  {phase}", secs(seconds), "—", f"{seconds / ours:.0%} of ours", "—", "—"))
    if fixed:
        rows.append(("  the execution's fixed cost (the same plan over an empty folder)", secs(fixed), "—",
                     f"{fixed / ours:.0%} of ours", "—", "—"))
    rest = ours - known - fixed
    rows.append((f"  the rest: {rest_is}", secs(rest), "—", f"{rest / ours:.0%} of ours",
                 "—", "—"))
    return rows


def table_rows(fig: dict[str, Any]) -> list[tuple[str, ...]]:
    n, folders = fig["files"], fig["folders"]
    rows: list[tuple[str, ...]] = []
    for backend, a in fig["assay"].items():
        label = "" if backend == "sqlite" else f" ({backend})"
        rows += [
            (f"index the tree once{label}: an index-only plan (not in the ratio)", secs(a["index_s"]), "—", "—", "—",
             "—"),
            (f"re-scan of the unchanged tree{label}: what an execution with scan on adds", secs(a["rescan_s"]), "—",
             "—", "—", "—")]
        rows += ratio_rows(f"move {n:,} files into {folders} dated folders: the plan (journal + store)", n,
                           a["move_s"], fig["loop_move_s"], a["move_phases"], a["fixed_s"], label,
                           "the plan engine's matching, work keys, batching, records")
        rows += ratio_rows("undo of that execution (journal + store)", n, a["undo_s"], fig["loop_undo_s"],
                           a["undo_phases"], 0.0, label, "the loop over the operations, results")
        for step in ("move", "undo"):
            problems = a["checks"][step]
            rows.append((f"correct after the {step}{label}: files in place, store = disk (ids kept), journal "
                         f"{'done' if step == 'move' else 'undone'}", "ok" if not problems else "; ".join(problems),
                         "—", "—", "all", yes_no(not problems)))
    return rows


def profile_section(fig: dict[str, Any]) -> str:
    """The profiles of --profile, one block per backend and step."""
    blocks = [f"The {step} ({backend}) under cProfile: assay's store/ and flows/fileops/ functions by cumulative "
              f"time, then the top {PROFILE_TOP} of all by own time:\n\n```\n{mine}\n\n{anywhere}\n```"
              for backend, a in fig["assay"].items() for step, (mine, anywhere) in a.get("profile", {}).items()]
    return "\n\n".join(blocks)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/fileops.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, help="files to move (default 10000; quick 300)")
    p.add_argument("--folders", type=int, help="distinct months, so dated folders (default 100; quick 6)")
    p.add_argument("--quick", action="store_true", help="tiny: 300 files into 6 folders (the smoke test's run)")
    p.add_argument("--postgres", action="store_true", help="also run assay's part on a throw-away PostgreSQL")
    p.add_argument("--profile", action="store_true",
                   help="run the move and the undo under cProfile and list their top functions (slower figures)")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench"),
                   help="the scratch folder is made here")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "fileops.md"), help="where to write the table")
    p.add_argument("--json", help="also write the figures as JSON to this file")
    args = p.parse_args(argv)
    args.files = args.files or (300 if args.quick else 10_000)
    args.folders = args.folders or (6 if args.quick else 100)
    bench_logging()

    Path(args.work).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="fileops-", dir=args.work))
    os.environ.update(PREFECT_HOME=str(scratch / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                      PREFECT_LOGGING_LEVEL="WARNING", ASSAY_TRASH_HOME=str(scratch / "trash-home"))
    fig: dict[str, Any] = {"files": args.files, "folders": args.folders, "assay": {}}
    try:
        facts = machine_facts(["warm"])
        log.info("writing %d files over %d months, twice", args.files, args.folders)
        expected = generate(scratch / "loop" / "inbox", args.files, args.folders)
        generate(scratch / "sqlite" / "inbox", args.files, args.folders)
        fig["loop_move_s"], fig["loop_undo_s"] = loop_move(scratch / "loop", expected)
        fig["checks_loop"] = disk_problems(scratch / "loop", expected, moved=False)
        (scratch / "data").mkdir()
        fig["assay"]["sqlite"] = run_assay(f"sqlite:///{scratch / 'data' / 'assay.db'}", scratch / "sqlite", expected,
                                           profile=args.profile)
        if args.postgres:
            generate(scratch / "postgres" / "inbox", args.files, args.folders)
            with postgres() as url:
                fig["assay"]["postgres"] = run_assay(url, scratch / "postgres", expected, profile=args.profile)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    notes = [f"{args.files:,} files of ~330 bytes, each its own content, in one flat folder; mtimes over "
             f"{args.folders} months, so {args.folders} folders Dated/YYYY-MM/.",
             "The loop: destinations worked out before the clock starts, then os.makedirs(exist_ok=True) + "
             "os.rename per file; its undo the same back. Both loops on a copy of the same tree, warm cache.",
             "assay: in-process (no Prefect, no MCP), SQLite in WAL mode; the plan runs over the indexed tree "
             "(scan off), in batches of 500: intents journalled with each file's content hash (read: the index-only "
             "store has none to reuse), renames, then the store in one transaction (folder sizes by delta). Undo "
             "reverses moves 500 at a time the same way (checks, intents, renames, store); a file whose size and "
             "mtime are the journal's (and not within 2 s of its row) is not read again for its hash.",
             "Phases: the flows/fileops functions each runs in, timed by wrappers swapped in for the run; shares "
             "are of assay's time. Timings on a shared 2-core machine are noisy."]
    if fig["checks_loop"]:
        notes.append(f"the loop's own check failed: {'; '.join(fig['checks_loop'])}")
    if args.profile:
        notes.append("Run under cProfile (--profile): every time above is inflated by the profiler.")
    table = render(facts, table_rows(fig), notes, extra=profile_section(fig))
    publish(table, args.out, fig, args.json)
    failed = fig["checks_loop"] or any(problems for a in fig["assay"].values() for problems in a["checks"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

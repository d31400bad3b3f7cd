"""The file outcomes of plans — ``move``, ``copy``, ``rename`` — done a batch at a time, journalled, with the store
kept in step.

A batch is planned first (:mod:`flows.fileops.destinations`: the same planner plan-preview shows), then:

1. every file to place is written down in the journal in one transaction (``store.file_journal.begin_many``: its
   source, destination, size, mtime and content hash), before the disk changes;
2. the disk changes, file by file: a rename that never replaces (``renameat2(RENAME_NOREPLACE)``); across
   filesystems a copy, checked (size, hash), then the source removed; a copy is written beside its destination and
   renamed into place. A file a conflict mode lets replace (``overwrite``) has what was there moved to the trash first;
3. the store follows in one transaction: a moved file's entry keeps its id (so its set memberships, metadata,
   extracted text and maps follow it), a copy gets an entry of its own, the folders made are indexed where their
   parent is, the sizes of the folders involved are recomputed, and each journal row is crossed out.

A crash between 1 and 3 leaves journal rows in flight, which the next start settles by what the disk shows
(flows/fileops/recovery.py). A file that vanished, is not a regular file, or whose destination appeared meanwhile is
that file's error; the others go on.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import stat
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from sqlalchemy.engine import Engine

from dsl.outcomes import OutcomeBase
from flows.core.outcomes import BatchResult, OutsideTransactionExecutor, RunContext
from flows.core.roots import Roots
from flows.fileops import destinations
from flows.fileops import disk as diskops
from flows.fileops.trashing import trash_one
from store import file_journal as journal
from store.entries import T, move_files, refresh_folder_sizes, upsert_entries
from store.errors import AssayError, Conflict

log = logging.getLogger(__name__)


@dataclass
class _Item:
    planned: destinations.Planned
    op: str
    op_id: int = 0
    made: list[str] = field(default_factory=list)
    error: str | None = None


def content_hash(path: str, st: os.stat_result, known: tuple[str | None, int, float] | None) -> str:
    """The file's content hash: the store's when its size and mtime still match the file's, else read now."""
    if known is not None and known[0] and known[1] == st.st_size and known[2] == st.st_mtime:
        return known[0]
    return diskops.hash_of(path, st.st_size)


def _change_disk(item: _Item, set_aside: Callable[[str], object]) -> None:
    p = item.planned
    assert p.dst is not None
    item.made = diskops.make_parents(posixpath.dirname(p.dst))
    if p.resolution == "overwrite" and os.path.lexists(p.dst):
        set_aside(p.dst)
    if item.op == "copy":
        diskops.copy_verified(p.src, p.dst)  # size and content hash checked before it counts
        return
    try:
        diskops.rename_noreplace(p.src, p.dst)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        diskops.copy_then_remove(p.src, p.dst)


class _Skipped(Exception):
    """The destination was taken after the plan was made, and the conflict mode says skip."""


RACE_RETRIES = 5  # fresh names a rename_new tries when each is taken between its choice and the rename


def _place_one(engine: Engine, item: _Item, *, origin: journal.Origin, conflict: str) -> None:
    """Change the disk for one planned file. Its destination taken since it was planned (another program wrote
    there) is settled by the conflict mode as at planning: ``rename_new`` takes the next free name (written to the
    journal first, so a crash leaves the journal naming where the file may be), ``skip`` leaves the file, ``fail``
    and ``overwrite`` (which never replaces what it did not see) make it the file's error."""
    for attempt in range(RACE_RETRIES + 1):
        try:
            _change_disk(item, lambda path: trash_one(engine, origin, path))
            return
        except (FileExistsError, Conflict) as exc:
            p = item.planned
            assert p.dst is not None
            if conflict == "skip":
                raise _Skipped(f"{p.dst} appeared after the plan was made; {p.src} was left where it is "
                               "(conflict: skip)") from None
            if conflict != "rename_new" or attempt == RACE_RETRIES:
                raise exc
            new = destinations.free_name(p.dst, os.path.lexists)
            journal.retarget(engine, item.op_id, new)
            item.planned = replace(p, dst=new, conflict="exists", resolution="rename_new")


def place(engine: Engine, planned: Sequence[destinations.Planned], *, origin: journal.Origin,
          known: dict[int, tuple[str | None, int, float]] | None = None,
          conflict: str = "fail") -> tuple[BatchResult, list[dict[str, Any]]]:
    """Do what ``planned`` says (move / copy / rename; skip and unchanged count as unchanged, error as the file's
    error); returns the batch's result and each placed file's (entry id, from, to). ``known``: entry id -> the
    store's (hash, size, mtime), so unchanged files are not read again for the journal's hash. A file an
    ``overwrite`` replaces goes to the trash first (``flows.fileops.trashing``). ``conflict``: the outcome's mode,
    for a destination taken after planning (:func:`_place_one`)."""
    result = BatchResult()
    items: list[_Item] = []
    for p in planned:
        if p.action in ("skip", "unchanged"):
            result.unchanged += 1
        elif p.action == "error":
            result.errors.append((p.entry_id, p.error or "not placed"))
        else:
            items.append(_Item(p, op=p.action))
    rows: list[dict[str, Any]] = []
    ready: list[_Item] = []
    for item in items:
        p = item.planned
        try:
            st = os.lstat(p.src)
        except OSError as exc:
            result.errors.append((p.entry_id, f"{p.src}: {diskops.reason(exc)}"))
            continue
        if not stat.S_ISREG(st.st_mode):
            result.errors.append((p.entry_id, f"{p.src} is not a regular file; plans place files only"))
            continue
        ready.append(item)
        rows.append({"op": item.op, "src": p.src, "dst": p.dst, "kind": "file", "entry_id": p.entry_id,
                     "size": st.st_size, "mtime": st.st_mtime,
                     "content_hash": content_hash(p.src, st, (known or {}).get(p.entry_id))})
    if not ready:
        return result, []
    for item, op_id in zip(ready, journal.begin_many(engine, origin, rows)):
        item.op_id = op_id
    done: list[_Item] = []
    for item in ready:
        try:
            _place_one(engine, item, origin=origin, conflict=conflict)
            done.append(item)
        except _Skipped as exc:
            journal.failed(engine, item.op_id, str(exc))
            result.unchanged += 1
        except (OSError, AssayError) as exc:
            item.error = (f"{item.planned.dst} appeared meanwhile; nothing was changed" if isinstance(
                exc, FileExistsError) else str(exc) if isinstance(exc, AssayError) else
                f"{item.op} {item.planned.src} -> {item.planned.dst}: {diskops.reason(exc)}")
            journal.failed(engine, item.op_id, item.error)
            result.errors.append((item.planned.entry_id, item.error))
    placed = _follow(engine, done, made=[d for item in ready for d in item.made])
    result.applied = len(placed)
    return result, placed


def _follow(engine: Engine, done: list[_Item], *, made: list[str]) -> list[dict[str, Any]]:
    """The store after the disk, in one transaction: entries moved (ids kept) or added (copies), folders made
    indexed where their parent is (those of a file that then failed too, while they are there: a later file may
    have landed in one), sizes recomputed, the journal's rows crossed out."""
    if not done and not made:
        return []
    touched: set[str] = set()
    with engine.begin() as conn:
        indexed_dirs: dict[str, bool] = {}

        def indexed(folder: str) -> bool:
            if folder not in indexed_dirs:
                indexed_dirs[folder] = conn.execute(T.select().with_only_columns(T.c.id).where(
                    T.c.path == folder, T.c.kind == "directory")).first() is not None
            return indexed_dirs[folder]

        for d in made:
            if os.path.isdir(d) and indexed(posixpath.dirname(d)):
                upsert_entries(conn, [diskops.entry_row(d)])
                indexed_dirs[d] = True
                touched.add(d)
        moves: list[tuple[str, str]] = []
        for item in done:
            p = item.planned
            assert p.dst is not None
            if item.op == "copy":
                if indexed(posixpath.dirname(p.dst)):
                    upsert_entries(conn, [diskops.entry_row(p.dst)])
                touched.add(p.dst)
            else:
                moves.append((p.src, p.dst))
        move_files(conn, moves, sizes=True)  # plain files: a few statements for the batch, folder sizes by delta
        journal.done_many(conn, [item.op_id for item in done])
        refresh_folder_sizes(conn, touched)  # where copies and folders made went: summed again
    return [{"entry_id": i.planned.entry_id, "from": i.planned.src, "to": i.planned.dst, "op": i.op} for i in done]


class FileOutcomeExecutor(OutsideTransactionExecutor):
    """The executors of ``move``, ``copy`` and ``rename``: planned and placed a batch at a time. Work keys leave the
    path out: a file the rule placed is done, wherever it is now (a watched folder it lands in does not place it
    again)."""

    records_work = True
    keyed_by_path = False
    batch_size = 500

    def preview_rows(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], roots: Roots,
                     claimed: set[str]) -> list[dict[str, Any]]:
        return [p.public() for p in destinations.plan(engine, roots, outcome, rows, claimed=claimed)]

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: RunContext) -> BatchResult:
        if ctx.roots is None:
            raise AssayError(f"a {outcome.type} outcome needs the run's roots (where files may go); this run has none")
        planned = destinations.plan(engine, ctx.roots, outcome, rows)
        origin = journal.Origin.for_execution(ctx.execution_id) if ctx.execution_id is not None \
            else journal.Origin.for_tool(f"{outcome.type} outcome")
        known = {int(r["id"]): (r["hash"], int(r["size"]), float(r["mtime"])) for r in rows}
        result, placed = place(engine, planned, origin=origin, known=known,
                               conflict=getattr(outcome, "conflict", "fail"))  # move, copy, rename: each has one
        for item in placed:
            if ctx.on_item is not None:
                ctx.on_item(item["to"])
        return result


class MoveExecutor(FileOutcomeExecutor):
    type = "move"


class CopyExecutor(FileOutcomeExecutor):
    type = "copy"


class RenameExecutor(FileOutcomeExecutor):
    type = "rename"


class TrashExecutor(OutsideTransactionExecutor):
    """``trash``: each matched file to the trash of its volume (:mod:`flows.fileops.trashing`: journalled, restorable
    by undo); its entry leaves the store. Work keys leave the path out, as for moves."""

    type = "trash"
    records_work = True
    keyed_by_path = False
    batch_size = 500

    def preview_rows(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], roots: Roots,
                     claimed: set[str]) -> list[dict[str, Any]]:
        return [{"from": r["path"], "to": None, "action": "trash"} for r in rows]  # the trash of its volume

    def work(self, engine: Engine, outcome: OutcomeBase, rows: Sequence[Any], ctx: RunContext) -> BatchResult:
        origin = journal.Origin.for_execution(ctx.execution_id) if ctx.execution_id is not None \
            else journal.Origin.for_tool("trash outcome")
        result = BatchResult()
        for row in rows:
            if ctx.should_cancel():
                break
            try:
                trash_one(engine, origin, row["path"])
                result.applied += 1
            except (OSError, AssayError) as exc:
                result.errors.append((int(row["id"]), str(exc) if isinstance(exc, AssayError)
                                      else f"{row['path']}: {diskops.reason(exc)}"))
        return result

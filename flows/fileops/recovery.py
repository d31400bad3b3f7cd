"""At server start: the file operations a dead process left in flight (store.file_journal, state intent or copying)
are finished or rolled back, by what the disk shows.

A move, rename, restore or trash (``src`` -> ``dst``):

- the source is gone and the target is there: the disk moved, so the store follows (a moved subtree's entries keep
  their ids, hence their set memberships; a trashed one's leave the store), as the call would have done next, with
  the folders above the target that the store lacks (made for it, or for another file of a plan's batch: a batch's
  intents are written before its folders are made, so the journal does not name them all);
- both are there and the item was a copy across filesystems: the copy was renamed into place whole, and the removal
  of the source was cut short; the rest of the source is removed, then the store follows;
- the source is there and the target is not: the disk did not change; a partial copy beside the target and the
  folders the journal says were made for it (when empty) are removed; folders above the target still there that the
  store lacks are indexed (the store follows the disk; what is not known to be ours is not removed);
- anything else (neither is there; both without a copy): something else changed the disk since; nothing is
  touched, and the next index of the folders brings the store in step.

A copy: its target there with the size and content hash written down is done (the store gets its row); not there,
its partial copy and folders are removed. A delete: the path gone is done (its rows go); still there, it was not
deleted, or in part (a folder's rows of what is gone go). A trash cut short before where the file went was written
down: the path gone, the trash of its volume (and assay's own) is searched by its info files for it (its original
path, deleted since the operation was written down, the content hash written down, no other operation's), and the
row gets that destination, so undo can restore it; still there, it was not trashed (what was kept for its undo goes).

An undo's operation (``undo_of``) found done marks the one it reverses undone in the same transaction, as the undo
would have: a move put back is not listed as still done, and undo again says undone already. An undo of a trash whose
file came back is indexed (a folder with what it holds) and gets the set memberships and maps kept when it was
trashed.

What was done is the operation's ``error`` (a note on a done one), logged, and counted in one warning. The files a
plan's batch had moved (up to 500) are settled in one transaction; the rest one by one. An operation of a plan
execution whose run is still alive (a work pool's worker runs it) is not touched, nor one written after the
recovery began.
"""

from __future__ import annotations

import glob
import logging
import os
import posixpath
import time
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from flows.core.settings import current
from flows.fileops import disk as diskops
from flows.fileops import trash as trashes
from flows.fileops.operations import resync_subtree, sync_copy, sync_delete, sync_move
from flows.fileops.trashing import home as trash_home
from flows.index.indexer import index_tree
from flows.media.hashing import hash_file
from store import file_journal, kept
from store import jobs as store_jobs
from store.entries import T, move_files, refresh_ancestor_sizes, refresh_folder_sizes, upsert_entries
from store.errors import Conflict
from store.models import PlanExecution

log = logging.getLogger(__name__)

PE = PlanExecution.__table__
J = store_jobs.J


def recover_moves(engine: Engine) -> list[str]:
    """Settle every operation a dead process left in flight; returns what was done with each."""
    began = time.time()
    live: dict[int, bool] = {}
    rows = []
    for row in file_journal.in_flight(engine):
        execution = row["execution_id"]
        if row["created_at"] > began:
            continue  # a call of this process, made after the recovery started
        if execution is not None and live.setdefault(execution, _run_alive(engine, execution)):
            continue
        rows.append(row)
    done = []
    for start in range(0, len(rows), BATCH):
        done.extend(settle_many(engine, rows[start:start + BATCH]))
    if done:
        log.warning("%d file operation(s) a stopped process left in flight were settled (file-history shows what "
                    "was found for each, in its error)", len(done))
    return done


def recover_at_start(engine: Engine) -> None:
    """The fileops capability's start-up hook: a failure is logged, the server starts anyway."""
    try:
        recover_moves(engine)
    except Exception:
        log.exception("settling interrupted file operations failed; re-index the folders they touched")


def _run_alive(engine: Engine, execution_id: int) -> bool:
    """Whether plan execution ``execution_id``'s run is pending or running (a work pool's worker holds it)."""
    with engine.connect() as conn:
        status = conn.execute(select(J.c.status).join(PE, PE.c.run_id == J.c.id)
                              .where(PE.c.id == execution_id)).scalar()
    return status in store_jobs.ACTIVE


def _finish(row: dict[str, Any], state: Literal["done", "failed"], message: str, dst: str | None = None):
    def settle(conn: Connection) -> None:
        file_journal.finish(conn, row["id"], state=state, error=message, dst=dst)
        if state == "done":
            _reversed(conn, row)

    return settle


def _reversed(conn: Connection, row: dict[str, Any]) -> None:
    """An undo's operation found done: the one it reverses is marked undone with it, as the undo would have done
    next (without it the journal would call a move that was put back still done). Unless it is no longer done."""
    if row.get("undo_of") is None:
        return
    try:
        file_journal.mark_undone(conn, row["undo_of"], by=row["id"])
    except Conflict as exc:
        log.warning("file operation %d reversed %d, which is not marked undone: %s", row["id"], row["undo_of"], exc)


BATCH = 500  # the files whose move the disk had made, settled in one transaction (a plan's batch is this size)


def settle_many(engine: Engine, rows: list[dict[str, Any]]) -> list[str]:
    """:func:`settle` each of ``rows``; what was done with each, in their order. The files whose move or rename the
    disk had made (what a plan's batch cut short leaves, up to 500 of them) are settled together, in one
    transaction (``_follow_files``), the others one by one."""
    moved = [row for row in rows if _disk_moved_file(row)]
    messages = _follow_files(engine, moved)
    out = []
    for row in rows:
        message = messages.get(row["id"]) or settle(engine, row)
        log.info("file operation %d: %s", row["id"], message)
        out.append(message)
    return out


def _disk_moved_file(row: dict[str, Any]) -> bool:
    """A file moved or renamed whose source is gone and whose target is there: the disk moved it."""
    dst = row["dst"]
    return (row["op"] in ("move", "rename") and row["kind"] == "file" and dst is not None
            and os.path.isfile(dst) and not os.path.islink(dst) and not os.path.lexists(row["src"]))


def _follow_files(engine: Engine, rows: list[dict[str, Any]]) -> dict[int, str]:
    """The store follows files the disk moved, in one transaction: the folders on their way it lacks stored,
    entries moved with their ids (a file the store did not have gets an entry where its folder is stored), folder
    sizes recomputed once each, each row done with what was found; operation id -> that message."""
    if not rows:
        return {}
    folders: dict[str, None] = {}
    for parent in dict.fromkeys(posixpath.dirname(row["dst"]) for row in rows):
        folders.update(dict.fromkeys(_unindexed_folders(engine, posixpath.join(parent, "-"))))
    messages = {row["id"]: f"interrupted {row['op']} {row['src']} -> {row['dst']}: the disk had moved; the store "
                           "follows" for row in rows}
    srcs = [row["src"] for row in rows]
    with engine.begin() as conn:
        for folder in sorted(folders, key=lambda d: d.count("/")):  # outermost first: its parent is stored
            upsert_entries(conn, [diskops.entry_row(folder)])
        stored = set(conn.execute(select(T.c.path).where(T.c.path.in_(srcs), T.c.kind != "directory")).scalars())
        move_files(conn, [(row["src"], row["dst"]) for row in rows if row["src"] in stored])
        unknown = [row["dst"] for row in rows
                   if row["src"] not in stored and _stored_dir(conn, posixpath.dirname(row["dst"]))]
        upsert_entries(conn, [diskops.entry_row(dst) for dst in unknown])
        for row in rows:
            file_journal.finish(conn, row["id"], state="done", error=messages[row["id"]])
            _reversed(conn, row)
        refresh_folder_sizes(conn, [*srcs, *(row["dst"] for row in rows), *folders])
    return messages


def settle(engine: Engine, row: dict[str, Any]) -> str:
    """Finish or roll back one operation in flight (a row of store.file_journal) by what the disk shows; what was
    done. Also for a plan's executor that takes over the batch of a worker that died."""
    op, src, dst = row["op"], row["src"], row["dst"]
    if op == "trash" and dst is None:
        return _settle_trash(engine, row)
    if op == "delete" or dst is None:
        return _settle_delete(engine, row)
    at_src, at_dst = os.path.lexists(src), os.path.lexists(dst)
    what = f"interrupted {op} {src} -> {dst}"
    if op == "copy":
        if at_dst and _is_the_copy(row):
            message = f"{what}: the copy was in place; the store follows"
            sync_copy(engine, dst=dst, created=_unindexed_folders(engine, dst),
                      settle=_finish(row, "done", message))
            return message
        if not at_dst:
            return _roll_back(engine, row, f"{what}: the copy was not made; nothing was copied")
        return _left_as_found(engine, row, f"{what}: {dst} is not the copy written down (size or content differ)")
    if at_dst and at_src and row["state"] == "copying":
        failures = diskops.rmtree(src) if os.path.isdir(src) and not os.path.islink(src) else _unlink(src)
        if failures:
            message = (f"{what}: the copy is in place but the source could not be removed "
                       f"({'; '.join(failures[:3])}); delete what is left of it with delete-files")
        else:
            message = f"{what}: the copy was in place; the source is removed and the store follows"
        _follow(engine, row, message)
        return message
    if at_dst and not at_src:
        message = f"{what}: the disk had moved; the store follows"
        if op == "restore":
            _follow_restore(engine, row, message)
        else:
            _follow(engine, row, message)
        return message
    if at_src and not at_dst:
        return _roll_back(engine, row, f"{what}: the disk had not changed; nothing was moved")
    return _left_as_found(engine, row, (
        f"{what}: the disk changed since (source {'there' if at_src else 'gone'}, target "
        f"{'there' if at_dst else 'gone'}); left as found: index the folders to bring the store in step"))


def _follow(engine: Engine, row: dict[str, Any], message: str) -> None:
    """The store follows a move the disk made: paths rewritten, or (a trash) the rows gone from the roots."""
    settle_it = _finish(row, "done", message)
    if row["op"] == "trash":
        sync_delete(engine, path=row["src"], settle=settle_it)
    else:
        sync_move(engine, src=row["src"], dst=row["dst"], created=_unindexed_folders(engine, row["dst"]),
                  settle=settle_it)


def _follow_restore(engine: Engine, row: dict[str, Any], message: str) -> None:
    """The store follows an undo of a trash whose file (or folder) came back before the undo's store step: indexed
    where its folder is (a folder with what it holds), and what was kept when it was trashed put back on its
    entries, as the undo would have done next."""
    dst = row["dst"]
    with engine.connect() as conn:
        indexed = _stored_dir(conn, posixpath.dirname(dst))
    folder = os.path.isdir(dst) and not os.path.islink(dst)
    if indexed and folder:
        index_tree(engine, dst, scan_id=0)
    with engine.begin() as conn:
        if indexed and not folder:
            upsert_entries(conn, [diskops.entry_row(dst)])
            refresh_ancestor_sizes(conn, path=dst)
        if row.get("undo_of") is not None:
            kept.restore(conn, operation_id=row["undo_of"], path=dst)
            kept.forget(conn, [row["undo_of"]])
        _finish(row, "done", message)(conn)


def _unindexed_folders(engine: Engine, path: str) -> list[str]:
    """The folders above ``path`` on disk but not in the store, outermost first, up to the nearest one the store has
    (none when no folder above it is indexed): those the cut call made for it, to be indexed with it. The journal's
    ``made`` does not name them all: a plan writes a batch's intents before it makes a folder, and a folder one file
    of the batch made holds others too."""
    chain: list[str] = []
    folder = posixpath.dirname(path)
    with engine.connect() as conn:
        while folder not in ("/", "") and not _stored_dir(conn, folder):
            if not os.path.isdir(folder) or os.path.islink(folder):
                return []
            chain.append(folder)
            folder = posixpath.dirname(folder)
    return [] if folder in ("/", "") else chain[::-1]


def _stored_dir(conn: Connection, path: str) -> bool:
    return conn.execute(select(T.c.id).where(T.c.path == path, T.c.kind == "directory")).first() is not None


def _roll_back(engine: Engine, row: dict[str, Any], message: str) -> str:
    """The disk did not change: a partial copy beside the target and the (empty) folders made for it go."""
    dst = row["dst"]
    for partial in glob.glob(posixpath.join(glob.escape(posixpath.dirname(dst)),
                                            f".{glob.escape(posixpath.basename(dst))}.assay-partial-*")):
        diskops.remove(partial)
    for folder in reversed(list(row["made"])):
        try:
            os.rmdir(folder)
        except OSError:
            break  # not empty (or gone): what is in it is not ours
    folders = _unindexed_folders(engine, dst)  # made for it (or for a file of its batch) and left: indexed
    with engine.begin() as conn:
        upsert_entries(conn, [diskops.entry_row(folder) for folder in folders])
        file_journal.finish(conn, row["id"], state="failed", error=message)
    return message


def _left_as_found(engine: Engine, row: dict[str, Any], message: str) -> str:
    file_journal.failed(engine, row["id"], message)
    return message


def _is_the_copy(row: dict[str, Any]) -> bool:
    """Whether the file at the copy's target is the source written down (a folder copied is taken as whole: it is
    renamed into place only once complete)."""
    dst = row["dst"]
    if row["kind"] == "directory" or row["content_hash"] is None:
        return True
    try:
        return os.path.getsize(dst) == row["size"] and hash_file(dst) == row["content_hash"]
    except OSError:
        return False


def _settle_delete(engine: Engine, row: dict[str, Any], verb: str = "delete") -> str:
    src, done = row["src"], f"{verb}d" if verb.endswith("e") else f"{verb}ed"
    if not os.path.lexists(src):
        message = f"interrupted {verb} of {src}: it was {done}; the store follows"
        sync_delete(engine, path=src, settle=_finish(row, "done", message))
        return message
    if os.path.isdir(src) and not os.path.islink(src):
        removed = resync_subtree(engine, path=src)
        message = (f"interrupted {verb} of {src}: the folder is still there, with what was not yet {done} "
                   f"({removed} index entries of what was are removed); {verb} it again to finish")
    else:
        message = f"interrupted {verb} of {src}: it was not {done}"
    file_journal.failed(engine, row["id"], message)
    return message


def _settle_trash(engine: Engine, row: dict[str, Any]) -> str:
    """A trash cut short before where the file went was written down: the source gone, its trash is searched for it
    (:func:`in_the_trash`), so the row names where it is and undo can bring it back; still there, it was not
    trashed (as a delete that did not happen; what was kept for its undo goes, unless part of a folder went)."""
    src = row["src"]
    if os.path.lexists(src):
        message = _settle_delete(engine, row, "trash")
        if not (os.path.isdir(src) and not os.path.islink(src)):
            with engine.begin() as conn:
                kept.forget(conn, [row["id"]])
        return message
    found = in_the_trash(engine, row)
    if found is None:
        message = (f"interrupted trash of {src}: it is gone, but not found in its trash; the store follows (undo "
                   "cannot bring it back: restore it from the trash by hand if it is there)")
        sync_delete(engine, path=src, settle=_finish(row, "done", message))
        return message
    message = f"interrupted trash of {src}: it is in the trash as {found.path}; the store follows (undo restores it)"
    sync_delete(engine, path=src, settle=_finish(row, "done", message, dst=found.path))
    return message


def in_the_trash(engine: Engine, row: dict[str, Any]) -> trashes.Trashed | None:
    """Where the trash operation ``row`` put its file, from the info files of the trash its path goes to (and of
    assay's own): the first entry, from when the operation was written down on, of that original path, not the
    destination of another operation, with the content hash written down (a file's)."""
    src = row["src"]
    real = os.path.join(os.path.realpath(os.path.dirname(src)), os.path.basename(src))
    data_dir = str(current().data_dir)
    places = [trashes.trash_for(src, home=trash_home(), data_dir=data_dir), trashes.own_trash(data_dir)]
    since = int(row["created_at"]) - 1  # an info file records whole seconds
    candidates = [t for place in dict.fromkeys(places) for t in trashes.entries(place)
                  if t.original in (real, src) and t.deleted_at >= since]
    for t in sorted(candidates, key=lambda t: (t.deleted_at, t.path)):
        with engine.connect() as conn:
            if conn.execute(select(file_journal.F.c.id).where(file_journal.F.c.dst == t.path,
                                                              file_journal.F.c.id != row["id"])).first():
                continue  # another trashing's
        if row["kind"] == "file" and row["content_hash"] and not _same(t.path, row["content_hash"]):
            continue
        return t
    return None


def _same(path: str, content_hash: str) -> bool:
    try:
        return os.path.isfile(path) and hash_file(path) == content_hash
    except OSError:
        return False


def _unlink(path: str) -> list[str]:
    try:
        os.unlink(path)
    except OSError as exc:
        return [f"{path}: {diskops.reason(exc)}"]
    return []

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
deleted, or in part (a folder's rows of what is gone go). What was done is the operation's ``error`` (a note on a
done one) and logged. An operation of a plan execution whose run is still alive (a work pool's worker runs it) is
not touched, nor one written after the recovery began.
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

from flows.fileops import disk as diskops
from flows.fileops.operations import resync_subtree, sync_copy, sync_delete, sync_move
from flows.media.hashing import hash_file
from store import file_journal
from store import jobs as store_jobs
from store.entries import T, upsert_entries
from store.models import PlanExecution

log = logging.getLogger(__name__)

PE = PlanExecution.__table__
J = store_jobs.J


def recover_moves(engine: Engine) -> list[str]:
    """Settle every operation a dead process left in flight; returns what was done with each."""
    began = time.time()
    live: dict[int, bool] = {}
    done = []
    for row in file_journal.in_flight(engine):
        execution = row["execution_id"]
        if row["created_at"] > began:
            continue  # a call of this process, made after the recovery started
        if execution is not None and live.setdefault(execution, _run_alive(engine, execution)):
            continue
        message = settle(engine, row)
        log.warning("file operation %d: %s", row["id"], message)
        done.append(message)
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


def _finish(op_id: int, state: Literal["done", "failed"], message: str):
    def settle(conn: Connection) -> None:
        file_journal.finish(conn, op_id, state=state, error=message)

    return settle


def settle(engine: Engine, row: dict[str, Any]) -> str:
    """Finish or roll back one operation in flight (a row of store.file_journal) by what the disk shows; what was
    done. Also for a plan's executor that takes over the batch of a worker that died."""
    op, src, dst = row["op"], row["src"], row["dst"]
    if op == "delete" or dst is None:
        return _settle_delete(engine, row)
    at_src, at_dst = os.path.lexists(src), os.path.lexists(dst)
    what = f"interrupted {op} {src} -> {dst}"
    if op == "copy":
        if at_dst and _is_the_copy(row):
            message = f"{what}: the copy was in place; the store follows"
            sync_copy(engine, dst=dst, created=_unindexed_folders(engine, dst),
                      settle=_finish(row["id"], "done", message))
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
        _follow(engine, row, message)
        return message
    if at_src and not at_dst:
        return _roll_back(engine, row, f"{what}: the disk had not changed; nothing was moved")
    return _left_as_found(engine, row, (
        f"{what}: the disk changed since (source {'there' if at_src else 'gone'}, target "
        f"{'there' if at_dst else 'gone'}); left as found: index the folders to bring the store in step"))


def _follow(engine: Engine, row: dict[str, Any], message: str) -> None:
    """The store follows a move the disk made: paths rewritten, or (a trash) the rows gone from the roots."""
    settle_it = _finish(row["id"], "done", message)
    if row["op"] == "trash":
        sync_delete(engine, path=row["src"], settle=settle_it)
    else:
        sync_move(engine, src=row["src"], dst=row["dst"], created=_unindexed_folders(engine, row["dst"]),
                  settle=settle_it)


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


def _settle_delete(engine: Engine, row: dict[str, Any]) -> str:
    src = row["src"]
    if not os.path.lexists(src):
        message = f"interrupted delete of {src}: it was deleted; the store follows"
        sync_delete(engine, path=src, settle=_finish(row["id"], "done", message))
        return message
    if os.path.isdir(src) and not os.path.islink(src):
        removed = resync_subtree(engine, path=src)
        message = (f"interrupted delete of {src}: the folder is still there, with what was not yet deleted "
                   f"({removed} index entries of what was are removed); delete it again to finish")
    else:
        message = f"interrupted delete of {src}: it was not deleted"
    file_journal.failed(engine, row["id"], message)
    return message


def _unlink(path: str) -> list[str]:
    try:
        os.unlink(path)
    except OSError as exc:
        return [f"{path}: {diskops.reason(exc)}"]
    return []

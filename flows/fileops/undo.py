"""Undo: file operations reversed from the journal — one operation, a whole tool call, or a whole plan execution.

Each operation that was done (and not undone since) is reversed newest first, as its own journalled operation
(``undo_of`` names the one it reverses; that one is marked undone in the same transaction that brings the store in
step):

- a move or rename goes back: the file at its destination returns to its source. The store follows the file: its
  entry keeps its id, so set memberships, metadata, extracted text and maps come back with it;
- a copy is removed (its entry too); the original was never touched;
- a trashed file or folder (by delete-files, the trash outcome, an ``overwrite``) comes back from the trash to its
  place, into the index (a folder's files too), with the set memberships and agent-supplied maps kept when it was
  trashed (store/kept.py); a membership of a set deleted since is not restored, and the file's result says so;
- a delete for good, or a trashed file emptied from the trash for good since (state ``purged``), cannot be undone
  (nothing is left to bring back): refused, saying so.

Nothing is forced: an operation whose file changed since (its content hash differs from the journal's), is gone, or
whose old place is taken now is refused, naming the file and why; the others go on. A dry run says what would be
reversed or refused and changes nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import stat
from typing import Any, Collection, Iterable

from sqlalchemy import select
from sqlalchemy.engine import Engine

from flows.core.roots import Roots
from flows.fileops import disk as diskops
from flows.fileops import trash
from flows.index.indexer import index_tree
from flows.media.hashing import hash_file
from store import file_journal as journal
from store import kept
from store.entries import T, delete_subtree, iso, move_files, move_subtree, refresh_ancestor_sizes, upsert_entries
from store.errors import FileOperationError, InvalidInput, NotFound

log = logging.getLogger(__name__)

REVERSIBLE = ("move", "rename", "copy", "trash")
ALL_OPS = 100_000  # the most operations one undo reverses (a plan execution's)


def operations_to_undo(engine: Engine, *, operation_id: int | None = None, call_id: str | None = None,
                       execution_id: int | None = None) -> list[dict[str, Any]]:
    """The journal's operations one undo covers, the last done first (exactly one of the three selectors)."""
    given = [x for x in (operation_id, call_id, execution_id) if x is not None]
    if len(given) != 1:
        raise InvalidInput("give exactly one of operationId (one operation), callId (a whole tool call) or "
                           "executionId (a whole plan execution), as file-history lists them", field="operationId")
    if operation_id is not None:
        found = journal.get(engine, operation_id)
        if found is None:
            raise NotFound(f"no file operation {operation_id} in the journal; file-history lists them",
                           field="operationId")
        ops = [found]
    elif call_id is not None:
        ops = list(reversed(journal.of_call(engine, call_id)))
    else:
        ops = journal.history(engine, execution_id=execution_id, limit=ALL_OPS)
    if not ops:
        what = f"call {call_id}" if call_id is not None else f"plan execution {execution_id}"
        raise NotFound(f"the journal has no file operation of {what}", field="callId" if call_id else "executionId")
    # newest first by when each was done (a move's intent is written before the trashing its overwrite does, but
    # finishes after it: the move goes back first, then what it replaced returns to the place it freed)
    return sorted(ops, key=lambda o: (o.get("finished_at") or 0.0, o["id"]), reverse=True)


def _why_not(op: dict[str, Any], roots: Roots, freed: Collection[str] = (), taken: Collection[str] = ()) -> str | None:
    """Why ``op`` cannot be reversed now, or None; ``freed`` / ``taken``: places earlier operations of the same batch
    empty or fill before this one."""
    if op["state"] == "undone":
        return "undone already"
    if op["state"] == "purged":
        when = f" on {iso(op['undone_at'])}" if op.get("undone_at") else ""
        return f"{op['src']} was emptied from the trash for good{when}; nothing is left to bring back"
    if op["state"] != "done":
        return f"it did not complete ({op['state']}{': ' + op['error'] if op.get('error') else ''}); nothing to undo"
    if op["op"] == "delete":
        return f"{op['src']} was deleted for good; nothing is left to bring back"
    if op["op"] not in REVERSIBLE:
        return f"a {op['op']} cannot be undone by this version of assay"
    here, back = op["dst"], op["src"]
    if op["op"] == "trash" and not here:
        return (f"where {back} went in the trash is not known (a crash cut the trashing short before it was written "
                "down); restore it from the trash by hand")
    if not roots.allows(back) or (op["op"] != "trash" and not roots.allows(here)):
        return f"{here} or {back} is outside the allowed roots"
    try:
        st = os.lstat(here)
    except OSError as exc:
        return f"{here} is gone ({diskops.reason(exc)})"
    if op["kind"] == "file" and not stat.S_ISREG(st.st_mode):
        return f"{here} is no longer a file"
    if op["kind"] == "file" and op.get("content_hash") and hash_file(here) != op["content_hash"]:
        return f"{here} changed since it was placed there (its content hash differs); undo would lose the change"
    if op["op"] != "copy" and (back in taken or (os.path.lexists(back) and back not in freed)):
        return f"its old place {back} is taken now"
    return None


BATCH = 500  # moves and renames reversed together: their intents in one transaction, the store in one more


def undo(engine: Engine, roots: Roots, *, origin: journal.Origin, operation_id: int | None = None,
         call_id: str | None = None, execution_id: int | None = None, dry_run: bool = False) -> dict[str, Any]:
    """Reverse what the selector names; per operation ``undone`` (or ``would_undo``) or ``refused`` with why. Moves
    and renames go back in batches (``_reverse_moves``); copies and trashes one at a time, in their turn."""
    ops = operations_to_undo(engine, operation_id=operation_id, call_id=call_id, execution_id=execution_id)
    results: list[dict[str, Any]] = []
    batch: list[dict[str, Any]] = []

    def flush() -> None:
        results.extend(_reverse_moves(engine, batch, roots, origin))
        batch.clear()

    for op in ops:
        if not dry_run and op["op"] in ("move", "rename") and op["kind"] == "file":
            batch.append(op)
            if len(batch) >= BATCH:
                flush()
            continue
        flush()
        item = _item(op)
        why = _why_not(op, roots)
        if why is not None:
            results.append({**item, "status": "refused", "reason": why})
        elif dry_run:
            results.append({**item, "status": "would_undo"})
        else:
            try:
                results.append({**item, "status": "undone", **_reverse(engine, op, origin)})
            except (OSError, FileOperationError) as exc:
                reason = diskops.reason(exc) if isinstance(exc, OSError) else str(exc)
                results.append({**item, "status": "refused", "reason": reason})
    flush()
    return {"callId": origin.call_id, "dryRun": dry_run, "results": results, **_counts(results)}


def _item(op: dict[str, Any]) -> dict[str, Any]:
    return {"operationId": op["id"], "op": op["op"], "from": op["dst"], "to": op["src"]}


def _reverse_moves(engine: Engine, ops: list[dict[str, Any]], roots: Roots,
                   origin: journal.Origin) -> list[dict[str, Any]]:
    """Moves and renames of files back, in order: each checked against the disk as the earlier ones leave it, the
    passing ones written down in one transaction, renamed back, then the store in one transaction (entries moved
    with their ids, folder sizes, the new rows done and the old ones undone)."""
    if not ops:
        return []
    results: dict[int, dict[str, Any]] = {}
    ready: list[dict[str, Any]] = []
    freed: set[str] = set()
    taken: set[str] = set()
    for op in ops:
        why = _why_not(_trusting_stat(op), roots, freed, taken)
        if why is not None:
            results[op["id"]] = {**_item(op), "status": "refused", "reason": why}
            continue
        ready.append(op)
        freed.add(op["dst"])
        taken.add(op["src"])
        freed.discard(op["src"])
    rows = [{"op": op["op"], "src": op["dst"], "dst": op["src"], "kind": "file", "entry_id": op.get("entry_id"),
             "size": op.get("size"), "mtime": op.get("mtime"), "content_hash": op.get("content_hash"),
             "undo_of": op["id"]} for op in ready]
    new_ids = journal.begin_many(engine, origin, rows) if rows else []
    moved: list[tuple[dict[str, Any], int]] = []
    for op, new in zip(ready, new_ids):
        here, back = op["dst"], op["src"]
        try:
            diskops.make_parents(posixpath.dirname(back))
            try:
                diskops.rename_noreplace(here, back)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                journal.copying(engine, new)
                diskops.copy_then_remove(here, back)
            moved.append((op, new))
            results[op["id"]] = {**_item(op), "status": "undone"}
        except (OSError, FileOperationError) as exc:
            reason = (f"its old place {back} is taken now" if isinstance(exc, FileExistsError) else
                      diskops.reason(exc) if isinstance(exc, OSError) else str(exc))
            journal.failed(engine, new, reason)
            results[op["id"]] = {**_item(op), "status": "refused", "reason": reason}
    _follow_back(engine, moved)
    return [results[op["id"]] for op in ops]


RACY = 2.0  # seconds: a file written again this soon after its size and mtime were read may have kept both


def _trusting_stat(op: dict[str, Any]) -> dict[str, Any]:
    """``op`` without its content hash (so the check does not read the file) when the file at its destination still
    has the size and mtime the journal wrote down: git's index trick, a file rewritten since has a newer mtime. Not
    when that mtime is within RACY seconds of the journal's row (a write right after could have kept both) nor
    when the journal has no size or mtime: then the content hash decides, as it always did."""
    if not op.get("content_hash") or op.get("size") is None or op.get("mtime") is None:
        return op
    try:
        st = os.lstat(op["dst"])
    except OSError:
        return op
    if st.st_size == op["size"] and st.st_mtime == op["mtime"] and op["mtime"] < op["created_at"] - RACY:
        return {**op, "content_hash": None}
    return op


def _follow_back(engine: Engine, moved: list[tuple[dict[str, Any], int]]) -> None:
    """The store after a batch of files went back, in one transaction: entries moved with their ids, folder sizes,
    the new journal rows done and the ones they reverse undone."""
    if not moved:
        return
    with engine.begin() as conn:
        move_files(conn, [(op["dst"], op["src"]) for op, _ in moved], sizes=True)  # folder sizes by delta
        journal.done_many(conn, [new for _, new in moved])
        journal.mark_undone_many(conn, [(op["id"], new) for op, new in moved])


def _counts(results: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = {"undone": 0, "refused": 0, "wouldUndo": 0}
    for r in results:
        counts["wouldUndo" if r["status"] == "would_undo" else r["status"]] += 1
    return counts


def _reverse(engine: Engine, op: dict[str, Any], origin: journal.Origin) -> dict[str, Any]:
    """Reverse one operation (a trash, a copy, or a move or rename outside a batch); what the result adds."""
    here, back = op["dst"], op["src"]
    st = os.lstat(here)
    if op["op"] == "trash":
        return _untrash(engine, op, origin, st)
    if op["op"] == "copy":
        new = journal.begin(engine, origin, op="delete", src=here, dst=None, entry_id=None, size=st.st_size,
                            mtime=st.st_mtime, content_hash=op.get("content_hash"), undo_of=op["id"])
        os.unlink(here)
        with engine.begin() as conn:
            delete_subtree(conn, path=here)
            refresh_ancestor_sizes(conn, path=here)
            journal.done(conn, new)
            journal.mark_undone(conn, op["id"], by=new)
        return {}
    made = diskops.make_parents(posixpath.dirname(back))
    new = journal.begin(engine, origin, op=op["op"], src=here, dst=back, entry_id=op.get("entry_id"),
                        size=st.st_size, mtime=st.st_mtime, content_hash=op.get("content_hash"), made=made,
                        undo_of=op["id"])
    try:
        diskops.rename_noreplace(here, back)
    except FileExistsError:
        journal.failed(engine, new, f"{back} appeared meanwhile")
        raise FileOperationError(f"its old place {back} is taken now", field="to") from None
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            journal.failed(engine, new, diskops.reason(exc))
            raise
        journal.copying(engine, new)
        diskops.copy_then_remove(here, back)
    with engine.begin() as conn:
        move_subtree(conn, old=here, new=back)
        refresh_ancestor_sizes(conn, path=here)
        refresh_ancestor_sizes(conn, path=back)
        journal.done(conn, new)
        journal.mark_undone(conn, op["id"], by=new)
    return {}


def _untrash(engine: Engine, op: dict[str, Any], origin: journal.Origin, st: os.stat_result) -> dict[str, Any]:
    """Back from the trash, into the index where its folder is (a folder with what it holds), then, with the journal
    settled in the same transaction, what was kept when it was trashed put back on its entries: ``restored`` counts,
    ``note`` what could not be (a set deleted since, a folder not indexed)."""
    here, back = op["dst"], op["src"]
    new = journal.begin(engine, origin, op="restore", src=here, dst=back, kind=op["kind"], size=st.st_size,
                        mtime=st.st_mtime, content_hash=op.get("content_hash"), undo_of=op["id"])
    try:
        trash.restore(here, to=back)
    except (OSError, FileOperationError) as exc:
        journal.failed(engine, new, str(exc))
        raise
    with engine.connect() as conn:
        indexed = conn.execute(select(T.c.id).where(T.c.path == posixpath.dirname(back),
                                                    T.c.kind == "directory")).first() is not None
    folder = os.path.isdir(back) and not os.path.islink(back)
    if indexed and folder:
        index_tree(engine, back, scan_id=0)  # its rows in batches, folder sizes up to the root
    with engine.begin() as conn:
        if indexed and not folder:
            upsert_entries(conn, [diskops.entry_row(back)])
            refresh_ancestor_sizes(conn, path=back)
        back_again = kept.restore(conn, operation_id=op["id"], path=back)
        kept.forget(conn, [op["id"]])
        journal.done(conn, new)
        journal.mark_undone(conn, op["id"], by=new)
    return {"restored": {"memberships": back_again["memberships"], "maps": back_again["maps"]},
            **({"note": note} if (note := _not_restored(back_again)) else {})}


def _not_restored(found: dict[str, Any]) -> str | None:
    """What of a trashed file's kept memberships and maps did not come back, in words (None: all did)."""
    parts = []
    if found["setsGone"]:
        parts.append("its memberships of set(s) deleted since were not restored: " + ", ".join(found["setsGone"]))
    if found["notIndexed"]:
        parts.append(f"{found['notIndexed']} membership(s) of files not in the index (their folder is not indexed) "
                     "were not restored")
    parts.extend(f"map {name} was not restored: {why}" for name, why in sorted(found["mapsSkipped"].items()))
    return "; ".join(parts) or None

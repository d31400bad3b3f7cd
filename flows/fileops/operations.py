"""rename-files, move-files and delete-files: change the disk item by item, then bring the store in step.

Each item reports its own result (``success``, ``error`` with the reason, or ``preview`` in a dry run) and a failing
item does not stop the others. Nothing is ever overwritten (the reference gives these tools no overwrite option), a
configured root is never moved or deleted, and every path is confined to the roots. In the store a moved subtree keeps
its entry ids, hence its resource-set memberships; the sizes of the old and new ancestors are recomputed.

Every item that changes the disk is journalled (flows/fileops/journal.py): written down with the file's hash before
the change, crossed out in the transaction that brings the store in step, under the call's
:class:`~store.file_journal.Origin` (a tool call, or a plan execution), whose call id the answer carries.

A dry run changes nothing; later items of the same call are previewed against what the earlier ones would have done
(rename a -> b then b -> c previews as two successes), using :class:`_Overlay`.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import stat
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.engine import Connection, Engine

from flows.fileops import disk as diskops
from flows.fileops.journal import CallJournal, before
from flows.fileops.trashing import trash_one
from flows.core.roots import Roots
from store.entries import (T, delete_subtree, move_subtree, refresh_ancestor_sizes, subtree_clause,
                           upsert_entries)
from store.errors import AssayError, Conflict, FileOperationError, InvalidInput, NotFound
from store.file_journal import Origin
from store.models import SetMember

log = logging.getLogger(__name__)

M = SetMember.__table__
Mode = Literal["rename", "move"]
_MADE = object()  # a directory an earlier dry-run item would have created
_BATCH = 1000


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


@dataclass
class _Overlay:
    """What earlier items of a dry run would have changed; with no ops recorded it is simply the disk."""

    # ("move", old, new) | ("delete", path, "") | ("mkdir", path, "")
    ops: list[tuple[str, str, str]] = field(default_factory=list)

    def origin(self, path: str) -> Any:
        """Where ``path`` would be found on disk now; None if an earlier item removed it, _MADE if one created it."""
        for op, a, b in reversed(self.ops):
            if op == "move":
                if _under(path, b):
                    path = a + path[len(b):]
                elif _under(path, a):
                    return None
            elif op == "delete" and _under(path, a):
                return None
            elif op == "mkdir" and path == a:
                return _MADE
        return path

    def kind(self, path: str) -> str | None:
        where = self.origin(path)
        if where is None:
            return None
        if where is _MADE:
            return "directory"
        try:
            mode = os.lstat(where).st_mode
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        if stat.S_ISLNK(mode):
            return "symlink"
        if stat.S_ISDIR(mode):
            return "directory"
        return "file" if stat.S_ISREG(mode) else "other"

    def is_empty_dir(self, path: str) -> bool:
        if any(op == "move" and posixpath.dirname(b) == path and self.kind(b) for op, _, b in self.ops):
            return False
        where = self.origin(path)
        if where is _MADE or where is None:
            return True
        with os.scandir(where) as it:
            return not any(self.kind(posixpath.join(path, e.name)) for e in it)

    def record(self, op: str, a: str, b: str = "") -> None:
        self.ops.append((op, a, b))


@dataclass
class _Call:
    engine: Engine
    roots: Roots
    dry_run: bool
    view: _Overlay = field(default_factory=_Overlay)
    journal: CallJournal | None = None  # each item written down before the disk changes (None: a dry run)


# --- store helpers --------------------------------------------------------------------------------------------------


def _subtree_count(conn: Connection, path: str) -> int:
    return conn.execute(select(func.count()).select_from(T).where(subtree_clause(path))).scalar_one()


def _memberships(conn: Connection, path: str) -> int:
    ids = select(T.c.id).where(subtree_clause(path))
    return conn.execute(select(func.count()).select_from(M).where(M.c.entry_id.in_(ids))).scalar_one()


def _is_indexed_dir(conn: Connection, path: str) -> bool:
    return conn.execute(select(exists().where(T.c.path == path, T.c.kind == "directory"))).scalar_one()


def sync_move(engine: Engine, *, src: str, dst: str, created: list[str],
              settle: Callable[[Connection], None] | None = None) -> dict[str, int | bool]:
    """Store side of a completed rename/move: rewrite the subtree's paths (ids and memberships kept). ``settle``
    runs in the same transaction (the move journal crosses the item out there)."""
    with engine.begin() as conn:
        if settle is not None:
            settle(conn)
        for d in created:  # directories made for the target, recorded where their parent is indexed
            if _is_indexed_dir(conn, posixpath.dirname(d)):
                upsert_entries(conn, [diskops.entry_row(d)])
        moved = _subtree_count(conn, src)
        if moved:
            stale = delete_subtree(conn, path=dst)  # rows left from a file that was gone from disk before the move
            if stale:
                log.info("dropped %d stale index rows at %s before moving %s there", stale, dst, src)
            move_subtree(conn, old=src, new=dst)
        elif _is_indexed_dir(conn, posixpath.dirname(dst)):
            row = diskops.entry_row(dst)
            if row["kind"] != "directory":  # an unindexed file moved into an indexed folder
                upsert_entries(conn, [row])
                moved = 1
        refresh_ancestor_sizes(conn, path=src)
        refresh_ancestor_sizes(conn, path=dst)
        kept = _memberships(conn, dst) if moved else 0
    out: dict[str, Any] = {"indexedEntries": moved, "membershipsKept": kept, "indexed": bool(moved)}
    if not moved:
        out["note"] = f"{src} was not in the index; run index on {dst} to add it"
    return out


def sync_copy(engine: Engine, *, dst: str, created: list[str],
              settle: Callable[[Connection], None] | None = None) -> dict[str, int | bool]:
    """Store side of a completed copy: the copy's row and the folders made for it, where their parents are indexed
    (what a copied folder holds is added by indexing it); ``settle`` runs in the same transaction."""
    with engine.begin() as conn:
        if settle is not None:
            settle(conn)
        added = 0
        for p in [*created, dst]:  # one by one: a folder made is indexed before its child is looked at
            if _is_indexed_dir(conn, posixpath.dirname(p)):
                upsert_entries(conn, [diskops.entry_row(p)])
                added += p == dst
        refresh_ancestor_sizes(conn, path=dst)
    return {"indexedEntries": added, "indexed": bool(added)}


def sync_delete(engine: Engine, *, path: str, settle: Callable[[Connection], None] | None = None) -> int:
    """Store side of a completed delete (or a move out of the roots): the subtree's rows go; ``settle`` runs in the
    same transaction."""
    with engine.begin() as conn:
        if settle is not None:
            settle(conn)
        removed = delete_subtree(conn, path=path)
        refresh_ancestor_sizes(conn, path=path)
    return removed


def resync_subtree(engine: Engine, *, path: str) -> int:
    """After a partly failed delete: drop the rows of whatever is gone from disk, then recompute directory sizes."""
    removed = 0
    last = ""
    while True:
        with engine.connect() as conn:
            page = list(conn.execute(select(T.c.path).where(subtree_clause(path), T.c.path > last)
                                     .order_by(T.c.path).limit(_BATCH)).scalars())
        if not page:
            break
        last = page[-1]
        gone = [p for p in page if not os.path.lexists(p)]
        if gone:
            with engine.begin() as conn:
                removed += conn.execute(delete(T).where(T.c.path.in_(gone))).rowcount or 0
    with engine.begin() as conn:  # directory sizes bottom-up, one set-based UPDATE per depth level
        child = T.alias("child")
        in_tree = (subtree_clause(path), T.c.kind == "directory")
        deepest = conn.execute(select(func.max(T.c.depth)).where(*in_tree)).scalar()
        top = path.count("/") if path != "/" else 0
        for depth in range(deepest if deepest is not None else top - 1, top - 1, -1):
            total = select(func.coalesce(func.sum(child.c.size), 0)).where(child.c.parent == T.c.path).scalar_subquery()
            conn.execute(update(T).where(*in_tree, T.c.depth == depth).values(size=total))
        refresh_ancestor_sizes(conn, path=path)
    return removed


# --- rename / move --------------------------------------------------------------------------------------------------


def _relocate(call: _Call, raw_src: Any, raw_dst: Any, mode: Mode) -> dict[str, Any]:
    item: dict[str, Any] = {"from": raw_src, "to": raw_dst}
    src = call.roots.resolve(raw_src, field="from", follow_last=False)
    if mode == "rename" and isinstance(raw_dst, str) and raw_dst.strip() and "/" not in raw_dst:
        raw_dst = posixpath.join(posixpath.dirname(src), raw_dst.strip())  # a bare new name: same folder
    dst = call.roots.resolve(raw_dst, field="to", follow_last=False)
    item.update({"from": src, "to": dst})
    tool = f"{mode}-files"
    view = call.view
    if call.roots.is_root(src):
        raise InvalidInput(f"{src} is a configured root; {tool} does not move or rename a root", field="from")
    kind = view.kind(src)
    if kind is None:
        raise NotFound(f"{src} does not exist", field="from")
    item["kind"] = kind
    if mode == "move" and view.kind(dst) == "directory" and dst != src:
        dst = posixpath.join(dst, posixpath.basename(src))  # like mv: into an existing folder
        item["to"] = dst
    if dst == src:
        raise InvalidInput(f"from and to are the same path ({src}); nothing to do", field="to")
    if _under(dst, src):
        raise InvalidInput(f"cannot {mode} {src} into itself ({dst})", field="to")
    if view.kind(dst) is not None and not (not call.dry_run and diskops.same_file(src, dst)):
        raise Conflict(f"{dst} already exists; {tool} never overwrites (it has no overwrite option): delete it "
                       "first with delete-files, or choose another name", field="to")
    parent = posixpath.dirname(dst)
    missing: list[str] = []
    probe = parent
    while view.kind(probe) is None:
        missing.append(probe)
        probe = posixpath.dirname(probe)
    if view.kind(probe) != "directory":
        raise InvalidInput(f"{probe} is a {view.kind(probe)}, not a directory, so {dst} cannot be created", field="to")
    if missing and mode == "rename":
        raise NotFound(f"folder {parent} does not exist; rename-files does not create folders (move-files does)",
                       field="to")
    missing.reverse()
    stored = view.origin(src)  # in a dry run, where an earlier item left it
    stored = stored if isinstance(stored, str) else src
    with call.engine.connect() as conn:
        item["indexedEntries"] = _subtree_count(conn, stored)
        item["membershipsKept"] = _memberships(conn, stored) if item["indexedEntries"] else 0
    item["createdDirectories"] = missing
    if call.dry_run:
        for d in missing:
            view.record("mkdir", d)
        view.record("move", src, dst)
        item["status"] = "preview"
        return item
    made: list[str] = []
    journal = call.journal
    op_id = None
    if journal is not None:  # written down first: a crash from here on is finished or undone at the next start
        op_id = journal.begin(op=mode, src=src, dst=dst, made=missing, before=before(call.engine, src))
    try:
        for d in missing:
            os.mkdir(d)
            made.append(d)
        warning = _rename_or_copy(src, dst, mode, journal, op_id)
    except BaseException as exc:
        for d in reversed(made):  # leave no empty folders behind from a failed item
            try:
                os.rmdir(d)
            except OSError:
                pass
        if journal is not None and op_id is not None and isinstance(exc, Exception):
            journal.failed(op_id, _reason(exc))  # the disk is as it was
        raise
    try:
        item.update(sync_move(call.engine, src=src, dst=dst, created=missing,
                              settle=journal.settle(op_id, warning=warning)
                              if journal is not None and op_id is not None else None))
    except Exception:
        if journal is not None:
            journal.cannot_follow(src)  # the disk moved, the store did not: the item stays written down
        raise
    log.info("%s %s -> %s (%s index entries)", mode, src, dst, item["indexedEntries"])
    if warning:
        item.update(status="error", error=warning, errorCode=FileOperationError.code)
    else:
        item["status"] = "success"
    return item


def _reason(exc: Exception) -> str:
    if isinstance(exc, AssayError):
        return exc.message
    return diskops.reason(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def _rename_or_copy(src: str, dst: str, mode: Mode, journal: CallJournal | None, op_id: int | None) -> str | None:
    try:
        diskops.rename_noreplace(src, dst)
    except FileExistsError:
        raise Conflict(f"{dst} appeared meanwhile; {mode}-files never overwrites, so nothing was changed",
                       field="to") from None
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise FileOperationError(f"{mode} {src} -> {dst} failed: {diskops.reason(exc)}", field="from") from None
        if mode == "rename":
            raise FileOperationError(f"{src} and {dst} are on different filesystems; use move-files, which copies "
                                     "and then removes the source", field="to") from None
        if journal is not None and op_id is not None:
            journal.copying(op_id)
        return diskops.copy_then_remove(src, dst)
    return None


def _run(items: Iterable[Any], one: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    results = []
    for raw in items:
        try:
            results.append(one(raw))
        except AssayError as exc:
            results.append({**_echo(raw), "status": "error", "error": exc.message, "errorCode": exc.code})
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            results.append({**_echo(raw), "status": "error", "error": f"{diskops.reason(exc)}{where}",
                            "errorCode": FileOperationError.code})
        except Exception as exc:  # an item must not hide the results of the others; logged with its traceback
            log.exception("file operation on %r failed", raw)
            results.append({**_echo(raw), "status": "error", "error": f"internal error: {type(exc).__name__}: {exc}",
                            "errorCode": "INTERNAL_ERROR"})
    return results


def _echo(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return {"from": raw.get("from"), "to": raw.get("to")}
    return {"path": raw}


def _summary(call: _Call, results: list[dict[str, Any]]) -> dict[str, Any]:
    ok = sum(1 for r in results if r["status"] in ("success", "preview"))
    return {"results": results, "successCount": ok, "errorCount": len(results) - ok, "dryRun": call.dry_run,
            "callId": call.journal.origin.call_id if call.journal is not None else None}


def _call(engine: Engine, roots: Roots, dry_run: bool, tool: str, origin: Origin | None) -> _Call:
    """One call's state; its journal under ``origin`` (None: a fresh tool call of ``tool``), none in a dry run."""
    journal = None if dry_run else CallJournal(engine, origin or Origin.for_tool(tool))
    return _Call(engine, roots, dry_run, journal=journal)


def _pairs(ops: Any, field_name: str) -> list[dict[str, Any]]:
    if isinstance(ops, dict):
        ops = [ops]
    if not isinstance(ops, list) or not ops:
        raise InvalidInput(f"{field_name} must be a non-empty array of {{from, to}} objects, e.g. "
                           f'[{{"from": "/home/user/a.txt", "to": "/home/user/b.txt"}}]', field=field_name)
    out = []
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or set(op) != {"from", "to"}:
            got = sorted(op) if isinstance(op, dict) else type(op).__name__
            raise InvalidInput(f"{field_name}[{i}] must be an object with exactly the keys from and to, got {got}",
                               field=field_name)
        out.append(op)
    return out


def rename_files(engine: Engine, roots: Roots, *, renames: Any, dry_run: bool = False,
                 origin: Origin | None = None) -> dict[str, Any]:
    """Rename each {from, to}; ``to`` is a full path or a bare new name in the same folder. Same filesystem only.
    Journalled under ``origin`` (None: a fresh call of rename-files)."""
    call = _call(engine, roots, dry_run, "rename-files", origin)
    results = _run(_pairs(renames, "renames"), lambda op: _relocate(call, op["from"], op["to"], "rename"))
    return _summary(call, results)


def move_files(engine: Engine, roots: Roots, *, moves: Any, dry_run: bool = False,
               origin: Origin | None = None) -> dict[str, Any]:
    """Move each {from, to}: into ``to`` if it is an existing folder, else to that path (missing folders are made);
    across filesystems the source is copied, and removed only once the copy is complete. Journalled under
    ``origin`` (None: a fresh call of move-files)."""
    call = _call(engine, roots, dry_run, "move-files", origin)
    results = _run(_pairs(moves, "moves"), lambda op: _relocate(call, op["from"], op["to"], "move"))
    return _summary(call, results)


# --- delete ---------------------------------------------------------------------------------------------------------


def _delete_one(call: _Call, raw: Any, force: bool, permanent: bool) -> dict[str, Any]:
    path = call.roots.resolve(raw, field="paths", follow_last=False)
    item: dict[str, Any] = {"path": path}
    if call.roots.is_root(path):
        raise InvalidInput(f"{path} is a configured root; delete-files does not delete a root", field="paths")
    kind = call.view.kind(path)
    with call.engine.connect() as conn:
        indexed = _subtree_count(conn, path)
    if kind is None:
        message = f"{path} does not exist"
        if indexed and not call.dry_run and call.view.origin(path) == path:
            removed = sync_delete(call.engine, path=path)
            message += f"; its {removed} stale index entries were removed"
        raise NotFound(message, field="paths")
    item.update(kind=kind, indexedEntries=indexed)
    if kind == "directory" and not force and not call.view.is_empty_dir(path):
        raise Conflict(f"{path} is a directory that is not empty; pass force: true to delete it with everything "
                       "in it", field="force")
    if call.dry_run or call.journal is None:
        call.view.record("delete", path)
        item["status"] = "preview"
        return item
    if not permanent:  # to the trash of its volume, journalled: undo brings it back
        gone, item["indexedEntries"] = trash_one(call.engine, call.journal.origin, path)
        item.update(status="success", trashedTo=gone.path)
        return item
    journal = call.journal  # written down with the file's hash before anything is removed
    op_id = journal.begin(op="delete", src=path, dst=None, before=before(call.engine, path))
    try:
        if kind == "directory" and not force:
            os.rmdir(path)
        elif kind != "directory":
            os.unlink(path)
    except Exception as exc:
        journal.failed(op_id, _reason(exc))
        raise
    if kind == "directory" and force:
        failures = diskops.rmtree(path)
        if failures:
            removed = resync_subtree(call.engine, path=path)
            item.update(indexedEntries=removed)
            shown = "; ".join(failures[:5]) + (f"; and {len(failures) - 5} more" if len(failures) > 5 else "")
            message = f"{path} was only partly deleted: {shown}"
            with call.engine.begin() as conn:  # what went is gone for good: done, with what is left
                journal.settle(op_id, warning=message)(conn)
            raise _Partial(item, message)
    item["indexedEntries"] = sync_delete(call.engine, path=path, settle=journal.settle(op_id))
    item["status"] = "success"
    log.info("deleted %s %s (%s index entries)", kind, path, item["indexedEntries"])
    return item


class _Partial(FileOperationError):
    def __init__(self, item: dict[str, Any], message: str) -> None:
        super().__init__(message, field="paths")
        self.item = item


def delete_files(engine: Engine, roots: Roots, *, paths: Any, dry_run: bool = False, force: bool = False,
                 permanent: bool = False, origin: Origin | None = None) -> dict[str, Any]:
    """Delete each path (files, symlinks themselves, empty folders; non-empty folders only with ``force``): to the
    trash of its volume (``permanent``: for good), each journalled (op ``trash`` / ``delete``) before the disk
    changes, under ``origin`` (None: a fresh call of delete-files)."""
    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths:
        raise InvalidInput('paths must be a non-empty array of paths, e.g. ["/home/user/temp.txt"]', field="paths")
    call = _call(engine, roots, dry_run, "delete-files", origin)

    def one(raw: Any) -> dict[str, Any]:
        try:
            return _delete_one(call, raw, force, permanent)
        except _Partial as exc:
            return {**exc.item, "status": "error", "error": exc.message, "errorCode": exc.code}

    return _summary(call, _run(paths, one))

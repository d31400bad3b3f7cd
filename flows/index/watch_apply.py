"""How a TreeWatcher's settled events change the store: moves (same inode), removals, upserts, walks of new folders.

One pass is one transaction for the moves, removals and upserts (bounded by the events of the pass), then a
streaming index of each directory that is new to the store (its contents may have arrived with it, unreported).
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from flows.index.indexer import index_tree, kind_of
from store import entries as store_entries
from store.entries import T

log = logging.getLogger(__name__)

MAX_CHANGE_IDS = 10_000  # more changed entries than this in one pass are reported as a full rescan
_CHUNK = 500


@dataclass
class Outcome:
    entry_ids: list[int] = field(default_factory=list)
    removed_paths: list[str] = field(default_factory=list)
    upserted: int = 0
    removed: int = 0
    moved: int = 0
    overflow: bool = False


def _chunks(items: Sequence, size: int = _CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _stored(conn: Connection, paths: Sequence[str]) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for chunk in _chunks(list(paths)):
        for row in conn.execute(select(T.c.path, T.c.id, T.c.kind, T.c.size, T.c.mtime, T.c.inode)
                                .where(T.c.path.in_(chunk))).mappings():
            found[row["path"]] = dict(row)
    return found


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def _moved_to(row: dict, candidates: dict[str, tuple], claimed: set[str]) -> str | None:
    """The candidate path holding the deleted entry's inode now (same kind; a file also keeps its size or mtime)."""
    if row["inode"] is None:
        return None
    for path, (kind, size, mtime_ns, inode) in candidates.items():
        if inode != row["inode"] or kind != row["kind"] or path in claimed:
            continue
        if kind == "file" and size != row["size"] and abs(mtime_ns / 1e9 - row["mtime"]) > 1e-3:
            continue  # the inode was reused by another file
        return path
    return None


def apply(engine: Engine, *, deletes: Sequence[str], candidates: dict[str, tuple],
          ready: Sequence[tuple[str, tuple]], scan_id: int | None, follow_symlinks: bool = False,
          should_stop: Callable[[], bool] = lambda: False) -> Outcome:
    """Apply one pass: ``deletes`` (paths gone from disk, sorted), ``candidates`` (paths an inode may have moved to,
    with their looks), ``ready`` (settled paths with their looks, sorted)."""
    out = Outcome()
    touched: list[str] = []
    walks: list[str] = []
    stamp = time.time()
    with engine.begin() as conn:
        stored = _stored(conn, deletes)
        gone: list[str] = []  # removed or moved away: what was under them is handled with them
        claimed: set[str] = set()
        for old in deletes:
            row = stored.get(old)
            if row is None or _under(old, gone):
                continue
            new = _moved_to(row, candidates, claimed)
            gone.append(old)
            if new is not None:
                claimed.add(new)
                out.removed += store_entries.delete_subtree(conn, path=new)  # a replaced target loses its entry
                store_entries.move_subtree(conn, old=old, new=new)
                store_entries.refresh_ancestor_sizes(conn, path=old)
                store_entries.refresh_ancestor_sizes(conn, path=new)
                out.moved += 1
                touched.append(new)
                continue
            removed = store_entries.delete_subtree(conn, path=old)
            if removed:
                out.removed += removed
                out.removed_paths.append(old)
                store_entries.refresh_ancestor_sizes(conn, path=old)
        stored = _stored(conn, [p for p, _ in ready])
        rows: list[dict[str, Any]] = []
        parents: dict[str, Any] = {}
        for path, (kind, _size, _mtime, _inode) in ready:
            if _under(path, walks):
                continue
            if kind == "directory" and path not in stored:
                walks.append(path)
                continue
            try:
                st = os.stat(path) if follow_symlinks else os.lstat(path)
            except OSError:
                continue  # vanished since its last look; its delete event follows
            kind = kind_of(st.st_mode)
            size = st.st_size if kind == "file" else (stored[path]["size"] if kind == "directory" else 0)
            rows.append(store_entries.make_row(path, kind=kind, size=size, mtime=st.st_mtime, ctime=st.st_ctime,
                                               inode=st.st_ino, scan_id=scan_id, indexed_at=stamp))
            parents.setdefault(posixpath.dirname(path), path)
            touched.append(path)
        for chunk in _chunks(rows):
            store_entries.upsert_entries(conn, chunk)
        out.upserted += len(rows)
        for child in parents.values():
            store_entries.refresh_ancestor_sizes(conn, path=child)
    for directory in walks:
        if should_stop():
            break  # the next start's catch-up indexes it
        try:
            result = index_tree(engine, directory, scan_id=scan_id or 0, follow_symlinks=follow_symlinks)
        except OSError as exc:
            log.info("watch: could not index new folder %s: %s", directory, exc)
            continue
        out.upserted += result.files + result.directories
    ids = _ids(engine, touched, walks)
    if ids is None:
        out.overflow, ids = True, []
    out.entry_ids = ids
    return out


def _ids(engine: Engine, paths: Sequence[str], subtrees: Sequence[str]) -> list[int] | None:
    """Ids of ``paths`` and of everything under ``subtrees``; None when there are more than MAX_CHANGE_IDS."""
    ids: list[int] = []
    with engine.connect() as conn:
        for chunk in _chunks(list(paths)):
            ids.extend(conn.scalars(select(T.c.id).where(T.c.path.in_(chunk))))
        for root in subtrees:
            room = MAX_CHANGE_IDS + 1 - len(ids)
            ids.extend(conn.scalars(select(T.c.id).where(store_entries.subtree_clause(root)).limit(room)))
            if len(ids) > MAX_CHANGE_IDS:
                return None
    return sorted(set(ids)) if len(ids) <= MAX_CHANGE_IDS else None

"""Filesystem entries: set-based bulk writes for the indexer, and keyword-only read functions for the tools.

The readers the tools and resources call (``get_entry``, ``list_children``, ``list_within``, ``count_entries``) show
only the entries the current caller may see (store.visibility: a guarded server's user limited to some roots); the
writers and the indexer's own reads see everything.
"""

from __future__ import annotations

import mimetypes
import os
import posixpath
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Sequence

from sqlalchemy import ColumnElement, and_, bindparam, case, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, RowMapping

from store.errors import InvalidInput, NotFound
from store.models import Entry, SetMember
from store.visibility import path_subtree, visible_clause, visible_where

T = Entry.__table__
SortField = Literal["name", "size", "mtime"]
SORT_FIELDS: dict[str, Any] = {"name": T.c.name, "size": T.c.size, "mtime": T.c.mtime}

_MEDIA = {
    "image": ".jpg .jpeg .png .gif .bmp .tif .tiff .webp .heic .heif .avif .svg .ico .raw .cr2 .nef .arw .dng",
    "video": ".mp4 .m4v .mov .mkv .avi .webm .wmv .flv .mpg .mpeg .3gp .ts .mts",
    "audio": ".mp3 .wav .flac .aac .m4a .ogg .oga .opus .wma .aiff .aif",
    "document": ".pdf .doc .docx .odt .rtf .epub .ppt .pptx .odp .xls .xlsx .ods",
    "text": ".txt .md .markdown .rst .csv .tsv .json .yaml .yml .toml .xml .html .htm .log "
            ".py .js .ts .c .h .go .rs .java",
}
MEDIA_TYPES: dict[str, str] = {ext: kind for kind, exts in _MEDIA.items() for ext in exts.split()}
ENTRY_COLUMNS = ("path", "parent", "name", "extension", "kind", "size", "mtime", "ctime", "depth", "inode",
                 "media_type", "mime", "scan_id", "indexed_at", "scan_error")
# What a re-scan compares to decide whether an entry changed (identity, size, times, completeness): an entry whose
# stored state equals what the walk sees is not written at all.
STATE_COLUMNS = ("kind", "size", "mtime", "ctime", "inode", "scan_error")


def split_extension(name: str) -> str:
    """``.jpg`` for ``Photo.JPG``; ``""`` for ``Makefile`` and for dot-files like ``.bashrc``."""
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def media_type_for(extension: str) -> str | None:
    return MEDIA_TYPES.get(extension)


def mime_for(name: str) -> str | None:
    return mimetypes.guess_type(name, strict=False)[0]


def driver_connection(conn: Connection) -> Any:
    """The DBAPI connection under ``conn`` (sqlite3's: its executemany and plain cursors are the hot paths)."""
    driver = conn.connection.driver_connection
    if driver is None:
        raise RuntimeError("the connection is closed")
    return driver


def path_depth(path: str) -> int:
    return 0 if path == "/" else path.count("/")


def subtree_clause(root: str, *, include_root: bool = True) -> ColumnElement[bool]:
    """Entries at or under ``root``, as an index-friendly range (no LIKE, so ``%`` and ``_`` in names are safe)."""
    return path_subtree(T.c.path, root, include_root=include_root)


_TYPE_CACHE: dict[str, tuple[str | None, str | None]] = {}


def types_for(extension: str) -> tuple[str | None, str | None]:
    """(media_type, mime) for a lower-case extension, cached: mimetypes.guess_type is too slow for the hot path."""
    cached = _TYPE_CACHE.get(extension)
    if cached is None:
        mime = mimetypes.guess_type("x" + extension, strict=False)[0] if extension else None
        cached = _TYPE_CACHE[extension] = (media_type_for(extension), mime)
    return cached


def row_tuple(path: str, parent: str | None, name: str, kind: str, size: int, mtime: float, ctime: float,
              inode: int | None, scan_id: int | None, indexed_at: float,
              scan_error: str | None = None) -> tuple[Any, ...]:
    """One entry as a tuple in ENTRY_COLUMNS order (the indexer's hot path builds these, not dicts)."""
    if kind == "file":
        dot = name.rfind(".")
        ext = name[dot:].lower() if dot > 0 else ""
        media, mime = types_for(ext)
    else:
        ext, media, mime = "", None, None
    depth = 0 if path == "/" else path.count("/")
    return (path, parent, name, ext, kind, size, mtime, ctime, depth, inode, media, mime, scan_id, indexed_at,
            scan_error)


def make_row(path: str, *, kind: str, size: int, mtime: float, ctime: float, inode: int | None, scan_id: int | None,
             indexed_at: float, scan_error: str | None = None) -> dict[str, Any]:
    name = posixpath.basename(path) or path
    parent = posixpath.dirname(path) if path != "/" else None
    return dict(zip(ENTRY_COLUMNS, row_tuple(path, parent, name, kind, size, mtime, ctime, inode, scan_id,
                                              indexed_at, scan_error)))


def upsert_entries(conn: Connection, rows: Sequence[dict[str, Any] | tuple[Any, ...]]) -> None:
    """Insert or update a batch of entries by path in one statement (entry ids, hence set memberships, survive).

    Rows are dicts keyed by ENTRY_COLUMNS or tuples in that order. Columns that are functions of the path are not
    rewritten; a stored media_type / mime is kept (classifiers may have refined them) unless the entry changed kind.
    """
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        # The DBAPI's executemany is several times faster than SQLAlchemy's per-row parameter processing; this is
        # the indexer's hot path, so it goes straight to sqlite3 with the same statement.
        params = [r if isinstance(r, tuple) else tuple(r[c] for c in ENTRY_COLUMNS) for r in rows]
        cursor = driver_connection(conn).cursor()
        try:
            cursor.executemany(_SQLITE_UPSERT, params)
        finally:
            cursor.close()
        return
    ins = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(T)
    x = ins.excluded
    same_kind = T.c.kind == x.kind
    updated = {c: getattr(x, c) for c in ("kind", "size", "mtime", "ctime", "inode", "scan_id", "indexed_at",
                                          "scan_error")}
    updated["extension"] = case((same_kind, T.c.extension), else_=x.extension)
    updated["media_type"] = case((same_kind, func.coalesce(T.c.media_type, x.media_type)), else_=x.media_type)
    updated["mime"] = case((same_kind, func.coalesce(T.c.mime, x.mime)), else_=x.mime)
    dicts = [dict(zip(ENTRY_COLUMNS, r)) if isinstance(r, tuple) else r for r in rows]
    conn.execute(ins.on_conflict_do_update(index_elements=[T.c.path], set_=updated), dicts)


# On conflict only what a re-scan can change is rewritten: path, parent, name and depth are functions of the path, and
# leaving them (and, for an unchanged kind, extension / media_type / mime) out of SET spares SQLite the index updates.
# A stored media_type / mime is kept (classifiers may have refined it) unless the entry changed kind.
_SAME_KIND = "entries.kind = excluded.kind"
_SQLITE_UPSERT = (
    f"INSERT INTO entries ({', '.join(ENTRY_COLUMNS)}) VALUES ({', '.join('?' * len(ENTRY_COLUMNS))}) "
    "ON CONFLICT(path) DO UPDATE SET kind=excluded.kind, size=excluded.size, mtime=excluded.mtime, "
    "ctime=excluded.ctime, inode=excluded.inode, scan_id=excluded.scan_id, indexed_at=excluded.indexed_at, "
    "scan_error=excluded.scan_error, "
    f"extension=CASE WHEN {_SAME_KIND} THEN entries.extension ELSE excluded.extension END, "
    f"media_type=CASE WHEN {_SAME_KIND} THEN COALESCE(entries.media_type, excluded.media_type) "
    "ELSE excluded.media_type END, "
    f"mime=CASE WHEN {_SAME_KIND} THEN COALESCE(entries.mime, excluded.mime) ELSE excluded.mime END"
)
SQLITE_UPSERT = _SQLITE_UPSERT
# A path and everything under it; the parameters come from subtree_bounds (a range, so the path index is used).
SQLITE_DELETE_SUBTREE = "DELETE FROM entries WHERE path = ? OR (path > ? AND path < ?)"
SQLITE_DELETE_BELOW = "DELETE FROM entries WHERE path > ? AND path < ?"
_SQLITE_CHILD_STATES = f"SELECT name, {', '.join(STATE_COLUMNS)} FROM entries WHERE parent = ?"


def subtree_bounds(path: str) -> tuple[str, str]:
    """(low, high): the paths strictly under ``path`` are those with low < p < high ("0" follows "/")."""
    base = path.rstrip("/")
    return base + "/", base + "0"


def delete_gone(conn: Connection, gone: Sequence[tuple[str, bool]]) -> int:
    """Delete each ``(path, with_path)``: everything under the path, and the path itself when ``with_path``.
    Returns the number of entries removed (set memberships and artifacts go with them by cascade)."""
    removed = 0
    for path, with_path in gone:
        removed += conn.execute(delete(T).where(subtree_clause(path, include_root=with_path))).rowcount or 0
    return removed


def child_states(conn: Connection, *, parent: str) -> dict[str, tuple[Any, ...]]:
    """``name -> (kind, size, mtime, ctime, inode, scan_error)`` of the stored entries directly inside ``parent``:
    what a re-scan compares each directory's listing with."""
    if conn.dialect.name == "sqlite":
        cursor = driver_connection(conn).cursor()
        try:
            return {row[0]: row[1:] for row in cursor.execute(_SQLITE_CHILD_STATES, (parent,))}
        finally:
            cursor.close()
    cols = [T.c.name, *(T.c[c] for c in STATE_COLUMNS)]
    return {row[0]: tuple(row[1:]) for row in conn.execute(select(*cols).where(T.c.parent == parent))}


def entry_state(conn: Connection, *, path: str) -> tuple[Any, ...] | None:
    row = conn.execute(select(*(T.c[c] for c in STATE_COLUMNS)).where(T.c.path == path)).first()
    return tuple(row) if row is not None else None


def recompute_directory_size(conn: Connection, *, path: str) -> None:
    """Set a directory's size to the sum of its stored children (after a walk stopped inside it)."""
    child = T.alias("child")
    total = select(func.coalesce(func.sum(child.c.size), 0)).where(child.c.parent == path).scalar_subquery()
    conn.execute(update(T).where(T.c.path == path, T.c.kind == "directory").values(size=total))


def delete_unseen(conn: Connection, *, root: str, scan_id: int) -> int:
    """Remove entries under ``root`` that the scan ``scan_id`` did not see (they disappeared from disk)."""
    result = conn.execute(delete(T).where(subtree_clause(root), or_(T.c.scan_id.is_(None), T.c.scan_id != scan_id)))
    return result.rowcount or 0


def delete_subtree(conn: Connection, *, path: str) -> int:
    return conn.execute(delete(T).where(subtree_clause(path))).rowcount or 0


def refresh_ancestor_sizes(conn: Connection, *, path: str) -> None:
    """Recompute the aggregated size of each stored ancestor of ``path``, bottom-up (a few rows, not the tree)."""
    current = posixpath.dirname(path) if path != "/" else None
    while current:
        child = T.alias("child")
        total = select(func.coalesce(func.sum(child.c.size), 0)).where(child.c.parent == current).scalar_subquery()
        res = conn.execute(update(T).where(T.c.path == current, T.c.kind == "directory").values(size=total))
        if not res.rowcount:
            break  # ancestors above an unindexed directory are not in the store
        current = posixpath.dirname(current) if current != "/" else None


def refresh_folder_sizes(conn: Connection, paths: Iterable[str]) -> None:
    """Recompute the aggregated size of the folders holding ``paths`` and of their stored ancestors, each once,
    deepest first (a batch of moves touches many files in few folders)."""
    folders: set[str] = set()
    for path in paths:
        current = posixpath.dirname(path) if path != "/" else None
        while current and current not in folders:
            folders.add(current)
            current = posixpath.dirname(current) if current != "/" else None
    by_depth = sorted({path_depth(f) for f in folders}, reverse=True)
    if conn.dialect.name == "sqlite":
        cursor = driver_connection(conn).cursor()
        try:
            for depth in by_depth:
                cursor.executemany(_SQLITE_FOLDER_SIZE, [(f, f) for f in folders if path_depth(f) == depth])
        finally:
            cursor.close()
        return
    child = T.alias("child")
    total = select(func.coalesce(func.sum(child.c.size), 0)).where(child.c.parent == bindparam("b_folder")) \
        .scalar_subquery()
    stmt = update(T).where(T.c.path == bindparam("b_folder"), T.c.kind == "directory").values(size=total)
    for depth in by_depth:
        conn.execute(stmt, [{"b_folder": f} for f in folders if path_depth(f) == depth])


_SQLITE_FOLDER_SIZE = ("UPDATE entries SET size = (SELECT COALESCE(SUM(child.size), 0) FROM entries AS child "
                       "WHERE child.parent = ?) WHERE path = ? AND kind = 'directory'")


def move_subtree(conn: Connection, *, old: str, new: str) -> int:
    """Rewrite the paths of ``old`` and everything under it to live under ``new``, keeping ids (and set memberships)."""
    n = len(old)
    name = posixpath.basename(new)
    conn.execute(
        update(T).where(T.c.path == old).values(
            path=new, parent=posixpath.dirname(new), name=name,
            extension=case((T.c.kind == "file", split_extension(name)), else_=""),
            depth=path_depth(new),
        )
    )
    delta = path_depth(new) - path_depth(old)
    res = conn.execute(
        update(T).where(subtree_clause(old, include_root=False)).values(
            path=new + func.substr(T.c.path, n + 1),
            parent=new + func.substr(T.c.parent, n + 1),
            depth=T.c.depth + delta,
        )
    )
    return (res.rowcount or 0) + 1


def move_files(conn: Connection, moves: Sequence[tuple[str, str]], *, sizes: bool = False) -> None:
    """Rewrite the paths of plain files (no subtree below them), ``(old, new)`` each, in order, in two statements
    executed for the whole batch: a row left at a ``new`` path (a file gone from disk unseen) is dropped first, unless
    an earlier move of the batch takes it away. Ids, hence set memberships, are kept.

    The folders' sizes: with ``sizes``, each stored folder above an old and a new path has the moved entry's size
    taken off or added (a delta, so a folder of 10,000 files is not summed again for every batch); without, they are
    the caller's to refresh (:func:`refresh_folder_sizes`, once per folder)."""
    if not moves:
        return
    olds = {old for old, _ in moves}
    stored = _stored_sizes(conn, list(olds | {new for _, new in moves})) if sizes else None
    # with the sizes read, only the rows known to be there are deleted (PostgreSQL: a round trip fewer per file)
    gone = [(new,) for _, new in moves if new not in olds and (stored is None or new in stored)]
    changed = [(new, posixpath.dirname(new), posixpath.basename(new), split_extension(posixpath.basename(new)),
                path_depth(new), old) for old, new in moves]
    deltas = _size_deltas(moves, olds, stored) if stored is not None else {}
    _executemany(conn, "DELETE FROM entries WHERE path = ? AND kind != 'directory'", gone)
    _executemany(conn, "UPDATE entries SET path = ?, parent = ?, name = ?, extension = ?, depth = ? WHERE path = ?",
                 changed)
    _executemany(conn, "UPDATE entries SET size = size + ? WHERE path = ? AND kind = 'directory'",
                 [(delta, folder) for folder, delta in deltas.items() if delta])


def _executemany(conn: Connection, sql: str, params: Sequence[tuple[Any, ...]]) -> None:
    """``sql`` (``?`` placeholders) for each of ``params`` through the DBAPI's own executemany, in ``conn``'s
    transaction: SQLAlchemy's per-row parameter processing costs more than these statements (~20 us a row)."""
    if not params:
        return
    cursor = driver_connection(conn).cursor()
    try:
        cursor.executemany(sql if conn.dialect.paramstyle == "qmark" else sql.replace("?", "%s"), params)
    finally:
        cursor.close()


def _stored_sizes(conn: Connection, paths: list[str]) -> dict[str, int]:
    """Path -> stored size, of those of ``paths`` that are stored and not directories (500 at a time)."""
    stored: dict[str, int] = {}
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    cursor = driver_connection(conn).cursor()
    try:
        for i in range(0, len(paths), 500):
            chunk = paths[i:i + 500]
            cursor.execute(f"SELECT path, size FROM entries WHERE kind != 'directory' AND path IN "
                           f"({', '.join([mark] * len(chunk))})", chunk)
            stored.update((p, int(size or 0)) for p, size in cursor.fetchall())
    finally:
        cursor.close()
    return stored


def _size_deltas(moves: Sequence[tuple[str, str]], olds: set[str], stored: dict[str, int]) -> dict[str, int]:
    """Folder -> what ``moves`` add to its size (negative: take off), from the stored sizes of the moved files and
    of the rows their new paths drop; every ancestor up to "/" (those not stored are no-ops when applied)."""
    stored = dict(stored)
    direct: dict[str, int] = {}  # each moved file's own folder first: a batch touches few folders
    for old, new in moves:  # in order: an entry moved twice in the batch carries its size along
        size = stored.pop(old, 0)
        dropped = stored.get(new, 0) if new not in olds else 0
        stored[new] = size
        for folder, delta in ((old.rpartition("/")[0] or "/", -size), (new.rpartition("/")[0] or "/", size - dropped)):
            direct[folder] = direct.get(folder, 0) + delta
    deltas: dict[str, int] = {}
    for path, delta in direct.items():
        while delta:
            deltas[path] = deltas.get(path, 0) + delta
            if path == "/":
                break
            path = path.rpartition("/")[0] or "/"
    return deltas


def existing_ids(conn: Connection, entry_ids: Sequence[int], *, chunk: int = 500) -> set[int]:
    """Which of ``entry_ids`` still name entries (asked ``chunk`` ids at a time): writers drop the results of entries
    deleted while their work ran, rather than fail on the foreign key."""
    found: set[int] = set()
    ids = list(entry_ids)
    for i in range(0, len(ids), chunk):
        found.update(conn.execute(select(T.c.id).where(T.c.id.in_(ids[i:i + chunk]))).scalars())
    return found


def get_entry(conn: Connection | Engine, *, path: str) -> RowMapping | None:
    """The entry at ``path``, or None: also when the current caller may not see it (store.visibility)."""
    stmt = select(T).where(T.c.path == path, visible_clause(T.c.path))
    if isinstance(conn, Engine):
        with conn.connect() as c:
            return c.execute(stmt).mappings().first()
    return conn.execute(stmt).mappings().first()


def require_entry(engine: Engine, *, path: str) -> RowMapping:
    """The entry at ``path``; NotFound otherwise, saying "not in the index" only where indexing would bring it in
    (something is on disk there), "does not exist" where nothing is."""
    row = get_entry(engine, path=path)
    if row is None:
        raise missing_entry(path)
    return row


def missing_entry(path: str) -> NotFound:
    """The error for a path with no entry: indexing helps only if something is on disk at that path."""
    if os.path.lexists(path):
        return NotFound(f"{path} is not in the index; index it (or a folder above it) first with the index tool",
                        field="path")
    return NotFound(f"{path} does not exist (nothing on disk at that path, nothing indexed)", field="path")


def check_sort(sort: str, allowed: Iterable[str] = SORT_FIELDS) -> str:
    allowed = list(allowed)
    if sort not in allowed:
        raise InvalidInput(f"sort field {sort!r} is not supported; use one of: {', '.join(allowed)}", field="sort")
    return sort


def list_children(engine: Engine, *, path: str, sort: str = "name", desc: bool = False, limit: int = 100,
                  offset: int = 0, show_hidden: bool = True) -> tuple[list[RowMapping], int]:
    """One page of the entries directly inside ``path`` and the total count (``ls``; ``ls -a`` with show_hidden)."""
    column = SORT_FIELDS[check_sort(sort)]
    order = [column.desc() if desc else column.asc(), T.c.name.desc() if desc else T.c.name.asc()]
    where = [T.c.parent == path, visible_clause(T.c.path)]
    if not show_hidden:
        where.append(~T.c.name.startswith(".", autoescape=True))
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(T).where(*where)).scalar_one()
        rows = conn.execute(
            select(T).where(*where).order_by(*order).limit(limit).offset(offset)
        ).mappings().all()
    return list(rows), total


def count_subtree(engine: Engine, *, root: str) -> int:
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T).where(subtree_clause(root))).scalar_one()


def within(roots: Sequence[str]) -> ColumnElement[bool]:
    """Entries at or under any of ``roots`` (a WHERE clause: what the readers of every entry of the roots scope by)."""
    return or_(*(subtree_clause(root) for root in roots))


def list_within(engine: Engine, *, roots: Sequence[str], limit: int = 100,
                offset: int = 0) -> tuple[list[RowMapping], int]:
    """One page of the entries at or under any of ``roots``, by path, and how many there are in all."""
    inside = and_(within(roots), visible_clause(T.c.path))
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(T).where(inside)).scalar_one()
        rows = conn.execute(select(T).where(inside).order_by(T.c.path).limit(limit).offset(offset)).mappings().all()
    return list(rows), total


def count_entries(engine: Engine) -> int:
    """How many entries the current caller may see (all of them with no limit)."""
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(T).where(*visible_where(T.c.path))).scalar_one()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def entry_public(row: RowMapping | dict[str, Any]) -> dict[str, Any]:
    """The shape tools return for an entry (reference 000's navigate entries, plus the fields agents filter on)."""
    return {
        "name": row["name"], "path": row["path"], "size": row["size"], "kind": row["kind"],
        "mtime": iso(row["mtime"]), "ctime": iso(row["ctime"]), "extension": row["extension"] or None,
        "media_type": row["media_type"], "parent": row["parent"],
    }


def memberships_kept(conn: Connection, *, entry_ids: Sequence[int]) -> int:
    if not entry_ids:
        return 0
    return conn.execute(
        select(func.count()).select_from(SetMember.__table__).where(SetMember.__table__.c.entry_id.in_(entry_ids))
    ).scalar_one()

"""Browsing the library and finding documents by name (reference 001's ``list_collections`` and ``find_document``).

Browsing reads the filesystem, so it is current before any indexing; finding by name reads the file index
(``entries``). Paths in and out are the tools' form (``flows.documents.paths.DocumentPaths``: relative to the root
holding them).
"""

from __future__ import annotations

import heapq
import os
import stat
from datetime import datetime, timezone
from typing import Any, Iterator

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Engine

from flows.documents.formats import EXTENSIONS, IMAGES, format_of
from flows.documents.paths import TOP, DocumentPaths
from store.entries import subtree_clause
from store.errors import DocumentError, InvalidInput
from store.fold import fold
from store.models import Entry

E = Entry.__table__


def iso(ts: float) -> str:
    """A modification time as reference 001 shows it: ISO 8601 to the second, in UTC (``Z``)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def size_human(size: int) -> str:
    """``2457600`` -> ``"2.3 MB"`` (powers of 1024, one decimal from KB up)."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _hidden(name: str) -> bool:
    return name.startswith(".")


# --- list_collections ---------------------------------------------------------------------------------------------


def _count_children(path: str, paths: DocumentPaths) -> tuple[int, int]:
    """(documents, subfolders) directly in the folder ``path``, hidden entries skipped; (0, 0) if unreadable."""
    documents = folders = 0
    try:
        with os.scandir(path) as it:
            for item in it:
                if _hidden(item.name):
                    continue
                kind = _kind(item, paths)
                if kind == "dir":
                    folders += 1
                elif kind == "file" and format_of(item.name) is not None:
                    documents += 1
    except OSError:
        pass
    return documents, folders


def _kind(item: os.DirEntry, paths: DocumentPaths) -> str | None:
    """"dir", "file" or None (something else, or a symlink the server does not follow / that leads out)."""
    try:
        if item.is_symlink():
            if not paths.allow_symlinks:
                return None
            target = os.path.realpath(item.path)
            if paths.root_of(target) is None:
                return None
        if item.is_dir():
            return "dir"
        if item.is_file():
            return "file"
    except OSError:
        return None
    return None


def list_collections(paths: DocumentPaths, path: str = "") -> dict[str, Any]:
    """The folder ``path`` (``""``: the root, or the roots when there are several): its subfolders (collections)
    with how many documents and subfolders each holds directly, and its documents (files whose name has a
    document format) with size and modification time; hidden entries are skipped. Read from the filesystem, so
    it is current even before anything is indexed."""
    target = paths.resolve(path, field="path", not_found="COLLECTION_NOT_FOUND")
    shown = path.strip()
    if target == TOP:
        collections = []
        for name, root in paths.names.items():
            docs, subs = _count_children(root, paths)
            collections.append({"name": name, "path": name, "document_count": docs, "subcollection_count": subs})
        return {"current_path": "", "collections": collections, "documents": []}
    try:
        st = os.stat(target)
    except OSError:
        raise DocumentError("COLLECTION_NOT_FOUND", f"Collection not found: {shown!r}; list_collections with an "
                            "empty path lists the top-level collections", field="path",
                            details={"path": path}) from None
    if not stat.S_ISDIR(st.st_mode):
        raise DocumentError("NOT_A_DIRECTORY", f"{shown!r} is a file, not a collection; read_document or "
                            "get_document_info read a document", field="path", details={"path": path})
    collections, documents = [], []
    try:
        with os.scandir(target) as it:
            items = sorted((i for i in it if not _hidden(i.name)), key=lambda i: (i.name.lower(), i.name))
    except OSError as exc:
        raise DocumentError("COLLECTION_NOT_FOUND", f"Collection {shown!r} cannot be read: {exc.strerror}",
                            field="path", details={"path": path}) from None
    for item in items:
        kind = _kind(item, paths)
        full = os.path.realpath(item.path) if item.is_symlink() else item.path
        if kind == "dir":
            docs, subs = _count_children(full, paths)
            collections.append({"name": item.name, "path": paths.display(item.path), "document_count": docs,
                                "subcollection_count": subs})
        elif kind == "file" and format_of(item.name) is not None:
            try:
                info = os.stat(full)
            except OSError:
                continue
            documents.append({"name": item.name, "path": paths.display(item.path), "size_bytes": info.st_size,
                              "modified": iso(info.st_mtime)})
    return {"current_path": paths.display(target), "collections": collections, "documents": documents}


# --- find_document ------------------------------------------------------------------------------------------------


def name_score(query: str, name: str) -> float | None:
    """How well ``name`` matches ``query`` (both folded): 1.0 exact; 0.9 the name without its extension; prefix
    0.5-0.9 and contains 0.1-0.5, each higher the more of the name the query covers; None: no match."""
    if name == query:
        return 1.0
    dot = name.rfind(".")
    if dot > 0 and name[:dot] == query:
        return 0.9
    position = name.find(query)
    if position < 0:
        return None
    coverage = len(query) / len(name)
    if position == 0:
        return round(0.5 + 0.39 * coverage, 3)
    return round(0.1 + 0.39 * coverage, 3)


def _name_clause(engine: Engine, folded: str):
    """The name contains ``folded``, folded as the store folds (SQLite: ``assay_fold``; PostgreSQL: ``lower``);
    a narrowing only: each candidate is checked again in Python."""
    lowered = func.assay_fold(E.c.name) if engine.dialect.name == "sqlite" else func.lower(E.c.name)
    return lowered.contains(folded, autoescape=True)


def find_document(engine: Engine, paths: DocumentPaths, query: str, limit: int = 10) -> dict[str, Any]:
    """Documents under the roots whose file name contains ``query`` (case-insensitive), best first: exact name,
    then prefix, then contains (see ``name_score``); ``total_found`` counts them all. Reads the file index, so
    it finds what has been indexed (the built-in documents plan indexes the roots)."""
    folded = fold(query.strip()) if isinstance(query, str) else ""
    if not folded:
        raise InvalidInput("query must name a document (a file name or part of one), e.g. \"tutorial.pdf\"",
                           field="query")
    extensions = sorted(set(EXTENSIONS) | set(IMAGES) | {""})
    q = (select(E.c.path, E.c.name, E.c.size, E.c.mtime)
         .where(E.c.kind == "file", E.c.extension.in_(extensions), _name_clause(engine, folded),
                or_(*[subtree_clause(root) for root in paths.roots.paths])))
    total = 0

    def candidates() -> Iterator[tuple[float, str, str, int, float]]:
        nonlocal total
        with engine.connect() as conn:
            for path, name, size, mtime in conn.execution_options(yield_per=500).execute(q):
                if format_of(name) is None:
                    continue
                root = paths.root_of(path)
                if root is None or any(_hidden(part) for part in path[len(root):].split("/")):
                    continue
                score = name_score(folded, fold(name))
                if score is None:
                    continue
                total += 1
                yield score, name, path, size, mtime

    best = heapq.nsmallest(limit, candidates(), key=lambda c: (-c[0], len(c[1]), c[1].lower(), c[2]))
    matches = [{"name": name, "path": paths.display(path), "collection": paths.collection_of(path),
                "size_bytes": size, "modified": iso(mtime), "score": score}
               for score, name, path, size, mtime in best]
    return {"matches": matches, "total_found": total}

"""Resources: the file a resource id names, and the id a file is cited under.

Ids are reserved (``flows.addresses.ids.reserve_ids``) when a file is first named: by its path inside the roots, or
by the bare name its id would have once the file index knows it (``lecture_01`` for ``lecture_01.mp4``). A file the
index does not know yet is indexed on demand (one upsert) so it has an entry to hang its id on.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from itertools import islice
from typing import Any, Iterable

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from flows.addresses.ids import candidates, reserve_ids
from flows.citations.maps import CITABLE
from flows.citations.model import modality_of
from flows.documents.paths import DocumentPaths
from store import citations as store
from store.entries import T as E
from store.entries import make_row, refresh_ancestor_sizes, split_extension, types_for, upsert_entries
from store.errors import CitationError, DocumentError

log = logging.getLogger(__name__)


class Resources:
    """Resource ids and the rows they name, over one store, confined to ``paths``' roots."""

    def __init__(self, engine: Engine, paths: DocumentPaths) -> None:
        self.engine, self.paths = engine, paths

    def resolve_path(self, path: str) -> str:
        """``path`` (absolute, or as the document tools show it) as an absolute path inside the roots, or
        CitationError INVALID_PATH saying why not."""
        try:
            return self.paths.resolve(path, field="path")
        except DocumentError as exc:
            raise CitationError("INVALID_PATH", exc.message, field="path", details={"path": path}) from None

    def id_for(self, path: str) -> str:
        """The resource id of the file at ``path`` (absolute, or as the document tools show it), reserving one
        (from the file name, made unique) if it has none. CitationError INVALID_PATH / UNSUPPORTED_FORMAT."""
        target = self.resolve_path(path)
        try:
            st = os.stat(target)
        except OSError:
            raise CitationError("INVALID_PATH", f"{path}: no such file inside the roots", field="path") from None
        if not stat.S_ISREG(st.st_mode):
            raise CitationError("INVALID_PATH", f"{path} is not a file; only files can be cited", field="path")
        modality = modality_of(os.path.basename(target), types_for(split_extension(os.path.basename(target)))[0])
        if modality is None:
            raise CitationError("UNSUPPORTED_FORMAT", f"{path}: this kind of file cannot be cited; what can: "
                                f"{CITABLE}", field="path")
        entry_id = self._entry_for(target, st)
        reserved = reserve_ids(self.engine, [(entry_id, target, modality)]).get(entry_id)
        if reserved is None:  # its entry went meanwhile (the file was deleted or moved as we looked)
            raise CitationError("INVALID_PATH", f"{path} was removed from the index while it was being cited; "
                                "try again", field="path")
        return reserved

    def ids_for_entries(self, entry_ids: Iterable[int]) -> dict[int, str]:
        """entry id -> resource id, reserving ids for entries that have none (a search hit's address)."""
        wanted = sorted({int(e) for e in entry_ids})
        if not wanted:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(select(E.c.id, E.c.path, E.c.name, E.c.media_type)
                                .where(E.c.id.in_(wanted), E.c.kind == "file")).all()
        items = [(r.id, r.path, m) for r in rows if (m := modality_of(r.name, r.media_type)) is not None]
        return reserve_ids(self.engine, items) if items else {}

    def row(self, resource_id: str) -> dict[str, Any]:
        """The ``resource_maps`` row of ``resource_id`` (an id reserved on first use when it names a file: see
        :meth:`_first_use`), or CitationError RESOURCE_NOT_FOUND listing some that exist."""
        if not isinstance(resource_id, str) or not resource_id:
            raise self._not_found(str(resource_id))
        with self.engine.connect() as conn:
            row = store.resource(conn, resource_id)
        if row is None:
            first = self._first_use(resource_id)
            if first is not None:
                with self.engine.connect() as conn:
                    row = store.resource(conn, first)
        if row is None or row["path"] is None or not self.paths.roots.allows(row["path"]):
            raise self._not_found(resource_id)  # a file outside the caller's roots reads as no resource
        return row

    def target(self, target: str) -> str:
        """A resource id given as itself or as the path of its file."""
        with self.engine.connect() as conn:
            row = store.resource(conn, target) if "/" not in target else None
        return row["resource_id"] if row is not None else self.id_for(target)

    def _entry_for(self, target: str, st: os.stat_result) -> int:
        """The entry id of the file at ``target``, indexing it now (one upsert) when the index does not know it."""
        with self.engine.connect() as conn:
            found = conn.execute(select(E.c.id).where(E.c.path == target, E.c.kind == "file")).scalar()
        if found is not None:
            return int(found)
        with self.engine.begin() as conn:
            upsert_entries(conn, [make_row(target, kind="file", size=st.st_size, mtime=st.st_mtime,
                                           ctime=st.st_ctime, inode=st.st_ino, scan_id=None,
                                           indexed_at=time.time())])
            refresh_ancestor_sizes(conn, path=target)  # its folders' sizes count it, in the same transaction
            found = conn.execute(select(E.c.id).where(E.c.path == target)).scalar_one()
        log.info("indexed %s on demand (entry %d) to cite it", target, found)
        return int(found)

    def _not_found(self, resource_id: str) -> CitationError:
        with self.engine.connect() as conn:
            some, total = store.resource_ids(conn, limit=3)
        if not total:
            listing = "there are no resources yet"
        else:
            listing = (f"listResources lists the {total} resource{'s' if total != 1 else ''} "
                       f"(e.g. {', '.join(some)})")
        listing += ("; a file gets its id when named by its path (getStructure, map-build or map-put with "
                    "'folder/name.ext'), or by its bare name once the index knows it")
        return CitationError("RESOURCE_NOT_FOUND", f"no resource {resource_id!r}; {listing}", field="resource_id",
                             details={"resource_id": resource_id})

    def _is_file(self, path: str) -> bool:
        try:
            return os.path.isfile(self.paths.resolve(path, field="resource_id"))
        except DocumentError:
            return False

    def _first_use(self, resource_id: str) -> str | None:
        """The resource id a caller used before any was reserved: a path inside the roots (``lib/lecture_01.mp4``)
        reserves that file's id; a bare name (``lecture_01``) the id of the one indexed file it is the name of (its
        id would be that name: ``lecture_01.mp4``, or ``report_pdf`` for ``report.pdf``). Several files of that
        name: RESOURCE_NOT_FOUND naming them, so the caller picks one by path. None when nothing fits."""
        if "/" in resource_id or self._is_file(resource_id):
            return self.id_for(resource_id)
        stem = resource_id
        pattern = stem.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = [E.c.name == stem, E.c.name.like(pattern + ".%", escape="\\")]
        if "_" in stem:  # report_pdf -> report.pdf
            head, _, ext = stem.rpartition("_")
            like.append(E.c.name == f"{head}.{ext}")
        with self.engine.connect() as conn:
            rows = conn.execute(select(E.c.id, E.c.path, E.c.name, E.c.media_type)
                                .where(E.c.kind == "file", or_(*like)).limit(50)).all()
        fits = [r for r in rows if self.paths.root_of(r.path) is not None
                and modality_of(r.name, r.media_type) is not None
                and resource_id in islice(candidates(r.path), 2)]
        if len(fits) > 1:
            shown = ", ".join(self.paths.display(r.path) for r in fits[:5])
            raise CitationError("RESOURCE_NOT_FOUND", f"no resource {resource_id!r} yet, and {len(fits)} files could "
                                f"be it ({shown}); name one by its path (getStructure or map-build with the path) "
                                "to give it an id", field="resource_id", details={"resource_id": resource_id})
        if not fits:
            return None
        reserved = self.ids_for_entries([fits[0].id]).get(fits[0].id)
        return reserved if reserved == resource_id else None

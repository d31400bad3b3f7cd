"""The citation tools' logic (reference 003), in plain functions the MCP tools, the CLI and tests call.

A resource is a file inside the roots under a readable id (``flows.addresses.ids``), kept in ``resource_maps`` with
what its source was when last looked at (size, mtime, content hash, its facts: pages, lines, duration, size) and its
map when one was built or supplied (nodes in ``map_nodes``; ``store.citations``).

Every call looks at the file first (:meth:`CitationService._look`): unchanged when its size and mtime are the
recorded ones (no reading at all: the hot path of a virtual resolve is two indexed queries and two ``stat`` calls);
else its content hash decides. A file whose bytes did not change only gets its new mtime recorded. A file that
changed: a built map is rebuilt (the strategy it was built with) when a map is needed; an agent-supplied map is
marked stale (getStructure says so in ``metadata``; getNode and resolve refuse it with SOURCE_CHANGED unless
``allow_stale``, until it is supplied again); outputs resolved from the old version lose their artifact rows (the
cache sweep removes their files). Heavy work (hashing, probing, building, extracting) runs with no transaction
open; the writes that follow are short.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine

from flows.citations.maps import (BUILT, CITABLE, build_source, ensure_text, facts_of, flatten, hash_of, iso,
                                  location_json, metadata_of, needs_extraction, node_dict, probe_source,
                                  save_built, text_lines_for, tree, window_of)
from flows.addresses.model import MODALITY_SCHEME, Address
from flows.citations.model import STRATEGIES, Location, Node, ResourceMap, SourceFacts, modality_of
from flows.documents.formats import format_of
from flows.documents.paths import TOP, DocumentPaths
from flows.roots import Roots
from store import citations as store
from store.entries import T as E
from store.entries import make_row, types_for, upsert_entries, split_extension
from store.errors import CitationError, DocumentError

log = logging.getLogger(__name__)

@dataclass
class Source:
    """A resource as looked at now: its row (``store.citations.resource``), its file, facts and content hash."""

    row: dict[str, Any]
    path: str
    size: int
    mtime: float
    source_hash: str | None = None
    facts: SourceFacts | None = None

    @property
    def resource_id(self) -> str:
        return self.row["resource_id"]

    @property
    def modality(self) -> str:
        return self.row["kind"]

    @property
    def stale(self) -> bool:
        """An agent map whose file changed since it was supplied (a built one is rebuilt instead)."""
        return bool(self.row["stale"]) and self.row["origin"] == "agent"

    @property
    def origin(self) -> str:
        return self.row["origin"]


class CitationService:
    """Resources, maps and resolution over one store, confined to ``roots``; outputs go to ``<data_dir>/cache``."""

    def __init__(self, engine: Engine, roots: Roots, data_dir: str | Path, *, allow_symlinks: bool = False) -> None:
        self.engine, self.roots, self.data_dir, self.allow_symlinks = engine, roots, Path(data_dir), allow_symlinks
        self.paths = DocumentPaths(roots, allow_symlinks)

    # --- the reference's four tools ---------------------------------------------------------------------------------

    def list_resources(self, *, path: str | None = None, limit: int = 1000, offset: int = 0) -> dict[str, Any]:
        """``{"resources": [ids sorted], "total": n}`` (+ ``"next_offset"`` when more): every resource with a map or
        a reserved id whose file lies inside the roots (under ``path`` when given)."""
        if path:
            target = self._resolve_path(path)
            under = list(self.roots.paths) if target == TOP else [target]
        else:
            under = list(self.roots.paths)
        limit, offset = max(0, int(limit)), max(0, int(offset))
        with self.engine.connect() as conn:
            ids, total = store.list_resource_ids(conn, under, limit=limit, offset=offset)
        out: dict[str, Any] = {"resources": ids, "total": total}
        if offset + len(ids) < total:
            out["next_offset"] = offset + len(ids)
        return out

    def resource_id_for(self, path: str) -> str:
        """The resource id of the file at ``path`` (absolute, or as the document tools show it), reserving one
        (from the file name, made unique) if it has none. CitationError INVALID_PATH / UNSUPPORTED_FORMAT."""
        from flows.addresses.ids import reserve_ids

        target = self._resolve_path(path)
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

    def resource_ids_for_entries(self, entry_ids: Iterable[int]) -> dict[int, str]:
        """entry id -> resource id, reserving ids for entries that have none (a search hit's address)."""
        from flows.addresses.ids import reserve_ids

        wanted = sorted({int(e) for e in entry_ids})
        if not wanted:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(select(E.c.id, E.c.path, E.c.name, E.c.media_type)
                                .where(E.c.id.in_(wanted), E.c.kind == "file")).all()
        items = [(r.id, r.path, m) for r in rows if (m := modality_of(r.name, r.media_type)) is not None]
        return reserve_ids(self.engine, items) if items else {}

    def address_for(self, entry_id: int, *, page: int | None = None, page_end: int | None = None,
                    line_start: int | None = None, line_end: int | None = None) -> str:
        """A search hit's address: ``doc://ID#pages=3-4`` for paged documents, ``text://ID#lines=10-20`` else."""
        with self.engine.connect() as conn:
            row = conn.execute(select(E.c.name, E.c.media_type).where(E.c.id == entry_id)).first()
        if row is None:
            raise CitationError("RESOURCE_NOT_FOUND", f"no file of entry {entry_id} in the index")
        modality = modality_of(row.name, row.media_type) or "text"
        resource_id = self.resource_ids_for_entries([entry_id])[entry_id]
        if modality == "document":
            pages = ((page, max(page, page_end or page)),) if page else None
            return Address("doc", resource_id, pages=pages).format()
        lines = (line_start, max(line_start, line_end or line_start)) if line_start else None
        return Address(MODALITY_SCHEME.get(modality, "text"), resource_id,
                       lines=lines if modality == "text" else None).format()

    def get_structure(self, resource_id: str) -> ResourceMap:
        """The whole map; built on first use (strategy auto) and rebuilt when an auto map's source changed; an agent
        map whose source changed comes back with ``metadata["stale"] = True``. RESOURCE_NOT_FOUND."""
        source = self._look(resource_id, need_map=True)
        with self.engine.connect() as conn:
            rows = store.load_nodes(conn, source.row["id"])
        return self._resource_map(source, tree(rows, source.resource_id))

    def get_node(self, resource_id: str, node_id: str) -> dict[str, Any]:
        """One node: ``{id, title, type, location, summary?, children: [{"id": ...}]}`` (+ ``stale: true`` when the
        file changed since its agent map was supplied). NODE_NOT_FOUND naming a few ids that exist."""
        source = self._look(resource_id, need_map=True)
        row = self._node(source, node_id)
        out = node_dict(row, source.resource_id)
        out["children"] = [{"id": c} for c in row["children"]]
        if source.stale:  # shown, as getStructure shows the map; resolve refuses it until supplied again
            out["stale"] = True
        return out

    def resolve(self, resource_id: str | None = None, node_id: str | None = None, *, address: str | None = None,
                virtual: bool = False, exact: bool = False, allow_stale: bool = False) -> dict[str, Any]:
        """Resolve a node (``resource_id`` + ``node_id``) or an ``address``. Returns ``{output_path (absolute path
        of the cached output, None when virtual), modality, address, node, resource_id, source_path, source_hash,
        stale, cache_path (relative "cache/ab/cd/<hash>.<ext>" or None), mime_type, size_bytes, cached (reused
        from the cache)}``. A node of an address is the map's node with exactly that location if any, else a node
        ``{"id": "address", "title": None, "type": "address", "location": ...}``."""
        from flows.citations.address import check_address, parse_address

        if address is not None:
            parsed = parse_address(address)
            if resource_id and resource_id != parsed.resource_id:
                raise CitationError("INVALID_ADDRESS", f"the address names resource {parsed.resource_id!r} but "
                                    f"resource_id is {resource_id!r}; give one of them, or the same in both",
                                    field="address")
            if node_id:
                raise CitationError("INVALID_ADDRESS", "give either node_id (with resource_id) or an address, not "
                                    "both", field="address")
            # an address is checked against the file as it is now, so a stale agent map does not stand in its way
            # (the map is only used to name the node when it is current)
            source = self._look(parsed.resource_id, need_map=False, need_facts=True)
            check_address(parsed, source.facts)
            node = self._node_at(source, parsed)
        else:
            if not resource_id or not node_id:
                raise CitationError("INVALID_ADDRESS", "resolve takes resource_id and node_id (a node of the map "
                                    "getStructure shows), or an address such as doc://ID#pages=3-5",
                                    field="node_id" if resource_id else "resource_id")
            source = self._look(resource_id, need_map=True, need_facts=not virtual)
            self._refuse_stale(source, allow_stale)
            row = self._node(source, node_id, children=False)
            node = node_dict(row, source.resource_id)
            parsed = Location(**json.loads(row["location_json"])).to_address(source.resource_id)
            if not virtual:
                check_address(parsed, source.facts)
        out: dict[str, Any] = {"output_path": None, "modality": source.modality, "address": parsed.format(),
                               "node": node, "resource_id": source.resource_id, "source_path": source.path,
                               "source_hash": source.source_hash,
                               "stale": source.stale and address is None, "cache_path": None,
                               "mime_type": None, "size_bytes": None, "cached": False}
        if virtual:
            return out
        return {**out, **self._extract(source, parsed, exact=exact)}

    # --- maps built or supplied ---------------------------------------------------------------------------------------

    def build_map(self, target: str, *, strategy: str = "auto", window: float | None = None) -> ResourceMap:
        """Build (or rebuild) the map of ``target`` (a resource id or a path) locally and store it."""
        if strategy not in STRATEGIES:
            raise CitationError("UNSUPPORTED_FORMAT", f"unknown strategy {strategy!r}; strategies: "
                                f"{', '.join(STRATEGIES)}", field="strategy")
        resource_id = self._target(target)
        source = self._look(resource_id, need_map=False)
        self._build(source, strategy=strategy, window=window)
        return self.get_structure(resource_id)

    def put_map(self, target: str, nodes: list[dict[str, Any]], *, title: str | None = None) -> ResourceMap:
        """Store an agent-supplied map of ``target`` (a resource id or a path), replacing any map it had, after
        checking every node against the file (CitationError INVALID_MAP listing each problem with its node)."""
        from flows.citations.validate import validate_nodes

        resource_id = self._target(target)
        source = self._look(resource_id, need_map=False, need_facts=True, fresh=True)
        checked = validate_nodes(nodes, source.facts)
        name = title or source.row.get("title") or os.path.basename(source.path)
        store.save_map(self.engine, source.row["id"], kind=source.modality, origin="agent", title=name,
                       strategy=None, source_size=source.size, source_mtime=source.mtime,
                       source_hash=source.source_hash, metadata=metadata_of(source.facts), nodes=flatten(checked))
        with self.engine.begin() as conn:
            store.drop_old_extracts(conn, source.row["entry_id"], source.source_hash)
        log.info("map of %s supplied: %d nodes", resource_id, sum(1 for n in checked for _ in n.walk()))
        return self.get_structure(resource_id)

    def delete_map(self, resource_id: str) -> bool:
        """Forget the map of ``resource_id`` (its id stays reserved); True if there was one."""
        row = self._row(resource_id)
        return store.delete_map(self.engine, row["id"])

    # --- internals ----------------------------------------------------------------------------------------------------

    def _resolve_path(self, path: str) -> str:
        try:
            return self.paths.resolve(path, field="path")
        except DocumentError as exc:
            raise CitationError("INVALID_PATH", exc.message, field="path", details={"path": path}) from None

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

    def _row(self, resource_id: str) -> dict[str, Any]:
        if not isinstance(resource_id, str) or not resource_id:
            raise self._not_found(str(resource_id))
        with self.engine.connect() as conn:
            row = store.resource(conn, resource_id)
        if row is None:
            first = self._first_use(resource_id)
            if first is not None:
                with self.engine.connect() as conn:
                    row = store.resource(conn, first)
        if row is None or row["path"] is None:
            raise self._not_found(resource_id)
        return row

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
        from flows.addresses.ids import candidates

        if "/" in resource_id or self._is_file(resource_id):
            return self.resource_id_for(resource_id)
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
        reserved = self.resource_ids_for_entries([fits[0].id]).get(fits[0].id)
        return reserved if reserved == resource_id else None

    def _target(self, target: str) -> str:
        """A resource id given as itself or as the path of its file."""
        with self.engine.connect() as conn:
            row = store.resource(conn, target) if "/" not in target else None
        return row["resource_id"] if row is not None else self.resource_id_for(target)

    def _look(self, resource_id: str, *, need_map: bool, need_facts: bool = False, fresh: bool = False) -> Source:
        """The resource as its file is now (see the module docstring): staleness noticed and acted upon; a map
        built (auto) when ``need_map`` and it has none (or rebuilt when marked for it); facts filled when asked for; the
        content hash always known. ``fresh``: the
        caller replaces the map, so a changed file is only recorded."""
        row = self._row(resource_id)
        path = row["path"]
        try:
            confined = self.paths.resolve(path, field="resource_id")
        except DocumentError:
            raise CitationError("INVALID_PATH", f"resource {resource_id!r}: its file {path} is outside the roots "
                                "this server may read", field="resource_id") from None
        try:
            st = os.stat(confined)
        except OSError:
            raise CitationError("RESOURCE_NOT_FOUND", f"resource {resource_id!r}: its file {path} is gone",
                                field="resource_id") from None
        if not stat.S_ISREG(st.st_mode):
            raise CitationError("INVALID_PATH", f"resource {resource_id!r}: {path} is not a file anymore",
                                field="resource_id")
        source = Source(row=row, path=confined, size=st.st_size, mtime=st.st_mtime, source_hash=row["source_hash"],
                        facts=facts_of(row["kind"], row["metadata_json"]))
        unchanged = (row["source_size"] == st.st_size and row["source_mtime"] == st.st_mtime
                     and row["source_hash"] is not None)
        if not unchanged:
            self._changed(source, need_map=need_map, fresh=fresh)
        if need_map and (source.origin == "none" or (source.origin in BUILT and source.row["stale"])):
            self._build(source, strategy=source.row["strategy"] or "auto", window=window_of(row["metadata_json"]),
                        rebuild=source.origin != "none")
        if need_facts and source.facts is None:
            source.facts = probe_source(self.engine, row["entry_id"], source.path, source.modality, source.size,
                                        source.mtime)
            with self.engine.begin() as conn:
                store.update_source(conn, row["id"], size=source.size, mtime=source.mtime,
                                    metadata={**json.loads(row["metadata_json"] or "{}"),
                                              **metadata_of(source.facts)})
        return source

    def _changed(self, source: Source, *, need_map: bool, fresh: bool) -> None:
        """The file's size or mtime is not the recorded one (or nothing is recorded): its content hash decides. A
        built map whose file changed is rebuilt now when a map is needed, else marked for a rebuild on its next use
        (``stale`` on a built map); an agent map is marked stale."""
        row = source.row
        digest = hash_of(source.path)
        if digest == row["source_hash"]:  # touched, same bytes: only the new state is recorded
            with self.engine.begin() as conn:
                store.update_source(conn, row["id"], size=source.size, mtime=source.mtime)
            source.row = {**row, "source_size": source.size, "source_mtime": source.mtime}
            return
        source.source_hash = digest
        origin = row["origin"]
        if origin in BUILT and need_map and not fresh:
            log.info("%s changed since its map was built: rebuilding it", row["resource_id"])
            self._build(source, strategy=row["strategy"] or "auto", window=window_of(row["metadata_json"]),
                        rebuild=True)
            return
        source.facts = probe_source(self.engine, row["entry_id"], source.path, source.modality, source.size,
                                    source.mtime)
        stale = origin != "none" and not fresh
        with self.engine.begin() as conn:
            store.update_source(conn, row["id"], size=source.size, mtime=source.mtime, source_hash=digest,
                                metadata=metadata_of(source.facts, window_of(row["metadata_json"])),
                                stale=stale if not fresh else None)
            if row["entry_id"] is not None:
                store.drop_old_extracts(conn, row["entry_id"], digest)
        if stale and origin == "agent":
            log.info("%s changed since its map was supplied: the map is stale until supplied again",
                     row["resource_id"])
        source.row = {**row, "source_size": source.size, "source_mtime": source.mtime, "source_hash": digest,
                      "stale": 1 if stale else row["stale"]}

    def _build(self, source: Source, *, strategy: str, window: float | None, rebuild: bool = False) -> None:
        """Build the map and store it. A ``rebuild`` (the file changed) whose strategy no longer applies (the new
        version has no outline) falls back to auto."""
        row = source.row
        if source.source_hash is None:
            source.source_hash = hash_of(source.path)
        try:
            built = build_source(self.engine, row["entry_id"], source.path, source.modality, source.size,
                                 source.mtime, strategy=strategy, window=window)
        except CitationError as exc:
            if not rebuild or strategy == "auto" or exc.code != "UNSUPPORTED_FORMAT":
                raise
            log.info("%s: rebuilding with %s failed (%s); built with auto instead", row["resource_id"], strategy,
                     exc.message)
            strategy = "auto"
            built = build_source(self.engine, row["entry_id"], source.path, source.modality, source.size,
                                 source.mtime, strategy=strategy, window=window)
        created = save_built(self.engine, row["id"], built, strategy=strategy, window=window, size=source.size,
                             mtime=source.mtime, source_hash=source.source_hash, entry_id=row["entry_id"])
        log.info("map of %s built (%s): %d top-level nodes", row["resource_id"], built.origin, len(built.nodes))
        source.facts = built.facts
        source.row = {**row, "origin": built.origin, "title": built.title, "strategy": strategy, "stale": 0,
                      "source_size": source.size, "source_mtime": source.mtime,
                      "source_hash": source.source_hash, "created_at": created, "updated_at": created,
                      "metadata_json": json.dumps(metadata_of(built.facts, window), default=str)}

    def _refuse_stale(self, source: Source, allow_stale: bool) -> None:
        if source.stale and not allow_stale:
            raise CitationError("SOURCE_CHANGED", f"{source.resource_id} ({self.paths.display(source.path)}) "
                                f"changed since its map was supplied at {iso(source.row['created_at'])}; supply "
                                "it again with map-put, or pass allow_stale to resolve (getStructure shows the "
                                "stale map)", field="resource_id",
                                details={"resource_id": source.resource_id, "source_hash": source.source_hash})

    def _node(self, source: Source, node_id: str, *, children: bool = True) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = store.node(conn, source.row["id"], node_id, children=children) if isinstance(node_id, str) else None
            if row is not None:
                return row
            some, total = store.node_ids(conn, source.row["id"], limit=10)
        listing = (f"its {total} node{'s' if total != 1 else ''} include {', '.join(some)}"
                   + (" (getStructure shows them all)" if total > len(some) else "")) if total else "its map is empty"
        raise CitationError("NODE_NOT_FOUND", f"Node {node_id!r} not found in {source.resource_id}; {listing}",
                            field="node_id", details={"resource_id": source.resource_id, "node_id": node_id,
                                                      "some_node_ids": some})

    def _node_at(self, source: Source, address: Address) -> dict[str, Any]:
        location = Location.from_address(address)
        if source.origin != "none" and not source.row["stale"] and not address.whole:
            with self.engine.connect() as conn:
                row = store.node_at(conn, source.row["id"], location_json(location))
            if row is not None:
                return node_dict(row, source.resource_id)
        shown = location.dump()
        shown["virtual_address"] = address.format()
        return {"id": "address", "title": None, "type": "address", "location": shown}

    def _extract(self, source: Source, address: Address, *, exact: bool) -> dict[str, Any]:
        from flows.citations.extract import extract

        fmt = format_of(os.path.basename(source.path))
        text_lines = (text_lines_for(self.engine, source.row["entry_id"])
                      if needs_extraction(source.modality, fmt) else None)
        if text_lines is not None:  # the lines come from the current extraction of the document
            ensure_text(self.engine, source.row["entry_id"], source.path, source.size, source.mtime)
        for _attempt in range(3):
            done = extract(self.data_dir, source.path, source.source_hash, address, source.facts, exact=exact,
                           text_lines=text_lines)
            store.record_extract(self.engine, source.row["entry_id"], mime_type=done.mime_type,
                                 cache_path=done.cache_path, source_hash=source.source_hash,
                                 address=address.format(), exact=exact)
            # the cache sweep removes files no row points at; one that ran between the write and the row took it
            if done.path.exists():
                break
            log.info("%s was swept before its row was written; extracting it again", done.cache_path)
        return {"output_path": str(done.path), "cache_path": done.cache_path, "mime_type": done.mime_type,
                "size_bytes": done.size_bytes, "cached": done.cached}

    def _resource_map(self, source: Source, nodes: list[Node]) -> ResourceMap:
        row = source.row
        facts = source.facts or facts_of(row["kind"], row["metadata_json"])
        metadata: dict[str, Any] = {"source_hash": source.source_hash, "source_size": source.size,
                                    "source_mtime": source.mtime, "origin": row["origin"],
                                    "strategy": row["strategy"], "stale": source.stale}
        window = window_of(row["metadata_json"])
        if window is not None:
            metadata["window"] = window
        if facts is not None:
            metadata.update(facts.as_dict())
        if source.stale:
            metadata["note"] = (f"the file changed since this map was supplied at {iso(row['created_at'])}: its "
                                "nodes may not fit it anymore; supply the map again with map-put")
        return ResourceMap(resource_id=source.resource_id, type=source.modality,
                           title=row["title"] or os.path.basename(source.path), source_path=source.path,
                           nodes=nodes, metadata=metadata, created_at=iso(row["created_at"]))

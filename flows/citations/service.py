"""The citation tools' logic (reference 003), in plain functions the MCP tools, the CLI and tests call.

A resource is a file inside the roots under a readable id (``flows.addresses.ids``; ``flows.citations.resources``
finds the file an id names and reserves ids on first use), kept in ``resource_maps`` with what its source was when
last looked at (size, mtime, content hash, its facts: pages, lines, duration, size) and its map when one was built or
supplied (nodes in ``map_nodes``; ``store.citations``).

Every call looks at the file first (``flows.citations.staleness.look``: unchanged files cost two ``stat`` calls;
a changed file's built map is rebuilt, an agent map marked stale), then answers from the map, or cuts the cited part
out of the file into the content cache (``flows.citations.extract``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import select
from sqlalchemy.engine import Engine

from flows.addresses.model import MODALITY_SCHEME, Address
from flows.citations.address import check_address, parse_address
from flows.citations.extract import extract
from flows.citations.maps import (ensure_text, facts_of, flatten, iso, location_json, metadata_of, needs_extraction,
                                  node_dict, text_lines_for, tree, window_of)
from flows.citations.model import STRATEGIES, Location, Node, ResourceMap, modality_of
from flows.citations.resources import Resources
from flows.citations.staleness import Source, build, look, refuse_stale
from flows.citations.validate import validate_nodes
from flows.documents.formats import format_of
from flows.documents.paths import TOP, DocumentPaths
from flows.core.roots import Roots
from store import citations as store
from store.entries import T as E
from store.errors import CitationError

log = logging.getLogger(__name__)


class CitationService:
    """Resources, maps and resolution over one store, confined to ``roots``; outputs go to ``<data_dir>/cache``."""

    def __init__(self, engine: Engine, roots: Roots, data_dir: str | Path, *, allow_symlinks: bool = False) -> None:
        self.engine, self.roots, self.data_dir, self.allow_symlinks = engine, roots, Path(data_dir), allow_symlinks
        self.paths = DocumentPaths(roots, allow_symlinks)
        self.resources = Resources(engine, self.paths)

    # --- the reference's four tools ---------------------------------------------------------------------------------

    def list_resources(self, *, path: str | None = None, limit: int = 1000, offset: int = 0) -> dict[str, Any]:
        """``{"resources": [ids sorted], "total": n}`` (+ ``"next_offset"`` when more): every resource with a map or
        a reserved id whose file lies inside the roots (under ``path`` when given)."""
        if path:
            target = self.resources.resolve_path(path)
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
        return self.resources.id_for(path)

    def resource_ids_for_entries(self, entry_ids: Iterable[int]) -> dict[int, str]:
        """entry id -> resource id, reserving ids for entries that have none (a search hit's address)."""
        return self.resources.ids_for_entries(entry_ids)

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
            check_address(parsed, source.needed_facts)
            node = self._node_at(source, parsed)
        else:
            if not resource_id or not node_id:
                raise CitationError("INVALID_ADDRESS", "resolve takes resource_id and node_id (a node of the map "
                                    "getStructure shows), or an address such as doc://ID#pages=3-5",
                                    field="node_id" if resource_id else "resource_id")
            source = self._look(resource_id, need_map=True, need_facts=not virtual)
            refuse_stale(source, self.paths, allow_stale)
            row = self._node(source, node_id, children=False)
            node = node_dict(row, source.resource_id)
            parsed = Location(**json.loads(row["location_json"])).to_address(source.resource_id)
            if not virtual:
                check_address(parsed, source.needed_facts)
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
        resource_id = self.resources.target(target)
        source = self._look(resource_id, need_map=False)
        build(self.engine, source, strategy=strategy, window=window)
        return self.get_structure(resource_id)

    def put_map(self, target: str, nodes: list[dict[str, Any]], *, title: str | None = None) -> ResourceMap:
        """Store an agent-supplied map of ``target`` (a resource id or a path), replacing any map it had, after
        checking every node against the file (CitationError INVALID_MAP listing each problem with its node)."""
        resource_id = self.resources.target(target)
        source = self._look(resource_id, need_map=False, need_facts=True, fresh=True)
        checked = validate_nodes(nodes, source.needed_facts)
        name = title or source.row.get("title") or os.path.basename(source.path)
        store.save_map(self.engine, source.row["id"], kind=source.modality, origin="agent", title=name,
                       strategy=None, source_size=source.size, source_mtime=source.mtime,
                       source_hash=source.content_hash, metadata=metadata_of(source.needed_facts),
                       nodes=flatten(checked))
        with self.engine.begin() as conn:
            store.drop_old_extracts(conn, source.row["entry_id"], source.content_hash)
        log.info("map of %s supplied: %d nodes", resource_id, sum(1 for n in checked for _ in n.walk()))
        return self.get_structure(resource_id)

    def delete_map(self, resource_id: str) -> bool:
        """Forget the map of ``resource_id`` (its id stays reserved); True if there was one."""
        row = self.resources.row(resource_id)
        return store.delete_map(self.engine, row["id"])

    # --- internals ----------------------------------------------------------------------------------------------------

    def _look(self, resource_id: str, *, need_map: bool, need_facts: bool = False, fresh: bool = False) -> Source:
        """The resource as its file is now (``flows.citations.staleness.look``)."""
        return look(self.engine, self.paths, self.resources.row(resource_id), resource_id, need_map=need_map,
                    need_facts=need_facts, fresh=fresh)

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
        fmt = format_of(os.path.basename(source.path))
        text_lines = (text_lines_for(self.engine, source.row["entry_id"])
                      if needs_extraction(source.modality, fmt) else None)
        if text_lines is not None:  # the lines come from the current extraction of the document
            ensure_text(self.engine, source.row["entry_id"], source.path, source.size, source.mtime)
        for _attempt in range(3):
            done = extract(self.data_dir, source.path, source.content_hash, address, source.needed_facts,
                           exact=exact, text_lines=text_lines)
            store.record_extract(self.engine, source.row["entry_id"], mime_type=done.mime_type,
                                 cache_path=done.cache_path, source_hash=source.content_hash,
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

"""The citation tools' logic (reference 003), in plain functions the MCP tools, the CLI and tests call.

INTERFACE STUB written by the lead: helper D fills it in; the signatures and result shapes are the contract the
tools (helper E) and the benchmark (helper F) code against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from sqlalchemy.engine import Engine

from flows.citations.model import ResourceMap
from flows.roots import Roots


class CitationService:
    """Resources, maps and resolution over one store, confined to ``roots``; outputs go to ``<data_dir>/cache``."""

    def __init__(self, engine: Engine, roots: Roots, data_dir: str | Path, *, allow_symlinks: bool = False) -> None:
        self.engine, self.roots, self.data_dir, self.allow_symlinks = engine, roots, Path(data_dir), allow_symlinks

    def list_resources(self, *, path: str | None = None, limit: int = 1000, offset: int = 0) -> dict[str, Any]:
        """``{"resources": [ids sorted], "total": n}`` (+ ``"next_offset"`` when more): every resource with a map or
        a reserved id whose file lies inside the roots (under ``path`` when given)."""
        raise NotImplementedError

    def resource_id_for(self, path: str) -> str:
        """The resource id of the file at ``path`` (absolute, or as the document tools show it), reserving one
        (from the file name, made unique) if it has none. CitationError INVALID_PATH / UNSUPPORTED_FORMAT."""
        raise NotImplementedError

    def resource_ids_for_entries(self, entry_ids: Iterable[int]) -> dict[int, str]:
        """entry id -> resource id, reserving ids for entries that have none (a search hit's address)."""
        raise NotImplementedError

    def address_for(self, entry_id: int, *, page: int | None = None, page_end: int | None = None,
                    line_start: int | None = None, line_end: int | None = None) -> str:
        """A search hit's address: ``doc://ID#pages=3-4`` for paged documents, ``text://ID#lines=10-20`` else."""
        raise NotImplementedError

    def get_structure(self, resource_id: str) -> ResourceMap:
        """The whole map; built on first use (strategy auto) and rebuilt when an auto map's source changed; an agent
        map whose source changed comes back with ``metadata["stale"] = True``. RESOURCE_NOT_FOUND."""
        raise NotImplementedError

    def get_node(self, resource_id: str, node_id: str) -> dict[str, Any]:
        """One node: ``{id, title, type, location, summary?, children: [{"id": ...}]}``. NODE_NOT_FOUND naming a
        few ids that exist."""
        raise NotImplementedError

    def resolve(self, resource_id: str | None = None, node_id: str | None = None, *, address: str | None = None,
                virtual: bool = False, exact: bool = False, allow_stale: bool = False) -> dict[str, Any]:
        """Resolve a node (``resource_id`` + ``node_id``) or an ``address``. Returns ``{output_path (absolute path
        of the cached output, None when virtual), modality, address, node, resource_id, source_path, source_hash,
        stale, cache_path (relative "cache/ab/cd/<hash>.<ext>" or None), mime_type, size_bytes, cached (reused
        from the cache)}``. A node of an address is the map's node with exactly that location if any, else a node
        ``{"id": "address", "title": None, "type": "address", "location": ...}``."""
        raise NotImplementedError

    def build_map(self, target: str, *, strategy: str = "auto", window: float | None = None) -> ResourceMap:
        """Build (or rebuild) the map of ``target`` (a resource id or a path) locally and store it."""
        raise NotImplementedError

    def put_map(self, target: str, nodes: list[dict[str, Any]], *, title: str | None = None) -> ResourceMap:
        """Store an agent-supplied map of ``target`` (a resource id or a path), replacing any map it had, after
        checking every node against the file (CitationError INVALID_MAP listing each problem with its node)."""
        raise NotImplementedError

    def delete_map(self, resource_id: str) -> bool:
        """Forget the map of ``resource_id`` (its id stays reserved); True if there was one."""
        raise NotImplementedError

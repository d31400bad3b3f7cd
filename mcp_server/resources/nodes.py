"""synthesis://nodes resources: a page of indexed entries, and one entry by path.

``synthesis://nodes`` (and ``synthesis://nodes?limit=N&offset=M``) lists entries inside the configured roots by path,
one page at a time (default 100, at most 1000) with the total and the URI of the next page: the table is never read
whole. ``synthesis://nodes/{+path}`` is one entry in inspect's shape; inspect's ``resourceUri`` reads back here
(flows.index.navigation.node_uri quotes the absolute path, the template hands us the decoded path without its leading
"/"). ``.../metadata`` after an indexed entry's path lists that entry's generated metadata (inspect's
``metadataUri``). Every path goes through the roots: the SDK's own absolute-path / ``..`` rejection is turned off for
this parameter because ours confines the resolved path instead (NUL bytes are still refused by the SDK). A path
outside the roots is refused as such; "not in the index" is said only of a path inside them that exists on disk
(indexing would bring it in), anything else "does not exist".
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from sqlalchemy import func, or_, select
from sqlalchemy.engine import Engine

from flows.index.navigation import inspect_entry, node_uri
from flows.roots import Roots
from mcp_server.resources.common import json_resource
from store import entries as store_entries
from store.entries import T, entry_public, subtree_clause
from store.errors import InvalidInput, NotFound

JSON = "application/json"
BASE = "synthesis://nodes"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
METADATA_SUFFIX = "/metadata"
# our Roots.resolve confines the path (after normalising "..", following symlinks); keep only the NUL-byte check
PATH_SECURITY = ResourceSecurity(reject_path_traversal=False, reject_absolute_paths=False)


_json = json_resource


def _int_param(value: str | None, *, field: str, default: int, low: int, high: int | None = None) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < low or (high is not None and number > high):
        span = f"{low}-{high}" if high is not None else f"{low} or more"
        raise InvalidInput(f"{field} must be a whole number ({span}), got {value!r}", field=field)
    return number


def list_nodes(engine: Engine, roots: Roots, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> dict[str, Any]:
    """One page of the indexed entries inside the roots, by path, with the total and the next page's URI."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}", field="limit")
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}", field="offset")
    inside = or_(*(subtree_clause(root) for root in roots.paths))
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(T).where(inside)).scalar_one()
        rows = conn.execute(select(T).where(inside).order_by(T.c.path).limit(limit).offset(offset)).mappings()
        entries = [{**entry_public(r), "uri": node_uri(r["path"])} for r in rows]
    has_more = offset + len(entries) < total
    result: dict[str, Any] = {
        "total": total, "offset": offset, "limit": limit, "hasMore": has_more, "entries": entries,
        "nextUri": f"{BASE}?limit={limit}&offset={offset + len(entries)}" if has_more else None,
    }
    if has_more:
        result["hint"] = (f"showing {len(entries)} of {total} entries by path; read nextUri for the next page, or use "
                          "the navigate tool to browse one directory at a time")
    return result


def _path_from_uri(path: str) -> str:
    """The template value ("home/user/a b.txt", already percent-decoded by the SDK) as an absolute path."""
    return "/" + path.lstrip("/") if path else "/"


def _explain_missing(engine: Engine, roots: Roots, path: str) -> None:
    """NotFound for a path inside the roots with no entry that is not on disk either: indexing would not help, so
    it "does not exist" (inspect says "not in the index" for one that is on disk)."""
    resolved = roots.resolve(path, field="path", follow_last=False)
    if store_entries.get_entry(engine, path=resolved) is None and not os.path.lexists(resolved):
        raise NotFound(f"{resolved} does not exist (nothing on disk at that path, nothing indexed)", field="path")


def read_node(engine: Engine, roots: Roots, *, path: str) -> dict[str, Any]:
    """One entry (inspect's shape), or its metadata list when the URI ends in /metadata after an indexed entry."""
    absolute = _path_from_uri(path)
    if absolute.endswith(METADATA_SUFFIX) and absolute != METADATA_SUFFIX:
        owner = absolute[: -len(METADATA_SUFFIX)] or "/"
        resolved = roots.resolve(absolute, field="path", follow_last=False)
        if store_entries.get_entry(engine, path=resolved) is None:  # not a file called "metadata": the sub-resource
            _explain_missing(engine, roots, owner)
            entry = inspect_entry(engine, roots, path=owner)
            return {"path": entry["path"], "resourceUri": entry["resourceUri"], "metadataUri": entry["metadataUri"],
                    "metadataCount": entry["metadataCount"], "metadata": entry["metadata"]}
    _explain_missing(engine, roots, absolute)
    return inspect_entry(engine, roots, path=absolute)


def register(mcp: MCPServer, app) -> None:
    @mcp.resource(BASE, name="nodes", mime_type=JSON)
    @_json
    def all_nodes() -> dict[str, Any]:
        """Indexed filesystem entries inside the allowed roots, by path: the first 100, the total and nextUri
        (synthesis://nodes?limit=N&offset=M pages on; navigate browses one directory)."""
        return list_nodes(app.engine, app.roots)

    @mcp.resource(BASE + "{?limit,offset}", name="nodes-page", mime_type=JSON)
    @_json
    def nodes_page(limit: str | None = None, offset: str | None = None) -> dict[str, Any]:
        """One page of indexed entries by path (?limit=1-1000, default 100; ?offset=N)."""
        size = _int_param(limit, field="limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        start = _int_param(offset, field="offset", default=0, low=0)
        return list_nodes(app.engine, app.roots, limit=size, offset=start)

    @mcp.resource(BASE + "/{+path}", name="node", mime_type=JSON, security=PATH_SECURITY)
    @_json
    def one_node(path: str) -> dict[str, Any]:
        """Single filesystem entry by absolute path (synthesis://nodes/home/user/file.txt, percent-encoded), as
        inspect returns it; .../metadata after an entry's path lists its generated metadata."""
        return read_node(app.engine, app.roots, path=path)

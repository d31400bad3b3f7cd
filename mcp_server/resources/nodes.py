"""synthesis://nodes resources: a page of indexed entries, and one entry by path.

``synthesis://nodes`` (and ``synthesis://nodes?limit=N&offset=M``) lists entries inside the configured roots by path,
one page at a time (default 100, at most 1000) with the total and the URI of the next page: the table is never read
whole. ``synthesis://nodes/{+path}`` is one entry in inspect's shape; inspect's ``resourceUri`` reads back here
(flows.index.navigation.node_uri quotes the absolute path, the template hands us the decoded path without its leading
"/"). ``.../metadata`` after an indexed entry's path lists that entry's generated metadata (inspect's
``metadataUri``); ``.../thumbnail`` is its thumbnail as a blob (image/jpeg), or an error saying how to make one
(rerun-classifier, or a plan with a classifier outcome). The ``{+path}`` template is greedy, so
``synthesis://nodes/{+path}/thumbnail`` and ``.../metadata`` are registered before it (the SDK tries templates in
order) and all three go through one dispatcher (:func:`read_node_content`): a path whose last name is "thumbnail" or
"metadata" is the sub-resource only when no entry has that exact path, so a real file named "thumbnail" still
reads as a node (as JSON: mcp_server.resources.common.mixed_resource gives each answer its own MIME type).
Every path goes through the roots: the SDK's own absolute-path / ``..`` rejection is turned off for this parameter
because ours confines the resolved path instead (NUL bytes are still refused by the SDK). A path outside the roots is
refused as such; "not in the index" is said only of a path inside them that exists on disk (indexing would bring it
in), anything else "does not exist".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from sqlalchemy.engine import Engine

from flows.index.navigation import entry_image, inspect_entry, node_uri
from flows.core.roots import Roots
from mcp_server.http import content_base
from mcp_server.resources.common import JSON, Content, int_param, json_content, json_resource, mixed_resource
from store import entries as store_entries
from store.entries import entry_public
from store.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

BASE = "synthesis://nodes"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
METADATA_SUFFIX = "/metadata"
THUMBNAIL_SUFFIX = "/thumbnail"
# our Roots.resolve confines the path (after normalising "..", following symlinks); keep only the NUL-byte check
PATH_SECURITY = ResourceSecurity(reject_path_traversal=False, reject_absolute_paths=False)


_json = json_resource


def list_nodes(engine: Engine, roots: Roots, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> dict[str, Any]:
    """One page of the indexed entries inside the roots, by path, with the total and the next page's URI."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}", field="limit")
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}", field="offset")
    rows, total = store_entries.list_within(engine, roots=roots.paths, limit=limit, offset=offset)
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


def _sub_resource(engine: Engine, roots: Roots, absolute: str, suffix: str) -> str | None:
    """The owner's path when ``absolute`` names the ``suffix`` sub-resource of an entry (no entry has that exact
    path: not a file called "metadata" or "thumbnail"), else None."""
    if not absolute.endswith(suffix) or absolute == suffix:
        return None
    resolved = roots.resolve(absolute, field="path", follow_last=False)
    if store_entries.get_entry(engine, path=resolved) is not None:
        return None
    return absolute[: -len(suffix)] or "/"  # inspect_entry says whether the owner is missing from disk or the index


def read_node(engine: Engine, roots: Roots, *, path: str, content_base: str | None = None) -> dict[str, Any]:
    """One entry (inspect's shape), or its metadata list when the URI ends in /metadata after an indexed entry."""
    absolute = _path_from_uri(path)
    owner = _sub_resource(engine, roots, absolute, METADATA_SUFFIX)
    if owner is not None:
        entry = inspect_entry(engine, roots, path=owner, content_base=content_base)
        return {"path": entry["path"], "resourceUri": entry["resourceUri"], "metadataUri": entry["metadataUri"],
                "hash": entry["hash"], "duplicates": entry["duplicates"], "thumbnailUri": entry["thumbnailUri"],
                "metadataCount": entry["metadataCount"], "metadata": entry["metadata"]}
    return inspect_entry(engine, roots, path=absolute, content_base=content_base)


def read_thumbnail(engine: Engine, roots: Roots, data_dir, *, path: str) -> Content:
    """The thumbnail of the entry at ``path`` (absolute) as image bytes; NotFound saying how to make one when the
    entry has none, or when its cache file is gone (inspect's includeImage, the same rule)."""
    data, mime, note = entry_image(data_dir, inspect_entry(engine, roots, path=path), "thumbnail")
    if data is None:
        raise NotFound(note, field="path")
    return Content(data, mime)


def read_node_content(engine: Engine, roots: Roots, data_dir, *, path: str, base: str | None) -> Content:
    """Dispatch of every synthesis://nodes/... URI: the thumbnail blob, the metadata list, or the node."""
    absolute = _path_from_uri(path)
    owner = _sub_resource(engine, roots, absolute, THUMBNAIL_SUFFIX)
    if owner is not None:
        return read_thumbnail(engine, roots, data_dir, path=owner)
    return json_content(read_node(engine, roots, path=path, content_base=base))


def register(mcp: MCPServer, app: AssayApp) -> None:
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
        size = int_param(limit, field="limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        start = int_param(offset, field="offset", default=0, low=0)
        return list_nodes(app.engine, app.roots, limit=size, offset=start)

    def dispatch(path: str) -> Content:
        return read_node_content(app.engine, app.roots, app.settings.data_dir, path=path,
                                 base=content_base(app.settings))

    # the SDK tries templates in the order they were added: the sub-resources before the greedy node template
    @mcp.resource(BASE + "/{+path}" + THUMBNAIL_SUFFIX, name="node-thumbnail", mime_type="image/jpeg",
                  security=PATH_SECURITY)
    @mixed_resource
    def node_thumbnail(path: str) -> Content:
        """Thumbnail for entry (image/jpeg blob); an entry without one: an error saying how to make one
        (rerun-classifier or a classifier outcome)."""
        return dispatch(path + THUMBNAIL_SUFFIX)

    @mcp.resource(BASE + "/{+path}" + METADATA_SUFFIX, name="node-metadata", mime_type=JSON, security=PATH_SECURITY)
    @mixed_resource
    def node_metadata(path: str) -> Content:
        """All metadata for entry: its generated artifacts (thumbnail, timeline frames, metadata record)."""
        return dispatch(path + METADATA_SUFFIX)

    @mcp.resource(BASE + "/{+path}", name="node", mime_type=JSON, security=PATH_SECURITY)
    @mixed_resource
    def one_node(path: str) -> Content:
        """Single filesystem entry by absolute path (synthesis://nodes/home/user/file.txt, percent-encoded), as
        inspect returns it; .../metadata after an entry's path lists its generated metadata, .../thumbnail is
        its thumbnail."""
        return dispatch(path)

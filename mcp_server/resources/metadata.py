"""synthesis://metadata resources (what classifiers generated) and synthesis://content (the cached images themselves).

- ``synthesis://metadata`` (``?limit=1-1000&offset=N&sort=newest|path``): every artifact of the entries inside the
  roots, one page at a time with the total and nextUri; ``synthesis://metadata/thumbnails`` the thumbnails only.
- ``synthesis://metadata/{hash}``: the entries whose content hash (inspect's ``hash``, ``xxh128:<32 hex>``) is that
  one, with their artifacts; a malformed hash is invalid params (-32602) saying what a hash looks like.
- ``synthesis://metadata/duplicates`` (``?limit=1-200&offset=N``): groups of identical files (same hash, two or
  more), largest wasted space first (size × (count − 1)), each with size, count, wasted bytes and paths, so a plan
  can gather or clean them.
- ``synthesis://content/{+path}``: one cached artifact (``cache/ab/cd/<hash>.jpg``) as a blob with its MIME type,
  the stdio counterpart of HTTP's ``/api/content?path=...`` (inspect's URLs under stdio point here). Only the exact
  shape of a cache path is read (flows.classify.cache.is_cache_path), nothing outside the cache.

Blob resources answer :class:`~mcp_server.resources.common.Content` through ``mixed_resource`` (resources/common.py):
the artifact's bytes with its own MIME type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from sqlalchemy.engine import Engine

from flows.index.navigation import artifact_item, node_uri
from flows.core.roots import Roots
from mcp_server.http import content_base
from mcp_server.resources.common import JSON, Content, int_param, json_resource, mixed_resource
from store import cache
from store import metadata as store_metadata
from store.entries import iso, within
from store.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

BASE = "synthesis://metadata"
CONTENT = "synthesis://content"
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
GROUPS_LIMIT = 50
MAX_GROUPS = 200
PATH_SECURITY = ResourceSecurity(reject_path_traversal=True, reject_absolute_paths=True)


def _scope(roots: Roots):
    return within(roots.paths)


def _page(uri: str, items_key: str, items: list, total: int, limit: int, offset: int, extra: str = "") -> dict:
    has_more = offset + len(items) < total
    return {"total": total, "offset": offset, "limit": limit, "hasMore": has_more, items_key: items,
            "nextUri": f"{uri}?limit={limit}&offset={offset + len(items)}{extra}" if has_more else None}


def metadata_listing(engine: Engine, roots: Roots, *, base: str | None, artifact_type: str | None = None,
                     sort: str = "newest", limit: int = DEFAULT_LIMIT, offset: int = 0) -> dict[str, Any]:
    """One page of generated artifacts (of one type), newest first or by path, with the total and nextUri."""
    rows, total = store_metadata.list_artifacts(engine, scope=_scope(roots), artifact_type=artifact_type, sort=sort,
                                                limit=limit, offset=offset)
    items = [{"path": a["path"], "uri": node_uri(a["path"]), **artifact_item(a, base), "hash": a["hash"],
              "createdAt": iso(a["created_at"])} for a in rows]
    uri = BASE + ("/thumbnails" if artifact_type == "thumbnail" else "")
    return _page(uri, "metadata", items, total, limit, offset, "" if artifact_type else f"&sort={sort}")


def metadata_by_hash(engine: Engine, roots: Roots, *, hash_: str, base: str | None) -> dict[str, Any]:
    """The entries with content hash ``hash_`` and their artifacts; NotFound when no entry inside the roots has it."""
    entries, total = store_metadata.entries_with_hash(engine, hash_=hash_, scope=_scope(roots))
    if not total:
        raise NotFound(f"no indexed entry has content hash {hash_}; hashes come from a classifier's metadata "
                       "operation (inspect shows an entry's hash)", field="hash")
    out = []
    for e in entries:
        artifacts = [artifact_item(a, base) for a in e["artifacts"]]
        out.append({"path": e["path"], "uri": node_uri(e["path"]), "size": e["size"], "mtime": iso(e["mtime"]),
                    "mimeType": e["mime"], "mediaType": e["media_type"], "metadataCount": len(artifacts),
                    "metadata": artifacts})
    return {"hash": hash_, "count": total, "duplicates": max(total - 1, 0), "entries": out}


def duplicates_listing(engine: Engine, roots: Roots, *, limit: int = GROUPS_LIMIT, offset: int = 0) -> dict[str, Any]:
    """One page of duplicate groups, largest wasted space first, with the number of groups and nextUri."""
    groups, total = store_metadata.duplicate_groups(engine, scope=_scope(roots), limit=limit, offset=offset)
    for g in groups:
        g["uri"] = f"{BASE}/{g['hash']}"
    result = _page(BASE + "/duplicates", "groups", groups, total, limit, offset)
    result["wastedBytesShown"] = sum(g["wastedBytes"] for g in groups)
    return result


MAX_BLOB_BYTES = 64 * 1024 * 1024  # an artifact read as an MCP blob (base64 in one JSON message) at most


def read_content(data_dir, rel: str) -> Content:
    """A cached artifact's bytes; InvalidInput for anything not shaped like a cache path, NotFound when gone."""
    if not cache.is_cache_path(rel):
        raise InvalidInput(f"{rel!r} is not a cache path; one looks like cache/ab/cd/<32 hex digits>.jpg (the url "
                           "inspect gives)", field="path")
    file = cache.resolve(data_dir, rel)
    if file is None:
        raise NotFound(f"{rel} is not in the cache (it may have been swept after its entry went; inspect the entry "
                       "again)", field="path")
    size = file.stat().st_size
    if size > MAX_BLOB_BYTES:  # a blob travels base64-encoded in one message: a long clip is for HTTP
        raise InvalidInput(f"{rel} is {size:,} bytes, more than a resource read carries ({MAX_BLOB_BYTES:,}); "
                           "fetch it from the HTTP server's /api/content?path=" + rel + " (resolve's url) or read "
                           "the file at resolve's output_path", field="path")
    return Content(file.read_bytes(), cache.mime_type(rel))


def register(mcp: MCPServer, app: AssayApp) -> None:
    def base() -> str | None:
        return content_base(app.settings)

    @mcp.resource(BASE, name="metadata", mime_type=JSON)
    @json_resource
    def all_metadata() -> dict[str, Any]:
        """All generated metadata (thumbnails, timeline frames, contact sheets, extracted records) of entries inside
        the roots, newest first: the first 100, the total and nextUri (?limit=1-1000&offset=N&sort=newest|path)."""
        return metadata_listing(app.engine, app.roots, base=base())

    @mcp.resource(BASE + "/thumbnails", name="metadata-thumbnails", mime_type=JSON)
    @json_resource
    def thumbnails() -> dict[str, Any]:
        """Thumbnail metadata (path, url, width, height), newest first: the first 100, total and nextUri."""
        return metadata_listing(app.engine, app.roots, base=base(), artifact_type="thumbnail")

    @mcp.resource(BASE + "/duplicates", name="metadata-duplicates", mime_type=JSON)
    @json_resource
    def duplicates() -> dict[str, Any]:
        """Groups of identical files (same content hash), largest wasted space first: size, count, wastedBytes,
        paths; 50 groups a page (?limit=1-200&offset=N)."""
        return duplicates_listing(app.engine, app.roots)

    @mcp.resource(BASE + "/thumbnails{?limit,offset}", name="metadata-thumbnails-page", mime_type=JSON)
    @json_resource
    def thumbnails_page(limit: str | None = None, offset: str | None = None) -> dict[str, Any]:
        """One page of thumbnail metadata (?limit=1-1000, ?offset=N)."""
        return metadata_listing(app.engine, app.roots, base=base(), artifact_type="thumbnail",
                                limit=int_param(limit, field="limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT),
                                offset=int_param(offset, field="offset", default=0, low=0))

    @mcp.resource(BASE + "/duplicates{?limit,offset}", name="metadata-duplicates-page", mime_type=JSON)
    @json_resource
    def duplicates_page(limit: str | None = None, offset: str | None = None) -> dict[str, Any]:
        """One page of duplicate groups (?limit=1-200, ?offset=N)."""
        return duplicates_listing(app.engine, app.roots,
                                  limit=int_param(limit, field="limit", default=GROUPS_LIMIT, low=1, high=MAX_GROUPS),
                                  offset=int_param(offset, field="offset", default=0, low=0))

    @mcp.resource(BASE + "{?limit,offset,sort}", name="metadata-page", mime_type=JSON)
    @json_resource
    def metadata_page(limit: str | None = None, offset: str | None = None, sort: str | None = None) -> dict[str, Any]:
        """One page of generated metadata (?limit=1-1000, ?offset=N, ?sort=newest|path)."""
        return metadata_listing(app.engine, app.roots, base=base(), sort=sort or "newest",
                                limit=int_param(limit, field="limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT),
                                offset=int_param(offset, field="offset", default=0, low=0))

    @mcp.resource(BASE + "/{hash}", name="metadata-by-hash", mime_type=JSON)
    @json_resource
    def by_hash(hash: str) -> dict[str, Any]:  # noqa: A002 - the reference names the template variable "hash"
        """Metadata by content hash (xxh128:<32 hex>, inspect's hash): the entries with that content and their
        artifacts; count > 1 means duplicates."""
        return metadata_by_hash(app.engine, app.roots, hash_=store_metadata.check_hash(hash), base=base())

    @mcp.resource(CONTENT + "/{+path}", name="content", mime_type="image/jpeg", security=PATH_SECURITY)
    @mixed_resource
    def content(path: str) -> Content:
        """A cached artifact (cache/ab/cd/<hash>.jpg, the url inspect gives under stdio) as a blob (image/jpeg)."""
        return read_content(app.settings.data_dir, path)

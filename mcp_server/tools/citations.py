"""Citation tools (reference 003 and our own): listResources, getStructure, getNode, resolve, and map-build, map-put,
map-delete. Thin typed wrappers over the app's CitationService (``AssayApp.citations()``, flows.citations.service:
maps in the store, built locally or supplied by an agent; addresses resolved virtually or into files of the content
cache); the work runs in worker threads, off the event loop.

Errors are CitationErrors (RESOURCE_NOT_FOUND, NODE_NOT_FOUND, INVALID_ADDRESS, INVALID_MAP, SOURCE_CHANGED,
UNSUPPORTED_FORMAT, EXTRACTION_FAILED, INVALID_PATH): tool errors whose text starts with the code, without structured
content. Results leave out the location fields of other modalities (no nulls), as reference 003 shows them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp_types import ToolAnnotations
from pydantic import BaseModel, BeforeValidator, Field

from flows.index.navigation import CONTENT_URI, content_url
from mcp_server.http import content_base
from mcp_server.tools.common import READ_ONLY, ToolSet, as_object_list, tool
from store.errors import CitationError, InvalidInput

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

# resolve writes its output into the content cache (once per source version and address): not read-only, but
# nothing is lost and the same call gives the same file
RESOLVES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
# map-build, map-put and map-delete replace or drop a map (an agent's map too, which cannot be rebuilt from the file);
# the same call again changes nothing more
REPLACES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)

# flows.citations.model.STRATEGIES, spelt out: importing flows.citations registers the capability, which the server
# need not do to list its tools (tests check the two agree)
Strategy = Literal["auto", "outline", "headings", "chapters", "scenes", "windows"]

ADDRESS_FORMS = ("doc://ID#pages=3-5 or #pages=1,3,7 (1-based, inclusive); video://ID#t=192-230 (seconds; also "
                 "MM:SS or HH:MM:SS, e.g. t=03:12-03:40); audio://ID#t=10-20; image://ID#bbox=x1,y1,x2,y2 "
                 "(fractions 0-1 of width and height, x1<x2, y1<y2); text://ID#lines=10-20 (1-based, inclusive); "
                 "no fragment: the whole resource")


def _none(value: Any) -> bool:
    return value is None


# --- results --------------------------------------------------------------------------------------------------------


class LocationView(BaseModel):
    """Where a node is, in its modality: only that modality's fields are present."""

    modality: Literal["document", "video", "audio", "image", "text"]
    start: float | None = Field(default=None, exclude_if=_none, description="seconds from the start (video, audio)")
    end: float | None = Field(default=None, exclude_if=_none, description="seconds from the start (video, audio)")
    pages: list[int] | None = Field(default=None, exclude_if=_none,
                                    description="[first, last] page, 1-based inclusive (document)")
    lines: list[int] | None = Field(default=None, exclude_if=_none,
                                    description="[first, last] line, 1-based inclusive (text)")
    bbox: list[float] | None = Field(default=None, exclude_if=_none,
                                     description="[x1, y1, x2, y2], fractions 0-1 of width and height (image)")
    virtual_address: str | None = Field(default=None, exclude_if=_none,
                                        description="the node's address, which resolve accepts")


class NodeRef(BaseModel):
    id: str


class NodeView(BaseModel):
    """A node of a map with its whole subtree (getStructure)."""

    id: str = Field(description="dotted: a child's id starts with its parent's id and a dot")
    title: str | None = Field(default=None, exclude_if=_none)
    type: str = Field(description="section, chapter, scene, window, region, ... (what the node is)")
    location: LocationView
    summary: str | None = Field(default=None, exclude_if=_none)
    children: list["NodeView"] = Field(default_factory=list)


NodeView.model_rebuild()


class ResourceMapView(BaseModel):
    """Reference 003's ResourceMap."""

    resource_id: str
    type: Literal["document", "video", "audio", "image", "text"]
    title: str
    source_path: str = Field(description="the absolute path of the file")
    nodes: list[NodeView]
    metadata: dict[str, Any] = Field(description="source_hash (xxh128:<hex>), source_size (bytes), origin (outline, "
                                                 "headings, chapters, scenes, silences, windows, whole, agent), "
                                                 "strategy, stale, and the source's extent (page_count, "
                                                 "line_count, duration, width, height)")
    created_at: str = Field(description="ISO 8601, UTC")


class NodeDetail(BaseModel):
    """One node (getNode): its children as ids only."""

    id: str
    title: str | None = Field(default=None, exclude_if=_none)
    type: str
    location: LocationView
    summary: str | None = Field(default=None, exclude_if=_none)
    children: list[NodeRef] = Field(default_factory=list, description="the direct children, ids only")
    stale: bool | None = Field(default=None, exclude_if=_none,
                               description="true: the node is of an agent's map made before the file changed "
                                           "(resolve refuses it until the map is supplied again, or allow_stale)")


class ResolvedNode(BaseModel):
    """The node resolved: the map's node, or for an address matching none of them ``{"id": "address", "type":
    "address", location}``."""

    id: str
    title: str | None = Field(default=None, exclude_if=_none)
    type: str
    location: LocationView
    summary: str | None = Field(default=None, exclude_if=_none)
    children: list[NodeRef] | None = Field(default=None, exclude_if=_none)


class Resolution(BaseModel):
    """What resolve answers: reference 003's fields, then the citation's proof (source hash) and the output's."""

    output_path: str | None = Field(description="the extracted file (absolute path in the content cache); null when "
                                                "virtual")
    modality: str
    address: str = Field(description="the canonical address, e.g. doc://textbook#pages=12-15")
    node: ResolvedNode
    resource_id: str
    source_path: str
    source_hash: str = Field(description="content hash of the source file now (xxh128:<hex>): what the citation "
                                         "was verified against")
    stale: bool = Field(description="true: the map is an agent's, made before the file changed (allow_stale)")
    mime_type: str | None = Field(default=None, exclude_if=_none)
    size_bytes: int | None = Field(default=None, exclude_if=_none)
    cached: bool | None = Field(default=None, exclude_if=_none,
                                description="true: the output was made before (same source, same address)")
    cache_path: str | None = Field(default=None, exclude_if=_none, description="cache/ab/cd/<hash>.<ext>")
    uri: str | None = Field(default=None, exclude_if=_none,
                            description="synthesis://content/<cache path>: the output as an MCP resource (blob)")
    url: str | None = Field(default=None, exclude_if=_none,
                            description="the output over HTTP (/api/content?path=...), when served over HTTP")


class ResourceList(BaseModel):
    resources: list[str] = Field(description="resource ids, sorted")
    total: int | None = Field(default=None, exclude_if=_none, description="how many resources there are in all")
    next_offset: int | None = Field(default=None, exclude_if=_none, description="offset of the next page, when more")


class MapDeleted(BaseModel):
    resource_id: str
    deleted: bool = Field(description="false: the resource had no map")
    message: str


# --- helpers ------------------------------------------------------------------------------------------------------


def map_view(resource_map: Any) -> dict[str, Any]:
    """A ResourceMap (model or dict) as reference 003 shows it, no null location fields (also the JSON export of
    synthesis://maps/{id})."""
    data = resource_map.model_dump() if hasattr(resource_map, "model_dump") else dict(resource_map)
    return ResourceMapView.model_validate(data).model_dump(mode="json")


_ADDRESS_ID = re.compile(r"\s*[A-Za-z]+://([^#]*)")


def check_target(resource_id: str | None, node_id: str | None, address: str | None) -> None:
    """What resolve must be given: resource_id + node_id, or an address (resource_id, if also given, the address's
    own)."""
    if address is None:
        missing = [name for name, value in (("resource_id", resource_id), ("node_id", node_id)) if not value]
        if missing:
            raise InvalidInput(f"resolve needs resource_id and node_id (missing: {', '.join(missing)}), or an "
                               f"address: {ADDRESS_FORMS}", field=missing[0])
        return
    if node_id is not None:
        raise InvalidInput("give node_id or address, not both: an address says itself what to cite",
                           field="node_id")
    match = _ADDRESS_ID.match(address)
    if resource_id is not None and match and match.group(1) != resource_id:
        raise CitationError("INVALID_ADDRESS", f"resource_id {resource_id!r} is not the resource of address "
                                               f"{address!r} ({match.group(1)!r}); give the address alone",
                            field="resource_id")


def resolution(result: dict[str, Any], base: str | None) -> Resolution:
    """The service's answer with the output's resource URI and, when served over HTTP, its URL."""
    data = dict(result)
    cache_path = data.get("cache_path")
    if cache_path:
        data["uri"] = CONTENT_URI + cache_path
        data["url"] = content_url(cache_path, base) if base else None
    return Resolution.model_validate(data)


ResourceId = Annotated[str, Field(min_length=1, max_length=4096, description="A resource id, as listResources "
                                                                             "lists it (e.g. textbook, lecture_01); "
                                                                             "a file's path inside the roots also "
                                                                             "works, and gives the file its id")]
NodeId = Annotated[str, Field(min_length=1, max_length=1000, description="A node id of the resource's map, dotted "
                                                                         "(e.g. chapter_1.intro); getStructure "
                                                                         "lists them")]
Target = Annotated[str, Field(min_length=1, max_length=4096, description="A file (absolute inside the roots, or "
                                                                         "relative to its root as the document "
                                                                         "tools show it) or a resource id")]


def register(tools: ToolSet, app: AssayApp) -> None:
    def run(fn):
        return anyio.to_thread.run_sync(fn)

    @tool(tools, "listResources", READ_ONLY)
    async def listResources(
        path: Annotated[str | None, Field(description="Only resources whose file is at or under this folder "
                                                      "(inside the roots)")] = None,
        limit: Annotated[int, Field(ge=1, le=10000, description="Most ids to return (1-10000)")] = 1000,
        offset: Annotated[int, Field(ge=0, description="Ids to skip (paging: next_offset)")] = 0,
    ) -> ResourceList:
        """Discovery (reference 003): the ids of the resources that can be cited (files with a map, or whose id was
        given out: by map-build, map-put or a search hit's address), sorted. An id names a file in the roots:
        getStructure shows its map, resolve cites parts of it. A file without an id gets one from map-build."""
        result = await run(lambda: app.citations().list_resources(path=path, limit=limit, offset=offset))
        return ResourceList.model_validate(result)

    @tool(tools, "getStructure", READ_ONLY)
    async def getStructure(resource_id: ResourceId) -> ResourceMapView:
        """Contextualisation (reference 003): the resource's whole map, a tree of nodes (dotted ids, titles, types,
        locations, summaries), with the file's source_path and, in metadata, its source_hash and source_size. A
        location holds only its modality's fields: document pages [first, last] (1-based, inclusive), text lines
        [first, last], video/audio start and end in seconds, image bbox [x1, y1, x2, y2] as fractions 0-1; each
        node's virtual_address is what resolve cites. Built from the file on first use (PDF outline, Markdown
        headings, video chapters or scene cuts, windows) and rebuilt when the file changed; an agent's map of a
        changed file shows metadata.stale = true."""
        result = await run(lambda: app.citations().get_structure(resource_id))
        return ResourceMapView.model_validate(result.model_dump())  # once: the SDK validates it again

    @tool(tools, "getNode", READ_ONLY)
    async def getNode(resource_id: ResourceId, node_id: NodeId) -> NodeDetail:
        """Verification (reference 003): one node of a resource's map (id, title, type, location, summary) with its
        children as ids only; faster than getStructure for one node."""
        result = await run(lambda: app.citations().get_node(resource_id, node_id))
        return NodeDetail.model_validate(result)

    @tool(tools, "resolve", RESOLVES)
    async def resolve(
        resource_id: Annotated[str | None, Field(max_length=4096, description="The resource (with node_id): its id "
                                                                              "or its file's path; may be left out "
                                                                              "with an address")] = None,
        node_id: Annotated[str | None, Field(max_length=1000, description="The node to resolve (dotted id, as "
                                                                          "getStructure lists it)")] = None,
        virtual: Annotated[bool, Field(description="true: only the address and its proof, no file (fast); false: "
                                                   "also extract the part into a file")] = False,
        address: Annotated[str | None, Field(max_length=4096, description=f"Instead of a node: {ADDRESS_FORMS}")]
        = None,
        exact: Annotated[bool, Field(description="video/audio: re-encode for frame-accurate cuts (slower); default: "
                                                 "stream copy from the nearest keyframe")] = False,
        allow_stale: Annotated[bool, Field(description="resolve a node of an agent's map although the file changed "
                                                       "since (default: refused with SOURCE_CHANGED)")] = False,
    ) -> Resolution:
        """Evidence extraction (reference 003): cite a node (resource_id + node_id) or an address, and, unless
        virtual, extract it into a file: PDF pages into a new PDF, a video or audio clip (ffmpeg), an image crop,
        a text file's lines. Answers output_path (null when virtual), modality, address (canonical), node,
        resource_id, and the proof: source_path and source_hash (the file's content hash now); a physical output
        also has mime_type, size_bytes, cached, uri (synthesis://content/..., readable as a resource) and, over
        HTTP, url. Addresses: doc://ID#pages=3-5 or #pages=1,3,7 (1-based, inclusive); video://ID#t=192-230
        (seconds; also MM:SS or HH:MM:SS, e.g. t=03:12-03:40); audio://ID#t=10-20; image://ID#bbox=x1,y1,x2,y2
        (fractions 0-1 of width and height, x1 < x2, y1 < y2); text://ID#lines=10-20 (1-based, inclusive); no
        fragment: the whole resource. An address that does not fit the file (pages 7-9 of 5, t beyond the
        duration, a zero-area bbox) is refused with INVALID_ADDRESS saying what fits. Outputs are cached while
        the file is unchanged; a node of an agent's map made before the file changed is refused with
        SOURCE_CHANGED unless allow_stale."""
        check_target(resource_id, node_id, address)
        result = await run(lambda: app.citations().resolve(resource_id, node_id, address=address, virtual=virtual,
                                                            exact=exact, allow_stale=allow_stale))
        return resolution(result, content_base(app.settings))

    @tool(tools, "map-build", REPLACES)
    async def map_build(
        resource: Target,
        strategy: Annotated[Strategy, Field(
            description="auto (the best the file has); outline (PDF bookmarks); headings (Markdown); chapters "
                        "(video/audio container chapters); scenes (video scene cuts; audio: silences); windows "
                        "(fixed windows of `window` units)")] = "auto",
        window: Annotated[float | None, Field(gt=0, description="Window size for windows (and fallbacks): lines "
                                                               "(text, default 50), pages (document, 10), seconds "
                                                               "(video/audio, 60)")] = None,
    ) -> ResourceMapView:
        """Build (or rebuild) a file's map locally with a strategy, replacing its map (an agent's too), and return
        it as getStructure does; the file gets a resource id if it had none (resource_id in the answer).
        UNSUPPORTED_FORMAT when the strategy cannot apply (an outline of a video, a PDF without bookmarks)."""
        result = await run(lambda: app.citations().build_map(resource, strategy=strategy, window=window))
        return ResourceMapView.model_validate(map_view(result))

    @tool(tools, "map-put", REPLACES)
    async def map_put(
        resource: Target,
        nodes: Annotated[list[dict[str, Any]], BeforeValidator(as_object_list), Field(
            min_length=1, description="The node tree: [{id, title, type, location: {modality, pages | lines | "
                                      "start+end | bbox}, summary?, children?: [...]}]; ids unique and dotted "
                                      "(a child's id starts with its parent's id and a dot)")],
        title: Annotated[str | None, Field(max_length=1000, description="The map's title (default: the file's "
                                                                       "name or its own title)")] = None,
    ) -> ResourceMapView:
        """Supply a file's map as an agent found it (sections read, regions of a diagram), replacing any map it
        had; returned as getStructure shows it. Every node is checked against the file: pages and lines within
        it, start < end within the duration (seconds), bbox four fractions 0-1 with x1 < x2 and y1 < y2, unique
        dotted ids consistent with nesting; INVALID_MAP lists every problem with its node. When the file changes
        later the map is marked stale and resolve refuses it (SOURCE_CHANGED) until supplied again."""
        result = await run(lambda: app.citations().put_map(resource, nodes, title=title))
        return ResourceMapView.model_validate(map_view(result))

    @tool(tools, "map-delete", REPLACES)
    async def map_delete(resource_id: ResourceId) -> MapDeleted:
        """Forget a resource's map (its id stays, so citations made with it still resolve; the next getStructure
        builds a map again from the file)."""
        deleted = await run(lambda: app.citations().delete_map(resource_id))
        message = "map deleted" if deleted else "the resource had no map"
        return MapDeleted(resource_id=resource_id, deleted=bool(deleted), message=message)

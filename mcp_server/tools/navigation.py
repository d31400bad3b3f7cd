"""Navigation tools: navigate (ls/cd over the index) and inspect (one entry with its artifacts).

Artifact URLs (thumbnailUrl, thumbnailUri, the metadata list's url) are ``http://HOST:PORT/api/content?path=cache/...``
when the server speaks HTTP (or the public URL setting's address), and ``synthesis://content/cache/...`` resources
under stdio (see flows.index.navigation.content_url). ``inspect`` can attach the thumbnail or the timeline's contact
sheet as MCP image content beside its JSON (``includeImage``).
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Annotated, Literal

from mcp_types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, ConfigDict, Field

from flows.index.navigation import entry_image, inspect_entry, navigate_dir
from mcp_server.http import content_base
from mcp_server.tools.common import READ_ONLY, ToolSet, tool

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


class NavEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    path: str
    size: int
    kind: str
    mtime: str | None
    thumbnailUrl: str | None = None


class NavigateResponse(BaseModel):
    path: str
    entries: list[NavEntry]
    total: int
    hasMore: bool
    offset: int
    limit: int
    complete: bool = Field(default=True, description="false when the folder's listing is not complete: unreadable, "
                                                     "or an index job stopped inside it (see scanError)")
    scanError: str | None = Field(default=None, description="why the listing is not complete, e.g. "
                                                            "'unreadable: Permission denied'")
    message: str | None = None


class InspectResponse(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str
    kind: str
    size: int
    modifiedAt: str | None
    createdAt: str | None
    resourceUri: str
    hash: str | None = Field(default=None, description="content hash (xxh128:...) once a classifier extracted "
                                                        "metadata")
    duplicates: int = Field(default=0, description="how many other entries have the same content hash")
    thumbnailUri: str | None = Field(default=None, description="URL of the thumbnail")
    timelineUri: str | None = Field(default=None, description="URL of the first timeline frame")
    timelineSheetUri: str | None = Field(default=None, description="URL of the timeline's contact sheet")
    metadataUri: str
    metadataCount: int
    metadata: list[dict] = Field(description="generated artifacts: thumbnail, video-timeline frames (metadata: frame, "
                                             "timestamp), timeline-sheet, and the extracted metadata record")
    complete: bool = Field(default=True, description="false for a directory whose listing is not complete "
                                                     "(unreadable, or an index job stopped inside it)")
    scanError: str | None = Field(default=None, description="why a directory's listing is not complete")


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "navigate", READ_ONLY)
    def navigate(
        path: Annotated[str, Field(description="Directory path to navigate to")],
        limit: Annotated[int, Field(ge=1, le=10000, description="Maximum entries to return")] = 100,
        offset: Annotated[int, Field(ge=0, description="Pagination offset")] = 0,
        sort: Annotated[Literal["name", "size", "mtime"] | None, Field(
            description="Sort by: name, size, mtime (default: the default_sort preference, name unless set)")] = None,
        desc: Annotated[bool, Field(description="Sort descending")] = False,
    ) -> NavigateResponse:
        """Shell-like directory navigation over indexed entries (like `ls`): one page of a directory's children
        with sizes (directories: total size of their subtree), kinds and modification times. Dot-files are left
        out when the show_hidden preference is false. A folder that could not be read, or whose indexing was
        stopped, says so: complete is false and scanError gives the reason (also on such folders in a listing)."""
        prefs = app.preferences
        return NavigateResponse(**navigate_dir(app.engine, app.roots, path=path, limit=limit, offset=offset,
                                               sort=sort or prefs.get("default_sort", "name"), desc=desc,
                                               show_hidden=prefs.get("show_hidden", True),
                                               content_base=content_base(app.settings)))

    @tool(tools, "inspect", READ_ONLY)
    def inspect(
        path: Annotated[str, Field(description="Path to inspect")],
        includeImage: Annotated[Literal["none", "thumbnail", "timeline"], Field(
            description="attach the thumbnail, or the timeline's contact sheet (videos), as an image beside the "
                        "JSON, for a model that can see images")] = "none",
    ) -> InspectResponse:
        """Detailed information about a file or directory, including generated artifacts such as thumbnails and
        video timeline frames (thumbnailUri, timelineUri, metadata list), the content hash and how many other
        entries share it (duplicates). includeImage attaches the thumbnail or the timeline's contact sheet as an
        image (imageNote says whether it is attached); an entry without one gets imageNote saying how to make it
        (rerun-classifier or a classifier outcome). For a directory, complete and scanError say whether its listing is
        whole (not unreadable, not left incomplete by a stopped index job)."""
        result = inspect_entry(app.engine, app.roots, path=path, content_base=content_base(app.settings))
        if includeImage == "none":
            return InspectResponse(**result)
        data, mime, result["imageNote"] = entry_image(app.settings.data_dir, result, includeImage)
        structured = InspectResponse(**result).model_dump(mode="json")
        content: list = [TextContent(type="text", text=json.dumps(structured, ensure_ascii=False))]
        if data is not None:
            content.append(ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime))
        # with an image the tool answers with the whole result; InspectResponse stays the declared output schema
        return CallToolResult(content=content, structured_content=structured)  # type: ignore[return-value]

"""The citation capability's contracts, shared by its modules (addresses, builders, extraction, store, service, tools).

Reference 003's shapes, as pydantic models: a :class:`ResourceMap` is a tree of :class:`Node` (dotted ids: a child's id
starts with its parent's id and a dot), each with a :class:`Location` in one modality. A location is cited as an
address (``flows.addresses.model.Address``: ``doc://textbook#pages=12-15``, ``video://lecture_01#t=192-230``, ...,
shared with the capabilities that cite their hits); ``flows.citations.address`` parses addresses with a grammar.

Units: pages and lines are 1-based and inclusive (``pages: [12, 15]`` is pages 12 to 15, ``lines: [10, 20]`` lines 10
to 20); times are seconds from the start (``start``/``end``); a bbox is ``[x1, y1, x2, y2]`` as fractions (0-1) of the
image's width and height, x1 < x2 and y1 < y2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flows.addresses.model import MODALITY_SCHEME, Address, Modality
from flows.documents import formats

STRATEGIES: tuple[str, ...] = ("auto", "outline", "headings", "chapters", "scenes", "windows")
# what a built map came from (ResourceMapRow.origin); "none": the id is reserved, no map yet; "agent": supplied
ORIGINS: tuple[str, ...] = ("none", "outline", "headings", "chapters", "scenes", "silences", "windows", "whole",
                            "agent")

# default window sizes of the "windows" strategy (and of the fallbacks), per modality: lines, pages, seconds
DEFAULT_WINDOW: dict[str, float] = {"text": 50, "document": 10, "video": 60.0, "audio": 60.0}
MAX_NODES = 10_000  # a map with more nodes is refused (agent) or coarsened (built: windows grow)
NODE_ID_PATTERN = r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*"  # dotted: chapter_1.intro


class Location(BaseModel):
    """Where a node is, in one modality; only the fields of its modality are set (None fields are left out of JSON).
    ``virtual_address`` is the node's address (filled when a map is shown)."""

    model_config = ConfigDict(extra="forbid")

    modality: Modality
    start: float | None = Field(default=None, description="seconds from the start (video, audio)")
    end: float | None = Field(default=None, description="seconds from the start, after start (video, audio)")
    pages: list[int] | None = Field(default=None, description="[first, last] page, 1-based inclusive (document)")
    lines: list[int] | None = Field(default=None, description="[first, last] line, 1-based inclusive (text)")
    bbox: list[float] | None = Field(default=None, description="[x1, y1, x2, y2], fractions 0-1 of width and "
                                                               "height (image)")
    virtual_address: str | None = None

    @classmethod
    def from_address(cls, address: Address) -> "Location":
        """The location ``address`` cites (a page list becomes its first-to-last span)."""
        pages = None
        if address.pages:
            listed = address.page_list()
            pages = [min(listed), max(listed)]
        return cls(modality=address.modality,
                   start=address.t[0] if address.t else None, end=address.t[1] if address.t else None,
                   pages=pages, lines=list(address.lines) if address.lines else None,
                   bbox=list(address.bbox) if address.bbox else None)

    def to_address(self, resource_id: str) -> Address:
        """The address of this location in resource ``resource_id`` (no fragment: the whole resource)."""
        scheme = MODALITY_SCHEME[self.modality]
        pages = t = bbox = lines = None
        if self.pages:
            first, last = self.pages[0], self.pages[-1]
            pages = ((first, last),)
        if self.start is not None or self.end is not None:
            t = (float(self.start or 0.0), float(self.end if self.end is not None else self.start or 0.0))
        if self.bbox:
            bbox = tuple(float(v) for v in self.bbox)
        if self.lines:
            lines = (self.lines[0], self.lines[-1])
        return Address(scheme, resource_id, pages=pages, t=t, bbox=bbox, lines=lines)  # type: ignore[arg-type]

    def dump(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Node(BaseModel):
    """One node of a map (reference 003's Node). ``children`` nest; ids are unique in the map and dotted."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str | None = None
    type: str = "section"
    location: Location
    summary: str | None = None
    children: list["Node"] = Field(default_factory=list)

    def walk(self):
        """This node and every node below it, pre-order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "title": self.title, "type": self.type, "location": self.location.dump()}
        if self.summary is not None:
            out["summary"] = self.summary
        out["children"] = [c.dump() for c in self.children]
        return out


class ResourceMap(BaseModel):
    """Reference 003's ResourceMap: what getStructure returns and what is exported as JSON. ``metadata`` holds
    ``source_hash`` and ``source_size`` (as the reference shows) and our own facts: ``origin`` (what the map came
    from), ``strategy``, ``stale``, ``source_mtime``, and the source's extent (``page_count``, ``line_count``,
    ``duration``, ``width``, ``height``)."""

    model_config = ConfigDict(extra="forbid")

    resource_id: str
    type: Modality
    title: str
    source_path: str
    nodes: list[Node] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: str  # ISO 8601, UTC ("2025-02-16T14:32:10Z")

    def walk(self):
        for node in self.nodes:
            yield from node.walk()


Node.model_rebuild()


@dataclass(frozen=True)
class SourceFacts:
    """What a source is, as far as citing it needs: its extent in its modality (None where unknown or not
    applicable). Addresses and agent maps are checked against these."""

    modality: str
    page_count: int | None = None  # document
    line_count: int | None = None  # text
    duration: float | None = None  # video, audio: seconds
    width: int | None = None  # image, video: pixels
    height: int | None = None
    extra: tuple[tuple[str, Any], ...] = ()  # anything else a builder learnt (codec, chapters count), as pairs

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in (("page_count", self.page_count), ("line_count", self.line_count),
                                 ("duration", self.duration), ("width", self.width), ("height", self.height))
               if v is not None}
        out.update(dict(self.extra))
        return out


def modality_of(name: str, media_type: str | None) -> str | None:
    """The modality a file is cited in: paged documents PyMuPDF opens (PDF, EPUB, XPS, ...) -> document; Markdown,
    plain text, code, HTML, DOCX -> text (lines of their text); video, audio, image by media type; None otherwise."""
    fmt = formats.format_of(name)
    if fmt is not None and name.lower().endswith(tuple(formats.PYMUPDF)):
        return "document"
    if fmt is not None and fmt != "image":
        return "text"
    if media_type in ("video", "audio", "image"):
        return media_type
    return None

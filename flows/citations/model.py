"""The citation capability's contracts, shared by its modules (addresses, builders, extraction, store, service, tools).

Reference 003's shapes, as pydantic models: a :class:`ResourceMap` is a tree of :class:`Node` (dotted ids: a child's id
starts with its parent's id and a dot), each with a :class:`Location` in one modality. An :class:`Address` is a
citation in text form (``doc://textbook#pages=12-15``, ``video://lecture_01#t=192-230``, ``audio://talk#t=10-20``,
``image://diagram#bbox=0.2,0.2,0.8,0.8``, ``text://notes#lines=10-20``); ``flows.citations.address`` parses them with a
grammar and :meth:`Address.format` writes the canonical form back.

Units: pages and lines are 1-based and inclusive (``pages: [12, 15]`` is pages 12 to 15, ``lines: [10, 20]`` lines 10
to 20); times are seconds from the start (``start``/``end``); a bbox is ``[x1, y1, x2, y2]`` as fractions (0-1) of the
image's width and height, x1 < x2 and y1 < y2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Modality = Literal["document", "video", "audio", "image", "text"]
MODALITIES: tuple[str, ...] = ("document", "video", "audio", "image", "text")
SCHEME_MODALITY: dict[str, str] = {"doc": "document", "video": "video", "audio": "audio", "image": "image",
                                   "text": "text"}
MODALITY_SCHEME: dict[str, str] = {v: k for k, v in SCHEME_MODALITY.items()}

STRATEGIES: tuple[str, ...] = ("auto", "outline", "headings", "chapters", "scenes", "windows")
# what a built map came from (ResourceMapRow.origin); "none": the id is reserved, no map yet; "agent": supplied
ORIGINS: tuple[str, ...] = ("none", "outline", "headings", "chapters", "scenes", "silences", "windows", "whole",
                            "agent")

# default window sizes of the "windows" strategy (and of the fallbacks), per modality: lines, pages, seconds
DEFAULT_WINDOW: dict[str, float] = {"text": 50, "document": 10, "video": 60.0, "audio": 60.0}
MAX_NODES = 10_000  # a map with more nodes is refused (agent) or coarsened (built: windows grow)
RESOURCE_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"  # what a resource id looks like (and what an address holds)
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

    def to_address(self, resource_id: str) -> "Address":
        """The address of this location in resource ``resource_id`` (no fragment: the whole resource)."""
        scheme = MODALITY_SCHEME[self.modality]
        pages = t = bbox = lines = None
        if self.pages:
            first, last = self.pages[0], self.pages[-1]
            pages = ((first, last),)
        if self.start is not None or self.end is not None:
            t = (float(self.start or 0.0), float(self.end if self.end is not None else self.start or 0.0))
        if self.bbox:
            bbox = tuple(float(v) for v in self.bbox)  # type: ignore[assignment]
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


def format_number(value: float) -> str:
    """A time or fraction in an address: whole numbers without a point (``192``), others with up to 3 decimals and no
    trailing zeros (``145.5``, ``0.25``)."""
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    rounded = round(float(value), 3)
    if rounded == int(rounded):
        return str(int(rounded))
    return f"{rounded:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Address:
    """A citation address, parsed (``flows.citations.address.parse_address``) or built from a location.

    At most one of ``pages``/``t``/``bbox``/``lines`` is set, the one of the scheme's modality; none set means the
    whole resource (``doc://textbook``)."""

    scheme: str  # doc | video | audio | image | text
    resource_id: str
    pages: tuple[tuple[int, int], ...] | None = None  # inclusive ranges in the order given: "1,3-5" -> ((1,1),(3,5))
    t: tuple[float, float] | None = None  # seconds, start < end
    bbox: tuple[float, float, float, float] | None = None  # x1, y1, x2, y2 (fractions)
    lines: tuple[int, int] | None = None  # 1-based inclusive

    @property
    def modality(self) -> str:
        return SCHEME_MODALITY[self.scheme]

    @property
    def whole(self) -> bool:
        return self.pages is None and self.t is None and self.bbox is None and self.lines is None

    def page_list(self) -> list[int]:
        """The pages in order, each range expanded (duplicates kept out)."""
        seen: dict[int, None] = {}
        for first, last in self.pages or ():
            for page in range(first, last + 1):
                seen.setdefault(page, None)
        return list(seen)

    def fragment(self) -> str:
        if self.pages is not None:
            return "pages=" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in self.pages)
        if self.t is not None:
            return f"t={format_number(self.t[0])}-{format_number(self.t[1])}"
        if self.bbox is not None:
            return "bbox=" + ",".join(format_number(v) for v in self.bbox)
        if self.lines is not None:
            first, last = self.lines
            return f"lines={first}" if first == last else f"lines={first}-{last}"
        return ""

    def format(self) -> str:
        """The canonical text: ``doc://textbook#pages=12-15``, ``video://l#t=192-220`` (seconds), ...."""
        fragment = self.fragment()
        return f"{self.scheme}://{self.resource_id}" + (f"#{fragment}" if fragment else "")

    def location(self) -> Location:
        """This address as a node location (a page list becomes its first-to-last span)."""
        pages = None
        if self.pages:
            listed = self.page_list()
            pages = [min(listed), max(listed)]
        return Location(modality=self.modality,  # type: ignore[arg-type]
                        start=self.t[0] if self.t else None, end=self.t[1] if self.t else None,
                        pages=pages, lines=list(self.lines) if self.lines else None,
                        bbox=list(self.bbox) if self.bbox else None)

    def __str__(self) -> str:
        return self.format()


def modality_of(name: str, media_type: str | None) -> str | None:
    """The modality a file is cited in: paged documents PyMuPDF opens (PDF, EPUB, XPS, ...) -> document; Markdown,
    plain text, code, HTML, DOCX -> text (lines of their text); video, audio, image by media type; None otherwise."""
    from flows.documents import formats

    fmt = formats.format_of(name)
    if fmt is not None and name.lower().endswith(tuple(formats.PYMUPDF)):
        return "document"
    if fmt is not None and fmt != "image":
        return "text"
    if media_type in ("video", "audio", "image"):
        return media_type
    return None

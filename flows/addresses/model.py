"""What a citation address is: a resource id and, after ``#``, the part of it cited (reference 003).

``doc://textbook#pages=12-15``, ``video://lecture_01#t=192-230``, ``audio://talk#t=10-20``,
``image://diagram#bbox=0.2,0.2,0.8,0.8``, ``text://notes#lines=10-20``; without ``#`` the whole resource. An
:class:`Address` holds one, and :meth:`Address.format` writes its canonical text (``flows.citations.address`` parses
the text back with its grammar). :func:`hit_address` is a search hit's address: what documents and the semantic index
put beside each hit.

Units: pages and lines are 1-based and inclusive (``pages=12-15`` is pages 12 to 15); times are seconds from the
start, kept to the millisecond; a bbox is ``x1,y1,x2,y2`` as fractions (0-1) of the image's width and height, x1 < x2
and y1 < y2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Modality = Literal["document", "video", "audio", "image", "text"]
MODALITIES: tuple[str, ...] = ("document", "video", "audio", "image", "text")
SCHEME_MODALITY: dict[str, str] = {"doc": "document", "video": "video", "audio": "audio", "image": "image",
                                   "text": "text"}
MODALITY_SCHEME: dict[str, str] = {v: k for k, v in SCHEME_MODALITY.items()}
RESOURCE_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}"  # what a resource id looks like (and what an address holds)


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
    """A citation address, parsed (``flows.citations.address.parse_address``) or built (from a map node's location,
    from a search hit).

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

    def __str__(self) -> str:
        return self.format()


def hit_address(resource_id: str, modality: str | None, *, page: int | None = None, page_end: int | None = None,
                line_start: int | None = None, line_end: int | None = None) -> str:
    """A search hit's place (a chunk, a matching line) as the canonical address ``resolve`` accepts, in the file
    cited as ``resource_id``: ``doc://<id>#pages=3`` (or ``=3-4``) for paged documents (their hits have pages),
    ``text://<id>#lines=10-20`` for the rest. An image read with OCR is cited whole (``image://<id>``: its text's
    lines are no place in the image), and so is a paged document's hit without a page (``doc://<id>``)."""
    if modality == "image":
        return Address("image", resource_id).format()
    if page is not None:
        return Address("doc", resource_id, pages=((page, max(page, page_end or page)),)).format()
    if modality == "document" or line_start is None:
        return Address("doc" if modality == "document" else "text", resource_id).format()
    return Address("text", resource_id, lines=(line_start, line_end if line_end is not None else line_start)).format()

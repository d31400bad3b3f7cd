"""The shapes of built maps: node ids from titles (slugs made unique among siblings), nested sections from a flat
outline (each runs to the next entry at its level or a higher one), windows of pages, lines or seconds, their titles,
and the window sizes a caller may ask for. Maps over ``model.MAX_NODES`` nodes are coarsened here: windows double,
the deepest outline level goes."""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Sequence

from flows.citations.model import DEFAULT_WINDOW, MAX_NODES, Location, Node
from store.errors import InvalidInput

SLUG_MAX = 40  # characters of a node id part


def slug(title: str | None, fallback: str) -> str:
    """A node id part from a title: accents dropped, lower case, runs of anything but [a-z0-9] as one "_", at most
    40 characters; ``fallback`` when nothing is left ("Über — 2" -> "uber_2"; "" or "Ωμέγα" -> fallback)."""
    ascii_text = unicodedata.normalize("NFKD", title or "").encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")
    text = text[:SLUG_MAX].rstrip("_")
    return text or fallback


def unique_id(base: str, taken: set[str]) -> str:
    """``base``, or ``base_2``, ``base_3`` ... when a sibling has it already (kept within 40 characters)."""
    name, n = base, 1
    while name in taken:
        n += 1
        suffix = f"_{n}"
        name = base[:SLUG_MAX - len(suffix)] + suffix
    taken.add(name)
    return name


def clock(seconds: float, *, up: bool = False) -> str:
    """``75`` -> "1:15", ``3725`` -> "1:02:05": whole seconds, rounded down (a span's start) or up (``up``: its
    end), so a title's span always covers the node's."""
    total = math.ceil(seconds - 1e-6) if up else math.floor(seconds + 1e-6)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def rounded(value: float) -> float:
    """A time in a location: milliseconds are enough."""
    return round(float(value), 3)


def whole_window(window: float | None, modality: str, unit: str) -> int:
    """A window of pages or lines: a whole number, at least 1 (InvalidInput otherwise); the modality's default."""
    if window is None:
        return int(DEFAULT_WINDOW[modality])
    if not math.isfinite(window) or window < 1 or float(window) != int(window):
        raise InvalidInput(f"window must be a whole number of {unit} of at least 1, got {window!r}", field="window")
    return int(window)


def seconds_window(window: float | None, modality: str) -> float:
    """A window of seconds: above 0 (InvalidInput otherwise); the modality's default."""
    if window is None:
        return float(DEFAULT_WINDOW[modality])
    if not math.isfinite(window) or window <= 0:
        raise InvalidInput(f"window must be a number of seconds above 0, got {window!r}", field="window")
    return float(window)


def check_window(window: float | None) -> None:
    if window is not None and (not isinstance(window, (int, float)) or not math.isfinite(window) or window <= 0):
        raise InvalidInput(f"window must be a number above 0, got {window!r}", field="window")


@dataclass
class _Entry:
    level: int
    title: str
    first: int
    last: int = 0
    children: list["_Entry"] = field(default_factory=list)


def _ranges(items: Sequence[tuple[int, str, int]], extent: int) -> list[_Entry]:
    """Nested entries from flat (level, title, start) items in order: an entry runs from its start to the item
    before the next one at the same or a higher level (never before its own start), else to ``extent``."""
    entries = [_Entry(level, title, start) for level, title, start in items]
    # the next item at the same or a higher level (smaller or equal level number), found with a stack in one pass
    pending: list[_Entry] = []
    for entry in entries:
        while pending and pending[-1].level >= entry.level:
            done = pending.pop()
            done.last = max(done.first, entry.first - 1)
        pending.append(entry)
    for entry in pending:
        entry.last = max(entry.first, extent)
    roots: list[_Entry] = []
    stack: list[_Entry] = []
    for entry in entries:
        while stack and stack[-1].level >= entry.level:
            stack.pop()
        (stack[-1].children if stack else roots).append(entry)
        stack.append(entry)
    return roots


def _depth(entries: list[_Entry]) -> int:
    return max((1 + _depth(e.children) for e in entries), default=0)


def _count(entries: list[_Entry]) -> int:
    return sum(1 + _count(e.children) for e in entries)


def _prune(entries: list[_Entry], keep: int) -> None:
    for entry in entries:
        if keep <= 1:
            entry.children = []
        else:
            _prune(entry.children, keep - 1)


def _nodes(entries: list[_Entry], modality: str, kind: str, parent: str = "") -> list[Node]:
    taken: set[str] = set()
    out = []
    for entry in entries:
        node_id = (parent + "." if parent else "") + unique_id(slug(entry.title, kind), taken)
        span = [entry.first, entry.last]
        location = Location(modality=modality, pages=span) if modality == "document" else \
            Location(modality=modality, lines=span)
        out.append(Node(id=node_id, title=entry.title, type=kind, location=location,
                        children=_nodes(entry.children, modality, kind, node_id)))
    return out


def outline_nodes(items: list[tuple[int, str, int]], extent: int, modality: str) -> list[Node]:
    roots = _ranges(items, extent)
    depth = _depth(roots)
    while _count(roots) > MAX_NODES and depth > 1:  # too many: the deepest level goes
        depth -= 1
        _prune(roots, depth)
    if _count(roots) > MAX_NODES:
        roots = roots[:MAX_NODES]
    return _nodes(roots, modality, "section")


def _count_windows(extent: float, size: float) -> int:
    return max(1, math.ceil(extent / size - 1e-9))


def _coarsen(extent: float, size: float) -> float:
    while _count_windows(extent, size) > MAX_NODES:
        size *= 2
    return size


def unit_windows(extent: int, size: int, modality: str, label: str) -> list[Node]:
    """Windows of ``size`` pages or lines over 1..extent ("Pages 1-10", "Lines 51-100")."""
    if extent < 1:
        return []
    size = int(_coarsen(extent, size))
    out = []
    for i, first in enumerate(range(1, extent + 1, size), start=1):
        span = [first, min(extent, first + size - 1)]
        location = Location(modality=modality, pages=span) if modality == "document" else \
            Location(modality=modality, lines=span)
        out.append(Node(id=f"w{i}", title=f"{label} {span[0]}-{span[1]}", type="window", location=location))
    return out


def time_windows(duration: float, size: float, modality: str) -> list[Node]:
    """Windows of ``size`` seconds over the duration, the last one shorter ("0:00-1:00", "1:00-1:30")."""
    size = _coarsen(duration, size)
    out = []
    count = _count_windows(duration, size)
    for i in range(count):
        start, end = i * size, min(duration, (i + 1) * size)
        if end - start <= 0:
            break
        out.append(Node(id=f"w{i + 1}", title=f"{clock(start)}-{clock(end, up=True)}", type="window",
                        location=Location(modality=modality,
                                          start=rounded(start), end=rounded(end))))
    return out

"""Helpers of the text engine's tests: segments and snapshots built from documents, the line test of a query tree
(what the caller's ``check`` is) and the plain line scan every search must agree with."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Iterable

from store.fold import fold
from store.textindex import AllOf, Leaf, Node, NoneOf, Snapshot
from store.textindex.segment import DocIn, Segment, SegmentBuilder

_names = itertools.count(1)


def write_segment(directory: Path, docs: Iterable[DocIn]) -> Segment:
    """The documents written as one segment file in ``directory``, opened."""
    builder = SegmentBuilder()
    for doc in docs:
        builder.add(doc)
    path = directory / f"seg-{next(_names):06d}.tx"
    builder.write(path)
    return Segment(path)


def snapshot_of(segments: Iterable[Segment], deleted: dict[str, frozenset[int]] | None = None,
                queued: Iterable[int] = ()) -> Snapshot:
    segs = tuple(segments)
    gone = deleted or {}
    return Snapshot(segs, {s.name: gone.get(s.name, frozenset()) for s in segs}, frozenset(queued))


def holds(node: Node, line: str) -> bool:
    """Whether a folded line matches the query tree (each needle a substring of it)."""
    if isinstance(node, Leaf):
        assert node.needle is not None
        return node.needle in line
    if isinstance(node, NoneOf):
        return not holds(node.child, line)
    if isinstance(node, AllOf):
        return all(holds(c, line) for c in node.children)
    return any(holds(c, line) for c in node.children)


def check_of(node: Node) -> Callable[[str], bool]:
    return lambda line: holds(node, line)


def scan(docs: Iterable[DocIn], node: Node) -> list[tuple[int, int]]:
    """(entry id, line number from 1) of every matching line of ``docs``, in their order."""
    return [(d.entry_id, n) for d in docs for n, line in enumerate(d.lines, 1) if holds(node, fold(line))]

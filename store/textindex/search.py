"""Boolean line search over the text engine: which lines match, how many, which documents answer best.

A query is a tree of needles (``Leaf``: a folded substring; None for a term the index cannot narrow, such as a fuzzy
one) under ``AllOf`` / ``AnyOf`` / ``NoneOf``. In each segment every node becomes a set of lines (a roaring bitmap)
and whether that set is exact or only holds every match (``store.textindex.tokens``): AND intersects, OR unites, NOT
takes an exact set from the lines in scope (an inexact one cannot be taken away, so it leaves every line a
candidate). An exact result is the answer as it stands: its size is the count. Otherwise each candidate line is
read from the segment and decided by ``check`` (the caller's line test over the folded line), so the result always
equals a plain scan of the lines.

Ranking (``sort="relevance"``): documents are scored with BM25 over their matching lines: for each positive needle
(not under a NOT) its frequency in a document is the number of the document's matching lines that hold it, its
rarity ``ln(1 + (L - l + 0.5) / (l + 0.5))`` with ``l`` the lines in scope holding it out of ``L``, and a long
document's counts are damped against the average length (k1 = 1.2, b = 0.75). The best documents come first, each
with its matches in line order. ``sort="path"`` gives documents in path order instead.
"""

from __future__ import annotations

import array
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Union

import numpy as np
from pyroaring import BitMap

from store.fold import fold
from store.textindex.index import Snapshot
from store.textindex.segment import Segment
from store.textindex.tokens import analyse

K1, B = 1.2, 0.75
VERIFY_BLOCK = 512  # candidate lines read between two releases of the segment's pages


@dataclass(frozen=True)
class Leaf:
    needle: str | None  # folded; None: every line is a candidate


@dataclass(frozen=True)
class AllOf:
    children: tuple["Node", ...]


@dataclass(frozen=True)
class AnyOf:
    children: tuple["Node", ...]


@dataclass(frozen=True)
class NoneOf:
    child: "Node"


Node = Union[Leaf, AllOf, AnyOf, NoneOf]


@dataclass(frozen=True)
class Scope:
    """Documents under any of ``under`` (absolute folders), or the one entry ``entry_id``; neither: all."""

    under: tuple[str, ...] | None = None
    entry_id: int | None = None


@dataclass
class Hit:
    entry_id: int
    path: str
    format: str
    line: int  # from 1
    text: str
    before: list[str]
    after: list[str]
    page: int
    ocr: bool
    score: float


@dataclass
class Result:
    hits: list[Hit] = field(default_factory=list)
    total: int = 0
    queued: frozenset[int] = frozenset()  # entries whose text is not searchable yet


class SearchTimeout(Exception):
    """The search ran past its deadline."""


@dataclass(frozen=True)
class _InScope:
    lines: BitMap  # the live lines of the documents in scope
    docs: np.ndarray  # those documents
    doc_lines: int  # their lines (the sum of their lengths)


def _in_scope(seg: Segment, deleted: frozenset[int], scope: Scope) -> _InScope:
    """The live documents of ``seg`` in ``scope`` and their lines (remembered by the segment)."""
    return seg.remember(("in_scope", deleted, scope), lambda: _find_in_scope(seg, deleted, scope))


def _find_in_scope(seg: Segment, deleted: frozenset[int], scope: Scope) -> _InScope:
    if scope.entry_id is not None:
        docs = [k for k in np.flatnonzero(seg.entry_ids == scope.entry_id).tolist() if k not in deleted]
    elif scope.under is not None:
        prefixes = tuple(d.rstrip("/") + "/" for d in scope.under)
        docs = [k for k, d in enumerate(seg.docs) if k not in deleted and d.path.startswith(prefixes)]
    else:
        docs = [k for k in range(len(seg.docs)) if k not in deleted]
    if len(docs) == len(seg.docs):
        lines = BitMap()
        lines.add_range(0, seg.lines)
    else:
        lines = seg.docs_ranges(docs)
    found = np.array(docs, dtype=np.int64)
    return _InScope(lines, found, int(seg.doc_count[found].sum()) if len(found) else 0)


def _line_docs(seg: Segment) -> np.ndarray:
    """The document index of each line of ``seg`` (remembered by the segment)."""
    dtype = np.uint16 if len(seg.docs) < 65_536 else np.uint32
    return seg.remember("line_docs", lambda: np.repeat(np.arange(len(seg.docs), dtype=dtype),
                                                       seg.doc_count.astype(np.int64)))


def _leaf(seg: Segment, leaf: Leaf, universe: BitMap) -> tuple[BitMap, bool]:
    if leaf.needle is None:
        return universe, False
    need = analyse(leaf.needle)
    if need.never:
        return BitMap(), True
    if not need.runs:
        return universe, False
    sets = sorted((seg.union(seg.find_tokens(run)) for run in need.runs), key=len)
    out = sets[0]
    for other in sets[1:]:
        out = out & other
    return out, need.exact


class _Eval:
    """One query over one segment: each node's lines, the positive leaves' lines kept for ranking."""

    def __init__(self, seg: Segment, universe: BitMap) -> None:
        self.seg, self.universe = seg, universe
        self.positive: list[BitMap] = []

    def run(self, node: Node, positive: bool = True) -> tuple[BitMap, bool]:
        if isinstance(node, Leaf):
            lines, exact = _leaf(self.seg, node, self.universe)
            if positive:
                self.positive.append(lines)
            return lines, exact
        if isinstance(node, NoneOf):
            lines, exact = self.run(node.child, not positive)
            return (self.universe - lines, True) if exact else (self.universe, False)
        parts = [self.run(c, positive) for c in node.children]
        exact = all(e for _, e in parts)
        maps = sorted((m for m, _ in parts), key=len)
        if isinstance(node, AllOf):
            out = maps[0]
            for m in maps[1:]:
                if not out:
                    break
                out = out & m
            return out, exact
        return BitMap.union(*maps) if len(maps) > 1 else maps[0], exact


def _verify(seg: Segment, lines: BitMap, check: Callable[[str], bool], deadline: float | None) -> BitMap:
    """The lines of ``lines`` that ``check`` accepts, read from the segment's text a block at a time. After each
    block the segment's pages are let go (Segment.release): a read fault maps the pages around it too, so lines
    read here and there would otherwise leave tens of kB resident each, hundreds of MB for a few thousand lines."""
    ids = np.frombuffer(lines.to_array(), dtype=np.uint32)
    keep = array.array("I")
    for start in range(0, len(ids), VERIFY_BLOCK):
        if deadline is not None and time.monotonic() > deadline:
            raise SearchTimeout()
        block = ids[start:start + VERIFY_BLOCK]
        keep.extend(i for i, text in zip(block.tolist(), seg.texts(block)) if check(fold(text)))
        seg.release()
    return BitMap(keep)


@dataclass
class _Part:
    seg: Segment
    matches: BitMap
    positive: list[BitMap]
    scope: _InScope


def search(snapshot: Snapshot, query: Node, check: Callable[[str], bool], *, scope: Scope = Scope(),
           limit: int = 20, context: int = 0, sort: str = "relevance", deadline: float | None = None) -> Result:
    """Every line in scope matching ``query`` (decided by ``check`` where the index is not exact), counted; the
    first ``limit`` in ``sort`` order returned with ``context`` lines around them (never crossing documents)."""
    parts: list[_Part] = []
    for seg in snapshot.segments:
        if deadline is not None and time.monotonic() > deadline:
            raise SearchTimeout()
        in_scope = _in_scope(seg, snapshot.deleted.get(seg.name, frozenset()), scope)
        universe = in_scope.lines
        if not universe:
            continue
        ev = _Eval(seg, universe)
        lines, exact = ev.run(query)
        lines = lines & universe
        if not exact and lines:
            lines = _verify(seg, lines, check, deadline)
        parts.append(_Part(seg, lines, ev.positive, in_scope))
    total = sum(len(p.matches) for p in parts)
    order = _order(parts, sort, limit)
    hits: list[Hit] = []
    for k, d, score in order:
        if len(hits) >= limit:
            break
        part = parts[k]
        doc = part.seg.docs[d]
        end = doc.first + doc.count
        for i in part.matches.iter_equal_or_larger(doc.first):
            if i >= end or len(hits) >= limit:
                break
            hits.append(_hit(part.seg, d, i, context, score))
    for seg in snapshot.segments:  # what this search read stays in the page cache, not in this process's memory
        seg.release()
    return Result(hits, total, snapshot.queued)


def _order(parts: list[_Part], sort: str, limit: int) -> list[tuple[int, int, float]]:
    """(part, document, score) of the documents with a match, best first (at least the ``limit`` best: as many as
    can be shown), or all of them in path order."""
    if sort == "path":
        by_path: list[tuple[str, int, int]] = []
        for k, p in enumerate(parts):
            if p.matches:
                counts = _counts(p.seg, p.matches)
                by_path += [(p.seg.docs[d].path, k, d) for d in np.flatnonzero(counts).tolist()]
        return [(k, d, 0.0) for _, k, d in sorted(by_path)]
    scope_lines = sum(p.scope.doc_lines for p in parts) or 1
    n_terms = max((len(p.positive) for p in parts), default=0)
    line_freq = [sum(p.positive[t].intersection_cardinality(p.scope.lines) for p in parts if t < len(p.positive))
                 for t in range(n_terms)]
    idf = [math.log(1 + (scope_lines - f + 0.5) / (f + 0.5)) for f in line_freq]
    total_docs = sum(len(p.scope.docs) for p in parts)
    avg = scope_lines / total_docs if total_docs else 1.0
    scores: list[np.ndarray] = []
    where: list[tuple[int, np.ndarray]] = []
    for k, p in enumerate(parts):
        if not p.matches:
            continue
        matched = _counts(p.seg, p.matches)
        docs = np.flatnonzero(matched)
        norm = K1 * (1 - B + B * p.seg.doc_count[docs].astype(np.float64) / avg)
        score = np.zeros(len(docs))
        for t, lines in enumerate(p.positive):
            tf = matched[docs] if len(p.positive) == 1 else _counts(p.seg, lines & p.matches)[docs]
            score += idf[t] * tf * (K1 + 1) / (tf + norm)
        if not p.positive:
            score += matched[docs]
        scores.append(score)
        where.append((k, docs))
    if not scores:
        return []
    score = np.concatenate(scores)
    part = np.concatenate([np.full(len(d), k, dtype=np.int64) for k, d in where])
    doc = np.concatenate([d for _, d in where])
    if len(score) > limit:  # each document has a match: the best ``limit`` of them are all that can be shown
        top = np.argpartition(-score, limit - 1)[:limit]
        score, part, doc = score[top], part[top], doc[top]
    order = np.lexsort((doc, part, -score))
    return list(zip(part[order].tolist(), doc[order].tolist(), score[order].tolist()))


def candidate_entries(snapshot: Snapshot, query: Node) -> set[int]:
    """The entries with a line the index cannot rule out for ``query`` (no line check), and every entry not indexed
    yet: a superset of the entries with a matching line, for plan conditions to narrow to."""
    found: set[int] = set(snapshot.queued)
    for seg in snapshot.segments:
        in_scope = _in_scope(seg, snapshot.deleted.get(seg.name, frozenset()), Scope())
        if not in_scope.lines:
            continue
        lines, _ = _Eval(seg, in_scope.lines).run(query)
        lines = lines & in_scope.lines
        if lines:
            found.update(seg.entry_ids[np.flatnonzero(_counts(seg, lines))].tolist())
    return found


def _counts(seg: Segment, lines: BitMap) -> np.ndarray:
    """How many of ``lines`` each document of ``seg`` holds."""
    ids = np.frombuffer(lines.to_array(), dtype=np.uint32)
    return np.bincount(_line_docs(seg)[ids], minlength=len(seg.docs))


def _hit(seg: Segment, d: int, i: int, context: int, score: float) -> Hit:
    doc = seg.docs[d]
    end = doc.first + doc.count
    page, ocr = seg.page_of(d, i)
    before = seg.line_range(max(doc.first, i - context), i) if context else []
    after = seg.line_range(i + 1, min(end, i + 1 + context)) if context else []
    return Hit(doc.entry_id, doc.path, doc.format, i - doc.first + 1, seg.line(i), before, after, page, ocr,
               round(float(score), 4))

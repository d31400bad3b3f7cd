"""Keyword ranking of passages (the chunks of a semantic collection) from the same line index document search uses.

A passage is a run of lines of one document (``chunks.line_start .. line_end``); the engine knows which lines hold
each token, so a word's frequency in a passage is the number of the passage's lines that hold it, and BM25 ranks the
passages (k1 = 1.2, b = 0.75 over the passage's length in characters) with each word's rarity counted over the
passages; the best of them are then scored again with the words' occurrences counted in their text. A query word
matches the tokens that are the word or share its English stem (Snowball), as a full-text engine with a Porter
tokenizer would; the caller drops function words.

``UnitMap`` places a collection's passages on the lines of a snapshot's segments once (each line knows the passage
that starts last at or before it, and the one before when they overlap), so ranking reads only the lines holding the
query's words: a gather and a count per word, whatever the number of passages.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import snowballstemmer
from pyroaring import BitMap

from store.textindex.index import Snapshot
from store.fold import fold
from store.textindex.segment import Segment
from store.textindex.tokens import words_of

K1, B = 1.2, 0.75
_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


@dataclass(frozen=True)
class Units:
    """A collection's passages: ids, entries, 1-based line ranges and lengths (characters), one array each."""

    ids: np.ndarray
    entries: np.ndarray
    first: np.ndarray
    last: np.ndarray
    length: np.ndarray
    version: object = None  # what the caller keys its cache with (the collection's version)


@dataclass
class _Placed:
    seg: Segment
    primary: np.ndarray  # per local line: index into Units of the passage starting last at or before it, or -1
    secondary: np.ndarray  # ... and of an overlapping earlier passage, or -1
    lines: BitMap  # the lines some passage covers


class UnitMap:
    """The passages of ``units`` placed on the lines of ``snapshot`` (documents not in the index are left out)."""

    def __init__(self, snapshot: Snapshot, units: Units) -> None:
        self.units = units
        self.generation = snapshot.generation
        self.placed: list[_Placed] = []
        # where each passage lies: its placed segment (index into ``placed``, -1: not in the index) and lines
        self.at = np.full(len(units.ids), -1, dtype=np.int32)
        self.first = np.zeros(len(units.ids), dtype=np.int64)
        self.last = np.zeros(len(units.ids), dtype=np.int64)
        where: dict[int, tuple[int, int]] = {}
        for k, seg in enumerate(snapshot.segments):
            gone = snapshot.deleted.get(seg.name, frozenset())
            for d, doc in enumerate(seg.docs):
                if d not in gone:
                    where[doc.entry_id] = (k, d)
        per_seg: dict[int, list[int]] = {}
        for u, entry in enumerate(units.entries.tolist()):
            if entry in where:
                per_seg.setdefault(where[entry][0], []).append(u)
        for k, members in per_seg.items():
            seg = snapshot.segments[k]
            idx = np.array(members, dtype=np.int64)
            docs = np.array([where[int(e)][1] for e in units.entries[idx]], dtype=np.int64)
            base = seg.doc_first[docs].astype(np.int64)
            count = seg.doc_count[docs].astype(np.int64)
            first = base + np.clip(units.first[idx] - 1, 0, np.maximum(count - 1, 0))
            last = base + np.clip(units.last[idx] - 1, 0, np.maximum(count - 1, 0))
            order = np.lexsort((last, first))
            idx, first, last = idx[order], first[order], last[order]
            self.at[idx], self.first[idx], self.last[idx] = len(self.placed), first, last
            primary = np.full(seg.lines, -1, dtype=np.int32)
            secondary = np.full(seg.lines, -1, dtype=np.int32)
            covered = BitMap()
            for u, a, b in zip(idx.tolist(), first.tolist(), last.tolist()):
                # a line already given to an earlier passage keeps it as its secondary
                prev = primary[a:b + 1]
                taken = prev >= 0
                secondary[a:b + 1][taken] = prev[taken]
                primary[a:b + 1] = u
                covered.add_range(a, b + 1)
            self.placed.append(_Placed(seg, primary, secondary, covered))


def word_tokens(seg: Segment, word: str) -> tuple[int, ...]:
    """The tokens of ``seg`` that are ``word`` or share its stem (``word`` folded, letters and digits only)."""
    target = stem(word)
    raw = word.encode("utf-8")
    prefix = target.encode("utf-8")[:max(3, len(target) - 1)]
    lo = bisect.bisect_left(seg.tokens, prefix)
    hi = bisect.bisect_left(seg.tokens, prefix + b"\xff", lo)
    found = []
    for i in range(lo, hi):
        token = seg.tokens[i]
        if token == raw or stem(token.decode("utf-8", "replace")) == target:
            found.append(i)
    return tuple(found)


def rank_units(snapshot: Snapshot, placed: UnitMap, words: list[str], *, limit: int,
               allowed: np.ndarray | None = None, rerank: int = 100) -> list[tuple[int, float]]:
    """The passages best matching any of ``words`` by BM25, best first, at most ``limit``: (passage id, score).
    ``allowed``: a boolean mask over the passages (the caller's filters); None: all. The passages are first scored
    with each word's frequency counted in lines (from the postings alone, only the passages a word touches); the
    best ``4 * limit + 20`` (at most ``rerank``, at least ``limit``) are then scored again with the words'
    occurrences counted in their text, which orders them exactly."""
    units = placed.units
    n = len(units.ids)
    if not n or not words or limit <= 0:
        return []
    mask = np.ones(n, dtype=bool) if allowed is None else allowed
    total = int(mask.sum())
    if not total:
        return []
    avg = float(units.length[mask].mean()) or 1.0
    score = np.zeros(n)
    weights: list[tuple[float, set[bytes]]] = []  # per word: its weight and the tokens that count as it
    for word in dict.fromkeys(words):
        touched: list[np.ndarray] = []
        matched: set[bytes] = set()
        for p in placed.placed:
            tokens = word_tokens(p.seg, word)
            if not tokens:
                continue
            matched.update(p.seg.tokens[t] for t in tokens)
            lines = p.seg.union(tokens) & p.lines
            if lines:
                ids = np.frombuffer(lines.to_array(), dtype=np.uint32)
                touched += [p.primary[ids], p.secondary[ids]]
        if not touched:
            continue
        hits = np.concatenate(touched)
        hits = hits[hits >= 0]
        hits = hits[mask[hits]]
        if not len(hits):
            continue
        found, tf = np.unique(hits, return_counts=True)  # each passage this word is in, and on how many lines
        idf = math.log(1 + (total - len(found) + 0.5) / (len(found) + 0.5))
        weights.append((idf, matched))
        norm = K1 * (1 - B + B * units.length[found] / avg)
        score[found] += idf * tf * (K1 + 1) / (tf + norm)
    best = _top(score, units.ids, max(limit, min(rerank, 4 * limit + 20)))
    if not len(best):
        return []
    exact = np.array([_exact_score(placed, int(u), weights, K1 * (1 - B + B * float(units.length[u]) / avg))
                      for u in best])
    order = np.lexsort((units.ids[best], -exact))[:limit]
    return [(int(units.ids[best[k]]), float(exact[k])) for k in order]


def _top(score: np.ndarray, ids: np.ndarray, k: int) -> np.ndarray:
    """The indexes of the ``k`` best positive scores (ties: the lower id)."""
    found = np.flatnonzero(score > 0)
    if len(found) > k:
        found = found[np.argpartition(-score[found], k - 1)[:k]]
    return found[np.lexsort((ids[found], -score[found]))]


def _exact_score(placed: UnitMap, u: int, weights: list[tuple[float, set[bytes]]], norm: float) -> float:
    """BM25 of passage ``u`` with each word's occurrences counted in the passage's text."""
    seg = placed.placed[int(placed.at[u])].seg
    text = "\n".join(seg.line_range(int(placed.first[u]), int(placed.last[u]) + 1))
    counts = Counter(words_of(fold(text).encode("utf-8", "surrogatepass")))
    out = 0.0
    for idf, tokens in weights:
        tf = sum(counts[t] for t in tokens)
        if tf:
            out += idf * tf * (K1 + 1) / (tf + norm)
    return out

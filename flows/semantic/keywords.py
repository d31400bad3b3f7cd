"""The keyword side of semantic search: a collection's chunks ranked by BM25 from the text engine's line index (the
one document search uses; store.textindex.units), with the caller's filters, best first.

Chunks are passages of lines of their documents' extracted text, so the engine counts, for each word of the
question (function words dropped: store.semantic.query_words), the chunk's lines that hold the word or a word of the
same stem. The passages' placement on the index is kept per collection version and index generation, so a question
reads only the lines holding its words. Chunks whose documents the engine has not indexed yet (it is catching up)
are found by the vector side alone until it has.
"""

from __future__ import annotations

import threading
from typing import Iterable

import numpy as np
from sqlalchemy.engine import Engine

from flows.documents.text_index import text_index
from store.semantic import query_words
from store.textindex.source import collection_units
from store.textindex import Snapshot
from store.textindex.units import UnitMap, Units, rank_units

_lock = threading.Lock()
_units: dict[tuple[str, int], Units] = {}
_maps: dict[tuple[str, int], UnitMap] = {}


def _placed(engine: Engine, collection: dict) -> tuple[Snapshot, UnitMap]:
    index = text_index(engine)
    snapshot = index.snapshot()
    key = (str(index.dir), int(collection["id"]))
    version = collection.get("version")
    with _lock:
        units = _units.get(key)
        if units is None or units.version != version:
            units = _units[key] = Units(*collection_units(engine, int(collection["id"])), version=version)
        placed = _maps.get(key)
        if placed is None or placed.units is not units or placed.generation != snapshot.generation:
            placed = _maps[key] = UnitMap(snapshot, units)
    return snapshot, placed


def keyword_search(engine: Engine, collection: dict, query: str, *, limit: int,
                   entry_ids: Iterable[int] | None = None) -> list[tuple[int, float]]:
    """The collection's chunks best matching ``query``'s words by BM25, best first, at most ``limit``: (chunk id,
    score). ``entry_ids`` restricts them to those entries (the caller's set, condition and path filters)."""
    words = query_words(query)
    if not words or limit <= 0:
        return []
    snapshot, placed = _placed(engine, collection)
    allowed = None
    if entry_ids is not None:
        allowed = np.isin(placed.units.entries, np.fromiter((int(e) for e in entry_ids), dtype=np.int64))
    return rank_units(snapshot, placed, words, limit=limit, allowed=allowed)

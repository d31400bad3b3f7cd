"""The store side of the semantic index: collections, their entries' chunks and vectors, the words of keyword queries.

A collection (``collections``) records the model and backend its vectors came from; asking for it with another model
is refused (MODEL_MISMATCH), so vectors of two models never mix. Each embedded entry has a ``collection_entries`` row
(its work key, status, chunk count), its ``chunks`` (text and place) and one ``embeddings`` row per chunk (float32
little-endian bytes, L2-normalised). The hnswlib file of a collection (``flows.semantic.vectors``) records the
collection's version it holds and catches up from here when it is behind.

- :mod:`store.semantic.collections`: the collections themselves;
- :mod:`store.semantic.entries`: an entry's state in a collection, and the writes that replace or remove its chunks;
- :mod:`store.semantic.vectors`: the stored vectors (their bytes, streamed reads);
- :mod:`store.semantic.chunks`: chunk rows (by id, by entry, those a filter permits);
- :mod:`store.semantic.keywords`: the words a keyword query looks for (flows.semantic.keywords ranks chunks by them).

Everything is importable from here (``from store import semantic as store_sem``).
"""

from __future__ import annotations

from store.semantic.chunks import allowed_chunk_ids, chunk_rows, entry_chunks
from store.semantic.collections import (add_folder, collection_by_id, collection_names, collection_version,
                                        drop_collection, ensure_collection, get_collection, list_collections,
                                        require_collection)
from store.semantic.entries import EntryChunks, Replaced, entry_keys, entry_states, remove_entries, replace_entries
from store.semantic.keywords import MAX_QUERY_WORDS, STOPWORDS, query_words
from store.semantic.vectors import chunk_ids, entry_vectors, iter_vectors, vector_bytes, vector_count, vector_of

__all__ = [
    "MAX_QUERY_WORDS", "STOPWORDS", "EntryChunks", "Replaced", "add_folder", "allowed_chunk_ids", "chunk_ids",
    "chunk_rows", "collection_by_id", "collection_names", "collection_version", "drop_collection", "ensure_collection",
    "entry_chunks", "entry_keys", "entry_states", "entry_vectors", "get_collection", "iter_vectors",
    "list_collections", "query_words", "remove_entries", "replace_entries", "require_collection",
    "vector_bytes", "vector_count", "vector_of",
]

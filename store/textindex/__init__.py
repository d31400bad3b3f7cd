"""The text engine: a line-level index of the extracted text that answers boolean substring searches (which lines,
how many), ranks documents with BM25, and follows the store's change log. The store stays the source of truth; the
engine's files are rebuilt from it when missing or unreadable.

- ``store.textindex.tokens``: how folded text is cut into tokens, and what a needle asks of them;
- ``store.textindex.segment``: one immutable segment file (documents, vocabulary, postings, line text);
- ``store.textindex.index``: the directory of segments, its manifest, catching up with the store, merging;
- ``store.textindex.search``: boolean line search and document ranking over a snapshot;
- ``store.textindex.source``: what it reads from the store;
- ``store.textindex.changes``: the store's change log read so that a change committed late is not missed.
"""

from store.textindex.index import Snapshot, TextIndex
from store.textindex.search import (AllOf, AnyOf, Hit, Leaf, Node, NoneOf, Result, Scope, SearchTimeout,
                                    candidate_entries, search)

__all__ = ["AllOf", "AnyOf", "Hit", "Leaf", "Node", "NoneOf", "Result", "Scope", "SearchTimeout", "Snapshot",
           "TextIndex", "candidate_entries", "search"]

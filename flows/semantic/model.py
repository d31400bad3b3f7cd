"""The semantic index's contracts, shared by its modules (chunking, encoder, store, vectors, search, labels, tools).

Text comes from the documents capability (``store.documents``): a document's text is its pages' lines in page
order, joined by newlines, lines numbered from 1 across the whole document. A chunk's ``start``/``end`` are offsets
into that text, ``line_start``/``line_end`` its first and last line, ``page``/``page_end`` the pages of its first and
last character (None for formats without pages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from flows.addresses.model import hit_address
from flows.core.settings import BACKENDS, DEFAULT_MODEL  # noqa: F401  (re-exported: defined once, with the settings)

DEFAULT_COLLECTION = "default"
SearchMode = Literal["semantic", "keyword", "hybrid"]
RRF_K = 60  # reciprocal-rank fusion: score = sum over modes of 1 / (RRF_K + rank)


@dataclass(frozen=True)
class ChunkSpan:
    """One chunk of a document's text, before it is stored."""

    index: int  # 0, 1, ... within the document
    start: int  # character offsets into the document's text
    end: int
    line_start: int  # 1-based, inclusive
    line_end: int
    page: int | None  # the page of the first character (paged formats), else None
    page_end: int | None
    text: str


@dataclass(frozen=True)
class EmbedParams:
    """What an embed outcome (or index_files) asks for; ``key()`` goes into each entry's work key, so changing the
    model, backend or chunking re-embeds and nothing else does."""

    collection: str = DEFAULT_COLLECTION
    chunk_size: int = 1000
    overlap: int = 200
    model: str = DEFAULT_MODEL
    backend: str = "torch"  # always resolved by executor.model_and_backend; this default only serves tests

    def key(self) -> str:
        return f"{self.model}|{self.backend}|{self.chunk_size}|{self.overlap}"


def entry_work_key(size: int, mtime: float, params: EmbedParams) -> str:
    """The key of embedding a file in this state with ``params``: equal keys mean nothing to redo."""
    return f"{size}:{mtime}:{params.key()}"


@dataclass
class Hit:
    """One search result: a chunk, where it is, and its scores."""

    chunk_id: int
    entry_id: int
    path: str
    collection: str
    chunk_index: int
    text: str
    start: int
    end: int
    line_start: int
    line_end: int
    page: int | None
    page_end: int | None
    score: float  # the ranking score: cosine similarity (semantic), BM25-derived (keyword) or fused RRF (hybrid)
    semantic_score: float | None = None  # cosine similarity of the chunk to the query, when known
    keyword_score: float | None = None  # the full-text score (higher is better), when the keyword side found it
    semantic_rank: int | None = None  # 1-based rank on each side, when it found the chunk
    keyword_rank: int | None = None
    extra: dict = field(default_factory=dict)

    def citation(self, resource_id: str, modality: str | None = None) -> str:
        """Where the hit is, as a reference 003 address of the file cited as ``resource_id`` (:func:`citation`)."""
        return citation(resource_id, self.page, self.page_end, self.line_start, self.line_end, modality)


def citation(resource_id: str, page: int | None, page_end: int | None, line_start: int, line_end: int,
             modality: str | None = None) -> str:
    """A chunk's place as a reference 003 address that ``resolve`` accepts, in the file cited as ``resource_id``
    (flows.addresses.model.hit_address): ``doc://<id>#pages=3`` (or ``=3-4``) for paged documents,
    ``text://<id>#lines=10-20`` otherwise; ``modality`` (flows.documents.citing.document_modality) cites an image
    read with OCR whole (``image://<id>``)."""
    return hit_address(resource_id, modality, page=page, page_end=page_end, line_start=line_start,
                       line_end=line_end)

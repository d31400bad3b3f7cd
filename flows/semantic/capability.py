"""The semantic capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.core.capability import Capability
from flows.semantic.conditions import FILLS, LABEL, SIMILARITY
from flows.semantic.executor import EmbedExecutor
from flows.semantic.labels import LabelExecutor

CAPABILITY = Capability(
    name="semantic",
    summary="chunks, embeddings, hnswlib collections, hybrid search and zero-shot labels (outcomes embed, label)",
    # documents: the text it embeds and cites; index and plans: index_files / update_index run as plan executions
    needs=("index", "plans", "documents"),
    executors=(EmbedExecutor(), LabelExecutor()),
    producers=("embeddings", "labels"),
    fields=(LABEL, SIMILARITY),
    fillers=FILLS,
    tool_groups=("semantic",),
)

"""The citations capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.citations.executor import MapExecutor
from flows.core.capability import Capability

CAPABILITY = Capability(
    name="citations",
    summary="resource maps, addresses and their resolution into pages, clips, crops and lines (outcome map)",
    needs=("documents",),  # the text of documents: extraction, formats, paths
    executors=(MapExecutor(),),
    tool_groups=("citations",),
    resources=("maps",),
)

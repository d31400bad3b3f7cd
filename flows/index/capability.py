"""The index capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.core.capability import Capability
from flows.index.flow import INDEX_JOBS

CAPABILITY = Capability(
    name="index",
    summary="walking, index jobs, watching, sources and navigation",
    job_kinds=(INDEX_JOBS,),
    tool_groups=("indexing", "navigation", "sources"),
    resources=("nodes",),
)

"""The file-operations capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.core.capability import Capability

CAPABILITY = Capability(
    name="fileops",
    summary="rename, move and delete files on disk with the store kept in step",
    tool_groups=("file-operations",),
)

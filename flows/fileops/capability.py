"""The file-operations capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.core.capability import Capability
from flows.fileops.placing import CopyExecutor, MoveExecutor, RenameExecutor, TrashExecutor
from flows.fileops.recovery import recover_at_start

CAPABILITY = Capability(
    name="fileops",
    summary="rename, move and delete files on disk with the store kept in step; the outcomes move, copy, rename, trash",
    executors=(MoveExecutor(), CopyExecutor(), RenameExecutor(), TrashExecutor()),
    tool_groups=("file-operations",),
    start_background=recover_at_start,  # renames and moves a dead process left half-done are settled
)

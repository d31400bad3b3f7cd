"""The file-operations capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from flows.core.capability import Capability
from flows.fileops.emptying import start_retention
from flows.fileops.placing import CopyExecutor, MoveExecutor, RenameExecutor, TrashExecutor
from flows.fileops.recovery import recover_at_start


def start_background(engine: Engine) -> None:
    """Operations a dead process left half-done are settled, then the trash's retention starts."""
    recover_at_start(engine)
    start_retention(engine)


CAPABILITY = Capability(
    name="fileops",
    needs=("index",),  # a folder back from the trash is indexed again with what it holds
    summary="rename, move and delete files on disk with the store kept in step; the outcomes move, copy, rename, "
            "trash; the trash listed and emptied",
    executors=(MoveExecutor(), CopyExecutor(), RenameExecutor(), TrashExecutor()),
    tool_groups=("file-operations", "trash"),
    start_background=start_background,
)

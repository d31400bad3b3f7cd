"""What an index walk returns (:class:`IndexResult`), how a cancelled one ends (:class:`Cancelled`), and the kind of
entry a file mode makes (:func:`kind_of`): shared by the walk (flows.index.indexer) and those that call it."""

from __future__ import annotations

import stat as statmod
from dataclasses import dataclass, field

_S_ISDIR, _S_ISREG, _S_ISLNK = statmod.S_ISDIR, statmod.S_ISREG, statmod.S_ISLNK


@dataclass
class IndexResult:
    root: str
    files: int = 0
    directories: int = 0
    total_size: int = 0
    removed: int = 0
    written: int = 0
    issues: list[tuple[str, str]] = field(default_factory=list)
    issue_count: int = 0
    duration_ms: int = 0
    percent: float = 100.0


class Cancelled(Exception):
    """The walk stopped because cancellation was requested; ``result`` holds what it did up to then."""

    def __init__(self, result: IndexResult | None = None) -> None:
        super().__init__("the walk was cancelled")
        self.result = result


def kind_of(mode: int) -> str:
    if _S_ISDIR(mode):
        return "directory"
    if _S_ISREG(mode):
        return "file"
    if _S_ISLNK(mode):
        return "symlink"
    return "other"

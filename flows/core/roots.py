"""Confinement: every path a caller names must lie inside one of the configured roots."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import Iterable

from store.errors import InvalidInput, PathNotAllowed


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _inside(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Roots:
    """The directories callers may touch, resolved once (``..`` and symlinks) at start-up."""

    paths: tuple[str, ...]

    @classmethod
    def of(cls, paths: Iterable[str]) -> "Roots":
        resolved = tuple(dict.fromkeys(_real(p) for p in paths))
        if not resolved:
            raise ValueError("at least one root is required")
        return cls(resolved)

    def describe(self) -> str:
        return ", ".join(self.paths)

    def resolve(self, path: str, *, field: str = "path", follow_last: bool = True) -> str:
        """The canonical absolute form of ``path`` if it lies inside a root, else :class:`PathNotAllowed`.

        ``follow_last=False`` resolves the parent directory but keeps the last component as named, so a symlink can be
        renamed or deleted itself; the target's location is still checked when it is followed.
        """
        if not isinstance(path, str) or not path.strip():
            raise InvalidInput(f"{field} must be a non-empty path inside the allowed roots ({self.describe()})",
                               field=field)
        if "\x00" in path:
            raise InvalidInput(f"{field} contains a NUL byte", field=field)
        raw = os.path.expanduser(path.strip())
        if not os.path.isabs(raw):
            raise InvalidInput(
                f"{field} {path!r} is relative; give an absolute path inside the allowed roots ({self.describe()})",
                field=field,
            )
        normal = posixpath.normpath(raw)
        if follow_last:
            resolved = _real(normal)
        else:
            head, tail = posixpath.split(normal)
            resolved = posixpath.join(_real(head), tail) if tail else _real(normal)
        if not any(_inside(resolved, root) for root in self.paths):
            shown = path if resolved == normal else f"{path} (resolves to {resolved})"
            raise PathNotAllowed(
                f"{field} {shown} is outside the allowed roots: {self.describe()}. "
                "Give the server (or the assay command) --root DIR, or set ASSAY_ROOTS, to allow another directory.",
                field=field,
            )
        return resolved

    def is_root(self, path: str) -> bool:
        return path in self.paths

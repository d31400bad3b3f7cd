"""Confinement: every path a caller names must lie inside one of the configured roots — and, when the caller is a
user limited to some of them (a guarded server's grant), inside that user's roots: while a call of such a user runs,
the guard sets the limit (:func:`limit_to`) and every ``Roots`` answers with the narrowed roots (``paths``), so
each tool's confinement, default scope ("all roots") and listing follow the caller without knowing of users; the
store's listings, counts and sums follow it too (store.visibility, set beside it)."""

from __future__ import annotations

import os
import posixpath
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Iterable

from store import visible_roots as visibility
from store.errors import InvalidInput, PathNotAllowed


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _inside(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


_limit: ContextVar[tuple[str, ...] | None] = ContextVar("assay_roots_limit", default=None)


LimitToken = tuple[Token, Token]  # the roots' limit and the store's visibility, set and reset together


def limit_to(paths: Iterable[str] | None) -> LimitToken:
    """Narrow every ``Roots``, and the entries the store shows, to ``paths`` (resolved) in this context, until
    :func:`reset_limit` with the returned token; None: no limit. Worker threads started for the call (anyio's)
    inherit it."""
    resolved = tuple(dict.fromkeys(_real(p) for p in paths)) if paths is not None else None
    return _limit.set(resolved), visibility.set_visible(resolved)


def reset_limit(token: LimitToken) -> None:
    limit, visible = token
    visibility.reset(visible)
    _limit.reset(limit)


def current_limit() -> tuple[str, ...] | None:
    return _limit.get()


def narrowed(configured: tuple[str, ...], limit: tuple[str, ...]) -> tuple[str, ...]:
    """The parts of the ``configured`` roots inside the ``limit``: a limit inside a root, or a root inside a limit."""
    out = [lim for lim in limit if any(_inside(lim, root) for root in configured)]
    out += [root for root in configured if any(_inside(root, lim) for lim in limit)]
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class Roots:
    """The directories callers may touch, resolved once (``..`` and symlinks) at start-up; ``paths`` are those of
    the current caller (see the module docstring), ``configured`` the server's."""

    configured: tuple[str, ...]
    _narrowed: dict = field(default_factory=dict, compare=False, repr=False)  # limit -> paths

    @property
    def paths(self) -> tuple[str, ...]:
        limit = _limit.get()
        if limit is None:
            return self.configured
        found = self._narrowed.get(limit)
        if found is None:
            found = self._narrowed[limit] = narrowed(self.configured, limit)
        return found

    @classmethod
    def of(cls, paths: Iterable[str]) -> "Roots":
        resolved = tuple(dict.fromkeys(_real(p) for p in paths))
        if not resolved:
            raise ValueError("at least one root is required")
        return cls(resolved)

    def describe(self) -> str:
        return ", ".join(self.paths) or "none: this user is limited to roots the server does not have"

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
            hint = ("Your user is limited to these roots." if _limit.get() is not None else
                    "Give the server (or the assay command) --root DIR, or set ASSAY_ROOTS, to allow another "
                    "directory.")
            raise PathNotAllowed(f"{field} {shown} is outside the allowed roots: {self.describe()}. {hint}",
                                 field=field)
        return resolved

    def allows(self, path: str | None) -> bool:
        """Whether the stored, canonical ``path`` lies inside the current caller's roots: ids (jobs, resources,
        executions) are handles, not permissions, and name only what the caller could reach by path."""
        return path is not None and any(_inside(path, root) for root in self.paths)

    def is_root(self, path: str) -> bool:
        return path in self.paths

"""The current caller's visible roots, as a context variable: the part of store.visibility that imports nothing but
the standard library, so that flows.core.roots (which the command line's hand-off loads) can set it without loading
SQLAlchemy. store.visibility turns it into WHERE clauses."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Iterable

_visible: ContextVar[tuple[str, ...] | None] = ContextVar("assay_visible_roots", default=None)


def _inside(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root + "/")


def _normal(paths: Iterable[str]) -> tuple[str, ...]:
    """Canonical roots without trailing slashes, each once, leaving out any inside another (the OR stays short)."""
    cleaned = list(dict.fromkeys(p.rstrip("/") or "/" for p in paths))
    return tuple(p for p in cleaned if not any(q != p and _inside(p, q) for q in cleaned))


def set_visible(paths: Iterable[str] | None) -> Token[tuple[str, ...] | None]:
    """Let the current context see only the entries at or under ``paths`` (absolute, canonical) until
    :func:`reset` with the returned token; None: every entry. An empty list lets it see none."""
    return _visible.set(_normal(paths) if paths is not None else None)


def reset(token: Token[tuple[str, ...] | None]) -> None:
    _visible.reset(token)


def visible() -> tuple[str, ...] | None:
    """The roots the current context sees entries under, or None when it sees every entry."""
    return _visible.get()


def limited() -> bool:
    return _visible.get() is not None


def shows(path: str | None) -> bool:
    """Whether the current context may see the entry at the stored, canonical ``path``."""
    roots = _visible.get()
    return roots is None or (path is not None and any(_inside(path, root) for root in roots))

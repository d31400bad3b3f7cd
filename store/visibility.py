"""Which entries the current caller may see: all of them, or only those under the roots a guarded server's user is
limited to (issue 23: "a user limited to some roots cannot reach other paths through any tool, resource, plan source
or address").

The limit lives in a context variable, set for the length of one call (flows.core.roots.limit_to sets it beside the
narrowed ``Roots``; worker threads started for the call inherit it), so the store's listings, counts and sums narrow
themselves without every caller passing the roots down. A reader adds :func:`visible_clause` on the path column of
the entries it reads (``entries.path``, or a set member's joined entry); with no limit the clause is ``true()``, which
SQLAlchemy drops from a conjunction, so the queries of an unlimited caller stay as they were. Writers (the indexer,
the plan engine) never narrow: what a limited user may change is decided by its paths, not here.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, false, or_, true

from store.visible_roots import limited, reset, set_visible, shows, visible

__all__ = ["limited", "path_subtree", "reset", "set_visible", "shows", "visible", "visible_clause", "visible_where"]


def path_subtree(column: Any, root: str, *, include_root: bool = True) -> ColumnElement[bool]:
    """``column`` (a path) at or under ``root``, as an index-friendly range: no LIKE, so ``%`` and ``_`` in names
    are safe, and the path index answers it ("0" is the character after "/")."""
    if root == "/":
        return column >= "/"  # type: ignore[no-any-return]
    under = and_(column > root + "/", column < root + "0")
    return or_(column == root, under) if include_root else under


def visible_clause(path_column: Any) -> ColumnElement[bool]:
    """A WHERE clause on ``path_column`` keeping the entries the current context may see: ``true()`` with no limit
    (dropped by SQLAlchemy beside other conditions), ``false()`` for a limit to no root, else the OR of each
    root's subtree range."""
    roots = visible()
    if roots is None:
        return true()
    if not roots:
        return false()
    return or_(*(path_subtree(path_column, root) for root in roots))


def visible_where(path_column: Any) -> list[ColumnElement[bool]]:
    """:func:`visible_clause` as a list of WHERE conditions, empty with no limit: for a statement whose only
    condition it would be (``WHERE 1 = 1`` would otherwise be added to an unlimited caller's query)."""
    return [] if visible() is None else [visible_clause(path_column)]

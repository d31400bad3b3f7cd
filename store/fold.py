"""The case folding of document search, in one place importing only ``typing``, so the store's models, the raw SQLite
writer (whose deletions fire the full-text index triggers) and the line check all fold alike."""

from __future__ import annotations

from typing import overload


@overload
def fold(text: str) -> str: ...
@overload
def fold(text: None) -> None: ...
@overload
def fold(text: str | None) -> str | None: ...


def fold(text: str | None) -> str | None:
    """The case-folded form the full-text index holds and queries are matched against (``str.lower``: the same in
    the SQLite triggers, in PostgreSQL's ``folded`` column and in the per-line check, so the index never misses a
    line the check would match)."""
    return None if text is None else text.lower()

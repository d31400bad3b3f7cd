"""Column helpers the table modules share: the timestamp default and a cascading foreign key."""

from __future__ import annotations

import time

from sqlalchemy import Column, ForeignKey, Integer


def now() -> float:
    return time.time()


def cascade_fk(target: str, *, index: bool = True, nullable: bool = False) -> Column:
    """An integer column referencing ``target``, deleted with it (ON DELETE CASCADE)."""
    return Column(Integer, ForeignKey(target, ondelete="CASCADE"), index=index, nullable=nullable)

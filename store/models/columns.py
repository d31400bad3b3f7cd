"""What the table modules share: their base class, the timestamp default, a cascading foreign key, and the id of an
inserted row."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from sqlalchemy import Column, CursorResult, ForeignKey, Integer, Table
from sqlmodel import SQLModel

if TYPE_CHECKING:
    class TableModel(SQLModel):
        """SQLModel with the ``__table__`` SQLAlchemy gives every ``table=True`` class typed (sqlmodel leaves it
        undeclared), so ``Entry.__table__.c.path`` type-checks; at run time this is SQLModel itself."""

        __table__: ClassVar[Table]
else:
    TableModel = SQLModel


def now() -> float:
    return time.time()


def cascade_fk(target: str, *, index: bool = True, nullable: bool = False) -> Column[Any]:
    """An integer column referencing ``target``, deleted with it (ON DELETE CASCADE)."""
    return Column(Integer, ForeignKey(target, ondelete="CASCADE"), index=index, nullable=nullable)


def inserted_id(result: CursorResult[Any]) -> int:
    """The integer primary key of the one row an INSERT statement made."""
    key = result.inserted_primary_key
    if key is None:  # an INSERT of one row always has it; a multi-row one has none
        raise ValueError("the statement inserted no single row")
    return int(key[0])

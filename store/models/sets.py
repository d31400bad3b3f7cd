"""Resource sets: a DAG of named sets of entries."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Integer, Text
from sqlmodel import Field

from store.models.columns import TableModel, now


class ResourceSet(TableModel, table=True):
    __tablename__ = "resource_sets"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    description: str | None = None
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class SetEdge(TableModel, table=True):
    """parent -> child edge; the graph is kept acyclic by store.sets.add_child."""

    __tablename__ = "set_edges"

    parent_id: int = Field(
        sa_column=Column(Integer, ForeignKey("resource_sets.id", ondelete="CASCADE"), primary_key=True))
    child_id: int = Field(
        sa_column=Column(Integer, ForeignKey("resource_sets.id", ondelete="CASCADE"), primary_key=True, index=True)
    )
    created_at: float = Field(default_factory=now)


class SetMember(TableModel, table=True):
    __tablename__ = "set_members"

    set_id: int = Field(sa_column=Column(Integer, ForeignKey("resource_sets.id", ondelete="CASCADE"), primary_key=True))
    entry_id: int = Field(
        sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True, index=True)
    )
    added_at: float = Field(default_factory=now)

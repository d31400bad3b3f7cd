"""Saved queries."""

from __future__ import annotations

from sqlalchemy import Column, Text
from sqlmodel import Field

from store.models.columns import TableModel, now


class SavedQuery(TableModel, table=True):
    __tablename__ = "saved_queries"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    description: str | None = None
    query_json: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    last_executed_at: float | None = None
    execution_count: int = 0

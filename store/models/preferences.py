"""Preferences: one JSON value per key."""

from __future__ import annotations

from sqlmodel import Field

from store.models.columns import TableModel, now


class Preference(TableModel, table=True):
    __tablename__ = "preferences"

    key: str = Field(primary_key=True)
    value_json: str
    updated_at: float = Field(default_factory=now)

"""What classifiers make of an entry: artifacts (thumbnails, frames, extracted fields) and metadata values."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class Artifact(TableModel, table=True):
    """Generated metadata for an entry: a thumbnail, a timeline frame, extracted fields (width, pages, exif.*...)."""

    __tablename__ = "artifacts"
    __table_args__ = (Index("ix_artifacts_entry_type", "entry_id", "type"),)

    id: int | None = Field(default=None, primary_key=True)
    entry_id: int = Field(sa_column=cascade_fk("entries.id", index=False))
    type: str  # thumbnail | video-timeline | metadata | page | clip
    mime_type: str | None = None
    cache_path: str | None = None  # relative to the content-addressed cache under the data dir
    source_hash: str | None = None  # identity of the source when made, to notice staleness
    value_json: str = "{}"
    created_at: float = Field(default_factory=now)


class MetadataValue(TableModel, table=True):
    """One extracted field per row (``width``, ``duration``, ``exif.Model``), so conditions can push down to SQL."""

    __tablename__ = "metadata_values"
    __table_args__ = (Index("ix_metadata_key_num", "key", "num_value"),
                      Index("ix_metadata_key_text", "key", "text_value"))

    entry_id: int = Field(sa_column=Column(Integer, ForeignKey("entries.id", ondelete="CASCADE"), primary_key=True))
    key: str = Field(primary_key=True)
    num_value: float | None = None
    text_value: str | None = None

"""Citation maps (flows/citations): citable resources and the nodes of their maps."""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, Text, UniqueConstraint
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class ResourceMapRow(TableModel, table=True):
    """A citable resource: one file inside the roots under a readable id (``lecture_01``), with its map when one was
    built or supplied. A row without a map (``origin`` "none") only reserves the id, e.g. for a search hit's address.
    ``source_*`` is what the file was when the map (or the id) was made; a file that changed since is noticed by
    comparing them (size and mtime first, the content hash when those differ)."""

    __tablename__ = "resource_maps"
    # one resource per file (NULLs allowed: a resource whose entry is gone); flows.citations.ids reserves under a
    # lock, the index makes it a rule of the store (a store made before this index keeps working without it)
    __table_args__ = (Index("uq_resource_maps_entry", "entry_id", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    resource_id: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    entry_id: int | None = Field(default=None, sa_column=cascade_fk("entries.id", index=False, nullable=True))
    kind: str  # modality: document | video | audio | image | text
    origin: str  # none (id only) | outline | headings | chapters | scenes | silences | windows | whole | agent
    source_size: int | None = None  # what the file was when the map was made, to notice changes
    source_mtime: float | None = None
    created_at: float = Field(default_factory=now)
    # added by the citation issue (nullable: a store made before gains them in migration 0001, store/migrations)
    source_hash: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # "xxh128:<hex>"
    title: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    strategy: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # what was asked: auto, ...
    stale: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))  # 1: agent map, source changed
    metadata_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # facts: pages, duration
    updated_at: float | None = Field(default=None, sa_column=Column(Float, nullable=True))


class MapNodeRow(TableModel, table=True):
    """One node of a map; ``ordinal`` is its place in a pre-order walk of the tree (parents before children,
    siblings in order), so one ordered query rebuilds the tree."""

    __tablename__ = "map_nodes"
    __table_args__ = (UniqueConstraint("map_id", "node_id", name="uq_map_node"),
                      Index("ix_map_nodes_parent", "map_id", "parent_node_id"))

    id: int | None = Field(default=None, primary_key=True)
    map_id: int = Field(sa_column=cascade_fk("resource_maps.id"))
    node_id: str
    parent_node_id: str | None = None
    ordinal: int = 0
    title: str | None = None
    kind: str = "section"
    location_json: str = "{}"  # reference 003's location: {"modality": "document", "pages": [3, 5]} ...
    summary: str | None = None

"""Every table of the store, for all of DESIGN.md: later issues fill the tables they need, they do not reshape them.

One module per area (entries, sets, queries, jobs, preferences, plans, artifacts, documents, semantic, citations,
users);
every table is importable from here (``from store.models import Entry``), and importing this package registers them
all on ``SQLModel.metadata``.

Conventions: times are unix seconds (float, UTC); JSON documents are stored as text (portable across SQLite and
PostgreSQL); bulk paths (indexing, membership, chunks) write through ``Model.__table__`` with set-based SQL, never
one ORM object per row.
"""

from __future__ import annotations

# in the order the tables were first defined: create_all makes them in this order, so a new store's schema is the
# same, statement for statement, as one made before the tables were split into modules
# isort: off
from store.models.entries import Entry
from store.models.sets import ResourceSet, SetEdge, SetMember
from store.models.queries import SavedQuery
from store.models.jobs import Job, JobIssue
from store.models.preferences import Preference
from store.models.plans import OutcomeRecord, Plan, PlanExecution, Source
from store.models.artifacts import Artifact, MetadataValue
from store.models.documents import Document, DocumentChange, DocumentSegment
from store.models.semantic import Chunk, Collection, CollectionEntry, Embedding, EntryLabel
from store.models.citations import MapNodeRow, ResourceMapRow
from store.models.users import ApiToken, User
from store.models.batches import OutcomeBatch
from store.models.file_operations import FileOperation
from store.models.columns import now
from store.fold import fold  # registered as assay_fold on every SQLite connection (store.engine)
# isort: on

__all__ = [
    "ApiToken", "Artifact", "Chunk", "Collection",
    "CollectionEntry", "Document", "DocumentChange", "DocumentSegment", "Embedding", "Entry", "EntryLabel",
    "FileOperation", "Job",
    "JobIssue", "MapNodeRow", "MetadataValue", "OutcomeBatch", "OutcomeRecord", "Plan", "PlanExecution", "Preference",
    "ResourceMapRow",
    "ResourceSet", "SavedQuery", "SetEdge", "SetMember", "Source", "User", "fold", "now",
]

"""The artifact rows the operator's repairs remove (check_integrity with fix, clear_cache thumbnails): rows whose
cache file is gone, or every row backed by a cache file. Their entries keep everything else; the classifier (and a
citation's resolve) makes them again when next asked, as it does for an entry never classified.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import delete
from sqlalchemy.engine import Engine

from store.models import Artifact

A = Artifact.__table__
_CHUNK = 500


def delete_artifact_rows(engine: Engine, *, artifact_ids: Iterable[int]) -> int:
    """Delete the artifact rows of ``artifact_ids`` (in chunks of 500, one transaction); the number deleted."""
    ids = list(artifact_ids)
    deleted = 0
    with engine.begin() as conn:
        for i in range(0, len(ids), _CHUNK):
            deleted += conn.execute(delete(A).where(A.c.id.in_(ids[i:i + _CHUNK]))).rowcount or 0
    return deleted


def delete_cached_artifacts(engine: Engine) -> int:
    """Delete every artifact row that points at a cache file (thumbnails, timeline frames, excerpts); rows holding
    their value in the store (extracted metadata) stay. The number deleted."""
    with engine.begin() as conn:
        return conn.execute(delete(A).where(A.c.cache_path.is_not(None))).rowcount or 0

"""Generated artifacts (thumbnails, timeline frames, extracted metadata) attached to entries."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from store.models import Artifact

A = Artifact.__table__


def list_artifacts(engine: Engine, *, entry_id: int) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(A).where(A.c.entry_id == entry_id).order_by(A.c.type, A.c.id)).mappings().all()
    return [dict(r) | {"value": json.loads(r["value_json"] or "{}")} for r in rows]


def count_artifacts(engine: Engine, *, artifact_type: str | None = None) -> int:
    stmt = select(func.count()).select_from(A)
    if artifact_type:
        stmt = stmt.where(A.c.type == artifact_type)
    with engine.connect() as conn:
        return conn.execute(stmt).scalar_one()

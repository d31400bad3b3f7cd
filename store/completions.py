"""Names (and ids) of stored things that start with what a caller typed so far: what completion/complete offers for
the arguments of the synthesis:// resource templates (mcp_server.resources.completions)."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import ColumnElement, String, cast, func, select, true
from sqlalchemy.engine import Engine

from store.models import Job, Plan, ResourceMapRow, ResourceSet

Named = Literal["resource-set", "plan", "job", "resource-map"]

# what is named -> the column holding its name (or id)
COLUMNS: dict[str, Any] = {
    "resource-set": ResourceSet.__table__.c.name,
    "plan": Plan.__table__.c.name,
    "job": Job.__table__.c.id,
    "resource-map": ResourceMapRow.__table__.c.resource_id,
}


def names_starting(engine: Engine, *, named: Named, prefix: str, limit: int) -> tuple[list[str], int]:
    """The first ``limit`` names of ``named`` things starting with ``prefix`` (in order; ids newest first) and how
    many there are in all. Ids are compared as text ("4" completes to 4, 41, 412)."""
    column = COLUMNS[named]
    text = cast(column, String) if not isinstance(column.type, String) else column
    where: ColumnElement[bool] = text.startswith(prefix, autoescape=True) if prefix else true()
    with engine.connect() as conn:
        total = conn.execute(select(func.count()).select_from(column.table).where(where)).scalar_one()
        order = column.desc() if text is not column else column  # ids: newest first
        rows = conn.execute(select(text).where(where).order_by(order).limit(limit)).scalars().all()
    return [v for v in rows if v.startswith(prefix)], total  # exact case, whatever the backend's LIKE does

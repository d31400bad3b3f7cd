"""Jobs (long work with its progress) and the issues they record."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Text
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class Job(TableModel, table=True):
    """A unit of long work (indexing now; classifier, embedding and map jobs later) with its progress."""

    __tablename__ = "jobs"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(default="index", index=True)  # index | classify | embed | map
    root: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(default="pending", index=True)  # pending | running | completed | failed | cancelled
    progress: float = 0.0  # 0..100
    files: int = 0
    directories: int = 0
    total_size: int = Field(default=0, sa_column=Column(BigInteger, nullable=False, default=0))
    removed: int = 0
    error_count: int = 0
    error_message: str | None = None
    current_path: str | None = None
    params_json: str = "{}"
    cancel_requested: bool = False
    flow_run_id: str | None = None
    runs_on: str | None = None  # "pool:<name>": a flow run on a work pool (not this process's to reap)
    heartbeat_at: float | None = None  # renewed by the flow running it on a work pool's worker, while it lives
    created_at: float = Field(default_factory=now)
    started_at: float | None = None
    completed_at: float | None = None
    duration_ms: int | None = None


class JobIssue(TableModel, table=True):
    """Something a job skipped and recorded: an unreadable directory, a file that vanished mid-walk, ..."""

    __tablename__ = "job_issues"

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(sa_column=cascade_fk("jobs.id"))
    path: str = Field(sa_column=Column(Text, nullable=False))
    reason: str
    created_at: float = Field(default_factory=now)

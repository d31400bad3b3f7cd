"""Plans, the sources they read, their executions and the outcomes they applied."""

from __future__ import annotations

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class Source(TableModel, table=True):
    __tablename__ = "sources"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    type: str  # live | manual | filesystem.index | filesystem.watch | selection_set | query
    path: str | None = None
    enabled: bool = True
    config_json: str = "{}"
    status: str = "stopped"  # stopped | running | error
    entries_indexed: int = 0
    total_scans: int = 0
    total_scan_ms: int = 0
    last_scan_at: float | None = None
    last_error: str | None = None
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class Plan(TableModel, table=True):
    __tablename__ = "plans"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    description: str | None = None
    mode: str = "oneshot"  # oneshot | continuous
    status: str = "active"  # active | paused | disabled
    definition_json: str = Field(sa_column=Column(Text, nullable=False))  # the canonical plan model
    origin_path: str | None = None  # the plan file it was loaded from, if any
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class PlanExecution(TableModel, table=True):
    __tablename__ = "plan_executions"

    id: int | None = Field(default=None, primary_key=True)
    plan_id: int = Field(sa_column=cascade_fk("plans.id"))
    plan_name: str
    status: str = "running"  # running | success | partial | error
    entries_processed: int = 0
    entries_matched: int = 0
    outcomes_applied: int = 0
    error_message: str | None = None
    flow_run_id: str | None = None
    trigger: str = "manual"  # manual | watch | startup | cli
    summary_json: str = "{}"  # per source, rule and outcome: counts, errors, task runs
    started_at: float = Field(default_factory=now)
    completed_at: float | None = None
    duration_ms: int | None = None
    # the execution's row in the runs table (jobs, kind "plan"), which the job runner follows; filled for the
    # executions of an older store when it is opened (migration 0001: store/migrations/baseline/adopt.py)
    run_id: int | None = None


class OutcomeRecord(TableModel, table=True):
    """One outcome applied to one entry; ``work_key`` makes re-runs on unchanged files do no repeated work."""

    __tablename__ = "outcome_records"
    __table_args__ = (UniqueConstraint("work_key", name="uq_outcome_work_key"),)

    id: int | None = Field(default=None, primary_key=True)
    execution_id: int | None = Field(default=None, sa_column=cascade_fk("plan_executions.id", nullable=True))
    entry_id: int = Field(sa_column=cascade_fk("entries.id"))
    rule: str
    outcome_type: str
    work_key: str  # hash of entry identity + size + mtime + outcome parameters + model
    status: str = "applied"  # applied | error
    detail: str | None = None
    created_at: float = Field(default_factory=now)

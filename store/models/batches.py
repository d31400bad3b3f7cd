"""Outcome batches spread over a work pool's workers: one row per batch of a plan execution's outcome, with the
worker that holds it and its lease."""

from __future__ import annotations

from sqlalchemy import Column, Index, Text
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class OutcomeBatch(TableModel, table=True):
    """One batch of one outcome of one execution: the entries whose paths sort in (``after``, ``until``] (``until``
    NULL: to the end). ``attempt`` counts the hand-outs; only the holder of the current attempt may finish it, so a
    batch redone after its worker vanished counts once."""

    __tablename__ = "outcome_batches"
    __table_args__ = (Index("ix_outcome_batches_job_position", "job_id", "position", "k"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(sa_column=cascade_fk("jobs.id"))
    execution_id: int
    position: int  # the outcome's position in the plan (over all rules, in order)
    k: int  # the batch's number within its outcome, from 1
    after: str = Field(sa_column=Column(Text, nullable=False))
    until: str | None = Field(default=None, sa_column=Column(Text))
    entries: int = 0  # entries in the range when it was cut (before per-outcome conditions)
    status: str = Field(default="pending", index=True)  # pending | running | done | cancelled
    attempt: int = 0
    worker: str | None = None  # the worker holding it (running) or that finished it (done)
    task_run_id: str | None = None
    # earlier attempts: [{"worker", "task_run_id", "outcome": "lost" | "handed back" | "yielded", "at", "did"?}]
    # ("did": how far a batch let go got, and its counts, which the next attempt goes on from)
    history_json: str = "[]"
    result_json: str | None = None
    created_at: float = Field(default_factory=now)
    started_at: float | None = None
    heartbeat_at: float | None = None
    finished_at: float | None = None

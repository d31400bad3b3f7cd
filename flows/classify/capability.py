"""The classify capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.classify.executor import ClassifierExecutor
from flows.classify.fields import DUPLICATES, FILLS, PRODUCER
from flows.classify.service import CLASSIFY_JOBS
from flows.classify.sweep import sweep_at_start
from flows.core.capability import Capability

CAPABILITY = Capability(
    name="classify",
    summary="thumbnails, timelines, metadata and content hashes (outcome classifier, classify jobs)",
    executors=(ClassifierExecutor(),),
    producers=(PRODUCER,),
    fields=(DUPLICATES,),
    fillers=(FILLS,),
    job_kinds=(CLASSIFY_JOBS,),
    tool_groups=("classifier",),
    resources=("metadata",),
    start_background=sweep_at_start,
)

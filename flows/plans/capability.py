"""The plans capability, declared once (``flows.core.capability``)."""

from __future__ import annotations

from flows.core.capability import Capability
from flows.plans.flow import PLAN_JOBS
from flows.plans.outcomes import ChainedExecutor, SelectionSetExecutor

CAPABILITY = Capability(
    name="plans",
    summary="plans: compile, run, preview, watch; the outcomes selection_set and chained",
    needs=("index",),  # a plan's filesystem sources are index jobs, its watchers the index's
    executors=(SelectionSetExecutor(), ChainedExecutor()),
    job_kinds=(PLAN_JOBS,),
    tool_groups=("plans",),
    resources=("plans",),
)

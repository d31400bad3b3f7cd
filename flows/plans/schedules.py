"""A plan's schedule (:class:`dsl.schedule.Schedule`) as the schedules of its Prefect deployment: Prefect's scheduler
makes the runs, the server's runner (or a worker of the pool) executes them as plan executions with trigger
``prefect``, and Prefect's UI shows the schedule and can pause it. A plan without a schedule gives an empty list,
which clears whatever schedule its deployment had.

An interval counts from the plan's ``anchor``, by default 2020-01-01T00:00 in the schedule's time zone, never from
"now": the deployment is re-applied each time the server starts or the plan is saved, and an anchor of "now" would
shift the runs each time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from prefect.schedules import Cron, Interval, RRule, Schedule as PrefectSchedule

from dsl.model import Plan
from dsl.schedule import DEFAULT_ANCHOR, Schedule


def prefect_schedule(schedule: Schedule) -> PrefectSchedule:
    """The Prefect schedule that fires when ``schedule`` says, in its time zone."""
    if schedule.cron is not None:
        return Cron(schedule.cron, timezone=schedule.timezone)
    if schedule.rrule is not None:
        return RRule(schedule.rrule, timezone=schedule.timezone)
    assert schedule.interval is not None  # a Schedule holds exactly one of the three
    anchor = datetime.fromisoformat(schedule.anchor or DEFAULT_ANCHOR)
    if anchor.tzinfo is None:  # a date-time without an offset is read in the schedule's time zone
        anchor = anchor.replace(tzinfo=ZoneInfo(schedule.timezone))
    return Interval(timedelta(seconds=schedule.interval), anchor_date=anchor, timezone=schedule.timezone)


def plan_schedules(plan: Plan) -> tuple[PrefectSchedule, ...]:
    """The schedules of ``plan``'s deployment: its schedule's, or none (clearing the deployment's)."""
    return () if plan.schedule is None else (prefect_schedule(plan.schedule),)

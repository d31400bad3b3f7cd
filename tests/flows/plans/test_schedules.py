"""A plan's schedule becomes its deployment's Prefect schedule: the times Prefect's server computes from it (the
schedule sent as the API would send it, read back by the server's own schema) are the plan's times, in its time zone;
what the plan language accepts, Prefect accepts; no schedule is an empty list (which clears a deployment's)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from prefect.client.schemas.actions import DeploymentScheduleCreate
from prefect.server.schemas import schedules as server_schedules

from dsl.model import Plan
from dsl.schedule import Schedule
from flows.core.deployments import DeploymentSpec
from flows.plans.deployments import plan_deployment
from flows.plans.flow import plan_flow
from flows.plans.schedules import plan_schedules, prefect_schedule

UTC = timezone.utc
SERVER_KINDS = {"cron": server_schedules.CronSchedule, "interval": server_schedules.IntervalSchedule,
                "rrule": server_schedules.RRuleSchedule}


def plan(schedule: dict | None = None, **extra) -> Plan:
    data = {"name": "nightly", "sources": [{"name": "s", "type": "filesystem.index", "config": {"path": "/data"}}],
            **extra}
    if schedule is not None:
        data["schedule"] = schedule
    return Plan.from_object(data)


async def fire_times(schedule: dict, start: datetime, n: int = 3) -> list[datetime]:
    """The next ``n`` times from ``start`` at which Prefect's server runs a deployment with the plan's schedule."""
    created = DeploymentScheduleCreate.from_schedule(prefect_schedule(Schedule.model_validate(schedule)))
    sent = created.model_dump(mode="json")["schedule"]  # what the client sends to the API
    kind = next(k for k in SERVER_KINDS if k in sent)
    dates = await SERVER_KINDS[kind].model_validate(sent).get_dates(n=n, start=start)
    return [d.astimezone(UTC).replace(tzinfo=None) for d in dates]


@pytest.mark.parametrize("schedule, start, expected", [
    # 03:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer
    ({"cron": "0 3 * * *", "timezone": "Europe/Berlin"}, datetime(2026, 1, 10, tzinfo=UTC),
     ["2026-01-10T02:00", "2026-01-11T02:00", "2026-01-12T02:00"]),
    ({"cron": "0 3 * * *", "timezone": "Europe/Berlin"}, datetime(2026, 7, 10, tzinfo=UTC),
     ["2026-07-10T01:00", "2026-07-11T01:00", "2026-07-12T01:00"]),
    ({"cron": "@hourly"}, datetime(2026, 1, 10, 5, 30, tzinfo=UTC),
     ["2026-01-10T06:00", "2026-01-10T07:00", "2026-01-10T08:00"]),
    ({"cron": "30 6 * * MON-FRI", "timezone": "America/New_York"}, datetime(2026, 1, 9, tzinfo=UTC),  # a Friday
     ["2026-01-09T11:30", "2026-01-12T11:30", "2026-01-13T11:30"]),
    # an interval counts from its anchor, read in the time zone: midnight in Berlin is 23:00 UTC the day before
    ({"interval": "15m", "timezone": "Europe/Berlin", "anchor": "2026-01-01T00:00:00"},
     datetime(2026, 1, 1, 0, 5, tzinfo=UTC), ["2026-01-01T00:15", "2026-01-01T00:30", "2026-01-01T00:45"]),
    ({"interval": "7m", "anchor": "2026-01-01T00:03:00+00:00"}, datetime(2026, 1, 1, tzinfo=UTC),
     ["2026-01-01T00:03", "2026-01-01T00:10", "2026-01-01T00:17"]),
    # without an anchor, from 2020-01-01 in the time zone: the same times whenever the deployment is re-applied
    ({"interval": 3600}, datetime(2026, 3, 5, 10, 7, tzinfo=UTC),
     ["2026-03-05T11:00", "2026-03-05T12:00", "2026-03-05T13:00"]),
    ({"interval": "1d", "timezone": "Asia/Kolkata"}, datetime(2026, 3, 5, tzinfo=UTC),  # local midnight, UTC+05:30
     ["2026-03-05T18:30", "2026-03-06T18:30", "2026-03-07T18:30"]),
    ({"rrule": "FREQ=DAILY;BYHOUR=6;BYMINUTE=0;BYSECOND=0", "timezone": "America/New_York"},
     datetime(2026, 1, 10, tzinfo=UTC), ["2026-01-10T11:00", "2026-01-11T11:00", "2026-01-12T11:00"]),
    ({"rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=7;BYMINUTE=30;BYSECOND=0"}, datetime(2026, 1, 6, tzinfo=UTC),
     ["2026-01-12T07:30", "2026-01-19T07:30", "2026-01-26T07:30"]),
])
async def test_prefect_fires_the_plans_schedule_at_the_plans_times_in_its_time_zone(schedule, start, expected):
    assert [d.isoformat(timespec="minutes") for d in await fire_times(schedule, start)] == expected


def test_a_plans_deployment_carries_its_schedule_and_its_pause():
    active = plan_deployment(plan({"cron": "0 3 * * *", "timezone": "Europe/Berlin"}))
    assert isinstance(active, DeploymentSpec)
    assert (active.flow, active.name, active.parameters, active.paused) == (plan_flow, "nightly",
                                                                            {"plan_name": "nightly"}, False)
    (schedule,) = active.schedules
    assert (schedule.cron, schedule.timezone) == ("0 3 * * *", "Europe/Berlin")
    paused = plan_deployment(plan({"interval": "15m"}, status="paused"))
    assert paused.paused and paused.schedules[0].interval.total_seconds() == 900


def test_a_plan_without_a_schedule_gives_no_schedules_which_clears_the_deployments():
    assert plan_schedules(plan()) == ()
    assert plan_deployment(plan()).schedules == ()


# what the plan language accepts (tests/dsl/test_schedule.py has what it refuses, and why)
CRONS = ["0 3 * * *", "*/15 * * * *", "0 6 * * MON-FRI", "0 0 1 */3 *", "5,35 8-18 * * 1-5", "0 0 L * *",
         "0 9 * * 1#2", "0 0 * JAN,JUL SUN", "@daily", "@hourly", "@weekly", "@monthly", "@yearly", "@midnight",
         " 0 3 * * * ", "0 0 * * 7"]
RRULES = ["FREQ=DAILY;BYHOUR=6", "RRULE:FREQ=WEEKLY;BYDAY=MO,TH", "FREQ=MINUTELY;INTERVAL=5",
          "DTSTART:20260101T000000\nRRULE:FREQ=DAILY", "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=23"]
ZONES = ["UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "Asia/Kolkata"]
ACCEPTED = [*({"cron": c} for c in CRONS), *({"rrule": r} for r in RRULES),
            *({"cron": "0 3 * * *", "timezone": z} for z in ZONES), *({"interval": 60, "timezone": z} for z in ZONES),
            *({"rrule": "FREQ=DAILY", "timezone": z} for z in ZONES)]


@pytest.mark.parametrize("schedule", ACCEPTED)
def test_what_the_plan_language_accepts_prefect_accepts(schedule):
    created = DeploymentScheduleCreate.from_schedule(prefect_schedule(plan(schedule).schedule))
    sent = created.model_dump(mode="json")["schedule"]
    kind = next(k for k in SERVER_KINDS if k in sent)
    SERVER_KINDS[kind].model_validate(sent)  # the server's own check: raises for what it would refuse

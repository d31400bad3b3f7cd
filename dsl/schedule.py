"""A plan's schedule: when it runs on its own, as a cron expression, a fixed interval or an iCalendar RRule, read in
a time zone. ``flows.plans.schedules`` turns it into the schedule of the plan's Prefect deployment, so Prefect's
scheduler starts the runs and its UI shows (and pauses) them.

Each kind is checked here, with the libraries that read it, so a plan Prefect would refuse is refused when it is
written, with its place: cron expressions by ``cronsim`` (five fields, or ``@daily`` and the other nicknames; the
extensions Prefect's croniter does not read, ``LW`` and ``5L``, are refused), RRules by ``dateutil`` (what Prefect
reads them with), time zones against the IANA database (``zoneinfo``, as Prefect checks them), intervals by
:func:`dsl.units.parse_duration`. ``tests/flows/plans/test_schedules.py`` checks that Prefect takes what this takes.
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone as dt_timezone
from typing import Any
from zoneinfo import available_timezones

from cronsim import CronSim, CronSimError
from dateutil.rrule import rrulestr  # type: ignore[import-untyped]  # python-dateutil ships no types
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dsl.units import parse_duration

KINDS = ("cron", "interval", "rrule")
SHAPES = '{cron: "0 3 * * *"}, {interval: 15m} or {rrule: "FREQ=DAILY;BYHOUR=6"}, each with an optional timezone'
CRON_HELP = ('five fields, minute hour day-of-month month day-of-week, e.g. "0 3 * * *" (03:00 every day), '
             '"*/15 * * * *" or "0 6 * * MON-FRI"; or one of @hourly, @daily, @weekly, @monthly, @yearly')
# Prefect's croniter reads these nicknames; each is checked as the five fields it stands for
NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
             "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
MIN_INTERVAL = 1.0  # seconds
MAX_RRULE = 6500  # characters, Prefect's limit
DEFAULT_ANCHOR = "2020-01-01T00:00:00"  # intervals count from here (in the time zone) unless the plan says


@functools.cache
def time_zones() -> frozenset[str]:
    """The IANA time zone names this machine knows (Prefect checks cron and interval zones against the same)."""
    return frozenset(available_timezones())


def check_cron(text: str) -> str:
    """``text`` stripped when it is a cron expression Prefect runs; ValueError saying what would be accepted."""
    expression = text.strip()
    fields = NICKNAMES.get(expression.lower(), expression).split()
    if len(fields) != 5:
        raise ValueError(f"{text!r} has {len(fields)} field(s); a cron expression has {CRON_HELP}")
    if "W" in fields[2].upper() or "L" in fields[4].upper():
        raise ValueError(f"{text!r}: W in day-of-month and L in day-of-week are not read by Prefect; write {CRON_HELP}")
    try:
        CronSim(" ".join(fields), datetime(2000, 1, 1, tzinfo=dt_timezone.utc))
    except (CronSimError, ValueError) as exc:  # "Bad minute", "Bad day-of-month" (a day no month has), ...
        raise ValueError(f"{text!r} is not a cron expression ({exc}); write {CRON_HELP}") from None
    return expression


def check_rrule(text: str) -> str:
    """``text`` stripped when dateutil reads it as an RRule; ValueError with dateutil's reason otherwise."""
    rule = text.strip()
    if not rule:
        raise ValueError('an rrule is iCalendar RRULE text, e.g. "FREQ=DAILY;BYHOUR=6" or "FREQ=WEEKLY;BYDAY=MO,TH"')
    if len(rule) > MAX_RRULE:
        raise ValueError(f"this rrule is {len(rule):,} characters long; Prefect takes at most {MAX_RRULE:,}")
    try:
        rrulestr(rule, cache=False)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not an RRule ({exc}); write iCalendar RRULE text, e.g. "
                         '"FREQ=DAILY;BYHOUR=6" or "FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=7;BYMINUTE=30"') from None
    return rule


class Schedule(BaseModel):
    """When a plan runs on its own: exactly one of ``cron``, ``interval`` or ``rrule``, read in ``timezone``."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(default=None, description='a cron expression: "0 3 * * *" is 03:00 every day')
    interval: float | None = Field(default=None, description="time between runs: seconds, or a duration such as "
                                                             "90s, 15m, 2h or 1d")
    rrule: str | None = Field(default=None, description='an iCalendar RRule, e.g. "FREQ=WEEKLY;BYDAY=MO;BYHOUR=6"')
    timezone: str = Field(default="UTC", description="the IANA time zone the times are read in, e.g. "
                                                     "Europe/Berlin")
    anchor: str | None = Field(default=None, description="intervals only: the date-time they count from, in the "
                                                         f"time zone (default {DEFAULT_ANCHOR})")

    @model_validator(mode="before")
    @classmethod
    def _mapping(cls, data: Any) -> Any:
        if not isinstance(data, (dict, Schedule)):
            raise ValueError(f"a schedule is a mapping: {SHAPES}")
        return data

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        return None if v is None else check_cron(v)

    @field_validator("rrule")
    @classmethod
    def _rrule(cls, v: str | None) -> str | None:
        return None if v is None else check_rrule(v)

    @field_validator("interval", mode="before")
    @classmethod
    def _interval(cls, v: Any) -> Any:
        if v is None:
            return None
        seconds = round(parse_duration(v), 3)  # to the millisecond: what the DSL and YAML print reads back the same
        if seconds < MIN_INTERVAL:
            raise ValueError(f"an interval of {seconds:g} seconds is too short; runs are at least {MIN_INTERVAL:g}s "
                             "apart")
        return seconds

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        if v not in time_zones():
            raise ValueError(f"unknown time zone {v!r}; use an IANA name such as UTC, Europe/Berlin or "
                             "America/New_York")
        return v

    @field_validator("anchor")
    @classmethod
    def _anchor(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            return datetime.fromisoformat(v.strip()).isoformat()
        except ValueError:
            raise ValueError(f"anchor {v!r} is not a date-time; write ISO 8601, e.g. 2026-01-01T06:00:00 (in the "
                             "schedule's time zone) or 2026-01-01T06:00:00+01:00") from None

    @model_validator(mode="after")
    def _one_kind(self) -> "Schedule":
        given = [k for k in KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            got = "none of them" if not given else " and ".join(given)
            raise ValueError(f"a schedule takes exactly one of cron, interval or rrule, got {got}: {SHAPES}")
        if self.anchor is not None and self.interval is None:
            raise ValueError(f"anchor is for interval schedules (the time the intervals count from); a {given[0]} "
                             "schedule names its own times")
        return self

    @property
    def kind(self) -> str:
        """``cron``, ``interval`` or ``rrule``."""
        return next(k for k in KINDS if getattr(self, k) is not None)

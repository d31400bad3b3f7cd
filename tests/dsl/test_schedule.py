"""A plan's schedule: the same schedule from YAML, JSON and the DSL; every mistake refused with its place and what
would be accepted; watched plans refused a schedule; printed back as YAML and DSL that read back the same."""

from __future__ import annotations

import json

import pytest

from dsl import PlanError, PlanSyntaxError, PlanValidationError, parse_plan_text, plan_to_dsl, plan_to_yaml
from dsl.grammar import SCHEDULE_WORDS
from dsl.model import Plan
from dsl.printer import plan_object
from dsl.schedule import Schedule
from dsl.schema import plan_json_schema

SOURCE = {"name": "s", "type": "filesystem.index", "config": {"path": "/data"}}


def from_yaml(schedule: str) -> Plan:
    return parse_plan_text(f"name: p\nschedule: {schedule}\nsources: [{{name: s, type: filesystem.index, "
                           "config: {path: /data}}]\n")


def from_json(schedule: dict) -> Plan:
    return parse_plan_text(json.dumps({"name": "p", "schedule": schedule, "sources": [SOURCE]}))


def from_dsl(line: str) -> Plan:
    return parse_plan_text(f"plan p\n{line}\nsource s index /data\n")


@pytest.mark.parametrize("yaml_text, json_object, dsl_line, expected", [
    ('{cron: "0 3 * * *", timezone: Europe/Berlin}', {"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
     'schedule cron "0 3 * * *" timezone Europe/Berlin', {"cron": "0 3 * * *", "timezone": "Europe/Berlin"}),
    ("{interval: 15m}", {"interval": "15m"}, "schedule every 15m", {"interval": 900.0}),
    ("{interval: 90}", {"interval": 90}, "schedule every 90", {"interval": 90.0}),
    ('{interval: 2h, timezone: America/New_York, anchor: "2026-01-01T06:00:00"}',
     {"interval": 7200, "timezone": "America/New_York", "anchor": "2026-01-01T06:00"},
     "schedule every 2h timezone America/New_York anchor 2026-01-01T06:00:00",
     {"interval": 7200.0, "timezone": "America/New_York", "anchor": "2026-01-01T06:00:00"}),
    ('{rrule: "FREQ=DAILY;BYHOUR=6"}', {"rrule": "FREQ=DAILY;BYHOUR=6"}, 'schedule rrule "FREQ=DAILY;BYHOUR=6"',
     {"rrule": "FREQ=DAILY;BYHOUR=6"}),
    ("{cron: '@daily', timezone: UTC}", {"cron": "@daily"}, 'schedule cron=@daily timezone=UTC', {"cron": "@daily"}),
])
def test_the_three_front_doors_read_the_same_schedule(yaml_text, json_object, dsl_line, expected):
    want = Schedule.model_validate(expected)
    assert from_yaml(yaml_text).schedule == from_json(json_object).schedule == from_dsl(dsl_line).schedule == want


def test_a_plan_has_no_schedule_unless_it_says_so():
    assert from_dsl("mode oneshot").schedule is None
    assert "schedule" not in plan_object(from_dsl("mode oneshot"))
    assert "schedule" not in plan_to_dsl(from_dsl("mode oneshot"))


def problem(exc: PlanError) -> tuple[str | None, str]:
    (only,) = exc.problems
    return only.path, only.message


@pytest.mark.parametrize("schedule, path, words", [
    ({"cron": "61 * * * *"}, "schedule.cron", ["not a cron expression", "Bad minute", "five fields"]),
    ({"cron": "0 3 * *"}, "schedule.cron", ["4 field(s)", "five fields"]),
    ({"cron": "0 0 30 2 *"}, "schedule.cron", ["Bad day-of-month"]),  # a day no February has
    ({"cron": "0 0 * * * *"}, "schedule.cron", ["6 field(s)"]),
    ({"cron": "0 0 LW * *"}, "schedule.cron", ["not read by Prefect"]),
    ({"cron": "0 0 * * 5L"}, "schedule.cron", ["not read by Prefect"]),
    ({"cron": "@reboot"}, "schedule.cron", ["1 field(s)", "@daily"]),
    ({"cron": "H * * * *"}, "schedule.cron", ["not a cron expression"]),
    ({"rrule": "FREQ=SOMETIMES"}, "schedule.rrule", ["not an RRule", "FREQ=DAILY;BYHOUR=6"]),
    ({"rrule": "BYHOUR=6"}, "schedule.rrule", ["not an RRule"]),
    ({"rrule": " "}, "schedule.rrule", ["iCalendar RRULE text"]),
    ({"rrule": "FREQ=DAILY;" + "BYHOUR=6;" * 800}, "schedule.rrule", ["at most 6,500"]),
    ({"interval": "10parsecs"}, "schedule.interval", ["unknown duration unit 'parsecs'", "90s"]),
    ({"interval": 0.5}, "schedule.interval", ["too short", "at least 1s"]),
    ({"interval": -5}, "schedule.interval", ["from 0 to"]),
    ({"interval": True}, "schedule.interval", ["not a duration"]),
    ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, "schedule.timezone",
     ["unknown time zone 'Mars/Olympus'", "Europe/Berlin"]),
    ({"cron": "0 3 * * *", "timezone": "utc"}, "schedule.timezone", ["unknown time zone 'utc'"]),
    ({"interval": 60, "anchor": "next tuesday"}, "schedule.anchor", ["not a date-time", "2026-01-01T06:00:00"]),
    ({"cron": "0 3 * * *", "anchor": "2026-01-01"}, "schedule", ["anchor is for interval schedules"]),
    ({"cron": "0 3 * * *", "interval": 60}, "schedule", ["exactly one of cron, interval or rrule",
                                                         "got cron and interval"]),
    ({}, "schedule", ["exactly one of", "got none of them"]),
    ({"timezone": "UTC"}, "schedule", ["exactly one of"]),
    ({"cron": "0 3 * * *", "every": 5}, "schedule.every", ["unknown key 'every'",
                                                           "accepted: cron, interval, rrule, timezone, anchor"]),
    ("daily", "schedule", ["a schedule is a mapping", '{cron: "0 3 * * *"}']),
    ({"cron": 3}, "schedule.cron", ["valid string"]),
])
def test_a_bad_schedule_is_refused_with_its_path_and_what_is_accepted(schedule, path, words):
    with pytest.raises(PlanValidationError) as caught:
        Plan.from_object({"name": "p", "sources": [SOURCE], "schedule": schedule})
    where, message = problem(caught.value)
    assert where == path
    for word in words:
        assert word in message


def test_a_yaml_schedule_mistake_names_its_line_and_column():
    with pytest.raises(PlanValidationError) as caught:
        from_yaml('{cron: "0 3 * * *", timezone: Nowhere}')
    (only,) = caught.value.problems
    assert (only.path, only.line, only.column) == ("schedule.timezone", 2, 31)
    assert "^" in only.context


@pytest.mark.parametrize("data, why", [
    ({"mode": "continuous", "sources": [SOURCE]}, "a continuous plan"),
    ({"sources": [SOURCE, {"name": "inbox", "type": "filesystem.watch", "config": {"path": "/in"}}]},
     "a plan with a filesystem.watch source ('inbox')"),
])
def test_a_watched_plan_cannot_carry_a_schedule(data, why):
    with pytest.raises(PlanValidationError) as caught:
        Plan.from_object({"name": "p", "schedule": {"interval": "1h"}, **data})
    path, message = problem(caught.value)
    assert path == "schedule"
    assert message.startswith(f"{why} cannot carry a schedule: it runs on file events, on the machine whose files")


def test_a_watched_plan_is_refused_its_schedule_in_the_dsl_at_the_schedule_line():
    with pytest.raises(PlanValidationError) as caught:
        parse_plan_text("plan p\nmode continuous\nsource s index /data\nschedule every 1h\n")
    (only,) = caught.value.problems
    assert (only.path, only.line, only.column) == ("schedule", 4, 10)
    assert "continuous plan cannot carry a schedule" in only.message


@pytest.mark.parametrize("line, at, words", [
    ("schedule every 5m timezone", (3, 19), ["missing value after 'timezone'"]),
    ("schedule every 5m colour blue", (3, 19), ["'colour' is not part of a schedule", "schedule every 15m"]),
    ("schedule cron 0 3 * * *", (3, 17), ["quote the cron text (it has spaces)"]),
    ("schedule daily", (3, 10), ["'daily' is not part of a schedule"]),
    ("schedule every 5m every 6m", (3, 19), ["'every' is given twice"]),
    ('schedule cron "0 3 * * *" timezone Mars', (3, 36), ["unknown time zone 'Mars'"]),
    ('schedule rrule "FREQ=HOURLY" anchor 2026-01-01', (3, 10), ["anchor is for interval schedules"]),
    ("schedule every 1s\nschedule every 2s", (4, 10), ["'schedule' is given twice"]),
])
def test_a_bad_schedule_line_is_refused_at_its_line_and_column(line, at, words):
    with pytest.raises(PlanValidationError) as caught:
        parse_plan_text(f"plan p\nsource s index /data\n{line}\n")
    first = caught.value.problems[0]
    assert (first.line, first.column) == at
    for word in words:
        assert word in first.message


@pytest.mark.parametrize("line", ["schedule", "schedule ("])
def test_a_schedule_line_without_a_schedule_is_a_syntax_error_that_shows_the_forms(line):
    with pytest.raises(PlanSyntaxError) as caught:
        parse_plan_text(f"plan p\n{line}\n")
    assert caught.value.problems[0].message.startswith('a schedule line is schedule cron "0 3 * * *", schedule '
                                                       "every 15m or schedule rrule")


@pytest.mark.parametrize("schedule, yaml_line, dsl_line", [
    ({"cron": "0 3 * * *", "timezone": "Europe/Berlin"}, "schedule: {cron: 0 3 * * *, timezone: Europe/Berlin}",
     'schedule cron "0 3 * * *" timezone Europe/Berlin'),
    ({"interval": 900}, "schedule: {interval: 15m}", "schedule every 15m"),
    ({"interval": 1.25}, "schedule: {interval: 1250ms}", "schedule every 1250ms"),
    ({"interval": "1d", "anchor": "2026-01-01T06:00:00+01:00"},
     "schedule: {interval: 1d, anchor: '2026-01-01T06:00:00+01:00'}",
     "schedule every 1d anchor 2026-01-01T06:00:00+01:00"),
    ({"rrule": "DTSTART:20260101T000000\nRRULE:FREQ=DAILY", "timezone": "Etc/GMT+5"},
     None,  # PyYAML folds the line break onto a second line
     'schedule rrule "DTSTART:20260101T000000\\nRRULE:FREQ=DAILY" timezone Etc/GMT+5'),
])
def test_a_schedule_prints_on_one_line_and_reads_back(schedule, yaml_line, dsl_line):
    plan = Plan.from_object({"name": "p", "status": "paused", "sources": [SOURCE], "schedule": schedule})
    if yaml_line is not None:
        assert plan_to_yaml(plan).splitlines()[2] == yaml_line  # after name and status
    assert plan_to_dsl(plan).splitlines()[2] == dsl_line
    assert parse_plan_text(plan_to_yaml(plan)) == plan == parse_plan_text(plan_to_dsl(plan))
    assert Plan.from_object(plan.to_object()) == plan  # the stored definition


def test_the_dsl_words_of_a_schedule_are_the_schedules_keys():
    assert set(SCHEDULE_WORDS.values()) == set(Schedule.model_fields)


def test_the_json_schema_describes_the_schedule():
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(plan_json_schema())
    for schedule in ({"cron": "0 3 * * *", "timezone": "Europe/Berlin"}, {"interval": "15m"}, {"interval": 60},
                     {"rrule": "FREQ=DAILY", "anchor": "2026-01-01"}):
        assert not list(validator.iter_errors({"name": "p", "sources": [SOURCE], "schedule": schedule})), schedule
    for schedule in ({}, {"cron": "x", "interval": 1}, {"cron": "x", "colour": 1}, "daily"):
        assert list(validator.iter_errors({"name": "p", "sources": [SOURCE], "schedule": schedule})), schedule

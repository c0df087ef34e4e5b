"""Cron schedules as Kubernetes reads them (robfig/cron v3 ParseStandard) and the CronJob controller's times.

Expected values, error texts included, were checked against robfig/cron v3.0.1 itself running under Go. Nothing
here needs the Job rules, so these tests stand on their own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from multiqueue.api.cronjobtimes import (
    MANY_MISSED,
    job_name,
    most_recent_schedule_time,
    next_schedule_time,
    schedule_zone,
    scheduled_timestamp_annotation,
)
from multiqueue.api.cronschedules import Schedule, parse_schedule

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def parsed(text: str) -> Schedule:
    schedule = parse_schedule(text)
    assert isinstance(schedule, Schedule), schedule
    return schedule


def following(text: str, after: datetime, count: int, zone: tzinfo | None = None) -> list[str]:
    """The next ``count`` activations as RFC 3339 in ``zone`` (UTC by default), chained like the controller."""
    schedule, times, moment = parsed(text), [], after
    for _ in range(count):
        found = schedule.next(moment, zone)
        assert found is not None
        times.append(found.astimezone(zone or UTC).isoformat())
        moment = found
    return times


# --- parsing --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("* * * * *", id="every-minute"),
        pytest.param("*/5 * * * *", id="step"),
        pytest.param("0 9-17 * * 1-5", id="ranges"),
        pytest.param("0,15,30,45 * * * *", id="list"),
        pytest.param("0 0 1,,15 * *", id="empty-list-part-dropped"),
        pytest.param("0 0 ? * MON-FRI", id="question-mark-day-of-month"),
        pytest.param("0 0 1 * ?", id="question-mark-day-of-week"),
        pytest.param("? ? ? ? ?", id="question-mark-any-field"),
        pytest.param("0 12 * jan,JUL sun", id="names-any-case"),
        pytest.param("0 0 1 jan-mar/2 *", id="named-range-with-step"),
        pytest.param("0 0 * * SUN-SAT", id="weekday-names-range"),
        pytest.param("*/61 * * * *", id="step-beyond-range"),
        pytest.param("+5 * * * *", id="plus-sign"),
        pytest.param("*-5 * * * *", id="star-ignores-range-end"),
        pytest.param("3/15 * * * *", id="start-with-step"),
        pytest.param("0 0 1 1 *\n", id="trailing-newline"),
        pytest.param("\t0\u00a00 * * *", id="go-whitespace"),
        pytest.param("@yearly", id="yearly"),
        pytest.param("@annually", id="annually"),
        pytest.param("@monthly", id="monthly"),
        pytest.param("@weekly", id="weekly"),
        pytest.param("@daily", id="daily"),
        pytest.param("@midnight", id="midnight"),
        pytest.param("@hourly", id="hourly"),
        pytest.param("@every 1h30m", id="every-hours-minutes"),
        pytest.param("@every 1.5h", id="every-fraction"),
        pytest.param("@every 500ms", id="every-below-a-second"),
        pytest.param("@every -5m", id="every-negative"),
        pytest.param("@every 0", id="every-zero"),
        pytest.param("@every 2\u00b5s", id="every-micro-sign"),
        pytest.param("TZ=UTC 0 * * * *", id="tz-prefix"),
        pytest.param("CRON_TZ=Europe/Berlin 30 2 * * *", id="cron-tz-prefix"),
        pytest.param("TZ= 0 * * * *", id="tz-empty-is-utc"),
        pytest.param("TZ=America/New_York @daily", id="tz-with-descriptor"),
    ],
)
def test_parse_accepts(text: str) -> None:
    assert isinstance(parse_schedule(text), Schedule)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("", "empty spec string", id="empty"),
        pytest.param("   ", "expected exactly 5 fields, found 0: []", id="blank"),
        pytest.param("* * * *", "expected exactly 5 fields, found 4: [* * * *]", id="four-fields"),
        pytest.param("0 0 1 1 * *", "expected exactly 5 fields, found 6: [0 0 1 1 * *]", id="six-fields"),
        pytest.param(" @daily", "expected exactly 5 fields, found 1: [@daily]", id="descriptor-after-space"),
        pytest.param(
            "0 0 L * *",
            'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax',
            id="last-day",
        ),
        pytest.param(
            "0 0 15W * *",
            'failed to parse int from 15W: strconv.Atoi: parsing "15W": invalid syntax',
            id="weekday-nearest",
        ),
        pytest.param(
            "0 0 * * 1#2",
            'failed to parse int from 1#2: strconv.Atoi: parsing "1#2": invalid syntax',
            id="nth",
        ),
        pytest.param(
            "0 0 * * 5L",
            'failed to parse int from 5L: strconv.Atoi: parsing "5L": invalid syntax',
            id="last-friday",
        ),
        pytest.param(
            "0 0 H * *",
            'failed to parse int from H: strconv.Atoi: parsing "H": invalid syntax',
            id="jenkins-hash",
        ),
        pytest.param(
            "0 0 * foo *",
            'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax',
            id="unknown-name",
        ),
        pytest.param(
            "99999999999999999999 * * * *",
            "failed to parse int from 99999999999999999999: strconv.Atoi: parsing "
            '"99999999999999999999": value out of range',
            id="huge-number",
        ),
        pytest.param(
            "0 0 1\x00 * *",
            'failed to parse int from 1\x00: strconv.Atoi: parsing "1\\x00": invalid syntax',
            id="control-character-quoted",
        ),
        pytest.param("0 0 * * 7", "end of range (7) above maximum (6): 7", id="weekday-7-is-not-sunday"),
        pytest.param(
            "0 0 * * MON-SUN", "beginning of range (1) beyond end of range (0): MON-SUN", id="weekday-wraps"
        ),
        pytest.param("60 * * * *", "end of range (60) above maximum (59): 60", id="minute-60"),
        pytest.param("0 24 * * *", "end of range (24) above maximum (23): 24", id="hour-24"),
        pytest.param("0 0 0 * *", "beginning of range (0) below minimum (1): 0", id="day-0"),
        pytest.param("0 0 32 * *", "end of range (32) above maximum (31): 32", id="day-32"),
        pytest.param("0 0 * 0 *", "beginning of range (0) below minimum (1): 0", id="month-0"),
        pytest.param("0 0 * 13 *", "end of range (13) above maximum (12): 13", id="month-13"),
        pytest.param(
            "5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1", id="reversed-range"
        ),
        pytest.param("*/0 * * * *", "step of range should be a positive number: */0", id="zero-step"),
        pytest.param("*/-1 * * * *", "negative number (-1) not allowed: -1", id="negative-step"),
        pytest.param("1-2-3 * * * *", "too many hyphens: 1-2-3", id="hyphens"),
        pytest.param("*/2/3 * * * *", "too many slashes: */2/3", id="slashes"),
        pytest.param("@sometimes", "unrecognized descriptor: @sometimes", id="unknown-descriptor"),
        pytest.param("@HOURLY", "unrecognized descriptor: @HOURLY", id="descriptor-case"),
        pytest.param("@daily ", "unrecognized descriptor: @daily ", id="descriptor-trailing-space"),
        pytest.param("@every", "unrecognized descriptor: @every", id="every-without-duration"),
        pytest.param(
            "@every ",
            'failed to parse duration @every : time: invalid duration ""',
            id="every-empty-duration",
        ),
        pytest.param(
            "@every 90x",
            'failed to parse duration @every 90x: time: unknown unit "x" in duration "90x"',
            id="every-unknown-unit",
        ),
        pytest.param(
            "@every 90",
            'failed to parse duration @every 90: time: missing unit in duration "90"',
            id="every-missing-unit",
        ),
        pytest.param(
            "@every 1h 30m",
            'failed to parse duration @every 1h 30m: time: unknown unit "h " in duration "1h 30m"',
            id="every-with-space",
        ),
        pytest.param(
            "@every 1\u00e9",
            'failed to parse duration @every 1\u00e9: time: unknown unit "\\xc3\\xa9" in duration "1\\xc3\\xa9"',
            id="every-non-ascii-unit",
        ),
        pytest.param(
            "@every 3000000000h",
            'failed to parse duration @every 3000000000h: time: invalid duration "3000000000h"',
            id="every-overflow",
        ),
        pytest.param(
            "TZ=Mars/Base 0 * * * *",
            "provided bad location Mars/Base: unknown time zone Mars/Base",
            id="tz-unknown",
        ),
        pytest.param(
            "TZ=../etc 0 * * * *", "provided bad location ../etc: time: invalid location name", id="tz-path"
        ),
        # robfig panics on these two (no space after the zone); we read the zone to the end of the text.
        pytest.param("TZ=UTC", "expected exactly 5 fields, found 0: []", id="tz-alone"),
        pytest.param(
            "CRON_TZ=Bogus", "provided bad location Bogus: unknown time zone Bogus", id="tz-alone-bad"
        ),
    ],
)
def test_parse_rejects_with_robfigs_message(text: str, error: str) -> None:
    assert parse_schedule(text) == error


def test_every_rounds_to_whole_seconds_with_a_minimum_of_one() -> None:
    assert parsed("@every 1h30m").every == 5400
    assert parsed("@every 1.9s").every == 1
    assert parsed("@every 500ms").every == 1
    assert parsed("@every -5m").every == 1


def test_very_long_numbers_are_refused_without_converting_them() -> None:
    hours, minutes = "9" * 5000 + "h", "1" * 6000
    assert parse_schedule(f"@every {hours}") == (
        f'failed to parse duration @every {hours}: time: invalid duration "{hours}"'
    )
    assert parse_schedule(f"{minutes} * * * *") == (
        f'failed to parse int from {minutes}: strconv.Atoi: parsing "{minutes}": value out of range'
    )
    assert parsed("@every " + "0" * 5000 + "1s").every == 1  # Go skips leading zeros
    assert parsed("0" * 5000 + "5 * * * *").minute == 1 << 5


# --- next activation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "after", "expected"),
    [
        pytest.param(
            "0 0 15 * 5",
            "2026-01-01T00:00:00+00:00",
            ["2026-01-02", "2026-01-09", "2026-01-15", "2026-01-16", "2026-01-23"],
            id="both-days-restricted-is-or",
        ),
        pytest.param(
            "0 0 15 * *", "2026-01-01T00:00:00+00:00", ["2026-01-15", "2026-02-15"], id="weekday-star-and"
        ),
        pytest.param(
            "0 0 ? * 1", "2026-01-01T00:00:00+00:00", ["2026-01-05", "2026-01-12"], id="question-mark-and"
        ),
        pytest.param(
            "0 0 */10 * 1",
            "2026-01-01T00:00:00+00:00",
            ["2026-01-05", "2026-01-11", "2026-01-12", "2026-01-19", "2026-01-21", "2026-01-26"],
            id="stepped-day-is-restricted",
        ),
        pytest.param(
            "0 0 1-31 * 1",
            "2026-01-01T00:00:00+00:00",
            ["2026-01-02", "2026-01-03", "2026-01-04"],
            id="full-range-is-restricted",
        ),
        pytest.param(
            "0 0 */1 * 1", "2026-01-01T00:00:00+00:00", ["2026-01-05", "2026-01-12"], id="step-one-keeps-star"
        ),
        pytest.param(
            "0 0 * * mon-fri", "2026-01-02T12:00:00+00:00", ["2026-01-05", "2026-01-06"], id="weekday-names"
        ),
        pytest.param(
            "0 12 * jan,JUL sun",
            "2026-01-25T13:00:00+00:00",
            ["2026-07-05T12:00:00+00:00", "2026-07-12T12:00:00+00:00"],
            id="month-names",
        ),
        pytest.param(
            "*/61 * * * *",
            "2026-01-01T00:00:00+00:00",
            ["2026-01-01T01:00:00+00:00", "2026-01-01T02:00:00+00:00"],
            id="step-beyond-range-keeps-start",
        ),
        pytest.param(
            "@weekly", "2026-01-01T00:00:00+00:00", ["2026-01-04", "2026-01-11"], id="weekly-sundays"
        ),
        pytest.param(
            "@yearly", "2026-01-01T00:00:00+00:00", ["2027-01-01", "2028-01-01"], id="yearly-strictly-after"
        ),
        pytest.param("@monthly", "2026-01-31T00:00:00+00:00", ["2026-02-01", "2026-03-01"], id="monthly"),
        pytest.param("0 0 29 2 *", "2026-01-01T00:00:00+00:00", ["2028-02-29"], id="leap-day"),
        pytest.param(
            "@every 1h30m",
            "2026-01-01T10:00:00.500000+00:00",
            ["2026-01-01T11:30:00+00:00", "2026-01-01T13:00:00+00:00"],
            id="every-drops-fraction",
        ),
        pytest.param(
            "@every -5m",
            "2026-01-01T10:00:00+00:00",
            ["2026-01-01T10:00:01+00:00", "2026-01-01T10:00:02+00:00"],
            id="every-at-least-a-second",
        ),
    ],
)
def test_next_times(text: str, after: str, expected: list[str]) -> None:
    times = following(text, at(after), len(expected))
    assert [t if "T" in e else t[:10] for t, e in zip(times, expected, strict=True)] == expected


@pytest.mark.parametrize(
    ("text", "after", "zone", "expected"),
    [
        pytest.param(
            "30 2 * * *",
            "2026-03-07T12:00:00+00:00",
            NEW_YORK,
            ["2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"],
            id="new-york-spring-forward-skips-2-30",
        ),
        pytest.param(
            "0 * * * *",
            "2026-03-08T05:30:00+00:00",
            NEW_YORK,
            ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"],
            id="new-york-hourly-across-the-gap",
        ),
        pytest.param(
            "30 1 * * *",
            "2026-10-31T12:00:00+00:00",
            NEW_YORK,
            ["2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"],
            id="new-york-fall-back-fires-in-both-1-30s",
        ),
        pytest.param(
            "*/30 * * * *",
            "2026-11-01T04:45:00+00:00",
            NEW_YORK,
            [
                "2026-11-01T01:00:00-04:00",
                "2026-11-01T01:30:00-04:00",
                "2026-11-01T01:00:00-05:00",
                "2026-11-01T01:30:00-05:00",
                "2026-11-01T02:00:00-05:00",
            ],
            id="new-york-half-hourly-through-the-repeated-hour",
        ),
        pytest.param(
            "30 2 * * *",
            "2026-03-28T12:00:00+00:00",
            BERLIN,
            ["2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"],
            id="berlin-spring-forward-skips-2-30",
        ),
        pytest.param(
            "0 2 * * *",
            "2026-03-28T12:00:00+00:00",
            BERLIN,
            ["2026-03-30T02:00:00+02:00"],
            id="berlin-spring-forward-skips-2-00",
        ),
        pytest.param(
            "30 2 * * *",
            "2026-10-24T12:00:00+00:00",
            BERLIN,
            ["2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"],
            id="berlin-fall-back-fires-in-both-2-30s",
        ),
        pytest.param(
            "0 3 * * *",
            "2026-03-28T12:00:00+00:00",
            BERLIN,
            ["2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00"],
            id="berlin-after-the-gap-unaffected",
        ),
    ],
)
def test_next_times_across_dst_follow_robfig(
    text: str, after: str, zone: ZoneInfo, expected: list[str]
) -> None:
    assert following(text, at(after), len(expected), zone) == expected


def test_next_is_strictly_after_and_in_the_zone_of_after() -> None:
    start = datetime(2026, 1, 5, 9, 0, tzinfo=BERLIN)
    found = parsed("0 9 * * *").next(start)  # no zone given: the wall clock of `after`, as robfig
    assert found == datetime(2026, 1, 6, 9, 0, tzinfo=BERLIN)
    assert found is not None and found.tzinfo is BERLIN


def test_a_tz_prefix_wins_over_the_zone_given() -> None:
    found = parsed("CRON_TZ=Europe/Berlin 0 9 * * *").next(at("2026-01-01T00:00:00+00:00"), NEW_YORK)
    assert found == at("2026-01-01T08:00:00+00:00")
    local = parsed("TZ=Local 0 9 * * *").next(at("2026-01-01T00:00:00+00:00"), NEW_YORK)
    assert local == at("2026-01-01T14:00:00+00:00")  # "Local" means the zone the caller runs in


def test_a_schedule_that_never_fires_has_no_next_time() -> None:
    assert parsed("0 0 30 2 *").next(at("2026-01-01T00:00:00+00:00")) is None
    assert parsed("0 0 , * *").next(at("2026-01-01T00:00:00+00:00")) is None  # robfig accepts an empty list


def test_naive_datetimes_are_read_as_utc() -> None:
    assert parsed("0 * * * *").next(datetime(2026, 1, 1, 10, 30)) == at("2026-01-01T11:00:00+00:00")


# --- the controller's view of a CronJob ------------------------------------------------------------------------


def cronjob(schedule: str = "*/5 * * * *", **fields: Any) -> dict[str, Any]:
    """A CronJob as stored; ``status`` and ``created`` go to their places, the rest into the spec."""
    status = fields.pop("status", {})
    created = fields.pop("created", "2026-01-01T00:00:00Z")
    return {
        "metadata": {"name": "nightly", "namespace": "default", "creationTimestamp": created},
        "spec": {"schedule": schedule, **fields},
        "status": status,
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(cronjob(), "2026-01-01T10:35:00+00:00", id="utc-by-default"),
        pytest.param(
            cronjob("0 9 * * *", timeZone="Europe/Berlin"), "2026-01-02T08:00:00+00:00", id="time-zone"
        ),
        pytest.param(cronjob("0 9 * * *", timeZone=""), "2026-01-02T09:00:00+00:00", id="empty-zone-is-utc"),
        pytest.param(
            cronjob("TZ=America/New_York 0 9 * * *", timeZone="Europe/Berlin"),
            "2026-01-01T14:00:00+00:00",
            id="schedule-tz-wins-as-upstream",
        ),
        pytest.param(cronjob("0 9 * * *", timeZone="Mars/Olympus"), None, id="unknown-zone"),
        pytest.param(cronjob("0 9 * * *", timeZone=7), None, id="zone-not-a-string"),
        pytest.param(cronjob("not a schedule"), None, id="bad-schedule"),
        pytest.param(cronjob("0 0 30 2 *"), None, id="never"),
        pytest.param({"spec": {"schedule": 5}}, None, id="schedule-not-a-string"),
    ],
)
def test_next_schedule_time(body: dict[str, Any], expected: str | None) -> None:
    found = next_schedule_time(body, at("2026-01-01T10:30:00+00:00"))
    assert found == (None if expected is None else at(expected))


@pytest.mark.parametrize(
    ("time_zone", "expected"),
    [
        pytest.param(None, UTC, id="unset"),
        pytest.param("", UTC, id="empty"),
        pytest.param("Local", UTC, id="local-is-the-controllers-utc"),
        pytest.param("Europe/Berlin", BERLIN, id="iana"),
        pytest.param("Mars/Olympus", None, id="unknown"),
        pytest.param("../etc", None, id="path"),
        pytest.param(["UTC"], None, id="not-a-string"),
    ],
)
def test_schedule_zone(time_zone: Any, expected: tzinfo | None) -> None:
    body = cronjob() if time_zone is None else cronjob(timeZone=time_zone)
    assert schedule_zone(body) == expected


MINUTELY = "* * * * *"


@pytest.mark.parametrize(
    ("body", "now", "expected", "many"),
    [
        pytest.param(cronjob(), "2026-01-01T00:04:59+00:00", None, False, id="none-due"),
        pytest.param(
            cronjob(), "2026-01-01T00:05:00+00:00", "2026-01-01T00:05:00+00:00", False, id="due-on-the-dot"
        ),
        pytest.param(
            cronjob(), "2026-01-01T00:07:00+00:00", "2026-01-01T00:05:00+00:00", False, id="one-missed"
        ),
        pytest.param(
            cronjob(),
            "2026-01-01T00:17:00+00:00",
            "2026-01-01T00:15:00+00:00",
            False,
            id="several-missed-latest",
        ),
        pytest.param(
            cronjob(status={"lastScheduleTime": "2026-01-01T00:15:00Z"}),
            "2026-01-01T00:17:00+00:00",
            None,
            False,
            id="last-schedule-time-already-done",
        ),
        pytest.param(
            cronjob(status={"lastScheduleTime": "2026-01-01T00:10:00Z"}, created="2025-01-01T00:00:00Z"),
            "2026-01-01T00:17:00+00:00",
            "2026-01-01T00:15:00+00:00",
            False,
            id="last-schedule-time-preferred-over-creation",
        ),
        pytest.param(
            cronjob(status={"lastScheduleTime": "yesterday"}),
            "2026-01-01T00:07:00+00:00",
            "2026-01-01T00:05:00+00:00",
            False,
            id="unreadable-last-schedule-time-falls-back-to-creation",
        ),
        pytest.param(
            cronjob(MINUTELY),
            "2026-01-01T01:40:00+00:00",
            "2026-01-01T01:40:00+00:00",
            False,
            id="100-missed",
        ),
        pytest.param(
            cronjob(MINUTELY), "2026-01-01T01:41:00+00:00", "2026-01-01T01:41:00+00:00", True, id="101-missed"
        ),
        pytest.param(
            cronjob(MINUTELY, startingDeadlineSeconds=300),
            "2026-01-01T01:41:00+00:00",
            "2026-01-01T01:41:00+00:00",
            False,
            id="starting-deadline-narrows-the-count",
        ),
        pytest.param(
            cronjob("0 * * * *", startingDeadlineSeconds=600),
            "2026-01-01T05:20:00+00:00",
            None,
            False,
            id="starting-deadline-cuts-off-the-last-run",
        ),
        pytest.param(
            cronjob("0 * * * *", startingDeadlineSeconds=600),
            "2026-01-01T05:09:00+00:00",
            "2026-01-01T05:00:00+00:00",
            False,
            id="starting-deadline-still-open",
        ),
        pytest.param(
            cronjob(startingDeadlineSeconds="600"),
            "2026-01-01T00:17:00+00:00",
            "2026-01-01T00:15:00+00:00",
            False,
            id="deadline-of-wrong-type-ignored",
        ),
        pytest.param(
            cronjob("0 9,10 * * *", status={"lastScheduleTime": "2026-01-01T10:00:00Z"}),
            "2026-01-03T08:00:00+00:00",
            "2026-01-02T10:00:00+00:00",
            False,
            id="irregular-schedule-exact-where-upstream-finds-none",
        ),
        pytest.param(
            cronjob("@every 7m", created="2026-01-01T10:00:00Z"),
            "2026-01-01T10:30:00+00:00",
            "2026-01-01T10:28:00+00:00",
            False,
            id="every-counts-from-the-last-run",
        ),
        pytest.param(
            cronjob(
                "30 1 * * *", timeZone="America/New_York", status={"lastScheduleTime": "2026-11-01T05:30:00Z"}
            ),
            "2026-11-01T07:00:00+00:00",
            "2026-11-01T06:30:00+00:00",
            False,
            id="second-of-a-repeated-wall-time",
        ),
        pytest.param(
            cronjob(created="2027-01-01T00:00:00Z"), "2026-01-01T00:17:00+00:00", None, False, id="future"
        ),
        pytest.param(cronjob("bad"), "2026-01-01T00:17:00+00:00", None, False, id="bad-schedule"),
        pytest.param(
            cronjob(timeZone="Mars/Olympus"), "2026-01-01T00:17:00+00:00", None, False, id="bad-time-zone"
        ),
    ],
)
def test_most_recent_schedule_time(body: dict[str, Any], now: str, expected: str | None, many: bool) -> None:
    assert most_recent_schedule_time(body, at(now)) == (None if expected is None else at(expected), many)


def test_most_recent_without_timestamps_counts_from_go_zero_time() -> None:
    body = {"spec": {"schedule": "0 * * * *"}}
    assert most_recent_schedule_time(body, at("2026-01-01T10:30:00+00:00")) == (
        at("2026-01-01T10:00:00+00:00"),
        True,
    )


def test_most_recent_after_years_missed_is_exact_and_quick() -> None:
    body = cronjob(MINUTELY, created="2020-01-01T00:00:00Z")
    now = at("2026-06-01T12:00:30.250000+00:00")
    assert most_recent_schedule_time(body, now) == (at("2026-06-01T12:00:00+00:00"), True)
    assert MANY_MISSED == 100


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        pytest.param("2026-01-01T00:10:00+00:00", "nightly-29453770", id="minutes-since-epoch"),
        pytest.param("2026-01-01T00:10:59.900000+00:00", "nightly-29453770", id="seconds-dropped"),
        pytest.param("2026-01-01T01:10:00+01:00", "nightly-29453770", id="zone-irrelevant"),
        pytest.param("1969-12-31T23:59:30+00:00", "nightly-0", id="go-truncates-toward-zero"),
    ],
)
def test_job_name(moment: str, expected: str) -> None:
    assert job_name("nightly", at(moment)) == expected


@pytest.mark.parametrize(
    ("time_zone", "moment", "expected"),
    [
        pytest.param(None, "2026-01-01T00:10:00.5+00:00", "2026-01-01T00:10:00Z", id="utc"),
        pytest.param("Europe/Berlin", "2026-01-01T00:10:00+00:00", "2026-01-01T01:10:00+01:00", id="berlin"),
        pytest.param(
            "America/New_York", "2026-07-01T12:00:00+00:00", "2026-07-01T08:00:00-04:00", id="summer"
        ),
        pytest.param(
            "Asia/Kolkata", "2026-01-01T00:00:00+00:00", "2026-01-01T05:30:00+05:30", id="half-hour"
        ),
        pytest.param(
            "Europe/London", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00Z", id="zero-offset-is-z"
        ),
        pytest.param(
            "Mars/Olympus", "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:00Z", id="unknown-zone-utc"
        ),
    ],
)
def test_scheduled_timestamp_annotation(time_zone: str | None, moment: str, expected: str) -> None:
    body = cronjob() if time_zone is None else cronjob(timeZone=time_zone)
    assert scheduled_timestamp_annotation(body, at(moment)) == expected


GARBAGE: list[Any] = [
    None,
    [],
    "x",
    7,
    {"spec": []},
    {"spec": None, "status": "x", "metadata": 3},
    {"spec": {"schedule": 5, "timeZone": 3, "startingDeadlineSeconds": 10**30}},
    {"spec": {"schedule": "* * * * *", "startingDeadlineSeconds": -(10**30)}},
    {
        "spec": {"schedule": "* * * * *"},
        "status": {"lastScheduleTime": 12},
        "metadata": {"creationTimestamp": []},
    },
    {
        "spec": {"schedule": "TZ=Etc/GMT-14 0 0 * * *", "timeZone": None},
        "metadata": {"creationTimestamp": "0001-01-01T00:00:00Z"},
    },
]


@pytest.mark.parametrize("garbage", GARBAGE)
def test_malformed_cronjobs_never_raise(garbage: Any) -> None:
    now = at("2026-01-01T00:00:00+00:00")
    next_schedule_time(garbage, now)
    most_recent_schedule_time(garbage, now)
    schedule_zone(garbage)
    scheduled_timestamp_annotation(garbage, now)


def test_times_at_the_edge_of_the_calendar_give_none() -> None:
    assert parsed("0 0 * * *").next(datetime(9999, 12, 31, 12, tzinfo=UTC)) is None
    assert parsed("@every 1h").next(datetime(9999, 12, 31, 23, 30, tzinfo=UTC)) is None


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("0123456789*?/-,@ LW#HTZ=eUCvrymonthlJAN\t\u00a0")), max_size=30)
)
def test_any_text_parses_or_gives_a_message(text: str) -> None:
    schedule = parse_schedule(text)
    if isinstance(schedule, str):
        assert schedule
    else:
        start = datetime(2026, 1, 1, tzinfo=UTC)
        found = schedule.next(start, NEW_YORK)
        assert found is None or start < found <= start + timedelta(days=366 * 6)

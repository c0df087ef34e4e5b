"""CronJob defaulting and validation, robfig/cron schedule parsing, schedule times across DST, names."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from multiqueue.api.cronjobs import (
    default_cronjob,
    job_name,
    most_recent_schedule_time,
    next_schedule_time,
    parse_schedule,
    scheduled_timestamp_annotation,
    validate_cronjob,
    validate_cronjob_update,
)

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def cronjob(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "schedule": "*/5 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
                    }
                }
            },
            **spec,
        },
    }
    return default_cronjob(body)


def test_defaults() -> None:
    spec = cronjob()["spec"]
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["suspend"] is False
    assert spec["successfulJobsHistoryLimit"] == 3
    assert spec["failedJobsHistoryLimit"] == 1
    assert spec["jobTemplate"]["spec"]["backoffLimit"] == 6


CASES: dict[str, tuple[dict[str, Any], str | None, str | None]] = {
    "valid": (cronjob(), None, None),
    "valid-time-zone": (cronjob(timeZone="Europe/Berlin"), None, None),
    "name-52": (cronjob(name="a" * 52), None, None),
    "name-53": (cronjob(name="a" * 53), "metadata.name", "must be no more than 52 characters"),
    "schedule-missing": (cronjob(schedule=""), "spec.schedule", "Required value"),
    "schedule-six-fields": (
        cronjob(schedule="0 0 1 1 * *"),
        "spec.schedule",
        "expected exactly 5 fields, found 6",
    ),
    "schedule-tz": (
        cronjob(schedule="TZ=UTC 0 * * * *"),
        "spec.schedule",
        "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
    ),
    "schedule-cron-tz": (
        cronjob(schedule="CRON_TZ=UTC 0 * * * *"),
        "spec.schedule",
        "use timeZone field instead",
    ),
    "time-zone-empty": (cronjob(timeZone=""), "spec.timeZone", "timeZone must be nil or non-empty string"),
    "time-zone-unknown": (
        cronjob(timeZone="Mars/Olympus"),
        "spec.timeZone",
        "unknown time zone Mars/Olympus",
    ),
    "time-zone-bad-characters": (cronjob(timeZone="../etc"), "spec.timeZone", "unknown time zone ../etc"),
    "time-zone-local": (cronjob(timeZone="Local"), "spec.timeZone", "timeZone must be an explicit time zone"),
    "negative-starting-deadline": (
        cronjob(startingDeadlineSeconds=-1),
        "spec.startingDeadlineSeconds",
        ">= 0".replace(">= 0", "greater than or equal to 0"),
    ),
    "concurrency-missing": (cronjob(concurrencyPolicy=""), "spec.concurrencyPolicy", None),
    "concurrency-unknown": (
        cronjob(concurrencyPolicy="Sometimes"),
        "spec.concurrencyPolicy",
        "Unsupported value",
    ),
    "negative-history": (
        cronjob(successfulJobsHistoryLimit=-1),
        "spec.successfulJobsHistoryLimit",
        "greater than or equal to 0",
    ),
    "negative-failed-history": (
        cronjob(failedJobsHistoryLimit=-1),
        "spec.failedJobsHistoryLimit",
        "greater than or equal to 0",
    ),
    "template-selector": (
        cronjob(
            jobTemplate={
                "spec": {
                    "selector": {"matchLabels": {"a": "b"}},
                    "template": {
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
                    },
                }
            }
        ),
        "spec.jobTemplate.spec.selector",
        "`selector` will be auto-generated",
    ),
    "template-restart-always": (
        cronjob(
            jobTemplate={
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}
                    }
                }
            }
        ),
        "spec.jobTemplate.spec.template.spec.restartPolicy",
        "Required value",
    ),
}


@pytest.mark.parametrize(("body", "field", "message"), [
    pytest.param(body, field, message, id=name) for name, (body, field, message) in CASES.items()
])  # fmt: skip
def test_create_rules(body: dict[str, Any], field: str | None, message: str | None) -> None:
    if body["spec"].get("concurrencyPolicy") == "Allow" and field == "spec.concurrencyPolicy":
        body["spec"]["concurrencyPolicy"] = ""  # defaulting filled it in; send it empty as a raw client could
    errors = validate_cronjob(body)
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        assert any(e.field == field and (message is None or message in e.message()) for e in errors), [
            str(e) for e in errors
        ]


def test_update_keeps_an_existing_tz_schedule_and_long_name() -> None:
    old = cronjob(name="a" * 60, schedule="TZ=UTC 0 * * * *")
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = True
    assert validate_cronjob_update(new, old) == []
    both = copy.deepcopy(old)
    both["spec"]["timeZone"] = "UTC"
    assert any("cannot use both timeZone field and TZ" in str(e) for e in validate_cronjob_update(both, old))


@pytest.mark.parametrize(
    ("schedule", "error"),
    [
        pytest.param("* * * * *", None, id="every-minute"),
        pytest.param("0 0 ? * MON-FRI", None, id="question-mark-and-names"),
        pytest.param("*/61 * * * *", None, id="step-beyond-range"),
        pytest.param("0 0 1 jan,JUL *", None, id="month-names"),
        pytest.param("@hourly", None, id="hourly"),
        pytest.param("@annually", None, id="annually"),
        pytest.param("@every 1h30m", None, id="every"),
        pytest.param("@every 90x", "failed to parse duration @every 90x", id="every-bad"),
        pytest.param("@sometimes", "unrecognized descriptor: @sometimes", id="unknown-descriptor"),
        pytest.param("0 0 1 1 * *", "expected exactly 5 fields, found 6: [0 0 1 1 * *]", id="six-fields"),
        pytest.param("0 0 L * *", "failed to parse int from L", id="L-rejected"),
        pytest.param("0 0 * * 1#2", "failed to parse int from 1#2", id="hash-rejected"),
        pytest.param("0 0 * * 7", "end of range (7) above maximum (6): 7", id="dow-7"),
        pytest.param("60 * * * *", "end of range (60) above maximum (59): 60", id="minute-60"),
        pytest.param("0 0 0 * *", "beginning of range (0) below minimum (1): 0", id="dom-0"),
        pytest.param(
            "5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1", id="reversed-range"
        ),
        pytest.param("*/0 * * * *", "step of range should be a positive number: */0", id="zero-step"),
        pytest.param("1-2-3 * * * *", "too many hyphens: 1-2-3", id="hyphens"),
        pytest.param("*/2/3 * * * *", "too many slashes: */2/3", id="slashes"),
    ],
)
def test_parse_schedule(schedule: str, error: str | None) -> None:
    parsed = parse_schedule(schedule)
    if error is None:
        assert not isinstance(parsed, str), parsed
    else:
        assert isinstance(parsed, str) and parsed.startswith(error), parsed


def _times(schedule: str, start: datetime, count: int, zone: ZoneInfo | None = None) -> list[datetime]:
    parsed = parse_schedule(schedule)
    assert not isinstance(parsed, str)
    found: list[datetime] = []
    moment = start
    for _ in range(count):
        following = parsed.next(moment, zone)
        assert following is not None
        found.append(following)
        moment = following
    return found


def test_day_fields_combine_with_or_when_both_restricted() -> None:
    times = _times("0 0 13 * 5", datetime(2026, 2, 1, tzinfo=UTC), 4)
    assert [t.day for t in times] == [6, 13, 20, 27]  # Fridays, and the 13th


def test_a_star_day_field_means_and() -> None:
    times = _times("0 0 * * 1", datetime(2026, 1, 1, tzinfo=UTC), 2)
    assert all(t.weekday() == 0 for t in times)


def test_a_stepped_day_field_counts_as_restricted() -> None:
    times = _times("0 0 */10 * 1", datetime(2026, 1, 1, tzinfo=UTC), 4)
    # Days 1, 11, 21, 31 OR Mondays (5, 12, 19, ...).
    assert [t.day for t in times] == [5, 11, 12, 19]


def test_spring_forward_skips_the_missing_time() -> None:
    times = _times("30 2 * * *", datetime(2026, 3, 7, 12, tzinfo=UTC), 2, NEW_YORK)
    assert [t.astimezone(NEW_YORK).day for t in times] == [9, 10]  # 2:30 does not exist on 8 March


def test_fall_back_fires_in_both_repeated_hours_like_robfig() -> None:
    times = _times("30 1 * * *", datetime(2026, 10, 31, 12, tzinfo=UTC), 3, NEW_YORK)
    assert [t.isoformat() for t in times] == [
        "2026-11-01T05:30:00+00:00",
        "2026-11-01T06:30:00+00:00",
        "2026-11-02T06:30:00+00:00",
    ]


def test_berlin_daily_across_dst() -> None:
    times = _times("0 3 * * *", datetime(2026, 3, 28, 12, tzinfo=UTC), 2, BERLIN)
    assert [t.astimezone(BERLIN).hour for t in times] == [3, 3]
    assert [t.astimezone(UTC).hour for t in times] == [1, 1]


def test_next_schedule_time_uses_the_time_zone() -> None:
    body = cronjob(schedule="0 9 * * *", timeZone="Europe/Berlin")
    following = next_schedule_time(body, datetime(2026, 1, 1, tzinfo=UTC))
    assert following == datetime(2026, 1, 1, 8, tzinfo=UTC)
    assert next_schedule_time(cronjob(schedule="bad"), datetime(2026, 1, 1, tzinfo=UTC)) is None


@pytest.mark.parametrize(
    ("now", "status", "deadline", "expected", "many"),
    [
        pytest.param(datetime(2026, 1, 1, 0, 4, tzinfo=UTC), {}, None, None, False, id="none-due"),
        pytest.param(
            datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
            {},
            None,
            datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
            False,
            id="one-due",
        ),
        pytest.param(
            datetime(2026, 1, 1, 0, 17, tzinfo=UTC),
            {},
            None,
            datetime(2026, 1, 1, 0, 15, tzinfo=UTC),
            False,
            id="several-missed",
        ),
        pytest.param(
            datetime(2026, 1, 1, 0, 17, tzinfo=UTC),
            {"lastScheduleTime": "2026-01-01T00:15:00Z"},
            None,
            None,
            False,
            id="already-done",
        ),
        pytest.param(
            datetime(2026, 1, 2, 0, 1, tzinfo=UTC),
            {},
            None,
            datetime(2026, 1, 2, 0, 0, tzinfo=UTC),
            True,
            id="over-100-missed",
        ),
        pytest.param(
            datetime(2026, 1, 2, 0, 1, tzinfo=UTC),
            {},
            200,
            datetime(2026, 1, 2, 0, 0, tzinfo=UTC),
            False,
            id="deadline-limits-window",
        ),
        pytest.param(datetime(2026, 1, 2, 0, 4, tzinfo=UTC), {}, 60, None, False, id="deadline-passed"),
    ],
)
def test_most_recent_schedule_time(
    now: datetime, status: dict[str, Any], deadline: int | None, expected: datetime | None, many: bool
) -> None:
    body = cronjob()
    body["status"] = status
    if deadline is not None:
        body["spec"]["startingDeadlineSeconds"] = deadline
    assert most_recent_schedule_time(body, now) == (expected, many)


def test_job_name_and_annotation() -> None:
    moment = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert job_name("nightly", moment) == f"nightly-{int(moment.timestamp()) // 60}"
    assert (
        scheduled_timestamp_annotation(cronjob(timeZone="Europe/Berlin"), moment)
        == "2026-01-01T01:10:00+01:00"
    )
    assert scheduled_timestamp_annotation(cronjob(), moment) == "2026-01-01T00:10:00Z"


@pytest.mark.parametrize("garbage", [None, [], "x", {"spec": []}, {"spec": {"schedule": 5, "timeZone": 3}}])
def test_malformed_input_never_raises(garbage: Any) -> None:
    validate_cronjob(garbage)
    validate_cronjob_update(garbage, garbage)
    most_recent_schedule_time(garbage, datetime(2026, 1, 1, tzinfo=UTC))

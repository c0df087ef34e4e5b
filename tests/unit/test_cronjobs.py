"""CronJob defaulting and validation: upstream's rules, field paths and messages (schedule times are in
test_cron_schedule.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api.cronjobs import default_cronjob, validate_cronjob, validate_cronjob_update
from multiqueue.api.errors import ErrorType

INVALID, REQUIRED, NOT_SUPPORTED = ErrorType.INVALID, ErrorType.REQUIRED, ErrorType.NOT_SUPPORTED
EXPLICIT_ZONE = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
TZ_IN_SCHEDULE = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
TZ_TWICE = "cannot use both timeZone field and TZ or CRON_TZ in schedule"
NON_NEGATIVE = "must be greater than or equal to 0"
POLICIES = 'supported values: "Allow", "Forbid", "Replace"'


def job_template(**spec: Any) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
    return {"spec": {"template": {"spec": pod}, **spec}}


def cronjob(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    """A CronJob as it reaches validation: CronJob defaults filled in by hand, so only the Job rules are borrowed."""
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedule": "*/5 * * * *",
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": job_template(),
            **spec,
        },
    }


Expected = list[tuple[ErrorType, str, str | None]]  # (type, field, detail); None: detail not checked


def found(errors: list[Any]) -> list[tuple[ErrorType, str, str]]:
    return [(e.type, e.field, e.detail) for e in errors]


def matches(errors: list[Any], expected: Expected) -> bool:
    return len(errors) == len(expected) and all(
        (e.type, e.field) == (t, f) and (d is None or e.detail == d)
        for e, (t, f, d) in zip(errors, expected, strict=True)
    )


CREATE: dict[str, tuple[dict[str, Any], Expected]] = {
    # accepted
    "valid": (cronjob(), []),
    "valid-descriptor": (cronjob(schedule="@every 1h30m"), []),
    "valid-question-mark-and-names": (cronjob(schedule="0 0 ? * MON-FRI"), []),
    "valid-time-zone": (cronjob(timeZone="Europe/Berlin"), []),
    "valid-legacy-zone-name": (cronjob(timeZone="Etc/GMT+5"), []),
    "valid-zero-limits": (
        cronjob(startingDeadlineSeconds=0, successfulJobsHistoryLimit=0, failedJobsHistoryLimit=0),
        [],
    ),
    "valid-forbid": (cronjob(concurrencyPolicy="Forbid"), []),
    "valid-replace": (cronjob(concurrencyPolicy="Replace"), []),
    "name-52-characters": (cronjob(name="a" * 52), []),
    # metadata
    "name-53-characters": (
        cronjob(name="a" * 53),
        [(INVALID, "metadata.name", "must be no more than 52 characters")],
    ),
    "namespace-missing": (
        {**cronjob(), "metadata": {"name": "nightly"}},
        [(REQUIRED, "metadata.namespace", None)],
    ),
    # schedule
    "schedule-missing": (cronjob(schedule=None), [(REQUIRED, "spec.schedule", "")]),
    "schedule-empty": (cronjob(schedule=""), [(REQUIRED, "spec.schedule", "")]),
    "schedule-not-a-string": (cronjob(schedule=5), [(INVALID, "spec.schedule", "must be a string")]),
    "schedule-six-fields": (
        cronjob(schedule="0 0 1 1 * *"),
        [(INVALID, "spec.schedule", "expected exactly 5 fields, found 6: [0 0 1 1 * *]")],
    ),
    "schedule-weekday-7": (
        cronjob(schedule="0 0 * * 7"),
        [(INVALID, "spec.schedule", "end of range (7) above maximum (6): 7")],
    ),
    "schedule-last-day": (
        cronjob(schedule="0 0 L * *"),
        [(INVALID, "spec.schedule", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax')],
    ),
    "schedule-tz": (cronjob(schedule="TZ=UTC 0 * * * *"), [(INVALID, "spec.schedule", TZ_IN_SCHEDULE)]),
    "schedule-cron-tz": (
        cronjob(schedule="CRON_TZ=Europe/Berlin 0 * * * *"),
        [(INVALID, "spec.schedule", TZ_IN_SCHEDULE)],
    ),
    "schedule-bad-tz": (
        cronjob(schedule="TZ=Mars/Base 0 * * * *"),
        [
            (INVALID, "spec.schedule", "provided bad location Mars/Base: unknown time zone Mars/Base"),
            (INVALID, "spec.schedule", TZ_IN_SCHEDULE),
        ],
    ),
    # startingDeadlineSeconds
    "deadline-negative": (
        cronjob(startingDeadlineSeconds=-1),
        [(INVALID, "spec.startingDeadlineSeconds", NON_NEGATIVE)],
    ),
    "deadline-not-an-integer": (
        cronjob(startingDeadlineSeconds="60"),
        [(INVALID, "spec.startingDeadlineSeconds", "must be an integer")],
    ),
    # timeZone
    "zone-empty": (
        cronjob(timeZone=""),
        [(INVALID, "spec.timeZone", "timeZone must be nil or non-empty string")],
    ),
    "zone-unknown": (
        cronjob(timeZone="Mars/Olympus"),
        [(INVALID, "spec.timeZone", "unknown time zone Mars/Olympus")],
    ),
    "zone-path": (
        cronjob(timeZone="../etc/passwd"),
        [(INVALID, "spec.timeZone", "unknown time zone ../etc/passwd")],
    ),
    "zone-leading-dash": (cronjob(timeZone="-UTC"), [(INVALID, "spec.timeZone", "unknown time zone -UTC")]),
    "zone-part-over-14": (
        cronjob(timeZone="America/Fifteen_Letters"),
        [(INVALID, "spec.timeZone", "unknown time zone America/Fifteen_Letters")],
    ),
    "zone-dots-inside-a-part": (
        cronjob(timeZone="Etc/a..b"),
        [(INVALID, "spec.timeZone", "time: invalid location name")],
    ),
    "zone-local": (cronjob(timeZone="Local"), [(INVALID, "spec.timeZone", EXPLICIT_ZONE)]),
    "zone-local-lowercase": (
        cronjob(timeZone="local"),
        [(INVALID, "spec.timeZone", EXPLICIT_ZONE), (INVALID, "spec.timeZone", "unknown time zone local")],
    ),
    "zone-not-a-string": (cronjob(timeZone=3), [(INVALID, "spec.timeZone", "must be a string")]),
    # concurrencyPolicy
    "policy-missing": (cronjob(concurrencyPolicy=None), [(REQUIRED, "spec.concurrencyPolicy", "")]),
    "policy-empty": (cronjob(concurrencyPolicy=""), [(REQUIRED, "spec.concurrencyPolicy", "")]),
    "policy-unknown": (
        cronjob(concurrencyPolicy="Sometimes"),
        [(NOT_SUPPORTED, "spec.concurrencyPolicy", POLICIES)],
    ),
    "policy-case": (
        cronjob(concurrencyPolicy="allow"),
        [(NOT_SUPPORTED, "spec.concurrencyPolicy", POLICIES)],
    ),
    # jobTemplate
    "template-selector": (
        cronjob(jobTemplate=job_template(selector={"matchLabels": {"a": "b"}})),
        [(INVALID, "spec.jobTemplate.spec.selector", "`selector` will be auto-generated")],
    ),
    "template-manual-selector": (
        cronjob(jobTemplate=job_template(manualSelector=True)),
        [(NOT_SUPPORTED, "spec.jobTemplate.spec.manualSelector", 'supported values: "nil", "false"')],
    ),
    "template-job-rules-apply": (
        cronjob(jobTemplate=job_template(backoffLimit=-1)),
        [(INVALID, "spec.jobTemplate.spec.backoffLimit", NON_NEGATIVE)],
    ),
    # history limits
    "successful-history-negative": (
        cronjob(successfulJobsHistoryLimit=-1),
        [(INVALID, "spec.successfulJobsHistoryLimit", NON_NEGATIVE)],
    ),
    "failed-history-negative": (
        cronjob(failedJobsHistoryLimit=-2),
        [(INVALID, "spec.failedJobsHistoryLimit", NON_NEGATIVE)],
    ),
    "history-not-an-integer": (
        cronjob(failedJobsHistoryLimit=1.5),
        [(INVALID, "spec.failedJobsHistoryLimit", "must be an integer")],
    ),
    "errors-in-upstream-order": (
        cronjob(name="b" * 60, schedule="", timeZone="", concurrencyPolicy="", failedJobsHistoryLimit=-1),
        [
            (REQUIRED, "spec.schedule", ""),
            (INVALID, "spec.timeZone", "timeZone must be nil or non-empty string"),
            (REQUIRED, "spec.concurrencyPolicy", ""),
            (INVALID, "spec.failedJobsHistoryLimit", NON_NEGATIVE),
            (INVALID, "metadata.name", "must be no more than 52 characters"),
        ],
    ),
}


@pytest.mark.parametrize(
    ("body", "expected"), [pytest.param(*case, id=name) for name, case in CREATE.items()]
)
def test_validate_cronjob(body: dict[str, Any], expected: Expected) -> None:
    errors = validate_cronjob(body)
    assert matches(errors, expected), found(errors)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            cronjob(schedule="0 0 * * 7"),
            'spec.schedule: Invalid value: "0 0 * * 7": end of range (7) above maximum (6): 7',
            id="schedule",
        ),
        pytest.param(
            cronjob(timeZone="Mars/Olympus"),
            'spec.timeZone: Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
            id="time-zone",
        ),
        pytest.param(cronjob(schedule=""), "spec.schedule: Required value", id="required"),
        pytest.param(
            cronjob(concurrencyPolicy="Sometimes"),
            'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"',
            id="not-supported",
        ),
        pytest.param(
            cronjob(startingDeadlineSeconds=-5),
            "spec.startingDeadlineSeconds: Invalid value: -5: must be greater than or equal to 0",
            id="negative",
        ),
    ],
)
def test_messages_read_like_the_api_servers(body: dict[str, Any], message: str) -> None:
    assert [e.message() for e in validate_cronjob(body)] == [message]


def changed(body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    new = copy.deepcopy(body)
    new["spec"].update(spec)
    return new


TZ_SCHEDULE = cronjob(schedule="TZ=UTC 0 * * * *")
LONG_NAME = cronjob(name="a" * 60)
STALE_ZONE = cronjob(timeZone="Mars/Olympus")

UPDATE: dict[str, tuple[dict[str, Any], dict[str, Any], Expected]] = {
    "unchanged": (cronjob(), cronjob(), []),
    "suspend": (changed(cronjob(), suspend=True), cronjob(), []),
    "long-name-kept": (changed(LONG_NAME, suspend=True), LONG_NAME, []),
    "tz-schedule-kept": (changed(TZ_SCHEDULE, suspend=True), TZ_SCHEDULE, []),
    "tz-schedule-changed": (
        changed(TZ_SCHEDULE, schedule="CRON_TZ=Europe/Berlin 30 * * * *"),
        TZ_SCHEDULE,
        [],
    ),
    "tz-schedule-dropped": (changed(TZ_SCHEDULE, schedule="0 * * * *"), TZ_SCHEDULE, []),
    "tz-schedule-and-time-zone": (
        changed(TZ_SCHEDULE, timeZone="UTC"),
        TZ_SCHEDULE,
        [(INVALID, "spec.schedule", TZ_TWICE)],
    ),
    "tz-schedule-added": (
        changed(cronjob(), schedule="TZ=UTC 0 * * * *"),
        cronjob(),
        [(INVALID, "spec.schedule", TZ_IN_SCHEDULE)],
    ),
    "stale-zone-kept": (changed(STALE_ZONE, suspend=True), STALE_ZONE, []),
    "zone-changed-to-unknown": (
        changed(cronjob(), timeZone="Mars/Olympus"),
        cronjob(),
        [(INVALID, "spec.timeZone", "unknown time zone Mars/Olympus")],
    ),
    "spec-rules-apply": (
        changed(cronjob(), startingDeadlineSeconds=-1, schedule="61 * * * *"),
        cronjob(),
        [
            (INVALID, "spec.schedule", "end of range (61) above maximum (59): 61"),
            (INVALID, "spec.startingDeadlineSeconds", NON_NEGATIVE),
        ],
    ),
    "name-immutable": (cronjob(name="other"), cronjob(), [(INVALID, "metadata.name", "field is immutable")]),
}


@pytest.mark.parametrize(
    ("new", "old", "expected"), [pytest.param(*case, id=name) for name, case in UPDATE.items()]
)
def test_validate_cronjob_update(new: dict[str, Any], old: dict[str, Any], expected: Expected) -> None:
    errors = validate_cronjob_update(new, old)
    assert matches(errors, expected), found(errors)


# --- defaulting ------------------------------------------------------------------------------------------------


def test_defaults_fill_the_spec_and_the_job_template() -> None:
    body = {"metadata": {"name": "nightly"}, "spec": {"schedule": "@daily", "jobTemplate": job_template()}}
    before = copy.deepcopy(body)
    spec = default_cronjob(body)["spec"]
    assert body == before, "the input is not modified"
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    job_spec = spec["jobTemplate"]["spec"]
    # As upstream's generated defaulters: the pod template is defaulted, the Job spec waits for the Job.
    assert not {"completions", "parallelism", "backoffLimit", "completionMode"} & set(job_spec)
    assert job_spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert "startingDeadlineSeconds" not in spec and "timeZone" not in spec


def test_an_indexed_template_without_completions_is_refused_at_create() -> None:
    body = {
        "metadata": {"name": "nightly", "namespace": "default"},
        "spec": {"schedule": "@daily", "jobTemplate": job_template(completionMode="Indexed")},
    }
    problems = [(p.field, p.detail) for p in validate_cronjob(default_cronjob(body))]
    assert ("spec.jobTemplate.spec.completions", "when completion mode is Indexed") in problems


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        pytest.param("concurrencyPolicy", "Forbid", "Forbid", id="policy-kept"),
        pytest.param("concurrencyPolicy", "", "Allow", id="empty-policy-defaulted"),
        pytest.param("concurrencyPolicy", None, "Allow", id="null-policy-defaulted"),
        pytest.param("suspend", True, True, id="suspend-kept"),
        pytest.param("successfulJobsHistoryLimit", 0, 0, id="zero-history-kept"),
        pytest.param("failedJobsHistoryLimit", None, 1, id="null-history-defaulted"),
    ],
)
def test_defaults_keep_what_is_set(field: str, value: Any, expected: Any) -> None:
    spec = default_cronjob({"spec": {"schedule": "@daily", field: value}})["spec"]
    assert spec[field] == expected


def test_a_defaulted_cronjob_validates() -> None:
    body = {
        "metadata": {"name": "n", "namespace": "d"},
        "spec": {"schedule": "@daily", "jobTemplate": job_template()},
    }
    assert validate_cronjob(default_cronjob(body)) == []


@pytest.mark.parametrize(
    "garbage",
    [
        None,
        [],
        "x",
        3,
        {"spec": []},
        {"spec": "x", "metadata": []},
        {"spec": {"jobTemplate": []}},
        {"spec": None},
    ],
)
def test_malformed_input_never_raises(garbage: Any) -> None:
    default_cronjob(garbage)
    assert validate_cronjob(garbage)
    validate_cronjob_update(garbage, garbage)
    validate_cronjob_update(cronjob(), garbage)

"""The CronJob controller's decide step over a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from multiqueue.api.cronjobs import SCHEDULED_TIMESTAMP_ANNOTATION, default_cronjob
from multiqueue.api.cronjobtimes import job_name
from multiqueue.api.meta import format_time
from multiqueue.controllers.cronjob_sync import decide

CREATED = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)


def cronjob(**spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    body = default_cronjob(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {
                "name": "cj",
                "namespace": "default",
                "uid": "cj-uid",
                "creationTimestamp": format_time(CREATED),
            },
            "spec": {
                "schedule": "*/10 * * * *",
                "jobTemplate": {
                    "metadata": {"labels": {"team": "a"}},
                    "spec": {
                        "template": {
                            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
                        }
                    },
                },
                **spec,
            },
        }
    )
    body["status"] = status
    return body


def job(name: str, outcome: str | None = None, started_minutes: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": format_time(CREATED + timedelta(minutes=started_minutes))}
    if outcome is not None:
        status["conditions"] = [
            {"type": outcome, "status": "True", "lastTransitionTime": format_time(CREATED)}
        ]
        if outcome == "Complete":
            status["completionTime"] = format_time(CREATED + timedelta(minutes=started_minutes + 1))
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": "CronJob", "name": "cj", "uid": "cj-uid", "controller": True}],
        },
        "status": status,
    }


def active_ref(name: str) -> dict[str, Any]:
    return {"kind": "Job", "name": name, "namespace": "default", "uid": f"uid-{name}"}


def test_creates_the_job_for_the_most_recent_time() -> None:
    now = CREATED + timedelta(minutes=10, seconds=5)
    actions = decide(cronjob(), [], now)
    scheduled = CREATED + timedelta(minutes=10)
    assert actions.create is not None
    assert actions.create["metadata"]["name"] == job_name("cj", scheduled)
    assert actions.create["metadata"]["labels"] == {"team": "a"}
    assert actions.create["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION] == "2026-01-01T00:10:00Z"
    assert actions.create["metadata"]["ownerReferences"][0]["uid"] == "cj-uid"
    assert actions.status is not None and actions.status["lastScheduleTime"] == "2026-01-01T00:10:00Z"
    assert actions.requeue_after == pytest.approx(595.1)


def test_nothing_due_requeues_at_the_next_time() -> None:
    actions = decide(cronjob(), [], CREATED + timedelta(minutes=3))
    assert actions.create is None
    assert actions.requeue_after == pytest.approx(420.1)


def test_many_missed_start_only_the_latest_and_warn() -> None:
    actions = decide(cronjob(), [], CREATED + timedelta(days=2, minutes=1))
    assert actions.create is not None
    assert actions.scheduled_time == CREATED + timedelta(days=2)
    assert "TooManyMissedTimes" in [e.reason for e in actions.events]


def test_starting_deadline_skips_a_late_start() -> None:
    actions = decide(cronjob(startingDeadlineSeconds=30), [], CREATED + timedelta(minutes=11))
    assert actions.create is None


def test_already_scheduled_time_is_not_started_twice() -> None:
    body = cronjob(status={"lastScheduleTime": "2026-01-01T00:10:00Z"})
    assert decide(body, [], CREATED + timedelta(minutes=12)).create is None


@pytest.mark.parametrize(
    ("policy", "creates", "deletes", "event"),
    [
        pytest.param("Allow", True, [], None, id="allow"),
        pytest.param("Forbid", False, [], "JobAlreadyActive", id="forbid"),
        pytest.param("Replace", True, ["old"], "SuccessfulDelete", id="replace"),
    ],
)
def test_concurrency_policies_with_an_active_job(
    policy: str, creates: bool, deletes: list[str], event: str | None
) -> None:
    body = cronjob(
        concurrencyPolicy=policy,
        status={"active": [active_ref("old")], "lastScheduleTime": "2026-01-01T00:00:00Z"},
    )
    actions = decide(body, [job("old")], CREATED + timedelta(minutes=10, seconds=1))
    assert (actions.create is not None) is creates
    assert [j["metadata"]["name"] for j in actions.delete] == deletes
    if event is not None:
        assert event in [e.reason for e in actions.events]
    if policy == "Forbid":
        assert actions.status is None, "lastScheduleTime does not move while forbidden"


def test_finished_jobs_leave_active_and_history_is_trimmed_oldest_first() -> None:
    body = cronjob(
        successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0, status={"active": [active_ref("c")]}
    )
    owned = [
        job("a", "Complete", 0),
        job("b", "Complete", 10),
        job("c", "Complete", 20),
        job("f", "Failed", 5),
    ]
    actions = decide(body, owned, CREATED + timedelta(minutes=25))
    assert sorted(j["metadata"]["name"] for j in actions.delete) == ["a", "b", "f"]
    assert "SawCompletedJob" in [e.reason for e in actions.events]
    assert actions.status is not None and "active" not in actions.status
    assert actions.status["lastSuccessfulTime"] == "2026-01-01T00:21:00Z"


def test_missing_and_unexpected_jobs_are_reported() -> None:
    body = cronjob(status={"active": [active_ref("gone")], "lastScheduleTime": "2026-01-01T00:00:00Z"})
    actions = decide(body, [job("stray")], CREATED + timedelta(minutes=5))
    reasons = [e.reason for e in actions.events]
    assert "MissingJob" in reasons and "UnexpectedJob" in reasons


def test_suspended_creates_nothing() -> None:
    assert decide(cronjob(suspend=True), [], CREATED + timedelta(minutes=30)).create is None


def test_time_zone_schedules_in_that_zone() -> None:
    body = cronjob(schedule="0 9 * * *", timeZone="Europe/Berlin")
    actions = decide(body, [], datetime(2026, 1, 1, 8, 0, 30, tzinfo=UTC))
    assert actions.create is not None
    assert (
        actions.create["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION]
        == "2026-01-01T09:00:00+01:00"
    )


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        pytest.param({"timeZone": "Mars/Olympus"}, "UnknownTimeZone", id="bad-zone"),
        pytest.param({"schedule": "61 * * * *"}, "UnparseableSchedule", id="bad-schedule"),
    ],
)
def test_invalid_schedules_and_zones_warn(spec: dict[str, Any], reason: str) -> None:
    actions = decide(cronjob(**spec), [], CREATED + timedelta(minutes=10))
    assert actions.create is None
    assert [e.reason for e in actions.events] == [reason]

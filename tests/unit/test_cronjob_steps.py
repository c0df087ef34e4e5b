"""Each step of the CronJob controller's decision on its own, as tables: history limits and status.active, the
scheduled time that is due, and the concurrency policy. ``test_cronjob_sync.py`` covers them composed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from multiqueue.api.cronjobtimes import job_name
from multiqueue.api.meta import format_time
from multiqueue.controllers.cronjob_concurrency import concurrency
from multiqueue.controllers.cronjob_history import expired_history, last_successful_time, running_jobs
from multiqueue.controllers.cronjob_schedule import already_started, due_time
from tests.unit.test_cronjob_sync import CREATED, active_ref, cronjob, job


def names(jobs: list[dict[str, Any]]) -> list[str]:
    return [str(j["metadata"]["name"]) for j in jobs]


# --- history and status.active ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "limits", "want"),
    [
        ("no limits", {}, []),
        ("one success kept, oldest go first", {"successfulJobsHistoryLimit": 1}, ["a", "b"]),
        ("no failure kept", {"failedJobsHistoryLimit": 0}, ["f"]),
        ("both, successes first", {"successfulJobsHistoryLimit": 2, "failedJobsHistoryLimit": 0}, ["a", "f"]),
        ("limits above the history", {"successfulJobsHistoryLimit": 5, "failedJobsHistoryLimit": 5}, []),
    ],
)
def test_expired_history(case: str, limits: dict[str, Any], want: list[str]) -> None:
    owned = [
        job("c", "Complete", 20),
        job("a", "Complete", 0),
        job("b", "Complete", 10),
        job("f", "Failed", 5),
    ]
    owned.append(job("running", None, 1))
    assert names(expired_history(limits, owned)) == want, case


@pytest.mark.parametrize(
    ("case", "active", "owned", "want_active", "want_events"),
    [
        ("a running Job stays", ["r"], [job("r")], ["r"], []),
        ("a finished Job leaves", ["c"], [job("c", "Complete")], [], ["SawCompletedJob"]),
        ("a Job gone leaves", ["gone"], [], [], ["MissingJob"]),
        ("a running Job not listed is reported", [], [job("stray")], [], ["UnexpectedJob"]),
        ("a finished Job not listed is no news", [], [job("old", "Failed")], [], []),
    ],
)
def test_running_jobs(
    case: str, active: list[str], owned: list[dict[str, Any]], want_active: list[str], want_events: list[str]
) -> None:
    running = running_jobs([active_ref(n) for n in active], owned)
    assert [r["name"] for r in running.active] == want_active, case
    assert [e.reason for e in running.events] == want_events, case


@pytest.mark.parametrize(
    ("case", "recorded", "owned", "want"),
    [
        ("nothing succeeded", None, [job("f", "Failed")], None),
        ("the latest completion", None, [job("a", "Complete", 0), job("b", "Complete", 10)], 11),
        ("an earlier completion leaves the recorded one", 30, [job("a", "Complete", 0)], 30),
        ("a later completion moves it", 5, [job("a", "Complete", 10)], 11),
    ],
)
def test_last_successful_time(
    case: str, recorded: int | None, owned: list[dict[str, Any]], want: int | None
) -> None:
    status = (
        {} if recorded is None else {"lastSuccessfulTime": format_time(CREATED + timedelta(minutes=recorded))}
    )
    expected = None if want is None else CREATED + timedelta(minutes=want)
    assert last_successful_time(status, owned) == expected, case


# --- the scheduled time that is due -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "spec", "at", "want_scheduled", "want_events", "want_requeue"),
    [
        ("due", {}, timedelta(minutes=10, seconds=5), 10, [], 595.1),
        ("not yet", {}, timedelta(minutes=3), None, [], 420.1),
        ("suspended", {"suspend": True}, timedelta(minutes=30), None, [], None),
        (
            "an unknown time zone",
            {"timeZone": "Mars/Olympus"},
            timedelta(minutes=10),
            None,
            ["UnknownTimeZone"],
            None,
        ),
        (
            "an unparseable schedule",
            {"schedule": "61 * * * *"},
            timedelta(minutes=10),
            None,
            ["UnparseableSchedule"],
            None,
        ),
        ("too many missed", {}, timedelta(days=2, minutes=1), 60 * 24 * 2, ["TooManyMissedTimes"], 540.1),
        (
            "missed its starting deadline",
            {"startingDeadlineSeconds": 30},
            timedelta(minutes=11),
            None,
            [],
            540.1,
        ),
    ],
)
def test_due_time(
    case: str,
    spec: dict[str, Any],
    at: timedelta,
    want_scheduled: int | None,
    want_events: list[str],
    want_requeue: float | None,
) -> None:
    due = due_time(cronjob(**spec), CREATED + at)
    expected = None if want_scheduled is None else CREATED + timedelta(minutes=want_scheduled)
    assert due.scheduled == expected, case
    assert [e.reason for e in due.events] == want_events, case
    assert due.requeue_after == (None if want_requeue is None else pytest.approx(want_requeue)), case


@pytest.mark.parametrize(
    ("case", "status", "active", "want"),
    [
        ("never started", {}, [], False),
        ("started before", {"lastScheduleTime": "2026-01-01T00:10:00Z"}, [], True),
        ("its Job runs", {}, [10], True),
        ("another Job runs", {"lastScheduleTime": "2026-01-01T00:00:00Z"}, [0], False),
    ],
)
def test_already_started(case: str, status: dict[str, Any], active: list[int], want: bool) -> None:
    """``active``: the Jobs running, by the minute of their scheduled time."""
    scheduled = CREATED + timedelta(minutes=10)
    refs = [{"name": job_name("cj", CREATED + timedelta(minutes=m))} for m in active]
    assert already_started(cronjob(status=status), refs, scheduled) is want, case


# --- the concurrency policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "policy", "active", "want_start", "want_delete", "want_active", "want_events"),
    [
        ("Allow beside a running Job", "Allow", ["old"], True, [], ["old"], []),
        ("Forbid while a Job runs", "Forbid", ["old"], False, [], ["old"], ["JobAlreadyActive"]),
        ("Forbid with nothing running", "Forbid", [], True, [], [], []),
        ("Replace deletes the running Job", "Replace", ["old"], True, ["old"], [], ["SuccessfulDelete"]),
        ("Replace forgets a Job gone", "Replace", ["gone"], True, [], [], []),
    ],
)
def test_concurrency(
    case: str,
    policy: str,
    active: list[str],
    want_start: bool,
    want_delete: list[str],
    want_active: list[str],
    want_events: list[str],
) -> None:
    decided = concurrency(policy, [active_ref(n) for n in active], [job("old")])
    assert decided.start is want_start, case
    assert names(decided.delete) == want_delete, case
    assert [r["name"] for r in decided.active] == want_active, case
    assert [e.reason for e in decided.events] == want_events, case

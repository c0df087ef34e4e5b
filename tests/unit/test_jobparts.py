"""An Indexed Job split into parts: the ranges each part runs, what a part's mirror starts from, and the user's
status merged from the parts, as tables. Every merged status is checked against the KEP-4368 status rules as the
management cluster would check the write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from multiqueue.api import indexes, jobs
from multiqueue.api.jobparts import Merged, PartStatus, divide, merged_status, seeded_status
from multiqueue.api.jobstatus import validate_job_status_update
from multiqueue.api.meta import format_time

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
EARLY = format_time(NOW - timedelta(minutes=5))
LATER = format_time(NOW - timedelta(minutes=4))
LOW = frozenset(range(20))
HIGH = frozenset(range(20, 40))


@pytest.mark.parametrize(
    ("case", "pending", "shares", "want"),
    [
        ("even shares, even halves", list(range(8)), [4, 4], [[0, 1, 2, 3], [4, 5, 6, 7]]),
        ("three to one", list(range(8)), [3, 1], [[0, 1, 2, 3, 4, 5], [6, 7]]),
        ("a remainder goes to the largest fraction", list(range(7)), [2, 1], [[0, 1, 2, 3, 4], [5, 6]]),
        ("ties on the fraction go to the first", list(range(5)), [1, 1], [[0, 1, 2], [3, 4]]),
        ("gaps in the pending indexes stay gaps", [1, 3, 5, 7], [1, 1], [[1, 3], [5, 7]]),
        ("fewer indexes than shares: the later parts get none", [4], [2, 2], [[4], []]),
        ("nothing pending", [], [2, 2], [[], []]),
    ],
)
def test_divide(case: str, pending: list[int], shares: list[int], want: list[list[int]]) -> None:
    runs = divide(pending, shares)
    assert runs == want, case
    assert sorted(i for run in runs for i in run) == pending, "every pending index in exactly one run"


@pytest.mark.parametrize(
    ("case", "completions", "own", "want"),
    [
        ("the lower half runs the lower half", 40, LOW, {"completedIndexes": "20-39", "succeeded": 20}),
        ("a middle range", 10, {3, 4, 5}, {"completedIndexes": "0-2,6-9", "succeeded": 7}),
        ("a part that runs every index starts from nothing", 4, {0, 1, 2, 3}, {}),
    ],
)
def test_seeded_status(case: str, completions: int, own: set[int], want: dict[str, Any]) -> None:
    assert seeded_status(completions, own) == want, case


def user_job(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sweep", "namespace": "default", "uid": "u-1", "resourceVersion": "7"},
        "spec": {
            "completions": 40,
            "parallelism": 8,
            "completionMode": "Indexed",
            "managedBy": "multiqueue.dev/dispatcher",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
            **(spec or {}),
        },
        "status": {"startTime": EARLY, "active": 8, **(status or {})} if status is not None else {},
    }


def part(own: frozenset[int], done: str = "", **status: Any) -> PartStatus:
    """A part's mirror status: the seeded indexes it was given, plus ``done`` of its own."""
    total = 40
    seeded = set(range(total)) - own
    completed = seeded | set(indexes.parse_indexes(done, total))
    return PartStatus(
        own,
        {
            "completedIndexes": indexes.format_indexes(completed),
            "succeeded": len(completed),
            "startTime": status.pop("startTime", LATER),
            **status,
        },
    )


def conditions(merged: Merged) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in merged.status.get("conditions", [])]


def assert_valid(user: dict[str, Any], merged: Merged) -> None:
    problems = validate_job_status_update({**user, "status": merged.status}, user)
    assert not problems, [str(p) for p in problems]


def test_running_parts_add_up_and_their_seeded_indexes_never_count() -> None:
    user = user_job(status={"active": 0})
    low = part(LOW, "0-4", active=4, ready=4)
    high = part(HIGH, "20,21", active=4, ready=3, startTime=EARLY)
    merged = merged_status(user, [low, high], 0, NOW)
    assert merged.status["completedIndexes"] == "0-4,20,21"
    assert merged.status["succeeded"] == 7
    assert (merged.status["active"], merged.status["ready"]) == (8, 7)
    assert merged.status["failed"] == 0
    assert merged.status["startTime"] == EARLY
    assert conditions(merged) == []
    assert not merged.decided
    assert_valid(user, merged)


def test_a_new_job_takes_the_earliest_start_of_its_parts() -> None:
    user = user_job()
    merged = merged_status(
        user, [part(LOW, startTime=LATER, active=4), part(HIGH, startTime=EARLY, active=4)], 0, NOW
    )
    assert merged.status["startTime"] == EARLY
    assert_valid(user, merged)


def test_progress_carried_from_earlier_parts_stays() -> None:
    """Indexes and failures of a part that is gone (a lost worker) stay in the user's status."""
    user = user_job(status={"completedIndexes": "20-29", "succeeded": 10, "failed": 3})
    rest = frozenset(range(30, 40))
    merged = merged_status(user, [part(LOW, "0-9", active=4), part(rest, "30", failed=1, active=3)], 3, NOW)
    assert merged.status["completedIndexes"] == "0-9,20-30"
    assert merged.status["failed"] == 4
    assert merged.status["succeeded"] == 21
    assert_valid(user, merged)


def test_failures_never_go_below_what_the_user_already_shows() -> None:
    user = user_job(status={"failed": 5})
    merged = merged_status(user, [part(LOW, failed=1, active=4)], 0, NOW)
    assert merged.status["failed"] == 5
    assert_valid(user, merged)


TERMINAL_CASES = [
    (
        "every index done on both parts: success, and Complete at once since no pod runs",
        {},
        {},
        [part(LOW, "0-19"), part(HIGH, "20-39")],
        [("SuccessCriteriaMet", "True", "CompletionsReached"), ("Complete", "True", "CompletionsReached")],
        True,
    ),
    (
        "every index done but a part's pod still terminating: only the interim condition",
        {},
        {},
        [part(LOW, "0-19"), part(HIGH, "20-39", terminating=1)],
        [("SuccessCriteriaMet", "True", "CompletionsReached")],
        True,
    ),
    (
        "a successPolicy met by indexes of two parts: the others stop",
        {"successPolicy": {"rules": [{"succeededIndexes": "0,39"}]}},
        {},
        [part(LOW, "0", active=4), part(HIGH, "39", active=4)],
        [("SuccessCriteriaMet", "True", "SuccessPolicy")],
        True,
    ),
    (
        "a successPolicy count no part reaches alone",
        {"successPolicy": {"rules": [{"succeededCount": 3}]}},
        {},
        [part(LOW, "0,1", active=2), part(HIGH, "20", active=3)],
        [("SuccessCriteriaMet", "True", "SuccessPolicy")],
        True,
    ),
    (
        "backoffLimit reached by failures on two parts together",
        {"backoffLimit": 2},
        {},
        [part(LOW, failed=2, active=4), part(HIGH, failed=1, active=4)],
        [("FailureTarget", "True", "BackoffLimitExceeded")],
        True,
    ),
    (
        "backoffLimit not reached: both parts go on",
        {"backoffLimit": 3},
        {},
        [part(LOW, failed=2, active=4), part(HIGH, failed=1, active=4)],
        [],
        False,
    ),
    (
        "index 7 failed with backoffLimitPerIndex 0, every other index done: FailedIndexes, then Failed",
        {"backoffLimitPerIndex": 0},
        {},
        [part(LOW, "0-6,8-19", failed=1, failedIndexes="7"), part(HIGH, "20-39")],
        [("FailureTarget", "True", "FailedIndexes"), ("Failed", "True", "FailedIndexes")],
        True,
    ),
    (
        "a failed index while others still run: nothing decided yet",
        {"backoffLimitPerIndex": 0},
        {},
        [part(LOW, "0-6", failed=1, failedIndexes="7", active=4), part(HIGH, active=4)],
        [],
        False,
    ),
    (
        "maxFailedIndexes exceeded by indexes failed on two parts",
        {"backoffLimitPerIndex": 0, "maxFailedIndexes": 1},
        {},
        [
            part(LOW, failed=1, failedIndexes="3", active=3),
            part(HIGH, failed=1, failedIndexes="25", active=4),
        ],
        [("FailureTarget", "True", "MaxFailedIndexesExceeded")],
        True,
    ),
    (
        "a FailJob rule matched on one part fails the whole Job, with that part's message",
        {
            "podFailurePolicy": {
                "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
            }
        },
        {},
        [
            part(
                LOW,
                failed=1,
                conditions=[
                    {
                        "type": "FailureTarget",
                        "status": "True",
                        "reason": "PodFailurePolicy",
                        "message": "Container c for pod default/sweep-3-x failed with exit code 42",
                    }
                ],
            ),
            part(HIGH, active=4),
        ],
        [("FailureTarget", "True", "PodFailurePolicy")],
        True,
    ),
    (
        "activeDeadlineSeconds from the user's start, not a later part's",
        {"activeDeadlineSeconds": 60},
        {},
        [part(LOW, active=4), part(HIGH, active=4)],
        [("FailureTarget", "True", "DeadlineExceeded")],
        True,
    ),
    (
        "an earlier FailureTarget: Failed once the last part's pods are gone",
        {"backoffLimit": 0},
        {
            "failed": 1,
            "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "message": "m"}
            ],
        },
        [part(LOW, failed=1), part(HIGH)],
        [("FailureTarget", "True", "BackoffLimitExceeded"), ("Failed", "True", "BackoffLimitExceeded")],
        True,
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "status", "parts", "want", "decided"), TERMINAL_CASES, ids=[c[0] for c in TERMINAL_CASES]
)
def test_the_whole_jobs_conditions(
    case: str,
    spec: dict[str, Any],
    status: dict[str, Any],
    parts: list[PartStatus],
    want: list[tuple[str, str, str]],
    decided: bool,
) -> None:
    user = user_job(spec, {"active": 8, **status})
    merged = merged_status(user, parts, 0, NOW)
    assert conditions(merged) == want, case
    assert merged.decided is decided
    assert_valid(user, merged)
    finished = {c for c, s, _ in want if s == "True"} & {jobs.COMPLETE, jobs.FAILED}
    assert (merged.status.get("completionTime") is not None) == (jobs.COMPLETE in finished)
    if finished:
        assert merged.status["active"] == 0


def test_a_failed_index_is_reported_exactly() -> None:
    """The issue's case: index 7 fails with backoffLimitPerIndex 0, the rest complete."""
    user = user_job({"backoffLimitPerIndex": 0})
    merged = merged_status(
        user, [part(LOW, "0-6,8-19", failed=1, failedIndexes="7"), part(HIGH, "20-39")], 0, NOW
    )
    assert merged.status["failedIndexes"] == "7"
    assert merged.status["completedIndexes"] == "0-6,8-39"
    assert conditions(merged)[-1] == ("Failed", "True", "FailedIndexes")


SUSPENDED_PART = {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}


def test_suspended_once_every_part_is_and_resumed_with_the_job() -> None:
    user = user_job({"suspend": True}, {"active": 4})
    one = merged_status(user, [part(LOW, conditions=[SUSPENDED_PART]), part(HIGH, active=4)], 0, NOW)
    assert conditions(one) == []
    both = merged_status(
        user, [part(LOW, conditions=[SUSPENDED_PART]), part(HIGH, conditions=[SUSPENDED_PART])], 0, NOW
    )
    assert conditions(both) == [("Suspended", "True", "JobSuspended")]
    assert both.status["active"] == 0
    assert_valid(user, both)
    suspended = {**user, "status": both.status}
    resumed_user = {**suspended, "spec": {**suspended["spec"], "suspend": False}}
    resumed = merged_status(resumed_user, [part(LOW, active=4), part(HIGH, active=4)], 0, NOW)
    assert conditions(resumed) == [("Suspended", "False", "JobResumed")]
    assert_valid(resumed_user, resumed)

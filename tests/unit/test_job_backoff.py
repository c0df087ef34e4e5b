"""The pod failure back-off of the Job controller, as tables: the delay per failure count, the Job-wide back-off
without per-index limits, and each index's own back-off with ``backoffLimitPerIndex``."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.meta import format_time
from multiqueue.controllers.job_accounting import account
from multiqueue.controllers.job_backoff import backoff_delay, indexes_due, next_index_counts
from multiqueue.controllers.job_pod_facts import INDEX_IGNORED_FAILURE_COUNT
from multiqueue.controllers.job_pods import manage_pods
from multiqueue.controllers.job_sync import decide
from tests.unit.test_job_sync import NOW, pod, running_job

EXIT_3_IGNORED = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]}
PER_INDEX = {"completionMode": "Indexed", "completions": 2, "parallelism": 2, "backoffLimitPerIndex": 3}


@pytest.mark.parametrize(
    ("failures", "seconds"),
    [(0, 0), (1, 10), (2, 20), (3, 40), (6, 320), (7, 600), (40, 600)],
)
def test_backoff_delay_doubles_up_to_ten_minutes(failures: int, seconds: int) -> None:
    assert backoff_delay(failures) == timedelta(seconds=seconds)


# Each history entry: (index, phase, seconds ago it finished, failure-count annotation, exit code).
History = list[tuple[int, str, int, int, int]]


@pytest.mark.parametrize(
    ("case", "spec", "history", "want_created", "want_requeue"),
    [
        (
            "per index: another index's success does not cut short index 0's back-off",
            PER_INDEX,
            [(0, "Failed", 4, 0, 1), (1, "Succeeded", 1, 0, 0)],
            [],
            6.0,
        ),
        (
            "per index: the back-off over, index 0 comes back with one failure",
            PER_INDEX,
            [(0, "Failed", 11, 0, 1), (1, "Succeeded", 1, 0, 0)],
            [("0", "1")],
            None,
        ),
        (
            "per index: the second failure of an index waits 20 s",
            PER_INDEX,
            [(0, "Failed", 40, 0, 1), (0, "Failed", 15, 1, 1), (1, "Succeeded", 1, 0, 0)],
            [],
            5.0,
        ),
        (
            "per index: only the index whose back-off is over gets its pod",
            PER_INDEX,
            [(0, "Failed", 12, 0, 1), (1, "Failed", 3, 0, 1)],
            [("0", "1")],
            None,
        ),
        (
            "per index: both wait, the sync comes back for the first",
            PER_INDEX,
            [(0, "Failed", 2, 0, 1), (1, "Failed", 7, 0, 1)],
            [],
            3.0,
        ),
        (
            "per index: a failure of index 1 does not hold back index 0's first pod",
            {**PER_INDEX, "parallelism": 1},
            [(1, "Failed", 1, 0, 1)],
            [("0", "0")],
            None,
        ),
        (
            "Indexed without per-index limits: the Job-wide back-off, reset by a later success",
            {"completionMode": "Indexed", "completions": 2, "parallelism": 2},
            [(0, "Failed", 4, 0, 1), (1, "Succeeded", 1, 0, 0)],
            [("0", None)],
            None,
        ),
        (
            "Indexed without per-index limits: a failure holds back every index",
            {"completionMode": "Indexed", "completions": 2, "parallelism": 2},
            [(1, "Succeeded", 9, 0, 0), (0, "Failed", 4, 0, 1)],
            [],
            6.0,
        ),
    ],
)
def test_pod_creation_waits_for_the_back_off(
    case: str,
    spec: dict[str, Any],
    history: History,
    want_created: list[tuple[str, str | None]],
    want_requeue: float | None,
) -> None:
    owner = running_job(**spec)
    owned = [
        pod(
            owner,
            phase,
            index=index,
            finalizer=False,
            exit_code=code,
            finished=NOW - timedelta(seconds=ago),
            failure_count=count,
        )
        for index, phase, ago, count, code in history
    ]
    counted = account(owner, owned, NOW, ending_in_success=False)
    completed = frozenset(index for index, phase, *_ in history if phase == "Succeeded")
    counted = dataclasses.replace(counted, completed_indexes=completed)
    changes = manage_pods(owner, owned, counted, NOW)
    created = [
        (
            p["metadata"]["annotations"][jobs.COMPLETION_INDEX],
            p["metadata"]["annotations"].get(jobs.INDEX_FAILURE_COUNT),
        )
        for p in changes.create
    ]
    assert created == want_created, case
    assert changes.requeue_after == (pytest.approx(want_requeue) if want_requeue is not None else None), case


@pytest.mark.parametrize(
    ("case", "exit_code", "annotations", "want"),
    [
        ("a counted failure adds to the failure count", 1, {}, (1, 0)),
        ("an ignored failure adds to the ignored count", 3, {}, (0, 1)),
        (
            "both counts carry over",
            1,
            {jobs.INDEX_FAILURE_COUNT: "2", INDEX_IGNORED_FAILURE_COUNT: "1"},
            (3, 1),
        ),
    ],
)
def test_next_index_counts(
    case: str, exit_code: int, annotations: dict[str, str], want: tuple[int, int]
) -> None:
    owner = running_job(**PER_INDEX, podFailurePolicy=EXIT_3_IGNORED)
    failed = pod(owner, "Failed", index=0, exit_code=exit_code, finished=NOW)
    failed["metadata"]["annotations"].update(annotations)
    counts = next_index_counts(owner, failed)
    assert (counts.failed, counts.ignored) == want, case


def test_an_ignored_failure_still_backs_off_and_is_carried_in_its_own_annotation() -> None:
    owner = running_job(**{**PER_INDEX, "parallelism": 1}, podFailurePolicy=EXIT_3_IGNORED)
    ignored = pod(
        owner, "Failed", index=0, exit_code=3, finished=NOW - timedelta(seconds=10), finalizer=False
    )
    counted = account(owner, [ignored], NOW - timedelta(seconds=1), ending_in_success=False)
    assert manage_pods(owner, [ignored], counted, NOW - timedelta(seconds=1)).create == []
    (created,) = manage_pods(owner, [ignored], counted, NOW).create
    annotations = created["metadata"]["annotations"]
    assert (annotations[jobs.INDEX_FAILURE_COUNT], annotations[INDEX_IGNORED_FAILURE_COUNT]) == ("0", "1")


def test_indexes_due_with_no_failed_pod_is_every_wanted_index() -> None:
    plan = indexes_due([0, 2], {}, NOW)
    assert plan.now == (0, 2) and plan.requeue_after is None


@pytest.mark.parametrize(
    ("case", "spec", "failure_count", "replacement", "deleting", "want_held"),
    [
        (
            "per index, the index runs again: held until its replacement exists",
            PER_INDEX,
            0,
            False,
            False,
            True,
        ),
        ("per index, its replacement exists: recorded and released", PER_INDEX, 0, True, False, False),
        ("per index, the index has used up its limit: recorded at once", PER_INDEX, 3, False, False, False),
        ("per index, the Job is being deleted: recorded at once", PER_INDEX, 0, False, True, False),
        (
            "Indexed without per-index limits: recorded at once",
            {"completionMode": "Indexed", "completions": 2, "parallelism": 2},
            0,
            False,
            False,
            False,
        ),
    ],
)
def test_a_failed_pod_is_held_for_its_replacement(
    case: str, spec: dict[str, Any], failure_count: int, replacement: bool, deleting: bool, want_held: bool
) -> None:
    """As upstream, with per-index limits the latest failed pod of an index that runs again keeps its tracking
    finalizer and stays out of the counts until its replacement exists: it carries what the replacement
    inherits."""
    owner = running_job(**spec)
    if deleting:
        owner["metadata"]["deletionTimestamp"] = format_time(NOW)
    failed = pod(
        owner,
        "Failed",
        index=0,
        exit_code=1,
        finished=NOW - timedelta(seconds=4),
        failure_count=failure_count,
    )
    owned = [failed, pod(owner, index=1)]
    if replacement:
        owned.append(pod(owner, index=0, failure_count=failure_count + 1))
    actions = decide(owner, owned, NOW)
    status = actions.status or owner["status"]
    recorded = failed["metadata"]["uid"] in (status.get("uncountedTerminatedPods") or {}).get("failed", [])
    released = failed["metadata"]["uid"] in [p["metadata"]["uid"] for p in actions.remove_finalizers]
    assert (recorded, released) == (not want_held, not want_held), case
    assert actions.create == [], "the back-off of index 0 still runs, or its pod exists"

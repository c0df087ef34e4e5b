"""Each step of the Job controller's decision on its own, as tables: accounting, the failure policy, finish
detection, suspend and resume, pod management and the TTL. ``test_job_sync.py`` covers them composed."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.meta import format_time
from multiqueue.api.types import Event
from multiqueue.controllers.job_accounting import (
    FAILED,
    RELEASED,
    SUCCEEDED,
    Accounting,
    account,
    counted_status,
    pod_counts,
    pod_outcome,
)
from multiqueue.controllers.job_backoff import backoff_until
from multiqueue.controllers.job_failure_policy import match_failure_policy
from multiqueue.controllers.job_finish import (
    Condition,
    ending,
    failure_verdict,
    interim_verdict,
    may_end,
    success_verdict,
    until_deadline,
)
from multiqueue.controllers.job_pods import deletion_order, excess_indexed, manage_pods
from multiqueue.controllers.job_suspend import RESUME, SUSPEND, suspension
from multiqueue.controllers.job_sync import decide
from multiqueue.controllers.job_ttl import AfterFinish, after_finish
from tests.unit.jobfixtures import cond, job
from tests.unit.test_job_sync import NOW, STARTED, pod, running_job

EXIT_42_FAILS_JOB = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
EXIT_3_IGNORED = {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]}
DISRUPTION_IGNORED = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}


def uid(p: dict[str, Any]) -> str:
    return str(p["metadata"]["uid"])


# --- pod accounting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "finalizer", "want_uncounted_failed", "want_failed", "want_released"),
    [
        ("failed with the finalizer: recorded uncounted, released with the status", True, 1, 0, 1),
        ("failed without the finalizer and not listed: already counted, nothing to do", False, 0, 0, 0),
    ],
)
def test_accounting_of_a_failed_pod_by_its_finalizer(
    case: str, finalizer: bool, want_uncounted_failed: int, want_failed: int, want_released: int
) -> None:
    owner = running_job(completions=3, parallelism=1)
    failed = pod(owner, "Failed", exit_code=1, finalizer=finalizer)
    counted = account(owner, [failed], NOW, ending_in_success=False)
    assert len(counted.uncounted_failed) == want_uncounted_failed, case
    assert counted.failed == want_failed, case
    assert len(counted.release) == want_released, case
    assert counted.failed_total == want_uncounted_failed + want_failed, case


def test_an_uncounted_pod_whose_finalizer_is_gone_is_counted_and_leaves_the_list() -> None:
    owner = running_job(completions=3, parallelism=1)
    gone_ok, gone_failed = pod(owner, "Succeeded", finalizer=False), pod(owner, "Failed", finalizer=False)
    held = pod(owner, "Failed", exit_code=1)
    owner["status"].update(
        succeeded=1,
        failed=2,
        uncountedTerminatedPods={"succeeded": [uid(gone_ok)], "failed": [uid(gone_failed), uid(held)]},
    )
    counted = account(owner, [gone_ok, gone_failed, held], NOW, ending_in_success=False)
    assert (counted.succeeded, counted.failed) == (2, 3)
    assert counted.uncounted_succeeded == () and counted.uncounted_failed == (uid(held),)
    assert [uid(p) for p in counted.release] == [uid(held)]
    assert counted_status(owner, counted)["uncountedTerminatedPods"] == {
        "succeeded": [],
        "failed": [uid(held)],
    }


@pytest.mark.parametrize(
    ("case", "spec", "phase", "pod_args", "ending_in_success", "want"),
    [
        ("succeeded", {}, "Succeeded", {}, False, SUCCEEDED),
        ("failed", {}, "Failed", {"exit_code": 1}, False, FAILED),
        ("removed while the Job succeeds", {}, "Failed", {"exit_code": 1}, True, RELEASED),
        ("deleted by the suspension", {"suspend": True}, "Running", {"deleting": True}, False, RELEASED),
        ("failed while suspended is a failure", {"suspend": True}, "Failed", {"exit_code": 1}, False, FAILED),
        ("deleted before it finished", {}, "Running", {"deleting": True}, False, FAILED),
        (
            "ignored by the failure policy",
            {"podFailurePolicy": EXIT_3_IGNORED},
            "Failed",
            {"exit_code": 3},
            False,
            RELEASED,
        ),
        (
            "not matched by the failure policy",
            {"podFailurePolicy": EXIT_3_IGNORED},
            "Failed",
            {"exit_code": 4},
            False,
            FAILED,
        ),
    ],
)
def test_pod_outcome(
    case: str, spec: dict[str, Any], phase: str, pod_args: dict[str, Any], ending_in_success: bool, want: str
) -> None:
    owner = running_job(completions=3, parallelism=1, **spec)
    outcome = pod_outcome(owner, pod(owner, phase, **pod_args), ending_in_success=ending_in_success)
    assert outcome.kind == want, case


EVICTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}


@pytest.mark.parametrize(
    ("case", "policy", "phase", "want_failed", "want_terminating", "want_released"),
    [
        (
            "evicted, still terminating: neither failed nor replaced yet",
            DISRUPTION_IGNORED,
            "Running",
            0,
            1,
            0,
        ),
        ("evicted and failed, rule Ignore: released, not a failure", DISRUPTION_IGNORED, "Failed", 0, 0, 1),
        ("evicted and failed, no policy: a failure", None, "Failed", 1, 0, 1),
    ],
)
def test_a_pod_evicted_through_the_eviction_api(
    case: str,
    policy: dict[str, Any] | None,
    phase: str,
    want_failed: int,
    want_terminating: int,
    want_released: int,
) -> None:
    """The eviction API gives the pod DisruptionTarget (reason EvictionByEvictionAPI) and deletes it; a rule
    onPodConditions DisruptionTarget with action Ignore keeps it out of the failures once it has failed."""
    spec: dict[str, Any] = {"completions": 1, "parallelism": 1, "backoffLimit": 0}
    if policy is not None:
        spec["podFailurePolicy"] = policy
    owner = running_job(**spec)
    evicted = pod(owner, phase, deleting=True, exit_code=143 if phase == "Failed" else None)
    evicted["status"]["conditions"] = [EVICTED]
    counted = account(owner, [evicted], NOW, ending_in_success=False)
    assert (counted.failed_total, len(counted.terminating), len(counted.release)) == (
        want_failed,
        want_terminating,
        want_released,
    ), case
    actions = decide(owner, [evicted], NOW)
    status = actions.status or {}
    conditions = {c["type"] for c in status.get("conditions") or []}
    assert ("FailureTarget" in conditions) is (want_failed > 0), case


def test_a_fail_job_rule_is_reported_by_the_accounting() -> None:
    owner = running_job(completions=3, parallelism=1, podFailurePolicy=EXIT_42_FAILS_JOB)
    counted = account(owner, [pod(owner, "Failed", exit_code=42)], NOW, ending_in_success=False)
    assert counted.fail_job is not None and "matching FailJob rule at index 0" in counted.fail_job
    assert len(counted.uncounted_failed) == 1


@pytest.mark.parametrize(
    ("case", "per_index", "failure_count", "want_failed_indexes", "want_completed"),
    [
        ("first failure within backoffLimitPerIndex=1", 1, 0, "", "1"),
        ("second failure over backoffLimitPerIndex=1", 1, 1, "0", "1"),
        ("any failure over backoffLimitPerIndex=0", 0, 0, "0", "1"),
    ],
)
def test_indexes_counted_per_index(
    case: str, per_index: int, failure_count: int, want_failed_indexes: str, want_completed: str
) -> None:
    owner = running_job(
        completionMode="Indexed", completions=2, parallelism=2, backoffLimitPerIndex=per_index
    )
    failed = pod(owner, "Failed", index=0, exit_code=1, failure_count=failure_count)
    done = pod(owner, "Succeeded", index=1)
    counted = account(owner, [failed, done], NOW, ending_in_success=False)
    fields = counted_status(owner, counted)
    assert (fields["failedIndexes"], fields["completedIndexes"]) == (want_failed_indexes, want_completed), (
        case
    )
    assert counted.succeeded == 1


def test_a_succeeded_pod_of_a_failed_index_does_not_complete_it() -> None:
    owner = running_job(completionMode="Indexed", completions=2, parallelism=2, backoffLimitPerIndex=0)
    owner["status"]["failedIndexes"] = "0"
    counted = account(owner, [pod(owner, "Succeeded", index=0)], NOW, ending_in_success=False)
    assert counted.completed_indexes == frozenset() and counted.failed_indexes == {0}


def test_pods_deleted_in_this_sync_count_as_terminating() -> None:
    owner = running_job(completions=3, parallelism=3)
    ready, other, leaving = pod(owner, ready=True), pod(owner, ready=True), pod(owner, deleting=True)
    counted = account(owner, [ready, other, leaving], NOW, ending_in_success=False)
    assert pod_counts(counted, []) == {"active": 2, "ready": 2, "terminating": 1}
    assert pod_counts(counted, [other]) == {"active": 1, "ready": 1, "terminating": 2}


# --- the pod failure policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "policy", "pod_args", "want_action"),
    [
        ("exit code In the list", EXIT_42_FAILS_JOB, {"exit_code": 42}, "FailJob"),
        ("exit code not in the list", EXIT_42_FAILS_JOB, {"exit_code": 1}, None),
        (
            "NotIn matches the other codes",
            {"rules": [{"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [42]}}]},
            {"exit_code": 1},
            "Count",
        ),
        ("a pod condition", DISRUPTION_IGNORED, {"exit_code": 1, "disrupted": True}, "Ignore"),
        ("no such condition", DISRUPTION_IGNORED, {"exit_code": 1}, None),
    ],
)
def test_match_failure_policy(
    case: str, policy: dict[str, Any], pod_args: dict[str, Any], want_action: str | None
) -> None:
    owner = running_job(completions=1, podFailurePolicy=policy)
    disrupted = pod_args.pop("disrupted", False)
    failed = pod(owner, "Failed", **pod_args)
    if disrupted:
        failed["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True"}]
    matched = match_failure_policy(owner, failed)
    assert (matched.action if matched is not None else None) == want_action, case


# --- finish detection ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "spec", "counted", "want"),
    [
        ("within backoffLimit", {"backoffLimit": 2}, Accounting(failed=2), None),
        (
            "past backoffLimit",
            {"backoffLimit": 2},
            Accounting(failed=2, uncounted_failed=("x",)),
            "BackoffLimitExceeded",
        ),
        ("past the default backoffLimit of 6", {}, Accounting(failed=7), "BackoffLimitExceeded"),
        (
            "an index over maxFailedIndexes",
            {"completionMode": "Indexed", "backoffLimitPerIndex": 1, "maxFailedIndexes": 1},
            Accounting(indexed=True, failed_indexes=frozenset({0, 2})),
            "MaxFailedIndexesExceeded",
        ),
        (
            "failed indexes within maxFailedIndexes, others still to run",
            {"completionMode": "Indexed", "backoffLimitPerIndex": 1, "maxFailedIndexes": 2},
            Accounting(indexed=True, failed_indexes=frozenset({0, 2})),
            None,
        ),
        (
            "every index done, some failed",
            {"completionMode": "Indexed", "backoffLimitPerIndex": 1},
            Accounting(indexed=True, failed_indexes=frozenset({0}), completed_indexes=frozenset({1, 2, 3})),
            "FailedIndexes",
        ),
        ("past activeDeadlineSeconds", {"activeDeadlineSeconds": 60}, Accounting(), "DeadlineExceeded"),
        ("within activeDeadlineSeconds", {"activeDeadlineSeconds": 600}, Accounting(), None),
        ("no deadline while suspended", {"activeDeadlineSeconds": 60, "suspend": True}, Accounting(), None),
    ],
)
def test_failure_verdict(case: str, spec: dict[str, Any], counted: Accounting, want: str | None) -> None:
    owner = running_job(completions=4, parallelism=1, **spec)
    verdict = failure_verdict(owner, counted, NOW)
    assert (verdict.reason if verdict is not None else None) == want, case


def test_restarts_under_on_failure_reach_the_backoff_limit() -> None:
    owner = running_job(completions=1, parallelism=1, backoffLimit=2)
    owner["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    restarting = pod(owner)
    restarting["status"]["containerStatuses"] = [
        {"name": "main", "restartCount": 2, "state": {"running": {}}}
    ]
    verdict = failure_verdict(owner, Accounting(active=(restarting,)), NOW)
    assert verdict is not None and verdict.reason == "BackoffLimitExceeded"


@pytest.mark.parametrize(
    ("case", "spec", "counted", "want"),
    [
        (
            "completions reached",
            {"completions": 2},
            Accounting(succeeded=1, uncounted_succeeded=("x",)),
            "CompletionsReached",
        ),
        ("completions not reached", {"completions": 3}, Accounting(succeeded=2), None),
        ("no completions: one success, nothing active", {}, Accounting(succeeded=1), "CompletionsReached"),
        ("no completions: one success, pods still active", {}, Accounting(succeeded=1, active=({},)), None),
        (
            "indexed: every index completed",
            {"completionMode": "Indexed", "completions": 2},
            Accounting(indexed=True, completed_indexes=frozenset({0, 1})),
            "CompletionsReached",
        ),
        (
            "successPolicy met by succeededIndexes",
            {
                "completionMode": "Indexed",
                "completions": 4,
                "successPolicy": {"rules": [{"succeededIndexes": "0-1"}]},
            },
            Accounting(indexed=True, completed_indexes=frozenset({0, 1})),
            "SuccessPolicy",
        ),
        (
            "successPolicy met by succeededCount",
            {
                "completionMode": "Indexed",
                "completions": 4,
                "successPolicy": {"rules": [{"succeededCount": 2}]},
            },
            Accounting(indexed=True, completed_indexes=frozenset({1, 3})),
            "SuccessPolicy",
        ),
        (
            "successPolicy not met",
            {
                "completionMode": "Indexed",
                "completions": 4,
                "successPolicy": {"rules": [{"succeededIndexes": "0-1"}]},
            },
            Accounting(indexed=True, completed_indexes=frozenset({0, 2})),
            None,
        ),
    ],
)
def test_success_verdict(case: str, spec: dict[str, Any], counted: Accounting, want: str | None) -> None:
    owner = running_job(parallelism=1, **spec)
    verdict = success_verdict(owner, counted)
    assert (verdict.reason if verdict is not None else None) == want, case


@pytest.mark.parametrize(
    ("case", "counted", "want"),
    [
        (
            "a FailJob match wins",
            Accounting(succeeded=1, fail_job="rule"),
            Condition("FailureTarget", "PodFailurePolicy", "rule"),
        ),
        (
            "failure before success",
            Accounting(succeeded=1, failed=2),
            Condition("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ),
        (
            "success",
            Accounting(succeeded=1),
            Condition(
                "SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"
            ),
        ),
        ("neither", Accounting(), None),
    ],
)
def test_interim_verdict(case: str, counted: Accounting, want: Condition | None) -> None:
    owner = running_job(completions=1, parallelism=1, backoffLimit=1)
    assert interim_verdict(owner, counted, NOW) == want, case


@pytest.mark.parametrize(
    ("case", "counted", "want"),
    [
        ("nothing runs, all counted", Accounting(), True),
        ("a pod still active", Accounting(active=({},)), False),
        ("a pod still terminating", Accounting(terminating=({},)), False),
        ("a pod still uncounted", Accounting(uncounted_failed=("x",)), False),
    ],
)
def test_may_end(case: str, counted: Accounting, want: bool) -> None:
    assert may_end(counted) is want, case


@pytest.mark.parametrize(
    ("interim", "want_type", "want_event", "completed"),
    [
        (cond("SuccessCriteriaMet", reason="SuccessPolicy"), "Complete", "Completed", True),
        (cond("FailureTarget", reason="BackoffLimitExceeded"), "Failed", "BackoffLimitExceeded", False),
    ],
)
def test_ending(interim: dict[str, Any], want_type: str, want_event: str, completed: bool) -> None:
    final = ending(interim)
    assert (final.condition.type, final.condition.reason) == (want_type, interim["reason"])
    assert (final.event.reason, final.completed) == (want_event, completed)


@pytest.mark.parametrize(
    ("spec", "started", "want"),
    [
        ({"activeDeadlineSeconds": 600}, NOW - timedelta(seconds=100), 500.0),
        ({"activeDeadlineSeconds": 600, "suspend": True}, NOW, None),
        ({}, NOW, None),
        ({"activeDeadlineSeconds": 600}, None, None),
    ],
)
def test_until_deadline(spec: dict[str, Any], started: Any, want: float | None) -> None:
    assert until_deadline(job(**spec), started, NOW) == want


# --- suspend and resume -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "suspend", "conditions", "want"),
    [
        ("suspended by its spec", True, [], SUSPEND),
        ("resumed after a suspension", False, [cond("Suspended")], RESUME),
        ("resumed once already", False, [cond("Suspended", "False")], None),
        ("never suspended", False, [], None),
    ],
)
def test_suspension(case: str, suspend: bool, conditions: list[dict[str, Any]], want: Any) -> None:
    owner = running_job(completions=1, suspend=suspend)
    owner["status"]["conditions"] = conditions
    assert suspension(owner) == want, case


def test_suspend_and_resume_say_what_happens_to_the_clock() -> None:
    assert (SUSPEND.status, SUSPEND.reason, SUSPEND.restarts_clock) == ("True", jobs.JOB_SUSPENDED, False)
    assert (RESUME.status, RESUME.reason, RESUME.restarts_clock) == ("False", jobs.JOB_RESUMED, True)
    assert RESUME.event == Event("Normal", "Resumed", "Job resumed")


# --- pod management -----------------------------------------------------------------------------------------


def test_excess_indexed_pods_are_chosen_for_deletion() -> None:
    owner = running_job(completionMode="Indexed", completions=3, parallelism=3)
    keeper = pod(owner, index=0, ready=True)
    duplicate = pod(owner, index=0)
    finished_index = pod(owner, index=1)
    out_of_range = pod(owner, index=7)
    ok = pod(owner, index=2)
    excess = excess_indexed(owner, [duplicate, keeper, finished_index, out_of_range, ok], frozenset({1}))
    assert {uid(p) for p in excess} == {uid(duplicate), uid(finished_index), uid(out_of_range)}


@pytest.mark.parametrize(
    ("case", "spec", "active", "counted", "want_create", "want_delete"),
    [
        ("parallelism pods to start", {"completions": 5, "parallelism": 2}, 0, Accounting(), 2, 0),
        (
            "no more than the completions left",
            {"completions": 5, "parallelism": 3},
            0,
            Accounting(succeeded=4),
            1,
            0,
        ),
        ("extra pods go", {"completions": 5, "parallelism": 1}, 3, Accounting(), 0, 2),
        ("no completions, a success: nothing new", {"parallelism": 3}, 1, Accounting(succeeded=1), 0, 0),
        (
            "indexed: the free indexes",
            {"completionMode": "Indexed", "completions": 3, "parallelism": 3},
            0,
            Accounting(indexed=True, completed_indexes=frozenset({1})),
            2,
            0,
        ),
    ],
)
def test_manage_pods(
    case: str, spec: dict[str, Any], active: int, counted: Accounting, want_create: int, want_delete: int
) -> None:
    owner = running_job(**spec)
    pods = tuple(pod(owner) for _ in range(active))
    changes = manage_pods(owner, list(pods), dataclasses.replace(counted, active=pods), NOW)
    assert (len(changes.create), len(changes.delete)) == (want_create, want_delete), case
    assert changes.release_before_delete is (want_delete > 0), case


def test_manage_pods_creates_the_lowest_free_indexes_with_their_failure_counts() -> None:
    owner = running_job(completionMode="Indexed", completions=3, parallelism=3, backoffLimitPerIndex=2)
    failed = pod(
        owner, "Failed", index=0, failure_count=1, finalizer=False, finished=NOW - timedelta(hours=1)
    )
    changes = manage_pods(owner, [failed], Accounting(indexed=True, completed_indexes=frozenset({1})), NOW)
    annotations = [p["metadata"]["annotations"] for p in changes.create]
    assert [(a[jobs.COMPLETION_INDEX], a[jobs.INDEX_FAILURE_COUNT]) for a in annotations] == [
        ("0", "2"),
        ("2", "0"),
    ]


def test_manage_pods_waits_for_the_back_off() -> None:
    owner = running_job(completions=2, parallelism=1)
    failed = pod(owner, "Failed", finalizer=False, finished=NOW - timedelta(seconds=4))
    changes = manage_pods(owner, [failed], Accounting(), NOW)
    assert changes.create == [] and changes.requeue_after == pytest.approx(6.0)


@pytest.mark.parametrize(
    ("case", "history", "want_delay"),
    [
        ("no failures", [], None),
        ("one failure: 10 s", [("Failed", 30)], 10),
        ("three failures: 40 s after the last", [("Failed", 30), ("Failed", 20), ("Failed", 10)], 40),
        ("a success resets the count", [("Failed", 30), ("Succeeded", 20), ("Failed", 10)], 10),
    ],
)
def test_backoff_until(case: str, history: list[tuple[str, int]], want_delay: int | None) -> None:
    owner = running_job(completions=5)
    owned = [pod(owner, phase, finished=NOW - timedelta(seconds=ago)) for phase, ago in history]
    until = backoff_until(owned)
    if want_delay is None:
        assert until is None, case
    else:
        last = NOW - timedelta(seconds=min(ago for _, ago in history))
        assert until == last + timedelta(seconds=want_delay), case


def test_deletion_order_takes_not_ready_then_unscheduled_pods_first() -> None:
    owner = running_job(completions=5)
    ready = pod(owner, ready=True)
    ready["spec"]["nodeName"] = "n"
    scheduled = pod(owner)
    scheduled["spec"]["nodeName"] = "n"
    scheduled["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    pending = pod(owner, "Pending")
    ordered = deletion_order([ready, scheduled, pending])
    assert [uid(p) for p in ordered] == [uid(pending), uid(scheduled), uid(ready)]


# --- TTL ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "ttl", "after", "want"),
    [
        ("no TTL", None, 1000, AfterFinish()),
        ("not yet", 100, 40, AfterFinish(requeue_after=60.0)),
        ("expired", 100, 100, AfterFinish(delete_job=True)),
        ("zero: at once", 0, 0, AfterFinish(delete_job=True)),
    ],
)
def test_after_finish(case: str, ttl: int | None, after: int, want: AfterFinish) -> None:
    owner = running_job(completions=1, **({} if ttl is None else {"ttlSecondsAfterFinished": ttl}))
    owner["status"]["conditions"] = [cond("Complete", time=format_time(NOW))]
    assert after_finish(owner, NOW + timedelta(seconds=after)) == want, case


def test_after_finish_of_a_running_job_is_nothing() -> None:
    owner = running_job(completions=1, ttlSecondsAfterFinished=0)
    assert owner["status"] == {"startTime": STARTED}
    assert after_finish(owner, NOW) == AfterFinish()

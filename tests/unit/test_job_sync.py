"""The Job controller's decide step, case by case like upstream's table tests.

Every status the decide step produces must also pass the server's status-update validation.
"""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from multiqueue.api import jobs
from multiqueue.api.jobstatus import validate_job_status_update
from multiqueue.api.meta import format_time
from multiqueue.controllers.job_orphans import releases_orphan
from multiqueue.controllers.job_pod_template import pod_for
from multiqueue.controllers.job_sync import Actions, decide
from tests.unit.jobfixtures import job

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
STARTED = format_time(NOW - timedelta(minutes=5))
_serial = itertools.count()


def running_job(**spec: Any) -> dict[str, Any]:
    body = job(**spec)
    body["status"] = {"startTime": STARTED}
    return body


def pod(
    owner: dict[str, Any],
    phase: str = "Running",
    *,
    index: int | None = None,
    finalizer: bool = True,
    ready: bool = False,
    deleting: bool = False,
    exit_code: int | None = None,
    finished: datetime | None = None,
    failure_count: int | None = None,
) -> dict[str, Any]:
    body = pod_for(owner, index, failure_count or 0)
    serial = next(_serial)
    body["metadata"].update(name=f"p-{serial}", uid=f"pod-uid-{serial}", creationTimestamp=STARTED)
    if not finalizer:
        body["metadata"]["finalizers"] = []
    if deleting:
        body["metadata"]["deletionTimestamp"] = format_time(NOW)
    status: dict[str, Any] = {"phase": phase}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    if exit_code is not None or finished is not None:
        status["containerStatuses"] = [
            {
                "name": "main",
                "state": {
                    "terminated": {"exitCode": exit_code or 0, "finishedAt": format_time(finished or NOW)}
                },
            }
        ]
    body["status"] = status
    return body


def run(owner: dict[str, Any], owned: list[dict[str, Any]], now: datetime = NOW, **kwargs: Any) -> Actions:
    actions = decide(owner, owned, now, **kwargs)
    if actions.status is not None:
        new = copy.deepcopy(owner)
        new["status"] = actions.status
        errors = validate_job_status_update(new, owner)
        assert errors == [], [str(e) for e in errors]
    return actions


def applied(owner: dict[str, Any], actions: Actions) -> dict[str, Any]:
    new = copy.deepcopy(owner)
    if actions.status is not None:
        new["status"] = actions.status
    return new


def condition(status: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    return next((c for c in (status or {}).get("conditions", []) if c["type"] == type_), None)


def test_job_managed_by_another_controller_is_skipped() -> None:
    actions = run(job(managedBy="multiqueue.dev/dispatcher"), [])
    assert actions.skipped and actions.status is None and not actions.create


def test_new_job_starts_and_creates_parallelism_pods() -> None:
    actions = run(job(completions=3, parallelism=2), [])
    assert actions.status is not None and actions.status["startTime"] == format_time(NOW)
    assert len(actions.create) == 2
    created = actions.create[0]
    assert created["metadata"]["generateName"] == "pi-"
    assert created["metadata"]["finalizers"] == [jobs.TRACKING_FINALIZER]
    assert created["metadata"]["ownerReferences"][0]["controller"] is True


def test_indexed_pods_get_lowest_free_indexes_and_their_identity() -> None:
    owner = running_job(completionMode="Indexed", completions=4, parallelism=2)
    owner["status"].update(completedIndexes="0", succeeded=1)
    actions = run(owner, [pod(owner, index=1)])
    assert len(actions.create) == 1
    created = actions.create[0]
    assert created["metadata"]["annotations"][jobs.COMPLETION_INDEX] == "2"
    assert created["metadata"]["labels"][jobs.COMPLETION_INDEX] == "2"
    assert created["spec"]["hostname"] == "pi-2"
    assert created["metadata"]["generateName"] == "pi-2-"
    env = created["spec"]["containers"][0]["env"]
    assert env[-1]["name"] == "JOB_COMPLETION_INDEX"
    assert (
        env[-1]["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.labels['batch.kubernetes.io/job-completion-index']"
    )


def test_finished_pod_is_recorded_uncounted_before_its_finalizer_goes() -> None:
    owner = running_job(completionMode="Indexed", completions=2, parallelism=2)
    done = pod(owner, "Succeeded", index=0, exit_code=0)
    actions = run(owner, [done, pod(owner, index=1)])
    assert actions.status is not None
    assert actions.status["uncountedTerminatedPods"] == {"succeeded": [done["metadata"]["uid"]], "failed": []}
    assert actions.status["completedIndexes"] == "0"
    assert [p["metadata"]["uid"] for p in actions.remove_finalizers] == [done["metadata"]["uid"]]


def test_uncounted_pod_without_finalizer_is_counted_once() -> None:
    owner = running_job(completions=2, parallelism=1)
    done = pod(owner, "Succeeded", finalizer=False, exit_code=0)
    owner["status"]["uncountedTerminatedPods"] = {"succeeded": [done["metadata"]["uid"]]}
    actions = run(owner, [done, pod(owner)])
    assert actions.status is not None
    assert actions.status["succeeded"] == 1
    assert actions.status["uncountedTerminatedPods"] == {}
    again = run(applied(owner, actions), [done, pod(owner)])
    assert again.status is None or again.status["succeeded"] == 1


def test_all_succeeded_completes_in_order() -> None:
    owner = running_job(completions=1, parallelism=1)
    done = pod(owner, "Succeeded", exit_code=0)
    first = run(owner, [done])
    assert condition(first.status, "SuccessCriteriaMet") is not None
    assert condition(first.status, "Complete") is None, "finish only once nothing is uncounted"
    after_finalizer = copy.deepcopy(done)
    after_finalizer["metadata"]["finalizers"] = []
    second = run(applied(owner, first), [after_finalizer])
    assert condition(second.status, "Complete") is not None
    assert second.status is not None and second.status["completionTime"] == format_time(NOW)
    assert condition(second.status, "Complete")["reason"] == "CompletionsReached"  # type: ignore[index]
    assert [e.reason for e in second.events] == ["Completed"]


def test_zero_completions_complete_at_once() -> None:
    actions = run(job(completions=0, parallelism=0), [])
    assert condition(actions.status, "Complete") is not None


def test_backoff_limit_exceeded_fails_after_failure_target() -> None:
    owner = running_job(completions=3, parallelism=1, backoffLimit=1)
    owner["status"]["failed"] = 1
    failed = pod(owner, "Failed", exit_code=1)
    running = pod(owner)
    first = run(owner, [failed, running])
    target = condition(first.status, "FailureTarget")
    assert target is not None and target["reason"] == "BackoffLimitExceeded"
    assert target["message"] == "Job has reached the specified backoff limit"
    assert [p["metadata"]["name"] for p in first.delete] == [running["metadata"]["name"]]
    assert condition(first.status, "Failed") is None
    gone = copy.deepcopy(failed)
    gone["metadata"]["finalizers"] = []
    second = run(applied(owner, first), [gone])
    failed_condition = condition(second.status, "Failed")
    assert failed_condition is not None and failed_condition["reason"] == "BackoffLimitExceeded"
    assert second.status is not None and second.status["failed"] == 2


def test_pod_recreation_backs_off_after_failures() -> None:
    owner = running_job(completions=2, parallelism=1)
    owner["status"].update(failed=1)
    failed = pod(owner, "Failed", finalizer=False, exit_code=1, finished=NOW - timedelta(seconds=4))
    waiting = run(owner, [failed])
    assert waiting.create == []
    assert waiting.requeue_after == pytest.approx(6.0)
    later = run(owner, [failed], now=NOW + timedelta(seconds=7))
    assert len(later.create) == 1


def test_suspend_deletes_active_pods_and_sets_the_condition() -> None:
    owner = running_job(completions=4, parallelism=2, suspend=True)
    active = [pod(owner), pod(owner)]
    actions = run(owner, active)
    assert len(actions.delete) == 2
    suspended = condition(actions.status, "Suspended")
    assert suspended is not None and (suspended["status"], suspended["reason"]) == ("True", "JobSuspended")
    assert [e.reason for e in actions.events] == ["Suspended"]
    deleting = [pod(owner, deleting=True)]
    later = run(applied(owner, actions), deleting)
    assert later.status is None or later.status.get("failed", 0) == 0, (
        "pods stopped by suspension are not failures"
    )


def test_resume_resets_start_time_and_creates_pods() -> None:
    owner = running_job(completions=2, parallelism=2)
    owner["status"]["conditions"] = [
        {
            "type": "Suspended",
            "status": "True",
            "reason": "JobSuspended",
            "message": "Job suspended",
            "lastTransitionTime": STARTED,
        }
    ]
    actions = run(owner, [])
    resumed = condition(actions.status, "Suspended")
    assert resumed is not None and (resumed["status"], resumed["reason"]) == ("False", "JobResumed")
    assert actions.status is not None and actions.status["startTime"] == format_time(NOW)
    assert len(actions.create) == 2
    assert [e.reason for e in actions.events] == ["Resumed"]


def test_active_deadline_exceeded() -> None:
    owner = running_job(completions=2, parallelism=1, activeDeadlineSeconds=60)
    actions = run(owner, [pod(owner)])
    target = condition(actions.status, "FailureTarget")
    assert target is not None and target["reason"] == "DeadlineExceeded"
    before = running_job(completions=2, parallelism=1, activeDeadlineSeconds=600)
    waiting = run(before, [pod(before)])
    assert condition(waiting.status, "FailureTarget") is None
    assert waiting.requeue_after == pytest.approx(300.0)


def test_pod_failure_policy_fail_job_on_exit_code() -> None:
    owner = running_job(
        completions=3,
        parallelism=1,
        podFailurePolicy={
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        },
    )
    actions = run(owner, [pod(owner, "Failed", exit_code=42)])
    target = condition(actions.status, "FailureTarget")
    assert target is not None and target["reason"] == "PodFailurePolicy"
    assert "failed with exit code 42 matching FailJob rule at index 0" in target["message"]


def test_pod_failure_policy_ignore_does_not_count() -> None:
    owner = running_job(
        completions=3,
        parallelism=1,
        backoffLimit=0,
        podFailurePolicy={"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [3]}}]},
    )
    ignored = pod(owner, "Failed", exit_code=3)
    actions = run(owner, [ignored])
    assert condition(actions.status, "FailureTarget") is None
    assert actions.status is None or not actions.status.get("uncountedTerminatedPods")
    assert [p["metadata"]["uid"] for p in actions.remove_finalizers] == [ignored["metadata"]["uid"]]


def test_excess_pods_are_deleted_not_ready_first() -> None:
    owner = running_job(completions=10, parallelism=1)
    ready, not_ready = pod(owner, ready=True), pod(owner)
    actions = run(owner, [ready, not_ready])
    assert [p["metadata"]["name"] for p in actions.delete] == [not_ready["metadata"]["name"]]
    assert actions.create == []


def test_expectations_block_pod_changes_but_not_status() -> None:
    owner = job(completions=3, parallelism=2)
    actions = run(owner, [], can_manage_pods=False)
    assert actions.create == [] and actions.status is not None


def test_finished_job_ttl() -> None:
    owner = running_job(completions=1, ttlSecondsAfterFinished=100)
    owner["status"].update(
        succeeded=1,
        completionTime=format_time(NOW),
        conditions=[
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": format_time(NOW)},
            {"type": "Complete", "status": "True", "lastTransitionTime": format_time(NOW)},
        ],
    )
    assert run(owner, [], now=NOW + timedelta(seconds=40)).requeue_after == pytest.approx(60.0)
    assert run(owner, [], now=NOW + timedelta(seconds=100)).delete_job


def test_backoff_limit_per_index_fails_index_then_job() -> None:
    owner = running_job(completionMode="Indexed", completions=2, parallelism=2, backoffLimitPerIndex=0)
    failed = pod(owner, "Failed", index=0, exit_code=1, failure_count=0)
    done = pod(owner, "Succeeded", index=1, exit_code=0)
    actions = run(owner, [failed, done])
    assert actions.status is not None and actions.status["failedIndexes"] == "0"
    assert actions.status["completedIndexes"] == "1"
    target = condition(actions.status, "FailureTarget")
    assert target is not None and target["reason"] == "FailedIndexes"


def test_success_policy_ends_the_job_early() -> None:
    owner = running_job(
        completionMode="Indexed",
        completions=3,
        parallelism=3,
        successPolicy={"rules": [{"succeededIndexes": "0"}]},
    )
    leader = pod(owner, "Succeeded", index=0, exit_code=0)
    worker = pod(owner, index=1)
    actions = run(owner, [leader, worker])
    met = condition(actions.status, "SuccessCriteriaMet")
    assert met is not None and (met["reason"], met["message"]) == (
        "SuccessPolicy",
        "Matched rules at index 0",
    )
    assert [p["metadata"]["name"] for p in actions.delete] == [worker["metadata"]["name"]]


@pytest.mark.parametrize("status", ["Running", ["a", "b"], 7])
def test_a_status_that_is_not_an_object_counts_as_none(status: Any) -> None:
    owner = job(completions=2, parallelism=2)
    owner["status"] = status
    actions = run(owner, [])
    assert len(actions.create) == 2
    assert actions.status is not None and actions.status["startTime"] == format_time(NOW)
    assert "succeeded" not in actions.status and "failed" not in actions.status  # omitted at zero, as Go does


def _deleting(owner: dict[str, Any]) -> dict[str, Any]:
    owner["metadata"]["deletionTimestamp"] = format_time(NOW)
    owner["metadata"]["finalizers"] = ["foregroundDeletion"]
    return owner


def test_a_job_being_deleted_releases_every_pod_and_makes_none() -> None:
    owner = _deleting(running_job(completions=4, parallelism=3))
    running, stopping = pod(owner), pod(owner, deleting=True)
    done, untracked = pod(owner, "Succeeded", exit_code=0), pod(owner, finalizer=False)
    actions = run(owner, [running, stopping, done, untracked])
    assert actions.create == [] and actions.delete == []
    released = sorted(p["metadata"]["uid"] for p in actions.remove_finalizers)
    assert released == sorted(p["metadata"]["uid"] for p in (running, stopping, done))
    assert actions.status is not None
    uncounted = actions.status["uncountedTerminatedPods"]
    assert uncounted["succeeded"] == [done["metadata"]["uid"]], "a finished pod is recorded before release"
    assert uncounted["failed"] == [stopping["metadata"]["uid"]], "a pod deleted before it finished failed"


def test_a_finished_job_being_deleted_releases_its_pods_and_skips_its_ttl() -> None:
    owner = running_job(completions=1, ttlSecondsAfterFinished=0)
    owner["status"].update(
        succeeded=1,
        completionTime=format_time(NOW),
        conditions=[
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": format_time(NOW)},
            {"type": "Complete", "status": "True", "lastTransitionTime": format_time(NOW)},
        ],
    )
    straggler = pod(owner, "Succeeded", exit_code=0)
    assert run(owner, [straggler]).delete_job, "not being deleted: the TTL deletes it"
    actions = run(_deleting(owner), [straggler])
    assert not actions.delete_job and actions.requeue_after is None
    assert [p["metadata"]["uid"] for p in actions.remove_finalizers] == [straggler["metadata"]["uid"]]


def _owned_by(
    owner: dict[str, Any] | None, *, uid: str = "", kind: str = "Job", **meta: Any
) -> dict[str, Any]:
    body = pod(job())
    refs = body["metadata"]["ownerReferences"]
    refs[0].update(kind=kind, uid=uid or (owner or {}).get("metadata", {}).get("uid", "uid-1"))
    body["metadata"].update(meta)
    return body


FINISHED = job()
FINISHED["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
FOREIGN = job(managedBy="example.com/other")
FOREIGN_FINISHED = job(managedBy="example.com/other")
FOREIGN_FINISHED["status"] = FINISHED["status"]

ORPHAN_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, bool]] = [
    ("its Job is gone", _owned_by(None), None, True),
    ("another Job now has its Job's name", _owned_by(None, uid="old-uid"), job(), True),
    ("no owner: the garbage collector orphaned it", _owned_by(None, ownerReferences=[]), None, True),
    ("owned but not controlled", _owned_by(None, ownerReferences=[{"kind": "Job", "uid": "x"}]), None, True),
    ("its Job has finished", _owned_by(FINISHED), FINISHED, True),
    ("its Job runs: its sync decides", _owned_by(job()), job(), False),
    ("its Job is managed by another controller", _owned_by(FOREIGN), FOREIGN, False),
    ("a finished Job another controller manages", _owned_by(FOREIGN_FINISHED), FOREIGN_FINISHED, False),
    ("controlled by something else", _owned_by(None, kind="ReplicaSet"), None, False),
    ("no tracking finalizer", _owned_by(None, finalizers=["example.com/keep"]), None, False),
]


@pytest.mark.parametrize(
    ("pod_", "named", "released"), [c[1:] for c in ORPHAN_CASES], ids=[c[0] for c in ORPHAN_CASES]
)
def test_orphan_pods_lose_the_tracking_finalizer(
    pod_: dict[str, Any], named: dict[str, Any] | None, released: bool
) -> None:
    assert releases_orphan(pod_, named) is released


def _exit_code_rule(values: Any) -> dict[str, Any]:
    return {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": values}}]}


@pytest.mark.parametrize(
    ("status", "spec", "problem"),
    [
        ({"succeeded": "x"}, {}, "status.succeeded must be an integer"),
        ({"failed": [1]}, {}, "status.failed must be an integer"),
        ({"active": {"a": 1}}, {}, "status.active must be an integer"),
        ({"ready": True}, {}, "status.ready must be an integer"),
        ({"terminating": 1.5}, {}, "status.terminating must be an integer"),
        (
            {},
            {"podFailurePolicy": _exit_code_rule([["x"]])},
            "spec.podFailurePolicy.rules[0].onExitCodes.values must be integers",
        ),
        (
            {},
            {"podFailurePolicy": _exit_code_rule([{"a": 1}])},
            "spec.podFailurePolicy.rules[0].onExitCodes.values must be integers",
        ),
    ],
)
def test_a_malformed_job_is_left_alone_with_the_reason(
    status: dict[str, Any], spec: dict[str, Any], problem: str
) -> None:
    """A field kube-apiserver would have refused: nothing is written, created or deleted for that Job."""
    owner = running_job(**spec)
    owner["status"].update(status)
    actions = decide(owner, [pod(owner, "Failed", exit_code=1)], NOW)
    assert (actions.malformed, actions.skipped) == (problem, problem)
    assert actions.status is None and not actions.create and not actions.delete and not actions.events


@pytest.mark.parametrize("status", ["x", [1], None])
def test_a_status_that_is_not_an_object_reads_as_none(status: Any) -> None:
    owner = job(parallelism=1)
    owner["status"] = status
    actions = run(owner, [])
    assert not actions.malformed and len(actions.create) == 1

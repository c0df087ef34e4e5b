"""The dispatcher's pure parts: the Job adapter, placement, and the lifecycle decide step."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.decision import Actions, Observed
from multiqueue.dispatch.generic import StatusRefused
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    LEGACY_PIN_ANNOTATION,
    ORIGIN_LABEL,
    ORIGIN_UID_ANNOTATION,
    PIN_LABEL,
    Identity,
    placement_metadata,
    release_metadata,
    requested_worker,
)
from multiqueue.dispatch.placement import WaitReason, WorkerView, WorkerViews, place
from tests.unit.jobfixtures import T0, T1, job

ADAPTER = BatchJobAdapter()
MANAGED_BY = "multiqueue.dev/dispatcher"
IDENTITY = Identity("multiqueue", MANAGED_BY)
MIRROR_FINALIZER = IDENTITY.finalizer  # the finalizer of the manager named multiqueue
WORKERS = [
    WorkerView("worker-1", {"region": "eu"}, True, 3),
    WorkerView("worker-2", {"region": "us"}, True, 1),
    WorkerView("worker-3", {"region": "eu"}, False, 0),
]


def user_job(**spec: Any) -> dict[str, Any]:
    body = job(managedBy=MANAGED_BY, ttlSecondsAfterFinished=60, **spec)
    body["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
    return body


def placed(body: dict[str, Any], worker: str = "worker-2") -> dict[str, Any]:
    result = copy.deepcopy(body)
    result["metadata"].setdefault("labels", {})[CLUSTER_LABEL] = worker
    result["metadata"]["finalizers"] = [MIRROR_FINALIZER]
    return result


def test_mirror_is_a_fresh_job_for_the_worker() -> None:
    user = placed(user_job())
    user["metadata"]["labels"][PIN_LABEL] = "worker-2"  # the user's pin
    user["metadata"]["annotations"] = {LEGACY_PIN_ANNOTATION: "worker-2"}  # a pin kept the older way
    mirror = ADAPTER.build_mirror(user, "multiqueue")
    assert "managedBy" not in mirror["spec"] and "ttlSecondsAfterFinished" not in mirror["spec"]
    assert "selector" not in mirror["spec"]
    assert "batch.kubernetes.io/controller-uid" not in mirror["spec"]["template"]["metadata"]["labels"]
    generated = {
        "batch.kubernetes.io/controller-uid",
        "controller-uid",
        "batch.kubernetes.io/job-name",
        "job-name",
    }
    assert generated & set(user["metadata"]["labels"]), "the defaulted user Job carries them"
    assert not generated & set(mirror["metadata"]["labels"]), "the worker generates its own for the mirror"
    assert mirror["metadata"]["labels"][ORIGIN_LABEL] == "multiqueue"
    assert CLUSTER_LABEL not in mirror["metadata"]["labels"] and PIN_LABEL not in mirror["metadata"]["labels"]
    assert mirror["metadata"]["annotations"] == {ORIGIN_UID_ANNOTATION: "uid-1"}
    assert set(mirror["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert "status" not in mirror
    assert user["spec"]["managedBy"] == MANAGED_BY, "the user's Job is not changed"


def test_status_follows_the_mirror() -> None:
    user = placed(user_job())
    mirror = copy.deepcopy(user)
    mirror["status"] = {
        "startTime": T0,
        "active": 1,
        "uncountedTerminatedPods": {"succeeded": ["worker-pod"]},
    }
    status = ADAPTER.synced_status(user, mirror)
    assert status == {"startTime": T0, "active": 1}
    assert ADAPTER.synced_status({**user, "status": status}, mirror) is None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(
            {"startTime": T0, "succeeded": 2}, {"startTime": T0, "succeeded": 1}, id="succeeded-decreases"
        ),
        pytest.param(
            {
                "startTime": T0,
                "conditions": [
                    {"type": "FailureTarget", "status": "True"},
                    {"type": "Failed", "status": "True"},
                ],
            },
            {"startTime": T0},
            id="terminal-condition-dropped",
        ),
        pytest.param(
            {},
            {"conditions": [{"type": "Complete", "status": "True"}]},
            id="complete-without-completion-time",
        ),
    ],
)
def test_a_faulty_mirror_status_is_refused(old: dict[str, Any], new: dict[str, Any]) -> None:
    user = placed(user_job())
    user["status"] = old
    mirror = copy.deepcopy(user)
    mirror["status"] = new
    with pytest.raises(StatusRefused):
        ADAPTER.synced_status(user, mirror)


@pytest.mark.parametrize(
    ("pinned", "annotations", "policy", "turn", "expected", "reason"),
    [
        pytest.param(None, {}, "LeastLoaded", 0, "worker-2", "", id="least-loaded"),
        pytest.param(None, {}, "RoundRobin", 0, "worker-1", "", id="round-robin-0"),
        pytest.param(None, {}, "RoundRobin", 1, "worker-2", "", id="round-robin-1"),
        pytest.param(None, {}, "Ordered", 0, "worker-1", "", id="ordered-first-that-fits"),
        pytest.param("worker-1", {}, "LeastLoaded", 0, "worker-1", "", id="pin"),
        pytest.param("nowhere", {}, "LeastLoaded", 0, None, "not configured", id="pin-unknown"),
        pytest.param(None, {"multiqueue.dev/cluster-selector": "region=eu"}, "LeastLoaded", 0, "worker-1", "", id="selector"),
        pytest.param(None, {"multiqueue.dev/cluster-selector": "region=asia"}, "LeastLoaded", 0, None, "no worker matches selector region=asia", id="selector-none"),
        pytest.param("worker-3", {}, "LeastLoaded", 0, None, "no active worker", id="pinned-to-inactive"),
    ],
)  # fmt: skip
def test_placement(
    pinned: str | None,
    annotations: dict[str, str],
    policy: str,
    turn: int,
    expected: str | None,
    reason: str,
) -> None:
    body = user_job()
    body["metadata"]["annotations"] = annotations
    result = place(body, WORKERS, policy, turn, pinned=pinned)
    assert result.worker == expected
    assert reason in result.message


def _decide(
    user: dict[str, Any],
    mirrors: dict[str, dict[str, Any]] | None = None,
    workers: list[WorkerView] = WORKERS,
) -> Actions:
    return decide(
        ADAPTER, IDENTITY, "LeastLoaded", Observed(user, mirrors or {}, WorkerViews.of(workers), {}, now=0.0)
    )


def _mirror_of(user: dict[str, Any], uid: str | None = None, **status: Any) -> dict[str, Any]:
    mirror = ADAPTER.build_mirror(user, "multiqueue")
    if uid is not None:
        mirror["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] = uid
    mirror["metadata"]["uid"] = "mirror-uid"
    mirror["status"] = status
    return mirror


def test_jobs_of_other_controllers_are_ignored() -> None:
    actions = _decide(job(managedBy="example.com/other"))
    assert actions.place_on is None and actions.create_mirror is None and actions.status is None


def test_new_job_is_placed_and_mirrored_in_one_sync() -> None:
    actions = _decide(user_job())
    assert actions.place_on == "worker-2"
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-2"


def test_suspended_job_waits() -> None:
    actions = _decide(user_job(suspend=True))
    assert actions.place_on is None
    assert actions.waiting is not None and actions.waiting.reason == WaitReason.SUSPENDED


def test_placed_without_mirror_recreates_it_there() -> None:
    actions = _decide(placed(user_job(), "worker-1"))
    assert actions.place_on is None
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-1"


def test_suspend_goes_to_the_mirror_and_status_comes_back() -> None:
    user = placed(user_job(suspend=True))
    mirror = _mirror_of(user, None, startTime=T0, active=1)
    actions = _decide(user, {"worker-2": mirror})
    assert actions.suspend_mirror == ("worker-2", True)
    assert actions.status == {"startTime": T0, "active": 1}


def test_finished_job_deletes_its_mirror_then_releases() -> None:
    user = placed(user_job())
    user["status"] = {
        "startTime": T0,
        "completionTime": T1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"},
        ],
    }
    mirror = _mirror_of(user)
    first = _decide(user, {"worker-2": mirror})
    assert [w for w, _ in first.delete_mirrors] == ["worker-2"] and not first.remove_finalizer
    second = _decide(user)
    assert second.remove_finalizer


def test_mirror_of_an_earlier_job_with_the_same_name_is_garbage() -> None:
    user = placed(user_job())
    stale = _mirror_of(user, uid="old-uid")
    actions = _decide(user, {"worker-1": stale})
    assert [w for w, _ in actions.delete_mirrors] == ["worker-1"]
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-2"


def test_deleted_user_job_removes_mirror_then_finalizer() -> None:
    user = placed(user_job())
    user["metadata"]["deletionTimestamp"] = T1
    assert [w for w, _ in _decide(user, {"worker-2": _mirror_of(user)}).delete_mirrors] == ["worker-2"]
    assert _decide(user).remove_finalizer


def test_refused_status_becomes_an_event() -> None:
    user = placed(user_job())
    user["status"] = {"startTime": T0, "succeeded": 3}
    actions = _decide(user, {"worker-2": _mirror_of(user, None, startTime=T0, succeeded=1)})
    assert actions.status is None
    assert [e.reason for e in actions.events] == ["StatusSyncRejected"]


def test_placement_respects_capacity() -> None:
    full = [
        WorkerView("small", {}, True, 0, free={"cpu": 1.0}),
        WorkerView("busy", {}, True, 2, max_jobs=2),
        WorkerView("roomy", {}, True, 5, free={"cpu": 8.0, "nvidia.com/gpu": 1.0}),
    ]
    assert place(user_job(), full, "LeastLoaded", demand={"cpu": 2.0}).worker == "roomy"
    assert place(user_job(), full, "LeastLoaded", demand={"cpu": 0.5}).worker == "small"
    assert place(user_job(), full, "Ordered", demand={"cpu": 2.0}).worker == "roomy", "the first that fits"
    nothing = place(user_job(), full, "LeastLoaded", demand={"cpu": 16.0})
    assert nothing.worker is None and nothing.message == "waiting for capacity: cpu, jobs"
    assert nothing.reason == WaitReason.NO_CAPACITY


def test_demand_is_requests_times_parallelism() -> None:
    from multiqueue.dispatch.generic import demand

    body = user_job(parallelism=3, completions=10)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"}
    }
    assert demand(ADAPTER.pod_sets(body)) == {"cpu": 1.5, "memory": 3 * 2.0**30}


# --- worker loss ------------------------------------------------------------------------------------------------

LOST_2 = [
    WorkerView("worker-1", {"region": "eu"}, True, 3),
    WorkerView("worker-2", {"region": "us"}, False, 1, reason="ClientConnectionFailed", lost=True),
    WorkerView("worker-3", {"region": "eu"}, False, 0, reason="ClientConnectionFailed"),
]


def _running(user: dict[str, Any]) -> dict[str, Any]:
    user["status"] = {
        "startTime": T0,
        "active": 2,
        "ready": 1,
        "succeeded": 1,
        "completedIndexes": "0",
        "conditions": [],
    }
    return user


def test_jobs_of_a_lost_worker_run_on_another_from_their_progress() -> None:
    user = _running(placed(user_job(completionMode="Indexed", completions=4, parallelism=2), "worker-2"))
    stale = _mirror_of(user, None, startTime=T0, active=2)
    actions = _decide(user, {"worker-2": stale}, LOST_2)
    assert actions.redispatch == ("worker-2", "worker-1")
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-1"
    assert actions.status is not None
    assert (actions.status["active"], actions.status["ready"]) == (0, 0), "nothing runs until the new mirror"
    assert (actions.status["succeeded"], actions.status["completedIndexes"]) == (1, "0"), "progress is kept"
    assert actions.delete_mirrors == [], "the lost worker is not asked; its mirror goes when it is back"
    assert [e.reason for e in actions.events] == ["Redispatched"]
    assert ADAPTER.progress(user) == {"succeeded": 1, "completedIndexes": "0"}


def test_a_worker_only_unreachable_keeps_its_jobs() -> None:
    brief = [*LOST_2[:1], WorkerView("worker-2", {}, False, 1, reason="ClientConnectionFailed"), *LOST_2[2:]]
    user = _running(placed(user_job(), "worker-2"))
    actions = _decide(user, {"worker-2": _mirror_of(user, None, **user["status"])}, brief)
    assert actions.redispatch is None and actions.create_mirror is None and actions.events == []


def test_a_lost_worker_with_nowhere_to_go_waits_with_the_reason() -> None:
    only = [WorkerView("worker-2", {}, False, 1, reason="Unauthorized", lost=True)]
    user = _running(placed(user_job(), "worker-2"))
    actions = _decide(user, {}, only)
    assert actions.redispatch is None
    assert actions.waiting is not None
    assert actions.waiting.message == (
        "worker worker-2 is lost; 0/1 workers can take this Job: 1 refused this Job's mirror lately, or is lost "
        "(worker-2)"
    )
    assert [(e.reason, e.message) for e in actions.events] == [("Pending", actions.waiting.message)]


def test_a_selector_still_holds_when_a_job_moves() -> None:
    user = _running(placed(user_job(), "worker-2"))
    user["metadata"]["annotations"]["multiqueue.dev/cluster-selector"] = "region=us"
    actions = _decide(user, {}, LOST_2)
    assert (
        actions.redispatch is None
        and actions.waiting is not None
        and actions.waiting.message
        == "worker worker-2 is lost; 0/3 workers can take this Job: 2 do not match the selector region=us "
        "(worker-1, worker-3), 1 refused this Job's mirror lately, or is lost (worker-2)"
    )


def test_when_the_lost_worker_returns_its_stale_mirror_is_deleted_and_never_synced() -> None:
    user = _running(placed(user_job(), "worker-1"))
    stale = _mirror_of(user, None, startTime=T0, succeeded=5, completionTime=T1)
    current = _mirror_of(user, None, startTime=T1, active=1, succeeded=2)
    back = [WorkerView("worker-1", {}, True, 1), WorkerView("worker-2", {}, True, 0)]
    actions = _decide(user, {"worker-1": current, "worker-2": stale}, back)
    assert [w for w, _ in actions.delete_mirrors] == ["worker-2"]
    assert actions.status is not None and actions.status.get("succeeded") == 2, "counts come from worker-1"
    assert actions.status["startTime"] == T0, "the user's start time stays"


def test_a_deleted_job_is_let_go_when_its_mirror_is_on_a_lost_worker() -> None:
    user = placed(user_job(), "worker-2")
    user["metadata"]["deletionTimestamp"] = T1
    actions = _decide(user, {"worker-2": _mirror_of(user)}, LOST_2)
    assert actions.remove_finalizer and actions.delete_mirrors == []
    brief = [WorkerView("worker-2", {}, False, 1, reason="ClientConnectionFailed")]
    held = _decide(user, {"worker-2": _mirror_of(user)}, brief)
    assert not held.remove_finalizer, "a worker that may come back still gets its mirror deleted first"


def test_a_draining_worker_gets_no_new_jobs() -> None:
    draining = [WorkerView("worker-1", {}, True, 0, accepting=False), WorkerView("worker-2", {}, True, 5)]
    assert place(user_job(), draining, "LeastLoaded").worker == "worker-2"
    refused = place(user_job(), draining, "LeastLoaded", pinned="worker-1")
    assert refused.message == "pinned to worker worker-1, which is draining"


@pytest.mark.parametrize(
    ("labels", "annotations", "held", "expected"),
    [
        pytest.param({}, {}, False, None, id="no-pin"),
        pytest.param({PIN_LABEL: "worker-1"}, {}, False, "worker-1", id="pin"),
        pytest.param({PIN_LABEL: "worker-1", CLUSTER_LABEL: "worker-1"}, {}, True, "worker-1", id="pinned-and-placed"),
        pytest.param({CLUSTER_LABEL: "worker-2"}, {}, True, None, id="placed-is-no-pin"),
        pytest.param({CLUSTER_LABEL: "worker-2"}, {}, False, "worker-2", id="older-spelling-before-placement"),
        pytest.param({CLUSTER_LABEL: "worker-2"}, {LEGACY_PIN_ANNOTATION: "worker-1"}, True, "worker-1", id="older-spelling-kept-while-placed"),
        pytest.param({PIN_LABEL: "worker-1"}, {LEGACY_PIN_ANNOTATION: "worker-2"}, True, "worker-1", id="label-wins"),
    ],
)  # fmt: skip
def test_the_pin_is_the_users_label_never_the_placement(
    labels: dict[str, str], annotations: dict[str, str], held: bool, expected: str | None
) -> None:
    body = user_job()
    body["metadata"]["labels"] = labels
    body["metadata"]["annotations"] = annotations
    assert requested_worker(body, held) == expected


@pytest.mark.parametrize(
    ("labels", "patch"),
    [
        pytest.param({}, {CLUSTER_LABEL: "w"}, id="no-pin"),
        pytest.param({PIN_LABEL: "w"}, {CLUSTER_LABEL: "w"}, id="pin-untouched"),
        pytest.param({CLUSTER_LABEL: "x"}, {CLUSTER_LABEL: "w", PIN_LABEL: "x"}, id="older-spelling-moves"),
    ],
)
def test_placing_writes_the_placement_and_never_the_pin(
    labels: dict[str, str], patch: dict[str, Any]
) -> None:
    body = user_job()
    body["metadata"]["labels"] = labels
    body["metadata"]["finalizers"] = ["other.example/keep"]
    placing = placement_metadata(body, "w", MIRROR_FINALIZER)
    assert placing == {"finalizers": ["other.example/keep", MIRROR_FINALIZER], "labels": patch}


@pytest.mark.parametrize(
    ("labels", "annotations", "patch"),
    [
        pytest.param({CLUSTER_LABEL: "w"}, {}, {"labels": {CLUSTER_LABEL: None}}, id="no-pin"),
        pytest.param({CLUSTER_LABEL: "w", PIN_LABEL: "w"}, {}, {"labels": {CLUSTER_LABEL: None}}, id="pin-untouched"),
        pytest.param(
            {CLUSTER_LABEL: "w"}, {LEGACY_PIN_ANNOTATION: "w"},
            {"labels": {CLUSTER_LABEL: None, PIN_LABEL: "w"}, "annotations": {LEGACY_PIN_ANNOTATION: None}},
            id="older-spelling-moves",
        ),
    ],
)  # fmt: skip
def test_letting_go_removes_the_placement_and_keeps_the_pin(
    labels: dict[str, str], annotations: dict[str, str], patch: dict[str, Any]
) -> None:
    body = user_job()
    body["metadata"]["labels"] = labels
    body["metadata"]["annotations"] = annotations
    body["metadata"]["finalizers"] = ["other.example/keep", MIRROR_FINALIZER]
    assert release_metadata(body, MIRROR_FINALIZER, unplace=True) == {
        "finalizers": ["other.example/keep"],
        **patch,
    }
    assert release_metadata(body, MIRROR_FINALIZER, unplace=False) == {"finalizers": ["other.example/keep"]}

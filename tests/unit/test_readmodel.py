"""The pure pieces of the manager's read model that ``multiqueue status`` shares with the running manager: a
worker's health reason, the capacity a Job holds, and a worker's line."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.capacity import Usage, held_on
from multiqueue.dispatch.mirror import CLUSTER_LABEL, Identity
from multiqueue.dispatch.readmodel import Snapshot, worker_state
from multiqueue.dispatch.split import PARTS_ANNOTATION
from multiqueue.dispatch.workers import WorkerSettings, health_reason
from multiqueue.kube.config import KubeconfigError
from multiqueue.kube.errors import Forbidden, TransportError, Unauthorized

IDENTITY = Identity("multiqueue", "multiqueue.dev/dispatcher")


@pytest.mark.parametrize(
    ("error", "synced", "reason"),
    [
        (None, True, "Connected"),
        (None, False, "Connecting"),
        (Unauthorized({"reason": "Unauthorized"}), True, "Unauthorized"),
        (Forbidden({"reason": "Forbidden"}), True, "Forbidden"),
        (TransportError("refused"), True, "ClientConnectionFailed"),
        (ConnectionRefusedError(111, "refused"), True, "ClientConnectionFailed"),
        (TimeoutError(), True, "ClientConnectionFailed"),
        (KubeconfigError("no such context"), True, "BadKubeConfig"),
    ],
)
def test_one_health_reason_for_the_manager_and_status(
    error: BaseException | None, synced: bool, reason: str
) -> None:
    assert health_reason(error, synced) == reason


def user(
    worker: str | None,
    *,
    ours: bool = True,
    finished: bool = False,
    deleting: bool = False,
    parts: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j", "namespace": "default", "labels": {}, "finalizers": []}
    if worker is not None:
        meta["labels"][CLUSTER_LABEL] = worker
    if parts is not None:
        meta["annotations"] = {PARTS_ANNOTATION: parts}
    if ours:
        meta["finalizers"].append(IDENTITY.finalizer)
    if deleting:
        meta["deletionTimestamp"] = "2026-11-28T10:00:00Z"
    status = {"conditions": [{"type": "Complete", "status": "True"}]} if finished else {}
    spec = {
        "managedBy": IDENTITY.managed_by,
        "parallelism": 8,
        "completions": 40,
        "completionMode": "Indexed",
    }
    spec["template"] = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    return {"metadata": meta, "spec": spec, "status": status}


TWO_PARTS = (
    '{"parts":{"worker-1":{"indexes":"0-19","parallelism":4},'
    '"worker-2":{"indexes":"20-39","parallelism":3}},"carriedFailed":0}'
)


@pytest.mark.parametrize(
    ("job", "held"),
    [
        pytest.param(user(None), {}, id="not-placed"),
        pytest.param(user("worker-1", ours=False), {}, id="labelled-but-not-held-by-this-manager"),
        pytest.param(user("worker-1"), {"worker-1": {"cpu": 8.0}}, id="placed-and-running"),
        pytest.param(user("worker-1", finished=True), {}, id="finished"),
        pytest.param(user("worker-1", deleting=True), {}, id="being-deleted"),
        pytest.param(
            user("worker-1", parts=TWO_PARTS),
            {"worker-1": {"cpu": 4.0}, "worker-2": {"cpu": 3.0}},
            id="run-as-parts-each-part-on-its-worker",
        ),
        pytest.param(user("worker-1", parts=TWO_PARTS, finished=True), {}, id="run-as-parts-finished"),
    ],
)
def test_a_job_holds_capacity_on_its_workers_while_placed_and_unfinished(
    job: dict[str, Any], held: dict[str, dict[str, float]]
) -> None:
    assert held_on(BatchJobAdapter(), IDENTITY, job) == held


@pytest.mark.parametrize(
    ("settings", "usage", "capacity"),
    [
        pytest.param(WorkerSettings(), Usage(3, {"cpu": 2.0}), {}, id="unlimited"),
        pytest.param(
            WorkerSettings(max_jobs=4, quota={"memory": 2.0**30, "cpu": 8.0}),
            Usage(2, {"cpu": 2.5}),
            {"jobs": (2.0, 4.0), "cpu": (2.5, 8.0), "memory": (0.0, 2.0**30)},
            id="jobs-first-then-resources-by-name",
        ),
    ],
)
def test_a_workers_state(
    settings: WorkerSettings, usage: Usage, capacity: dict[str, tuple[float, float]]
) -> None:
    state = worker_state("w", settings, "Connected", usage)
    assert state.active and state.running == usage.jobs
    assert list(state.capacity.items()) == list(capacity.items())
    assert not worker_state("w", settings, "Unauthorized", usage).active


def test_managed_jobs_add_up_over_kinds() -> None:
    snapshot = Snapshot(
        identity=IDENTITY,
        synced=True,
        workers=(),
        refused={},
        jobs={"Job": {"active": 2, "finished": 5}, "JobGroup": {"active": 1, "finished": 0}},
        waiting=0,
        dispatched={},
        redispatched={},
        rejected={},
        dispatch_latency=(),
        requests={},
    )
    assert snapshot.managed == {"active": 3, "finished": 5}

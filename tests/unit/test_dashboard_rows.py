"""What the dashboard shows of each Job and each worker: the status table's row, made ready for the page."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.dashboard.rows import job_entry, worker_entry
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.inspect import job_row
from multiqueue.dispatch.mirror import CLUSTER_LABEL, PARTS_ANNOTATION, Identity
from multiqueue.dispatch.readmodel import WorkerState
from multiqueue.dispatch.split import PartPlan, Parts

IDENTITY = Identity("multiqueue", "multiqueue.dev/dispatcher")
NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)


def job(
    *, placed: str | None = None, status: dict[str, Any] | None = None, suspend: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "train",
        "namespace": "team-a",
        "uid": "u-1",
        "creationTimestamp": "2026-11-27T11:59:00Z",
    }
    if placed is not None:
        meta["labels"] = {CLUSTER_LABEL: placed}
        meta["finalizers"] = [IDENTITY.finalizer]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"managedBy": IDENTITY.managed_by, "completions": 2, "suspend": suspend, "template": {}},
        "status": status or {},
    }


def as_parts(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` placed as two parts, index 0 on worker-1 and index 1 on worker-2."""
    plans = (PartPlan("worker-1", "0", 1), PartPlan("worker-2", "1", 1))
    obj["metadata"]["annotations"] = {PARTS_ANNOTATION: Parts(plans).encoded()}
    return obj


def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


WAITING_EVENT = {"reason": "Waiting", "message": "waiting for capacity: cpu"}


@pytest.mark.parametrize(
    ("obj", "latest", "expected"),
    [
        pytest.param(job(), {}, {"worker": "", "state": "Waiting", "reason": "", "message": ""}, id="new"),
        pytest.param(
            job(),
            {"u-1": WAITING_EVENT},
            {"worker": "", "state": "Waiting", "reason": "Waiting", "message": "waiting for capacity: cpu"},
            id="waiting-says-why",
        ),
        pytest.param(
            job(placed="worker-2", status={"active": 1, "succeeded": 1}),
            {},
            {"worker": "worker-2", "state": "Running", "completions": "1/2"},
            id="running",
        ),
        pytest.param(
            job(placed="worker-2", suspend=True),
            {},
            {"worker": "worker-2", "state": "Suspended"},
            id="suspended",
        ),
        pytest.param(
            # A pin the user wrote is not a placement: without the manager's finalizer the Job is not placed.
            {**job(), "metadata": {**job()["metadata"], "labels": {CLUSTER_LABEL: "worker-9"}}},
            {},
            {"worker": "", "state": "Waiting"},
            id="label-without-finalizer",
        ),
        pytest.param(
            job(
                placed="worker-1",
                status={"succeeded": 2, "conditions": [condition("Complete", "CompletionsReached", "done")]},
            ),
            {"u-1": WAITING_EVENT},
            {"worker": "worker-1", "state": "Complete", "completions": "2/2", "reason": "CompletionsReached"},
            id="complete-shows-how-it-ended",
        ),
        pytest.param(
            job(
                placed="worker-1",
                status={"failed": 1, "conditions": [condition("Failed", "BackoffLimitExceeded", "too many")]},
            ),
            {},
            {"state": "Failed", "reason": "BackoffLimitExceeded", "message": "too many"},
            id="failed",
        ),
        pytest.param(
            as_parts(job(placed="worker-1", status={"active": 2})),
            {},
            {"worker": "worker-1[0],worker-2[1]", "state": "Running"},
            id="run-as-parts-each-with-its-indexes",
        ),
    ],
)
def test_a_jobs_line(obj: dict[str, Any], latest: dict[str, Any], expected: dict[str, Any]) -> None:
    entry = job_entry(job_row(BatchJobAdapter(), obj, IDENTITY, latest, NOW), obj, "2026-11-27T11:59:30Z")
    assert {k: entry[k] for k in expected} == expected
    assert (entry["uid"], entry["kind"], entry["namespace"], entry["name"]) == (
        "u-1",
        "Job",
        "team-a",
        "train",
    )
    assert (entry["created"], entry["lastEvent"]) == ("2026-11-27T11:59:00Z", "2026-11-27T11:59:30Z")


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param(
            WorkerState("w", "Connected", {"zone": "a"}, 3, {}, last_contact=1_800_000_000.0),
            {
                "healthy": True,
                "reason": "Connected",
                "lost": False,
                "draining": False,
                "labels": {"zone": "a"},
                "running": 3,
                "capacity": {},
                "lastContact": "2027-01-15T08:00:00Z",
            },
            id="connected",
        ),
        pytest.param(
            WorkerState("w", "ClientConnectionFailed", {}, 1, {}, lost=True),
            {"healthy": False, "reason": "ClientConnectionFailed", "lost": True, "lastContact": None},
            id="lost-never-answered",
        ),
        pytest.param(
            WorkerState("w", "Connected", {}, 0, {}, draining=True),
            {"healthy": True, "draining": True},
            id="draining",
        ),
        pytest.param(
            WorkerState("w", "Connected", {}, 2, {"jobs": (2, 4), "cpu": (2.5, 4.0)}),
            {"capacity": {"jobs": {"used": 2, "total": 4}, "cpu": {"used": 2.5, "total": 4.0}}},
            id="capacity-in-use",
        ),
    ],
)
def test_a_workers_line(state: WorkerState, expected: dict[str, Any]) -> None:
    entry = worker_entry(state)
    assert entry["name"] == "w"
    assert {k: entry[k] for k in expected} == expected

"""Capacity read from a worker's Nodes: the records informers keep, the pure computation over them, and how it
combines with a configured quota."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from multiqueue.api.types import Obj
from multiqueue.dispatch.capacity import Usage
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.nodecapacity import (
    NodeCapacity,
    combined,
    node_capacity,
    node_record,
    pod_record,
    pod_requests,
)
from multiqueue.dispatch.readmodel import worker_state
from multiqueue.dispatch.workers import WorkerSettings
from multiqueue.dispatch.workersecrets import settings_of

GIB = 2.0**30


def node(name: str, *, ready: bool = True, cordoned: bool = False, **allocatable: str) -> Obj:
    spec: Obj = {"unschedulable": True} if cordoned else {}
    return {
        "metadata": {"name": name, "resourceVersion": "1", "managedFields": [{"manager": "x"}]},
        "spec": spec,
        "status": {
            "allocatable": allocatable or {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def container(**requests: str) -> Obj:
    return {"name": "c", "resources": {"requests": requests}}


def pod(
    name: str,
    node_name: str = "n1",
    phase: str = "Running",
    owner: str | None = None,
    labels: dict[str, str] | None = None,
    **requests: str,
) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "resourceVersion": "7", "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner, "controller": True}]
    return {
        "metadata": meta,
        "spec": {"nodeName": node_name, "containers": [container(**requests)]},
        "status": {"phase": phase},
    }


# --- records ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            node("n1", cpu="4", memory="1Gi", pods="110"),
            {
                "metadata": {"name": "n1", "resourceVersion": "1"},
                "schedulable": True,
                "allocatable": {"cpu": 4.0, "memory": GIB, "pods": 110.0},
            },
            id="ready",
        ),
        pytest.param(
            node("n1", ready=False, cpu="2"),
            {
                "metadata": {"name": "n1", "resourceVersion": "1"},
                "schedulable": False,
                "allocatable": {"cpu": 2.0},
            },
            id="not-ready",
        ),
        pytest.param(
            node("n1", cordoned=True, cpu="500m"),
            {
                "metadata": {"name": "n1", "resourceVersion": "1"},
                "schedulable": False,
                "allocatable": {"cpu": 0.5},
            },
            id="cordoned",
        ),
        pytest.param(
            {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "many"}}},
            {"metadata": {"name": "n1"}, "schedulable": False, "allocatable": {}},
            id="no-conditions-bad-quantity",
        ),
    ],
)
def test_node_record(obj: Obj, expected: Obj) -> None:
    assert node_record(obj) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"containers": [container(cpu="1"), container(cpu="500m")]}, {"cpu": 1.5}, id="containers"
        ),
        pytest.param({"containers": [{"name": "c"}]}, {}, id="no-requests"),
        pytest.param(
            {"initContainers": [container(cpu="3")], "containers": [container(cpu="1", memory="1Gi")]},
            {"cpu": 3.0, "memory": GIB},
            id="init-container-larger",
        ),
        pytest.param(
            {
                "initContainers": [{**container(cpu="1"), "restartPolicy": "Always"}, container(cpu="2")],
                "containers": [container(cpu="1")],
            },
            {"cpu": 3.0},
            id="sidecar-runs-beside-the-init-container",
        ),
        pytest.param(
            {
                "initContainers": [{**container(cpu="1"), "restartPolicy": "Always"}],
                "containers": [container(cpu="1")],
            },
            {"cpu": 2.0},
            id="sidecar-runs-beside-the-containers",
        ),
        pytest.param(
            {"containers": [container(cpu="1")], "overhead": {"cpu": "250m"}}, {"cpu": 1.25}, id="overhead"
        ),
        pytest.param(
            {"containers": [container(**{"nvidia.com/gpu": "2"})]}, {"nvidia.com/gpu": 2.0}, id="extended"
        ),
    ],
)
def test_pod_requests(spec: Obj, expected: dict[str, float]) -> None:
    assert pod_requests(spec) == expected


def test_pod_record_keeps_node_phase_requests_and_makers() -> None:
    made = pod("p", owner="job-uid", labels={"jobset.sigs.k8s.io/jobset-uid": "set-uid"}, cpu="2")
    assert pod_record(made) == {
        "metadata": {"name": "p", "namespace": "default", "resourceVersion": "7"},
        "nodeName": "n1",
        "phase": "Running",
        "requests": {"cpu": 2.0},
        "owners": ["job-uid", "set-uid"],
    }
    assert pod_record({"metadata": {"name": "q"}})["nodeName"] == ""


# --- the computation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "pods", "ours", "total", "free"),
    [
        pytest.param([], [], frozenset(), {"cpu": 0.0, "memory": 0.0, "pods": 0.0}, None, id="no-nodes"),
        pytest.param(
            [node("n1", cpu="4", pods="10")],
            [],
            frozenset(),
            {"cpu": 4.0, "memory": 0.0, "pods": 10.0},
            None,
            id="one-node-nothing-running",
        ),
        pytest.param(
            [node("n1", cpu="4", pods="10"), node("n2", cpu="2", pods="10", **{"nvidia.com/gpu": "1"})],
            [pod("a", cpu="3"), pod("b", "n2", memory="1"), pod("c", "", cpu="1")],
            frozenset(),
            {"cpu": 6.0, "memory": 0.0, "pods": 20.0, "nvidia.com/gpu": 1.0},
            {"cpu": 2.0, "memory": -1.0, "pods": 17.0, "nvidia.com/gpu": 1.0},
            id="bound-and-unbound-pods-count",
        ),
        pytest.param(
            [node("n1", cpu="4", pods="10")],
            [
                pod("a", phase="Succeeded", cpu="3"),
                pod("b", phase="Failed", cpu="3"),
                pod("c", phase="Pending", cpu="1"),
            ],
            frozenset(),
            {"cpu": 4.0, "memory": 0.0, "pods": 10.0},
            {"cpu": 3.0, "memory": 0.0, "pods": 9.0},
            id="finished-pods-do-not-count",
        ),
        pytest.param(
            [
                node("n1", cpu="4", pods="10"),
                node("n2", cordoned=True, cpu="8"),
                node("n3", ready=False, cpu="8"),
            ],
            [pod("a", "n2", cpu="8"), pod("b", "n3", cpu="8"), pod("c", "n1", cpu="1")],
            frozenset(),
            {"cpu": 4.0, "memory": 0.0, "pods": 10.0},
            {"cpu": 3.0, "memory": 0.0, "pods": 9.0},
            id="cordoned-and-not-ready-nodes-and-their-pods-left-out",
        ),
        pytest.param(
            [node("n1", cpu="4", pods="10")],
            [pod("a", owner="mirror-uid", cpu="2"), pod("b", owner="other-uid", cpu="1")],
            frozenset({"mirror-uid"}),
            {"cpu": 4.0, "memory": 0.0, "pods": 10.0},
            {"cpu": 3.0, "memory": 0.0, "pods": 9.0},
            id="pods-of-our-mirrors-left-to-the-ledger",
        ),
        pytest.param(
            [node("n1", cpu="4", pods="10")],
            [pod("a", labels={"jobset.sigs.k8s.io/jobset-uid": "set-uid"}, owner="child-job", cpu="2")],
            frozenset({"set-uid"}),
            {"cpu": 4.0, "memory": 0.0, "pods": 10.0},
            None,
            id="pods-of-our-jobset-mirrors-left-to-the-ledger",
        ),
    ],
)
def test_node_capacity(
    nodes: list[Obj],
    pods: list[Obj],
    ours: frozenset[str],
    total: dict[str, float],
    free: dict[str, float] | None,
) -> None:
    found = node_capacity([node_record(n) for n in nodes], [pod_record(p) for p in pods], ours)
    assert found == NodeCapacity(total, total if free is None else free)


# --- with the configured quota and the Jobs placed there ------------------------------------------------------------


@pytest.mark.parametrize(
    ("quota", "used", "nodes", "capacity", "free"),
    [
        pytest.param({"cpu": 4.0}, {"cpu": 1.0}, None, {"cpu": 4.0}, {"cpu": 3.0}, id="quota-only"),
        pytest.param(
            {},
            {"cpu": 1.0},
            NodeCapacity({"cpu": 8.0, "pods": 10.0}, {"cpu": 5.0, "pods": 7.0}),
            {"cpu": 8.0, "pods": 10.0},
            {"cpu": 4.0, "pods": 7.0},
            id="nodes-only-placed-jobs-still-count",
        ),
        pytest.param(
            {"cpu": 4.0, "memory": 4 * GIB},
            {"cpu": 1.0},
            NodeCapacity({"cpu": 8.0, "memory": 2 * GIB}, {"cpu": 7.5, "memory": GIB}),
            {"cpu": 4.0, "memory": 2 * GIB},
            {"cpu": 3.0, "memory": GIB},
            id="smaller-wins-per-resource",
        ),
        pytest.param(
            {"cpu": 4.0},
            {"cpu": 1.0},
            NodeCapacity({"cpu": 8.0}, {"cpu": 1.5}),
            {"cpu": 4.0},
            {"cpu": 0.5},
            id="pods-of-others-leave-less-than-the-quota",
        ),
        pytest.param(
            {"nvidia.com/gpu": 2.0},
            {},
            NodeCapacity({"cpu": 8.0}, {"cpu": 8.0}),
            {"nvidia.com/gpu": 2.0, "cpu": 8.0},
            {"nvidia.com/gpu": 2.0, "cpu": 8.0},
            id="resource-the-nodes-do-not-report-keeps-its-quota",
        ),
    ],
)
def test_combined(
    quota: dict[str, float],
    used: dict[str, float],
    nodes: NodeCapacity | None,
    capacity: dict[str, float],
    free: dict[str, float],
) -> None:
    assert combined(quota, used, nodes) == (capacity, free)


# --- the option -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "from_nodes"),
    [
        pytest.param({}, False, id="off-by-default"),
        pytest.param({"fromNodes": True}, True, id="alone"),
        pytest.param({"fromNodes": True, "maxJobs": 3, "resources": {"cpu": "4"}}, True, id="beside-limits"),
    ],
)
def test_from_nodes_option(data: dict[str, Any], from_nodes: bool) -> None:
    capacity = Capacity.model_validate(data)
    assert capacity.from_nodes is from_nodes
    assert settings_of({}, capacity).from_nodes is from_nodes


@pytest.mark.parametrize("value", ["yes", 1, "true", None])
def test_from_nodes_must_be_a_boolean(value: object) -> None:
    with pytest.raises(ValidationError, match="fromNodes\n  Input should be a valid boolean"):
        Capacity.model_validate({"fromNodes": value})


# --- as `multiqueue status` shows it ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "nodes", "shown"),
    [
        pytest.param(
            WorkerSettings(max_jobs=3, quota={"cpu": 4.0}),
            None,
            {"jobs": (1.0, 3.0), "cpu": (1.0, 4.0)},
            id="quota-only-shows-the-jobs-use",
        ),
        pytest.param(
            WorkerSettings(max_jobs=3, quota={"cpu": 4.0}, from_nodes=True),
            NodeCapacity({"cpu": 2.0, "pods": 10.0}, {"cpu": 0.5, "pods": 9.0}),
            {"jobs": (1.0, 3.0), "cpu": (2.5, 2.0), "pods": (1.0, 10.0)},
            id="nodes-show-every-pod-against-the-smaller-total",
        ),
    ],
)
def test_status_capacity_column(
    settings: WorkerSettings, nodes: NodeCapacity | None, shown: dict[str, tuple[float, float]]
) -> None:
    state = worker_state("w", settings, "Connected", Usage(1, {"cpu": 1.0}), nodes=nodes)
    assert dict(state.capacity) == shown

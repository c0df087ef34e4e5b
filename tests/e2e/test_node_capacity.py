"""A worker whose capacity is read from its Nodes: pods nobody dispatched take their share of it."""

from __future__ import annotations

import asyncio
from typing import Any, Final

import pytest

from multiqueue.api.quantities import parse_quantity
from multiqueue.api.types import JOBS, NODES, PODS, Obj
from multiqueue.dispatch import inspect
from multiqueue.dispatch.mirror import CLUSTER_LABEL, PIN_LABEL
from multiqueue.kube.informer import Handlers
from tests.e2e.conftest import BUSYBOX, Clusters, job_body
from tests.e2e.test_dispatch_failures import wait_for_event

pytestmark = pytest.mark.e2e
MANAGED_BY: Final = "multiqueue.dev/dispatcher"
FROM_NODES: Final = {
    "workers": [
        {"name": "worker-1", "labels": {"region": "eu"}, "capacity": {"fromNodes": True}},
        {"name": "worker-2", "labels": {"region": "us"}},
    ]
}


@pytest.fixture
def not_on_kind(e2e_provider: str) -> None:
    """Kind runs the real kubelet and kube-controller-manager, and its CI time is tight: these scenarios run on
    local and upstream. Asked for before the clusters, so that kind's manager is not reconfigured for nothing."""
    if e2e_provider == "kind":
        reason = "not on kind: the Nodes scenarios run on local and upstream, to keep kind's CI time"
        print(reason)
        pytest.skip(reason)


async def node_cpu(clusters: Clusters, worker: str) -> float:
    """The allocatable cpu of the worker's Nodes, in cores, once its kubelet has registered one."""
    client = clusters.client(worker)
    nodes, version = await client.list(NODES)
    if not nodes:
        async with asyncio.timeout(30):
            async for event in client.watch(NODES, resource_version=version):
                if event["type"] == "ADDED":
                    break
        nodes, _ = await client.list(NODES)
    return sum(parse_quantity(str(n["status"]["allocatable"]["cpu"])) or 0.0 for n in nodes)


def millicores(cores: float) -> str:
    return f"{int(cores * 1000)}m"


def with_cpu(body: Obj, cpu: str) -> Obj:
    for container in body["spec"]["template"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": cpu}}
    return body


def managed(name: str, cpu: str, **labels: str) -> Obj:
    body = with_cpu(job_body(name, "true", managedBy=MANAGED_BY), cpu)
    body["metadata"]["labels"] = labels
    return body


def outside_pod(name: str, cpu: str, command: str) -> Obj:
    """A pod made on the worker directly, as someone with access to it would."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": BUSYBOX,
                    "command": ["sh", "-c", command],
                    "resources": {"requests": {"cpu": cpu}},
                }
            ],
        },
    }


async def seen_by_manager(clusters: Clusters, worker: str, key: str, present: bool) -> None:
    """Until the manager's Pod cache of ``worker`` holds ``key`` (or no longer does)."""
    local = clusters.in_process("reads the manager's caches of the worker's pods")
    assert local.manager is not None
    view = local.manager.dispatcher.pool.workers[worker].node_view
    assert view is not None, f"{worker} does not read its Nodes"
    done = asyncio.Event()

    def check(_: Any = None, __: Any = None) -> None:
        if (view.pods.get(key) is not None) == present:
            done.set()

    unsubscribe = view.pods.add_handlers(Handlers(on_add=check, on_update=check, on_delete=check))
    try:
        check()
        async with asyncio.timeout(30):
            await done.wait()
    finally:
        unsubscribe()


def placed(job: Obj) -> bool:
    return CLUSTER_LABEL in (job["metadata"].get("labels") or {})


@pytest.mark.parametrize("dispatching_clusters", [FROM_NODES], indirect=True)
async def test_pod_made_outside_multiqueue_sends_the_job_elsewhere(
    not_on_kind: None, dispatching_clusters: Clusters
) -> None:
    clusters = dispatching_clusters
    cores = await node_cpu(clusters, "worker-1")
    gate = clusters.gate("hog")
    await clusters.client("worker-1").create(
        PODS,
        outside_pod("hog", millicores(cores * 0.75), f"while [ ! -f {gate} ]; do sleep 0.1; done"),
        "default",
    )
    await seen_by_manager(clusters, "worker-1", "default/hog", present=True)
    # Both workers are empty of Jobs: without the pod, least loaded (then by name) is worker-1.
    await clusters.client().create(JOBS, managed("half", millicores(cores * 0.5)), "default")
    job = await clusters.wait_for(JOBS, "default", "half", placed)
    assert job["metadata"]["labels"][CLUSTER_LABEL] == "worker-2"
    # `multiqueue status` shows what takes worker-1's cpu against its Nodes', with the manager and without.
    hog = float(int(cores * 0.75 * 1000)) / 1000
    config, contexts = clusters.reader()
    rows, _ = await inspect.status(config, contexts)
    shown = {row.name: row.capacity for row in rows}
    assert shown["worker-1"]["cpu"] == pytest.approx((hog, cores))
    assert "cpu" not in shown["worker-2"]
    local = clusters.in_process("reads the running manager's read model")
    assert local.manager is not None and local.manager.read_model is not None
    states = {state.name: state.capacity for state in local.manager.read_model.workers()}
    assert states["worker-1"]["cpu"] == pytest.approx((hog, cores))


@pytest.mark.parametrize("dispatching_clusters", [FROM_NODES], indirect=True)
async def test_job_pinned_to_the_worker_runs_once_the_outside_pod_is_gone(
    not_on_kind: None, dispatching_clusters: Clusters
) -> None:
    clusters = dispatching_clusters
    cores = await node_cpu(clusters, "worker-1")
    worker = clusters.client("worker-1")
    gate = clusters.gate("hog")
    await worker.create(
        PODS,
        outside_pod("hog", millicores(cores * 0.75), f"while [ ! -f {gate} ]; do sleep 0.1; done"),
        "default",
    )
    await seen_by_manager(clusters, "worker-1", "default/hog", present=True)
    await clusters.client().create(
        JOBS, managed("pinned", millicores(cores * 0.5), **{PIN_LABEL: "worker-1"}), "default"
    )
    pending = await wait_for_event(clusters.client(), "pinned", "Pending")
    used = int(cores * 0.75 * 1000) / 1000
    assert pending["message"] == (
        "0/2 workers can take this Job: 1 is not the pinned worker worker-1 (worker-2), "
        f"1 has no capacity now (worker-1: cpu {round(used, 3):g}/{round(cores, 3):g})"
    )
    assert not placed(await clusters.client().get(JOBS, "pinned", "default"))
    await worker.delete(PODS, "hog", "default")
    placed_job = await clusters.wait_for(JOBS, "default", "pinned", placed)
    assert placed_job["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"

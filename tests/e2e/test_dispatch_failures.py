"""The dispatcher when things fail or run short, on local clusters: lost workers, brief outages, priorities,
workers that come and go through Secrets."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from multiqueue.api.types import EVENTS, JOBS, LEASES, NAMESPACES, PODS, PRIORITY_CLASSES, SECRETS
from multiqueue.dispatch import inspect
from multiqueue.dispatch.config import Capacity, LeaderElectionConfig
from multiqueue.dispatch.lossclock import lease_name, recorded_since
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import CLUSTER_LABEL, ORIGIN_LABEL, ORIGIN_UID_ANNOTATION, PIN_LABEL
from multiqueue.dispatch.sweep import garbage
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import NotFound
from multiqueue.kube.informer import Handlers
from tests.e2e.conftest import Clusters, Gate, has_condition, job_body
from tests.e2e.test_dispatch import managed, placed

pytestmark = pytest.mark.e2e
Obj = dict[str, Any]


async def restart_manager(clusters: Clusters, **changes: Any) -> Manager:
    """Run the in-process manager again with ``changes`` to its config (timeouts shortened for the test), for a
    scenario that then looks inside it."""
    assert clusters.local is not None, "looks inside the in-process manager"
    manager = await clusters.restart_manager(**changes)
    assert manager is not None
    return manager


async def wait_for_event(
    client: KubeClient, name: str, reason: str, namespace: str = "default", within: float = 30
) -> Obj:
    """The first Event about ``name`` with ``reason``, waiting for it on a watch."""
    selector = f"involvedObject.name={name},reason={reason}"
    async with asyncio.timeout(within):
        while True:
            events, rv = await client.list(EVENTS, namespace, field_selector=selector)
            if events:
                return events[0]
            async for event in client.watch(EVENTS, namespace, resource_version=rv, field_selector=selector):
                return dict(event["object"])


def gated(name: str, gate: Gate, **spec: Any) -> Obj:
    return managed(name, f"while [ ! -f {gate} ]; do sleep 0.1; done", **spec)


async def test_jobs_of_a_lost_worker_finish_on_another_and_its_stale_mirror_goes(
    dispatching_clusters: Clusters, tmp_path: Path
) -> None:
    dispatching_clusters.in_process(
        "stops a worker's API server and reads the dispatcher's redispatch count (test_kind pauses a worker's node instead)"
    )
    clusters = dispatching_clusters
    assert clusters.local is not None
    manager = await restart_manager(clusters, worker_lost_timeout=2.0)
    gate = clusters.gate("gate")
    # Index 0 finishes at once, index 1 runs until the gate opens: the loss comes between the two.
    command = f'[ "$JOB_COMPLETION_INDEX" = 0 ] && exit 0; while [ ! -f {gate} ]; do sleep 0.1; done'
    body = managed("moving", command, completions=2, parallelism=2, completionMode="Indexed")
    await clusters.client().create(JOBS, body, "default")
    user = await clusters.wait_for(
        JOBS, "default", "moving", lambda j: placed(j) and j.get("status", {}).get("completedIndexes") == "0"
    )
    lost = user["metadata"]["labels"][CLUSTER_LABEL]
    other = "worker-2" if lost == "worker-1" else "worker-1"

    await clusters.local.stop_server(lost)
    stopped = time.monotonic()
    moved = await clusters.wait_for(
        JOBS, "default", "moving", lambda j: j["metadata"]["labels"].get(CLUSTER_LABEL) == other, within=60
    )
    redispatch_seconds = time.monotonic() - stopped
    event = await wait_for_event(clusters.client(), "moving", "Redispatched")
    assert event["type"] == "Warning" and f"worker {lost} was unreachable" in event["message"]
    assert not any(c.get("type") in ("Complete", "Failed") for c in moved["status"].get("conditions") or [])
    await gate.open()
    done = await clusters.wait_for(JOBS, "default", "moving", has_condition("Complete"), within=60)
    assert (done["status"]["succeeded"], done["status"]["completedIndexes"]) == (2, "0,1")
    pods, _ = await clusters.client(other).list(
        PODS, "default", label_selector="batch.kubernetes.io/job-name=moving"
    )
    indexes = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods}
    assert indexes == {"1"}, "the index finished on the lost worker is not run again"
    finished_seconds = time.monotonic() - stopped

    # The lost worker comes back: its mirror (which went on running there, out of reach) is deleted, and the
    # user's finished Job is not touched by it.
    await clusters.local.start_server(lost)
    await clusters.wait_gone(JOBS, "default", "moving", cluster=lost, within=60)
    after = await clusters.client().get(JOBS, "moving", "default")
    assert after["status"] == done["status"]
    dispatcher = manager.dispatcher
    assert dispatcher is not None and dispatcher.metrics.redispatched[lost] == 1
    print(
        f"\nworker lost after 2.0 s: re-dispatched in {redispatch_seconds:.1f} s, Complete in {finished_seconds:.1f} s"
    )


async def test_a_brief_outage_moves_nothing(dispatching_clusters: Clusters, tmp_path: Path) -> None:
    dispatching_clusters.in_process(
        "stops a worker's API server and follows the in-process informer's health"
    )
    clusters = dispatching_clusters
    assert clusters.local is not None
    manager = await restart_manager(clusters, worker_lost_timeout=60.0)
    dispatcher = manager.dispatcher
    assert dispatcher is not None
    gate = clusters.gate("gate")
    await clusters.client().create(JOBS, gated("staying", gate), "default")
    user = await clusters.wait_for(JOBS, "default", "staying", placed)
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    await clusters.wait_for(JOBS, "default", "staying", lambda j: True, cluster=worker)
    informer = dispatcher.pool.workers[worker].mirrors["Job"]

    await clusters.local.stop_server(worker)
    async with asyncio.timeout(30):
        while informer.last_error is None:
            informer.health_changed.clear()
            await informer.health_changed.wait()
    await clusters.local.start_server(worker)
    async with asyncio.timeout(60):
        while not informer.healthy:
            informer.health_changed.clear()
            await informer.health_changed.wait()
    await gate.open()
    done = await clusters.wait_for(JOBS, "default", "staying", has_condition("Complete"), within=60)
    assert done["metadata"]["labels"][CLUSTER_LABEL] == worker
    assert dispatcher.metrics.redispatched == {}
    events, _ = await clusters.client().list(
        EVENTS, "default", field_selector="involvedObject.name=staying,reason=Redispatched"
    )
    assert events == []


async def test_waiting_jobs_get_capacity_by_priority_then_age(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    # worker-1 takes one Job at a time and worker-2 none, so every Job here waits for worker-1.
    await clusters.set_capacity({"worker-1": Capacity(max_jobs=1), "worker-2": Capacity(max_jobs=0)})
    management = clusters.client()
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high"},
        "value": 1000,
    }
    # The class exists on the worker too, as an admin sets it up: the mirror's pods name it, and kube-apiserver's
    # Priority admission refuses pods that name a class the cluster lacks.
    for cluster in ("management", "worker-1"):
        await clusters.client(cluster).create(PRIORITY_CLASSES, high)
    gate = clusters.gate("gate")
    await management.create(JOBS, gated("blocker", gate), "default")
    await clusters.wait_for(JOBS, "default", "blocker", placed)
    await management.create(JOBS, gated("low", clusters.gate("low-gate")), "default")
    await wait_for_event(management, "low", "Pending")
    urgent = gated("urgent", clusters.gate("urgent-gate"))
    urgent["spec"]["template"]["spec"]["priorityClassName"] = "high"
    await management.create(JOBS, urgent, "default")
    pending = await wait_for_event(management, "urgent", "Pending")
    assert pending["message"] == (
        "0/2 workers can take this Job: 1 takes no Jobs (worker-2: maxJobs 0), "
        "1 has no capacity now (worker-1: jobs 1/1)"
    )

    await gate.open()
    await clusters.wait_for(JOBS, "default", "urgent", placed, within=60)
    low = await management.get(JOBS, "low", "default")
    assert not placed(low), "the older Job of lower priority still waits"
    await clusters.gate("urgent-gate").open()
    await clusters.gate("low-gate").open()
    await clusters.wait_for(JOBS, "default", "low", has_condition("Complete"), within=60)


def worker_kubeconfig(clusters: Clusters, context: str) -> dict[str, Any]:
    """One context of the local kubeconfig, self-contained (CA data and token inline), as an admin would hand it over."""
    full = yaml.safe_load(clusters.kubeconfig.read_text())
    entry = next(c for c in full["contexts"] if c["name"] == context)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [c for c in full["clusters"] if c["name"] == entry["context"]["cluster"]],
        "users": [u for u in full["users"] if u["name"] == entry["context"]["user"]],
        "contexts": [entry],
        "current-context": context,
    }


def worker_secret(name: str, worker: str, kubeconfig: dict[str, Any], **annotations: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": {CLUSTER_LABEL: worker}, "annotations": annotations},
        "data": {"kubeconfig": base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()},
    }


async def test_a_worker_added_through_a_secret_takes_waiting_jobs_and_drains_when_it_goes(
    dispatching_clusters: Clusters,
) -> None:
    dispatching_clusters.in_process("starts the in-process manager with no workers and follows its pool")
    clusters = dispatching_clusters
    manager = await restart_manager(clusters, workers=[])
    dispatcher = manager.dispatcher
    assert dispatcher is not None
    management = clusters.client()
    await management.get(NAMESPACES, "multiqueue-system")  # local up makes the manager's namespace
    await management.create(JOBS, managed("early", "true"), "default")
    waiting = await wait_for_event(management, "early", "NoWorker")
    assert (waiting["type"], waiting["message"]) == (
        "Warning",
        "0/0 workers can take this Job: no worker is configured",
    )

    refused = worker_secret(
        "bad-worker",
        "worker-1",
        {
            **worker_kubeconfig(clusters, "worker-1"),
            "users": [{"name": "u", "user": {"exec": {"command": "true"}}}],
        },
    )
    await management.create(SECRETS, refused, "multiqueue-system")
    event = await wait_for_event(management, "bad-worker", "BadKubeConfig", "multiqueue-system")
    assert "runs the credential plugin exec" in event["message"]

    secret = worker_secret(
        "worker-2",
        "worker-2",
        worker_kubeconfig(clusters, "worker-2"),
        **{"multiqueue.dev/labels": json.dumps({"region": "us"})},
    )
    await management.create(SECRETS, secret, "multiqueue-system")
    done = await clusters.wait_for(JOBS, "default", "early", has_condition("Complete"), within=60)
    assert done["metadata"]["labels"][CLUSTER_LABEL] == "worker-2"
    view = next(v for v in dispatcher.worker_views() if v.name == "worker-2")
    assert view.labels == {"region": "us"}
    rows, _ = await inspect.status(manager.config)
    assert {(r.name, r.active) for r in rows} == {("worker-1", "False (BadKubeConfig)"), ("worker-2", "True")}

    await management.delete(SECRETS, "worker-2", "multiqueue-system")
    await clusters.wait_gone(JOBS, "default", "early", cluster="worker-2")
    async with asyncio.timeout(30):
        while "worker-2" in dispatcher.pool.workers:
            dispatcher.pool.changed.clear()
            await dispatcher.pool.changed.wait()
    await management.create(JOBS, managed("late", "true"), "default")
    late = await wait_for_event(management, "late", "NoWorker")
    assert late["message"] == "0/0 workers can take this Job: no worker is configured"
    with pytest.raises(NotFound):
        await clusters.client("worker-2").get(JOBS, "late", "default")


async def test_the_garbage_sweep_collects_orphans_only(dispatching_clusters: Clusters) -> None:
    """The periodic sweep on its own: this manager does not lead (another holds the Lease), so no sync runs and
    only :meth:`Dispatcher.collect_garbage` can delete anything."""
    dispatching_clusters.in_process("calls the in-process dispatcher's sweep")
    clusters = dispatching_clusters
    assert clusters.local is not None, "drives the in-process manager's sweep"
    management = clusters.client()
    await management.get(NAMESPACES, "multiqueue-system")  # local up makes the manager's namespace
    await management.create(
        LEASES,
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "multiqueue-manager"},
            "spec": {
                "holderIdentity": "another-manager",
                "leaseDurationSeconds": 3600,
                # A MicroTime: kube-apiserver refuses one without the microseconds.
                "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        },
        "multiqueue-system",
    )
    election = LeaderElectionConfig.model_validate({"enabled": True, "leaseDurationSeconds": 3600})
    manager = await restart_manager(clusters, leader_election=election)
    dispatcher = manager.dispatcher
    assert dispatcher is not None and not manager.leading
    await management.create(JOBS, managed("kept", "true", suspend=True), "default")
    user = await management.get(JOBS, "kept", "default")
    arrived = asyncio.Event()
    informer = dispatcher.pool.workers["worker-1"].mirrors["Job"]
    informer.add_handlers(Handlers(on_add=lambda _o: arrived.set()))
    users = dispatcher.users["Job"]  # the sweep must know "kept" has its user, as well as see its mirror
    users.add_handlers(Handlers(on_add=lambda _o: arrived.set()))
    worker = clusters.client("worker-1")
    for name, origin, uid in (
        ("orphan", "multiqueue", "gone"),
        ("foreign", "someone-else", "gone"),
        ("kept", "multiqueue", user["metadata"]["uid"]),
    ):
        body = job_body(name, "true", suspend=True)
        body["metadata"].update(labels={ORIGIN_LABEL: origin}, annotations={ORIGIN_UID_ANNOTATION: uid})
        await worker.create(JOBS, body, "default")
    async with asyncio.timeout(30):
        while {"default/orphan", "default/kept"} - set(informer.keys()) or users.get("default/kept") is None:
            arrived.clear()
            await arrived.wait()
    assert [m["metadata"]["name"] for _, _, m in garbage(dispatcher.pool, dispatcher.users)] == ["orphan"]
    assert await dispatcher.collect_garbage() == 1
    await clusters.wait_gone(JOBS, "default", "orphan", cluster="worker-1")
    assert (await worker.get(JOBS, "foreign", "default"))["metadata"]["labels"][
        ORIGIN_LABEL
    ] == "someone-else"
    assert (await worker.get(JOBS, "kept", "default"))["metadata"]["uid"]


async def test_a_hung_worker_holds_up_no_other(
    dispatching_clusters: Clusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    dispatching_clusters.in_process("patches the in-process dispatcher")
    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    dispatcher = clusters.local.manager.dispatcher
    assert dispatcher is not None
    never = asyncio.Event()

    async def never_answers(*_args: Any, **_kwargs: Any) -> Obj:
        await never.wait()  # a worker that accepts the connection and then says nothing
        raise AssertionError("unreachable")

    monkeypatch.setattr(dispatcher.pool.workers["worker-2"].client, "create", never_answers)
    for i in range(2 * dispatcher.settings.workers_count):
        body = managed(f"stuck-{i}", "true")
        body["metadata"]["labels"] = {PIN_LABEL: "worker-2"}
        await clusters.client().create(JOBS, body, "default")
    for i in range(3):
        body = managed(f"free-{i}", "true")
        body["metadata"]["annotations"] = {"multiqueue.dev/cluster-selector": "region=eu"}
        await clusters.client().create(JOBS, body, "default")
    for i in range(3):
        done = await clusters.wait_for(JOBS, "default", f"free-{i}", has_condition("Complete"), within=30)
        assert done["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"
    stuck = await clusters.client().get(JOBS, "stuck-0", "default")
    assert not has_condition("Complete")(stuck)


async def test_a_restarted_manager_goes_on_counting_how_long_a_worker_has_been_gone(
    dispatching_clusters: Clusters,
) -> None:
    """The loss clock lives in the management cluster: a new manager (after a crash or a takeover) counts the
    worker-lost timeout from when the worker really stopped answering, not from its own start."""
    dispatching_clusters.in_process(
        "stops a worker's API server and reads the restarted in-process manager's pool (test_kind checks the same through a takeover)"
    )
    clusters = dispatching_clusters
    assert clusters.local is not None
    manager = await restart_manager(clusters, worker_lost_timeout=600.0)
    namespace = manager.config.lease_namespace
    name = lease_name(manager.config.name, "worker-2")

    await clusters.local.stop_server("worker-2")
    lease = await clusters.wait_for(
        LEASES, namespace, name, lambda lease: recorded_since(lease) is not None, within=30
    )
    recorded = recorded_since(lease)
    assert recorded is not None
    manager = await restart_manager(clusters, worker_lost_timeout=600.0)
    assert manager.dispatcher is not None
    worker = manager.dispatcher.pool.workers["worker-2"]
    assert worker.inactive_since == pytest.approx(recorded, abs=0.01)
    assert [v.lost for v in manager.dispatcher.worker_views() if v.name == "worker-2"] == [False]

    # Back again: the record goes, so a later outage starts a fresh count.
    await clusters.local.start_server("worker-2")
    await clusters.wait_for(LEASES, namespace, name, lambda lease: recorded_since(lease) is None, within=30)
    assert worker.inactive_since is None

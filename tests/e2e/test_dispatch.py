"""The dispatcher end to end on local clusters: Jobs with our managedBy run on a worker, status comes back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.types import JOBS, PODS
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.manager import Manager
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    FINALIZER_PREFIX,
    ORIGIN_LABEL,
    ORIGIN_UID_ANNOTATION,
    PIN_LABEL,
)
from multiqueue.kube.errors import NotFound
from tests.e2e.conftest import Clusters, condition, has_condition, job_body

MIRROR_FINALIZER = FINALIZER_PREFIX + "multiqueue"  # the finalizer of the manager named multiqueue


pytestmark = pytest.mark.e2e
MANAGED_BY = "multiqueue.dev/dispatcher"


def managed(name: str, command: str = "echo $JOB_COMPLETION_INDEX", **spec: Any) -> dict[str, Any]:
    body = job_body(name, command, managedBy=MANAGED_BY, **spec)
    return body


def placed(job: dict[str, Any]) -> bool:
    return CLUSTER_LABEL in (job["metadata"].get("labels") or {}) and MIRROR_FINALIZER in (
        job["metadata"].get("finalizers") or []
    )


async def test_runs_on_a_worker_syncs_status_and_cleans_up(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    management = clusters.client("management")
    created = await management.create(
        JOBS, managed("indexed", completionMode="Indexed", completions=3, parallelism=2), "default"
    )
    user = await clusters.wait_for(JOBS, "default", "indexed", placed)
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    done = await clusters.wait_for(JOBS, "default", "indexed", has_condition("Complete"))
    assert done["status"]["completedIndexes"] == "0-2"
    assert done["status"]["succeeded"] == 3
    assert condition(done, "SuccessCriteriaMet") is not None
    # The finished mirror stays for its TTL (its logs can be read), held by the finalizer; deleting the user's
    # Job takes both.
    kept = await clusters.client(worker).get(JOBS, "indexed", "default")
    assert condition(kept, "Complete") is not None and MIRROR_FINALIZER in done["metadata"]["finalizers"]
    await management.delete(JOBS, "indexed", "default", propagation="Background")
    await clusters.wait_gone(JOBS, "default", "indexed", cluster=worker)
    await clusters.wait_gone(JOBS, "default", "indexed")
    # The management cluster's own Job controller never ran it.
    local_pods, _ = await management.list(PODS, "default")
    assert local_pods == []
    assert created["metadata"]["uid"] == done["metadata"]["uid"]


async def test_mirror_carries_origin_and_drops_managed_by(
    dispatching_clusters: Clusters, tmp_path: Path
) -> None:
    clusters = dispatching_clusters
    gate = clusters.gate("gate")
    user = await clusters.client().create(
        JOBS, managed("slow", f"while [ ! -f {gate} ]; do sleep 0.1; done"), "default"
    )
    placed_job = await clusters.wait_for(JOBS, "default", "slow", placed)
    worker = placed_job["metadata"]["labels"][CLUSTER_LABEL]
    mirror = await clusters.wait_for(JOBS, "default", "slow", lambda j: True, cluster=worker)
    assert "managedBy" not in mirror["spec"]
    assert mirror["metadata"]["labels"][ORIGIN_LABEL] == "multiqueue"
    assert mirror["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] == user["metadata"]["uid"]
    assert mirror["metadata"]["uid"] != user["metadata"]["uid"]
    assert not mirror["metadata"].get("ownerReferences")
    await gate.open()
    await clusters.wait_for(JOBS, "default", "slow", has_condition("Complete"))


async def test_suspend_and_resume_keep_progress(dispatching_clusters: Clusters, tmp_path: Path) -> None:
    clusters = dispatching_clusters
    management = clusters.client()
    gate = clusters.gate("go")
    command = f'if [ "$JOB_COMPLETION_INDEX" -lt 3 ] || [ -f {gate} ]; then echo ok; else sleep 60; fi'
    await management.create(
        JOBS, managed("pausable", command, completionMode="Indexed", completions=6, parallelism=6), "default"
    )
    user = await clusters.wait_for(
        JOBS, "default", "pausable", lambda j: (j.get("status") or {}).get("completedIndexes") == "0-2"
    )
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    await management.patch(JOBS, "pausable", {"spec": {"suspend": True}}, "default")
    suspended = await clusters.wait_for(
        JOBS,
        "default",
        "pausable",
        lambda j: has_condition("Suspended")(j) and not (j.get("status") or {}).get("active"),
    )
    assert suspended["status"]["completedIndexes"] == "0-2"
    await gate.open()
    await management.patch(JOBS, "pausable", {"spec": {"suspend": False}}, "default")
    done = await clusters.wait_for(JOBS, "default", "pausable", has_condition("Complete"))
    assert done["status"]["completedIndexes"] == "0-5"
    assert done["metadata"]["labels"][CLUSTER_LABEL] == worker, "resumed on the same worker, same mirror"


async def test_delete_removes_the_mirror_and_its_running_pods(dispatching_clusters: Clusters) -> None:
    """Deleting a running Job as kubectl does (Background): its mirror and the mirror's pods go within 10 s."""
    clusters = dispatching_clusters
    management = clusters.client()
    await management.create(JOBS, managed("doomed", "sleep 60", parallelism=2, completions=2), "default")
    user = await clusters.wait_for(JOBS, "default", "doomed", placed)
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    await clusters.wait_for(
        JOBS, "default", "doomed", lambda j: (j.get("status") or {}).get("ready") == 2, cluster=worker
    )
    pods, _ = await clusters.client(worker).list(
        PODS, "default", label_selector="batch.kubernetes.io/job-name=doomed"
    )
    assert len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)
    deleted = time.monotonic()
    await management.delete(JOBS, "doomed", "default", propagation="Background")
    for pod in pods:
        left = 10.0 - (time.monotonic() - deleted)
        await clusters.wait_gone(
            PODS, "default", pod["metadata"]["name"], cluster=worker, within=max(left, 0.01)
        )
    await clusters.wait_gone(JOBS, "default", "doomed", cluster=worker, within=10.0)
    await clusters.wait_gone(JOBS, "default", "doomed", within=10.0)
    print(f"\nrunning pods gone from the worker {time.monotonic() - deleted:.1f} s after the delete")


async def test_created_suspended_waits_until_resumed(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    management = clusters.client()
    await management.create(JOBS, managed("later", "true", suspend=True), "default")
    # Another Job dispatched after it proves the dispatcher has looked at the suspended one.
    await management.create(JOBS, managed("now", "true"), "default")
    await clusters.wait_for(JOBS, "default", "now", has_condition("Complete"))
    waiting = await management.get(JOBS, "later", "default")
    assert CLUSTER_LABEL not in (waiting["metadata"].get("labels") or {})
    await management.patch(JOBS, "later", {"spec": {"suspend": False}}, "default")
    await clusters.wait_for(JOBS, "default", "later", has_condition("Complete"))


async def test_unmanaged_job_runs_on_the_management_cluster_and_other_owners_are_left_alone(
    dispatching_clusters: Clusters,
) -> None:
    clusters = dispatching_clusters
    management = clusters.client()
    await management.create(JOBS, job_body("local", "true"), "default")
    await management.create(JOBS, job_body("foreign", "true", managedBy="example.com/other"), "default")
    local = await clusters.wait_for(JOBS, "default", "local", has_condition("Complete"))
    assert CLUSTER_LABEL not in (local["metadata"].get("labels") or {})
    foreign = await management.get(JOBS, "foreign", "default")
    assert not foreign["metadata"].get("finalizers") and not foreign.get("status")
    for worker in ("worker-1", "worker-2"):
        with pytest.raises(NotFound):
            await clusters.client(worker).get(JOBS, "foreign", "default")


async def test_foreign_same_named_job_on_a_worker_is_never_touched(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    worker = clusters.client("worker-1")
    foreign = await worker.create(JOBS, job_body("twin", "sleep 30", suspend=True), "default")
    await clusters.client().create(
        JOBS,
        {**managed("twin", "true"), "metadata": {"name": "twin", "labels": {PIN_LABEL: "worker-1"}}},
        "default",
    )
    user = await clusters.wait_for(JOBS, "default", "twin", placed)
    assert user["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"
    still = await worker.get(JOBS, "twin", "default")
    assert still["metadata"]["uid"] == foreign["metadata"]["uid"]
    assert still["spec"]["suspend"] is True


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        pytest.param({PIN_LABEL: "worker-2"}, {}, "worker-2", id="pinned"),
        pytest.param({CLUSTER_LABEL: "worker-2"}, {}, "worker-2", id="pinned-the-older-way"),
        pytest.param({}, {"multiqueue.dev/cluster-selector": "region=eu"}, "worker-1", id="selector"),
    ],
)
async def test_cluster_pin_and_selector(
    dispatching_clusters: Clusters, labels: dict[str, str], annotations: dict[str, str], expected: str
) -> None:
    clusters = dispatching_clusters
    body = managed("aimed", "true")
    body["metadata"].update(labels=labels, annotations=annotations)
    await clusters.client().create(JOBS, body, "default")
    done = await clusters.wait_for(JOBS, "default", "aimed", has_condition("Complete"))
    assert done["metadata"]["labels"][CLUSTER_LABEL] == expected
    if labels:
        assert done["metadata"]["labels"][PIN_LABEL] == expected, "the pin keeps a label of its own"


async def test_manager_restart_mid_flight_makes_no_second_mirror(
    dispatching_clusters: Clusters, tmp_path: Path
) -> None:
    clusters = dispatching_clusters
    gate = clusters.gate("gate")
    await clusters.client().create(
        JOBS, managed("survivor", f"while [ ! -f {gate} ]; do sleep 0.1; done"), "default"
    )
    user = await clusters.wait_for(JOBS, "default", "survivor", placed)
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    first = await clusters.wait_for(JOBS, "default", "survivor", lambda j: True, cluster=worker)
    await clusters.restart_manager()
    await gate.open()
    await clusters.wait_for(JOBS, "default", "survivor", has_condition("Complete"))
    other = "worker-2" if worker == "worker-1" else "worker-1"
    with pytest.raises(NotFound):
        await clusters.client(other).get(JOBS, "survivor", "default")
    kept = await clusters.client(worker).get(JOBS, "survivor", "default")
    assert kept["metadata"]["uid"] == first["metadata"]["uid"], (
        "the one mirror ran it, kept since it finished"
    )


async def test_status_and_logs_for_people(dispatching_clusters: Clusters, tmp_path: Path) -> None:
    from multiqueue.dispatch import inspect, joblogs

    clusters = dispatching_clusters
    config, contexts = clusters.reader()
    gate = clusters.gate("gate")
    command = f"echo hello from $JOB_COMPLETION_INDEX; while [ ! -f {gate} ]; do sleep 0.1; done"
    await clusters.client().create(
        JOBS, managed("chatty", command, completionMode="Indexed", completions=2, parallelism=2), "default"
    )
    user = await clusters.wait_for(
        JOBS, "default", "chatty", lambda j: (j.get("status") or {}).get("active") == 2
    )
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    workers, rows = await inspect.status(config, contexts)
    assert {w.name: w.running for w in workers}[worker] == 1
    assert [(r.kind, r.key, r.worker, r.state, r.completions) for r in rows] == [
        ("Job", "default/chatty", worker, "Running", "0/2")
    ]
    # Once each pod's container runs (an active pod may still be creating it, and a kubelet refuses its log
    # then), follow its log until its first line is there; then read the logs as a person would.
    worker_client = clusters.client(worker)
    pods, _ = await worker_client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=chatty")
    for pod in pods:
        await clusters.wait_for(PODS, "default", pod["metadata"]["name"], _container_started, cluster=worker)
    async with asyncio.timeout(20):
        for pod in pods:
            async for _line in worker_client.follow_log(pod["metadata"]["name"], "default"):
                break
    found = await joblogs.logs(config, "chatty", "default", joblogs.LogOptions(), contexts)
    assert [text.strip() for _, text in found] == ["hello from 0", "hello from 1"]
    only = await joblogs.logs(config, "chatty", "default", joblogs.LogOptions(index=1), contexts)
    assert [text.strip() for _, text in only] == ["hello from 1"]
    with pytest.raises(joblogs.LogsError):
        await joblogs.logs(config, "missing", "default", joblogs.LogOptions(), contexts)
    await gate.open()
    await clusters.wait_for(JOBS, "default", "chatty", has_condition("Complete"))


def _container_started(pod: dict[str, Any]) -> bool:
    """The pod's container runs or has run, so its log can be read."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and "waiting" not in (statuses[0].get("state") or {"waiting": {}})


@pytest.mark.parametrize("dispatching_clusters", [{"namespaces": ["team-a"]}], indirect=True)
async def test_namespaces_outside_the_config_are_not_dispatched(dispatching_clusters: Clusters) -> None:
    from multiqueue.api.types import NAMESPACES

    clusters = dispatching_clusters
    management = clusters.client()
    await management.create(NAMESPACES, {"metadata": {"name": "team-a"}})
    await management.create(JOBS, managed("outside", "true"), "default")
    await management.create(JOBS, managed("inside", "true"), "team-a")
    await clusters.wait_for(JOBS, "team-a", "inside", has_condition("Complete"))
    outside = await management.get(JOBS, "outside", "default")
    assert CLUSTER_LABEL not in (outside["metadata"].get("labels") or {})


async def test_garbage_collection_deletes_orphaned_mirrors_only(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    worker = clusters.client("worker-1")
    orphan = job_body("orphan", "sleep 60", suspend=True)
    orphan["metadata"].update(
        labels={ORIGIN_LABEL: "multiqueue"}, annotations={ORIGIN_UID_ANNOTATION: "gone-uid"}
    )
    await worker.create(JOBS, orphan, "default")
    other = job_body("other-origin", "sleep 60", suspend=True)
    other["metadata"].update(
        labels={ORIGIN_LABEL: "someone-else"}, annotations={ORIGIN_UID_ANNOTATION: "gone-uid"}
    )
    await worker.create(JOBS, other, "default")
    await clusters.restart_manager(gc_interval=0.2)
    await clusters.wait_gone(JOBS, "default", "orphan", cluster="worker-1")
    still = await worker.get(JOBS, "other-origin", "default")
    assert still["metadata"]["labels"][ORIGIN_LABEL] == "someone-else"


async def test_recreated_job_gets_a_fresh_mirror(dispatching_clusters: Clusters, tmp_path: Path) -> None:
    clusters = dispatching_clusters
    management = clusters.client()
    body = managed("again", "sleep 60")
    body["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
    first = await management.create(JOBS, body, "default")
    await clusters.wait_for(JOBS, "default", "again", lambda j: True, cluster="worker-1")
    # The user removes the Job for good (finalizer too, as `kubectl patch` could) and creates it again.
    await management.patch(JOBS, "again", {"metadata": {"finalizers": None}}, "default")
    await management.delete(JOBS, "again", "default", propagation="Background")
    await clusters.wait_gone(JOBS, "default", "again")
    second = await management.create(
        JOBS,
        {**body, "spec": {**body["spec"], "template": job_body("x", "true")["spec"]["template"]}},
        "default",
    )
    mirror = await clusters.wait_for(
        JOBS,
        "default",
        "again",
        lambda m: m["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] == second["metadata"]["uid"],
        cluster="worker-1",
    )
    assert mirror["metadata"]["annotations"][ORIGIN_UID_ANNOTATION] != first["metadata"]["uid"]
    await clusters.wait_for(JOBS, "default", "again", has_condition("Complete"))


async def test_two_managers_one_leads_and_the_other_takes_over(dispatching_clusters: Clusters) -> None:
    dispatching_clusters.in_process(
        "runs a second manager in this process beside the first (on kind the Deployment's two replicas do, in test_kind)"
    )
    import time

    from multiqueue.api.types import NAMESPACES

    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    base = clusters.local.manager.config
    await clusters.local.manager.stop()
    clusters.local.manager = None
    # local up made the manager's namespace, as deploy/ does on a real cluster; the Lease lives there.
    await clusters.client().get(NAMESPACES, "multiqueue-system")
    election = base.leader_election.model_copy(
        update={"enabled": True, "lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.2}
    )
    config = base.model_copy(update={"leader_election": election})
    managers = [Manager(config), Manager(config)]
    # What else runs only on the leader (the embedded controllers in `multiqueue manager`).
    running: list[str] = []
    started = asyncio.Event()

    def leader_only(manager: Manager) -> Any:
        async def work() -> None:
            running.append(manager.identity)
            started.set()
            await asyncio.Event().wait()

        return work

    for manager in managers:
        await manager.start()
        manager.leader_work.add("probe", leader_only(manager))
    try:
        await clusters.client().create(JOBS, managed("first", "true"), "default")
        await clusters.wait_for(JOBS, "default", "first", has_condition("Complete"))
        leaders = [m for m in managers if m.leading]
        assert len(leaders) == 1
        leader, follower = leaders[0], next(m for m in managers if m is not leaders[0])
        assert running == [leader.identity]
        started.clear()
        # The leader dies: its connection goes first, so it cannot hand the Lease back.
        assert leader.management is not None
        await leader.management.close()
        died = time.monotonic()
        await leader.stop()
        await clusters.client().create(JOBS, managed("second", "true"), "default")
        await clusters.wait_for(JOBS, "default", "second", has_condition("Complete"), within=30)
        assert follower.leading
        await asyncio.wait_for(started.wait(), 10)
        assert running == [leader.identity, follower.identity]
        took = time.monotonic() - died
        assert took < 30
        print(f"\nleader died: the next Job Complete {took:.1f} s later (lease duration 2.0 s)")
    finally:
        for manager in managers:
            await manager.stop()


async def test_a_job_that_fits_nowhere_waits_for_capacity(dispatching_clusters: Clusters) -> None:
    from multiqueue.api.types import EVENTS

    clusters = dispatching_clusters
    await clusters.set_capacity({w: Capacity(max_jobs=1) for w in ("worker-1", "worker-2")})
    management = clusters.client()
    gate = clusters.gate("gate")
    for name in ("one", "two"):
        await management.create(JOBS, managed(name, f"while [ ! -f {gate} ]; do sleep 0.1; done"), "default")
        await clusters.wait_for(JOBS, "default", name, placed)
    await management.create(JOBS, managed("three", "true"), "default")
    selector = "involvedObject.name=three,reason=Pending"
    events, rv = await management.list(EVENTS, "default", field_selector=selector)
    if not events:
        async with asyncio.timeout(30):
            async for event in management.watch(
                EVENTS, "default", resource_version=rv, field_selector=selector
            ):
                events = [event["object"]]
                break
    assert events[0]["message"] == (
        "0/2 workers can take this Job: 2 have no capacity now (worker-1: jobs 1/1, worker-2: jobs 1/1)"
    )
    waiting = await management.get(JOBS, "three", "default")
    assert CLUSTER_LABEL not in (waiting["metadata"].get("labels") or {})
    await gate.open()
    await clusters.wait_for(JOBS, "default", "three", has_condition("Complete"))


async def test_an_unreachable_worker_is_inactive_with_its_reason(dispatching_clusters: Clusters) -> None:
    dispatching_clusters.in_process(
        "stops a worker's API server and reads the in-process dispatcher's view of it"
    )

    clusters = dispatching_clusters
    assert clusters.local is not None and clusters.local.manager is not None
    dispatcher = clusters.local.manager.dispatcher
    assert dispatcher is not None
    worker_2 = dispatcher.pool.workers["worker-2"].mirrors["Job"]
    await clusters.local.stop_server("worker-2")

    def worker_2_view() -> tuple[bool, str]:
        view = next(v for v in dispatcher.worker_views() if v.name == "worker-2")
        return view.active, view.reason

    seen = []
    async with asyncio.timeout(30):
        # The informer's watch breaks at once; its next LIST fails and records why. A kube-apiserver that is
        # shutting down answers 503 first (ServerError); once it is gone, the connection is refused.
        while worker_2.last_error is None or worker_2_view() != (False, "ClientConnectionFailed"):
            worker_2.health_changed.clear()
            await worker_2.health_changed.wait()
            if worker_2.last_error is not None:
                seen.append(worker_2_view())
    assert all(active is False for active, _ in seen), seen
    body = managed("pinned-away", "true")
    body["metadata"]["labels"] = {PIN_LABEL: "worker-2"}
    await clusters.client().create(JOBS, body, "default")
    await clusters.client().create(JOBS, managed("elsewhere", "true"), "default")
    done = await clusters.wait_for(JOBS, "default", "elsewhere", has_condition("Complete"), within=30)
    assert done["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"
    waiting = await clusters.client().get(JOBS, "pinned-away", "default")
    assert MIRROR_FINALIZER not in (waiting["metadata"].get("finalizers") or [])

"""The embedded Job controller and the process kubelet, end to end on a local cluster."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.jobs import TRACKING_FINALIZER
from multiqueue.api.meta import parse_time
from multiqueue.api.types import JOBS, PODS
from tests.e2e.conftest import Clusters, condition, has_condition, job_body

pytestmark = pytest.mark.e2e


async def test_indexed_job_completes_and_logs_show_each_index(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    await client.create(
        JOBS,
        job_body(
            "echo", "echo index=$JOB_COMPLETION_INDEX", completionMode="Indexed", completions=5, parallelism=2
        ),
        "default",
    )
    job = await local_clusters.wait_for(JOBS, "default", "echo", has_condition("Complete"))
    assert job["status"]["completedIndexes"] == "0-4"
    assert job["status"]["succeeded"] == 5
    assert condition(job, "SuccessCriteriaMet") is not None
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=echo")
    assert sorted(
        p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods
    ) == list("01234")
    assert all(not p["metadata"].get("finalizers") for p in pods), "every pod was counted and released"
    if shutil.which("kubectl"):
        index_2 = next(
            p for p in pods if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "2"
        )
        logs = await local_clusters.kubectl("logs", index_2["metadata"]["name"])
        assert logs.strip() == "index=2"


async def test_suspend_part_way_then_resume_keeps_completed_indexes(
    local_clusters: Clusters, tmp_path: Path
) -> None:
    client = local_clusters.client()
    gate = local_clusters.gate("go")
    command = f'if [ "$JOB_COMPLETION_INDEX" -lt 2 ] || [ -f {gate} ]; then echo done; else sleep 60; fi'
    await client.create(
        JOBS, job_body("pausable", command, completionMode="Indexed", completions=4, parallelism=4), "default"
    )
    await local_clusters.wait_for(
        JOBS, "default", "pausable", lambda j: (j.get("status") or {}).get("completedIndexes") == "0,1"
    )
    await client.patch(JOBS, "pausable", {"spec": {"suspend": True}}, "default")
    suspended = await local_clusters.wait_for(
        JOBS,
        "default",
        "pausable",
        lambda j: has_condition("Suspended")(j) and not (j.get("status") or {}).get("active"),
    )
    assert suspended["status"]["completedIndexes"] == "0,1"
    assert suspended["status"].get("failed", 0) == 0, "pods stopped by suspension are not failures"
    await gate.open()
    await client.patch(JOBS, "pausable", {"spec": {"suspend": False}}, "default")
    done = await local_clusters.wait_for(JOBS, "default", "pausable", has_condition("Complete"))
    assert done["status"]["completedIndexes"] == "0-3"
    resumed = condition(done, "Suspended")
    assert resumed is not None and resumed["reason"] == "JobResumed"
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=pausable")
    indexes = [p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods]
    assert indexes.count("0") == 1 and indexes.count("1") == 1, "completed indexes did not run again"


async def test_failing_pods_exhaust_the_backoff_limit(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    await client.create(JOBS, job_body("failing", "exit 1", backoffLimit=0), "default")
    job = await local_clusters.wait_for(JOBS, "default", "failing", has_condition("Failed"))
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "BackoffLimitExceeded"
    target = condition(job, "FailureTarget")
    assert target is not None and target["lastTransitionTime"] <= failed["lastTransitionTime"]
    assert job["status"]["failed"] == 1


async def test_pod_failure_policy_fails_the_job_at_once(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    body = job_body(
        "exit42",
        "exit 42",
        backoffLimit=6,
        podFailurePolicy={
            "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]
        },
    )
    await client.create(JOBS, body, "default")
    job = await local_clusters.wait_for(JOBS, "default", "exit42", has_condition("Failed"))
    failed = condition(job, "Failed")
    assert failed is not None and failed["reason"] == "PodFailurePolicy"
    assert job["status"]["failed"] == 1, "no retry after a FailJob rule matched"


async def test_job_managed_by_another_controller_gets_no_pods(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    await client.create(JOBS, job_body("foreign", "true", managedBy="example.com/other"), "default")
    # A Job the controller does handle, created after, completes; by then the foreign one would have pods.
    await client.create(JOBS, job_body("ours", "true"), "default")
    await local_clusters.wait_for(JOBS, "default", "ours", has_condition("Complete"))
    foreign_pods, _ = await client.list(
        PODS, "default", label_selector="batch.kubernetes.io/job-name=foreign"
    )
    assert foreign_pods == []
    foreign = await client.get(JOBS, "foreign", "default")
    assert not foreign.get("status")


RELEASE_WITHIN = 10.0


def _tracked(pod: dict[str, Any]) -> bool:
    return TRACKING_FINALIZER in (pod["metadata"].get("finalizers") or [])


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
async def test_deleting_a_running_job_releases_its_pods(local_clusters: Clusters, policy: str) -> None:
    """The Job controller takes its tracking finalizer off the pods of a deleted Job (or, with Orphan, of pods
    no Job controls any more), so they can go: before, they stayed deleting forever."""
    client = local_clusters.client()
    name = f"deleted-{policy.lower()}"
    await client.create(JOBS, job_body(name, "sleep 300", completions=2, parallelism=2), "default")
    await local_clusters.wait_for(JOBS, "default", name, lambda j: (j.get("status") or {}).get("ready") == 2)
    pods, _ = await client.list(PODS, "default", label_selector=f"batch.kubernetes.io/job-name={name}")
    names = [p["metadata"]["name"] for p in pods]
    assert len(names) == 2 and all(_tracked(p) for p in pods)
    await client.delete(JOBS, name, "default", propagation=policy)
    async with asyncio.timeout(RELEASE_WITHIN):
        await local_clusters.wait_gone(JOBS, "default", name, within=RELEASE_WITHIN)
        for pod_name in names:
            if policy != "Orphan":
                await local_clusters.wait_gone(PODS, "default", pod_name, within=RELEASE_WITHIN)
                continue
            released = await local_clusters.wait_for(
                PODS,
                "default",
                pod_name,
                lambda p: not _tracked(p) and not p["metadata"].get("ownerReferences"),
                within=RELEASE_WITHIN,
            )
            assert released["status"]["phase"] == "Running", "an orphaned pod keeps running"
    for pod_name in names if policy == "Orphan" else []:
        await client.delete(PODS, pod_name, "default")
        await local_clusters.wait_gone(PODS, "default", pod_name)


def _skip_on_kind(clusters: Clusters, why: str) -> None:
    """These scenarios check the Job controller against kube-controller-manager; on kind both sides are it."""
    if clusters.provider == "kind":
        reason = f"not on kind: this scenario {why}, and kind runs kube-controller-manager itself"
        print(reason)
        pytest.skip(reason)


async def test_an_orphaned_pod_is_adopted_back_not_replaced(local_clusters: Clusters) -> None:
    """A running pod whose owner reference a user removed still matches its Job's selector: the Job controller
    adopts it again (owner reference and tracking finalizer back) and makes no replacement."""
    _skip_on_kind(local_clusters, "compares the embedded Job controller's adoption with upstream's")
    client = local_clusters.client()
    gate = local_clusters.gate("finish")
    command = f"while [ ! -e {gate} ]; do sleep 0.2; done"
    await client.create(JOBS, job_body("adopt", command, completions=2, parallelism=2), "default")
    job = await local_clusters.wait_for(
        JOBS, "default", "adopt", lambda j: (j.get("status") or {}).get("ready") == 2
    )
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=adopt")
    orphan = pods[0]["metadata"]["name"]
    await client.patch(
        PODS, orphan, [{"op": "remove", "path": "/metadata/ownerReferences"}], "default", patch_type="json"
    )
    adopted = await local_clusters.wait_for(
        PODS,
        "default",
        orphan,
        lambda p: bool(p["metadata"].get("ownerReferences")) and _tracked(p),
        within=RELEASE_WITHIN,
    )
    (ref,) = adopted["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("Job", "adopt", job["metadata"]["uid"])
    assert ref["controller"] is True and ref["blockOwnerDeletion"] is True
    await gate.open()
    done = await local_clusters.wait_for(JOBS, "default", "adopt", has_condition("Complete"))
    assert done["status"]["succeeded"] == 2
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=adopt")
    assert len(pods) == 2, f"no replacement for the adopted pod: {[p['metadata']['name'] for p in pods]}"


BACKOFF_FIRST = 10.0  # the first pod failure back-off of kube-controller-manager
TIMESTAMP_GRANULARITY = 1.0  # both times are whole seconds


async def test_per_index_backoff_is_not_cut_short_by_another_index(local_clusters: Clusters) -> None:
    """With backoffLimitPerIndex each index waits out its own back-off: index 1 succeeding while index 0 waits
    does not let index 0 come back before 10 s. Meanwhile the failed pod keeps its tracking finalizer and is not
    counted yet: its replacement inherits the index's failure count from it."""
    _skip_on_kind(local_clusters, "compares the embedded Job controller's per-index back-off with upstream's")
    client = local_clusters.client()
    marker = local_clusters.gate("index-0-failed")
    index_0 = f"if [ -e {marker} ]; then exit 0; fi; mkdir -p {marker.path.parent}; touch {marker}; exit 1"
    index_1 = f"while [ ! -e {marker} ]; do sleep 0.2; done; exit 0"
    command = f'if [ "$JOB_COMPLETION_INDEX" = 0 ]; then {index_0}; else {index_1}; fi'
    body = job_body(
        "per-index", command, completionMode="Indexed", completions=2, parallelism=2, backoffLimitPerIndex=1
    )
    await client.create(JOBS, body, "default")
    waiting = await local_clusters.wait_for(
        JOBS,
        "default",
        "per-index",
        lambda j: (j.get("status") or {}).get("completedIndexes") == "1" and not j["status"].get("active"),
    )
    assert not waiting["status"].get("failed"), "the failed pod is counted once its replacement exists"
    assert not (waiting["status"].get("uncountedTerminatedPods") or {}).get("failed")
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=per-index")
    held = [p for p in pods if p["status"].get("phase") == "Failed"]
    assert len(held) == 1 and _tracked(held[0]), "it keeps the tracking finalizer while its index backs off"
    done = await local_clusters.wait_for(JOBS, "default", "per-index", has_condition("Complete"), within=90)
    assert done["status"]["completedIndexes"] == "0,1" and done["status"]["failed"] == 1
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=per-index")
    by_index: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_index.setdefault(pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"], []).append(
            pod
        )
    (failed,) = [p for p in by_index["0"] if p["status"]["phase"] == "Failed"]
    (replacement,) = [p for p in by_index["0"] if p["status"]["phase"] == "Succeeded"]
    (other,) = by_index["1"]
    failed_at = parse_time(failed["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
    other_done = parse_time(other["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
    created = parse_time(replacement["metadata"]["creationTimestamp"])
    assert failed_at is not None and other_done is not None and created is not None
    gap = (created - failed_at).total_seconds()
    assert gap >= BACKOFF_FIRST - TIMESTAMP_GRANULARITY, f"index 0 came back {gap:g}s after its failure"
    assert other_done < created, "index 1 succeeded while index 0 waited"
    assert replacement["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"] == "1"

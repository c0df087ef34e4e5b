"""What tools look for first on a cluster, the same on the embedded server and on upstream's: the resources of a
suspended Job changed before and after it ran, a privileged pod, the ``default/kubernetes`` Service, the Eviction
API with a Job's podFailurePolicy on DisruptionTarget, and ``kubectl drain`` of the node."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
import yaml

from multiqueue.api.types import JOBS, NODES, PODS, Resource
from multiqueue.kube.errors import Invalid
from tests.e2e.conftest import Clusters, condition, has_condition, job_body

pytestmark = pytest.mark.e2e

NS: Final = "default"
SERVICE_ACCOUNTS: Final = Resource("", "v1", "serviceaccounts", "ServiceAccount")
WITHIN: Final = 90.0
Obj = dict[str, Any]


def _local_or_upstream(clusters: Clusters) -> None:
    """Kind runs the real kubelet and kube-controller-manager, which these scenarios do not need to prove."""
    if clusters.provider == "kind":
        reason = "not on kind: these scenarios check the local and upstream control planes against each other"
        print(reason)
        pytest.skip(reason)


def _requests(job: Obj) -> Obj:
    return dict(job["spec"]["template"]["spec"]["containers"][0].get("resources", {}).get("requests", {}))


def _with_cpu(cpu: str) -> Obj:
    return {
        "spec": {
            "template": {"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]}}
        }
    }


def _active(job: Obj) -> int:
    return int((job.get("status") or {}).get("active") or 0)


def _pods_of(job: str) -> str:
    return f"batch.kubernetes.io/job-name={job}"


async def _running_pod(clusters: Clusters, job: str) -> Obj:
    """The Job's first pod, once its container runs."""
    client = clusters.client()
    async with asyncio.timeout(WITHIN):
        while True:
            found, _ = await client.list(PODS, NS, label_selector=_pods_of(job))
            if found:
                name = found[0]["metadata"]["name"]
                return await clusters.wait_for(
                    PODS, NS, name, lambda p: (p.get("status") or {}).get("phase") == "Running", within=WITHIN
                )
            await clusters.wait_for(JOBS, NS, job, lambda j: _active(j) > 0, within=WITHIN)


async def test_suspended_job_resources_change_before_and_after_it_ran(local_clusters: Clusters) -> None:
    _local_or_upstream(local_clusters)
    client = local_clusters.client()
    gate = local_clusters.gate("resized")
    body = job_body("resized", f"until [ -f {gate} ]; do sleep 0.2; done", suspend=True)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}
    await client.create(JOBS, body, NS)

    changed = await client.patch(JOBS, "resized", _with_cpu("20m"), NS, patch_type="strategic")
    assert _requests(changed) == {"cpu": "20m"}, "a suspended Job that never ran takes new requests"

    await client.patch(JOBS, "resized", {"spec": {"suspend": False}}, NS)
    pod = await _running_pod(local_clusters, "resized")
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "20m"}
    with pytest.raises(Invalid) as refused:
        await client.patch(JOBS, "resized", _with_cpu("30m"), NS, patch_type="strategic")
    assert refused.value.causes[0]["field"] == "spec.template", "a running Job's template stays as it is"

    await client.patch(JOBS, "resized", {"spec": {"suspend": True}}, NS)
    await local_clusters.wait_for(
        JOBS, NS, "resized", lambda j: has_condition("Suspended")(j) and _active(j) == 0, within=WITHIN
    )
    changed = await client.patch(JOBS, "resized", _with_cpu("40m"), NS, patch_type="strategic")
    assert _requests(changed) == {"cpu": "40m"}, "suspended again after it ran, it takes new requests"
    image = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}}
    with pytest.raises(Invalid) as refused:
        await client.patch(JOBS, "resized", image, NS, patch_type="strategic")
    assert refused.value.causes[0]["field"] == "spec.template.spec"
    assert "field is immutable" in refused.value.message

    await client.patch(JOBS, "resized", {"spec": {"suspend": False}}, NS)
    await gate.open()
    done = await local_clusters.wait_for(JOBS, NS, "resized", has_condition("Complete"), within=WITHIN)
    assert _requests(done) == {"cpu": "40m"}


async def test_privileged_pod_is_admitted(local_clusters: Clusters) -> None:
    _local_or_upstream(local_clusters)
    client = local_clusters.client()
    # Upstream's ServiceAccount admission refuses pods until the token controller made the default account.
    await local_clusters.wait_for(SERVICE_ACCOUNTS, NS, "default", lambda _: True, within=WITHIN)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.35",
                    "command": ["true"],
                    "securityContext": {"privileged": True},
                }
            ],
        },
    }
    created = await client.create(PODS, pod, NS)
    assert created["spec"]["containers"][0]["securityContext"] == {"privileged": True}
    await client.delete(PODS, "privileged", NS, grace_period_seconds=0)


async def test_kubernetes_service_names_the_api_server(local_clusters: Clusters) -> None:
    _local_or_upstream(local_clusters)
    shown = await local_clusters.kubectl("get", "svc", "kubernetes", "-n", "default")
    assert shown.split("\n")[1].split()[:2] == ["kubernetes", "ClusterIP"], shown
    assert "10.0.0.1" in shown and "443/TCP" in shown, shown
    service = json.loads(
        await local_clusters.kubectl("get", "svc", "kubernetes", "-n", "default", "-o", "json")
    )
    server = yaml.safe_load(local_clusters.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    assert service["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    assert service["spec"]["clusterIP"] == "10.0.0.1"
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": urlsplit(server).port}
    ]


async def _evict(clusters: Clusters, name: str, tmp_path: Path) -> None:
    body = tmp_path / f"evict-{name}.json"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    await asyncio.to_thread(body.write_text, json.dumps(eviction))
    await clusters.kubectl(
        "create", "--raw", f"/api/v1/namespaces/{NS}/pods/{name}/eviction", "-f", str(body)
    )


async def _evicted_condition(clusters: Clusters, name: str, tmp_path: Path) -> Obj | None:
    """Evict the pod and return its DisruptionTarget condition, watched from before the eviction (the pod may be
    gone by the time a read after it would look)."""
    client = clusters.client()
    selector = f"metadata.name={name}"
    _, version = await client.list(PODS, NS, field_selector=selector)
    await _evict(clusters, name, tmp_path)
    async with asyncio.timeout(WITHIN):
        async for event in client.watch(PODS, NS, field_selector=selector, resource_version=version):
            if event["type"] in ("MODIFIED", "DELETED") and has_condition("DisruptionTarget")(
                event["object"]
            ):
                return condition(event["object"], "DisruptionTarget")
    return None


async def test_evicted_pod_is_ignored_by_the_pod_failure_policy(
    local_clusters: Clusters, tmp_path: Path
) -> None:
    _local_or_upstream(local_clusters)
    gate = local_clusters.gate("evicted")
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    body = job_body(
        "evicted", f"until [ -f {gate} ]; do sleep 0.2; done", backoffLimit=0, podFailurePolicy=policy
    )
    await local_clusters.client().create(JOBS, body, NS)
    first = (await _running_pod(local_clusters, "evicted"))["metadata"]["name"]

    target = await _evicted_condition(local_clusters, first, tmp_path)
    assert target is not None and target["reason"] == "EvictionByEvictionAPI"

    await gate.open()
    job = await local_clusters.wait_for(JOBS, NS, "evicted", has_condition("Complete"), within=WITHIN)
    assert not job["status"].get("failed"), "the evicted pod does not count as a failure"
    assert job["status"]["succeeded"] == 1
    pods, _ = await local_clusters.client().list(PODS, NS, label_selector=_pods_of("evicted"))
    assert first not in {p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Succeeded"}


async def test_drain_evicts_and_cordons_the_node(local_clusters: Clusters) -> None:
    _local_or_upstream(local_clusters)
    client = local_clusters.client()
    gate = local_clusters.gate("drained")
    await client.create(JOBS, job_body("drained", f"until [ -f {gate} ]; do sleep 0.2; done"), NS)
    first = await _running_pod(local_clusters, "drained")
    node = first["spec"]["nodeName"]
    nodes, _ = await client.list(NODES)
    assert [n["metadata"]["name"] for n in nodes] == [node]

    out = await local_clusters.kubectl(
        "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
    )
    assert f"pod/{first['metadata']['name']} evicted" in out, out
    taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    cordoned = await local_clusters.wait_for(
        NODES,
        "",
        node,
        lambda n: any(
            {k: t.get(k) for k in taint} == taint for t in (n.get("spec") or {}).get("taints") or []
        ),
        within=WITHIN,
    )
    assert cordoned["spec"]["unschedulable"] is True
    left, _ = await client.list(PODS, NS, field_selector=f"spec.nodeName={node},status.phase=Running")
    assert not left, [p["metadata"]["name"] for p in left]

    await local_clusters.kubectl("uncordon", node)
    uncordoned = await local_clusters.wait_for(
        NODES, "", node, lambda n: not (n.get("spec") or {}).get("taints"), within=WITHIN
    )
    assert not uncordoned["spec"].get("unschedulable")
    await gate.open()
    job = await local_clusters.wait_for(JOBS, NS, "drained", has_condition("Complete"), within=WITHIN)
    assert job["status"]["succeeded"] == 1

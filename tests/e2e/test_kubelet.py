"""The process kubelet runs pods as a node's kubelet and container runtime would: image shells, signals and grace
periods, volumes, readiness probes and containers it cannot start. The same assertions hold on the embedded
control plane and on the upstream one (our kubelet is the node of both); kind runs the real kubelet, so these
scenarios skip there."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from multiqueue.api.types import JOBS, PODS, Obj
from multiqueue.kube.client import LogQuery
from multiqueue.kube.errors import BadRequest
from tests.e2e.conftest import BUSYBOX, GATES, GATES_MOUNT, Clusters, condition, has_condition, job_body
from tests.e2e.test_dispatch_failures import wait_for_event

pytestmark = pytest.mark.e2e

PAUSE = "registry.k8s.io/pause:3.10"


@pytest.fixture(autouse=True)
def _our_kubelet(e2e_provider: str) -> None:
    """Before any cluster is made for the scenario: kind runs the real kubelet, not the one these scenarios check."""
    if e2e_provider == "kind":
        reason = f"not on {e2e_provider}: this scenario checks multiqueue's process kubelet, kind runs the real one"
        print(reason)
        pytest.skip(reason)


def _pod(name: str, container: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", **container}], **spec},
    }


def _container_status(pod: Obj) -> Obj:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def _phase(phase: str) -> Callable[[Obj], bool]:
    return lambda p: (p.get("status") or {}).get("phase") == phase


def _running(pod: Obj) -> bool:
    return "running" in (_container_status(pod).get("state") or {})


async def _lines(clusters: Clusters, pod: str) -> AsyncIterator[str]:
    """The pod's log followed from its start, once its container runs."""
    client = clusters.client()
    await clusters.wait_for(PODS, "default", pod, _running)
    while True:
        try:
            async for line in client.follow_log(pod, "default", LogQuery("main")):
                yield line
            return
        except BadRequest:  # the container waits to start: ask again once the pod's status changes
            seen = await client.get(PODS, pod, "default")
            version = seen["metadata"]["resourceVersion"]
            await clusters.wait_for(
                PODS, "default", pod, lambda p, seen=version: p["metadata"]["resourceVersion"] != seen
            )


async def test_a_job_that_fails_once_then_finds_its_marker_in_an_empty_dir(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    # Bash-isms on purpose: images' sh (busybox ash, bash) have [[, the host's dash does not.
    command = "if [[ -f /data/marker ]]; then echo found it; exit 0; fi; echo first > /data/marker; exit 1"
    body = job_body("marker", command, backoffLimit=2)
    template = body["spec"]["template"]["spec"]
    template["restartPolicy"] = "OnFailure"
    template["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    template["volumes"] = [{"name": "data", "emptyDir": {}}]
    await client.create(JOBS, body, "default")
    job = await local_clusters.wait_for(JOBS, "default", "marker", has_condition("Complete"), within=90)
    assert job["status"]["succeeded"] == 1 and not job["status"].get("failed")
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=marker")
    assert len(pods) == 1, "the restarted container ran in the same pod"
    status = _container_status(pods[0])
    assert status["restartCount"] == 1
    assert status["state"]["terminated"]["exitCode"] == 0
    assert status["lastState"]["terminated"]["exitCode"] == 1
    assert not await asyncio.to_thread(Path("/data/marker").exists), (
        "the empty dir is the pod's, not the host's /data"
    )


async def test_a_deleted_pod_runs_its_sigterm_trap_within_its_grace_period(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    command = (
        "_term() { echo got SIGTERM; sleep 3; echo trap done; exit 0; }; trap _term SIGTERM; "
        "echo started; while [[ true ]]; do sleep 0.2; done"
    )
    body = _pod(
        "trapper", {"image": BUSYBOX, "command": ["sh", "-c", command]}, terminationGracePeriodSeconds=10
    )
    await client.create(PODS, body, "default")
    lines = _lines(local_clusters, "trapper")
    async with asyncio.timeout(60):
        assert await anext(lines) == "started"
        await client.delete(PODS, "trapper", "default")
        deleted = time.monotonic()
        assert await anext(lines) == "got SIGTERM"
        terminating = await client.get(PODS, "trapper", "default")
    assert terminating["metadata"].get("deletionTimestamp"), "the pod stays, Terminating, while its trap runs"
    assert "running" in _container_status(terminating)["state"]
    async with asyncio.timeout(30):
        rest = [line async for line in lines]
    assert rest == ["trap done"]
    await local_clusters.wait_gone(PODS, "default", "trapper")
    assert time.monotonic() - deleted >= 3, "the pod went only once its trap had ended"


async def test_job_ready_counts_a_pod_only_once_its_readiness_probe_passes(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    gate = local_clusters.gate("ready")
    body = job_body("probed", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.5; done")
    body["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = {
        "exec": {"command": ["sh", "-c", f"test -f {gate}"]},
        "periodSeconds": 1,
    }
    await client.create(JOBS, body, "default")
    active = await local_clusters.wait_for(
        JOBS, "default", "probed", lambda j: (j.get("status") or {}).get("active") == 1
    )
    assert active["status"].get("ready", 0) == 0
    pods, _ = await client.list(PODS, "default", label_selector="batch.kubernetes.io/job-name=probed")
    name = pods[0]["metadata"]["name"]
    async with asyncio.timeout(60):
        async for line in _lines(local_clusters, name):
            if line == "tick 8":  # four seconds: four probe periods
                break
    pod = await client.get(PODS, name, "default")
    assert pod["status"]["phase"] == "Running"
    assert _container_status(pod)["ready"] is False
    ready = condition(pod, "Ready")
    assert ready is not None and ready["status"] == "False"
    job = await client.get(JOBS, "probed", "default")
    assert job["status"].get("ready", 0) == 0
    unhealthy = await wait_for_event(client, name, "Unhealthy")
    assert unhealthy["type"] == "Warning" and unhealthy["message"].startswith("Readiness probe failed:")
    await gate.open()
    await local_clusters.wait_for(
        JOBS, "default", "probed", lambda j: (j.get("status") or {}).get("ready") == 1
    )
    pod = await client.get(PODS, name, "default")
    assert _container_status(pod)["ready"] is True and has_condition("Ready")(pod)


async def test_a_container_without_command_fails_to_start_unless_it_is_pause(
    local_clusters: Clusters,
) -> None:
    client = local_clusters.client()
    await client.create(PODS, _pod("pause", {"image": PAUSE}, terminationGracePeriodSeconds=5), "default")
    await local_clusters.wait_for(PODS, "default", "pause", has_condition("Ready"))
    await client.create(PODS, _pod("imageonly", {"image": BUSYBOX}), "default")
    failed = await local_clusters.wait_for(PODS, "default", "imageonly", _phase("Failed"))
    terminated = _container_status(failed)["state"]["terminated"]
    assert terminated["reason"] == "StartError" and terminated["exitCode"] == 128
    assert "has no command" in terminated["message"]
    failed_event = await wait_for_event(client, "imageonly", "Failed")
    assert failed_event["type"] == "Warning" and "has no command" in failed_event["message"]
    assert failed_event["source"]["component"] == "kubelet"
    pause = await client.get(PODS, "pause", "default")
    assert pause["status"]["phase"] == "Running"
    assert _container_status(pause)["restartCount"] == 0 and "running" in _container_status(pause)["state"]
    await client.delete(PODS, "pause", "default")
    await local_clusters.wait_gone(PODS, "default", "pause")


async def test_a_container_failing_its_liveness_probe_is_restarted_in_its_running_pod(
    local_clusters: Clusters,
) -> None:
    client = local_clusters.client()
    gate = local_clusters.gate("alive")
    container = {
        "image": BUSYBOX,
        "command": ["sh", "-c", "echo started; exec sleep 3600"],
        "livenessProbe": {
            "exec": {"command": ["test", "!", "-f", str(gate)]},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
        "volumeMounts": [GATES_MOUNT],
    }
    gates = {"name": "gates", "hostPath": {"path": str(GATES), "type": "DirectoryOrCreate"}}
    body = _pod("lively", container, restartPolicy="Always", terminationGracePeriodSeconds=1, volumes=[gates])
    await client.create(PODS, body, "default")
    await local_clusters.wait_for(PODS, "default", "lively", _running)
    await gate.open()
    restarted = await local_clusters.wait_for(
        PODS, "default", "lively", lambda p: _container_status(p).get("restartCount") == 1 and _running(p)
    )
    assert restarted["status"]["phase"] == "Running", "restartPolicy Always: the pod runs on"
    assert _container_status(restarted)["lastState"]["terminated"]["exitCode"] == 143


async def test_http_and_tcp_probes_reach_the_pods_port(local_clusters: Clusters) -> None:
    client = local_clusters.client()
    with socket.socket() as probe:  # a free port: pods share the host's network here
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    container = {
        "image": "python:3.11",
        "command": ["python3", "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        "ports": [{"name": "web", "containerPort": port}],
        "startupProbe": {"tcpSocket": {"port": "web"}, "periodSeconds": 1, "failureThreshold": 30},
        "readinessProbe": {"httpGet": {"port": "web", "path": "/"}, "periodSeconds": 1},
    }
    await client.create(PODS, _pod("served", container, terminationGracePeriodSeconds=1), "default")
    ready = await local_clusters.wait_for(PODS, "default", "served", has_condition("Ready"))
    status = _container_status(ready)
    assert status["started"] is True and status["ready"] is True

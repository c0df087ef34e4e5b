"""The official Python client against a local API server: CRUD, watch, conflicts and errors as on a real one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, dynamic, watch
from kubernetes.client.rest import ApiException

from tests.compat.conftest import Cluster
from tests.support.servers import threaded_server, tls_config, write_kubeconfig


def job_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                }
            },
            **spec,
        },
    }


@pytest.fixture
def batch(cluster: Cluster) -> Iterator[client.BatchV1Api]:
    with cluster.api_client() as api_client:
        yield client.BatchV1Api(api_client)


@pytest.fixture
def core(cluster: Cluster) -> Iterator[client.CoreV1Api]:
    with cluster.api_client() as api_client:
        yield client.CoreV1Api(api_client)


def test_crud(batch: client.BatchV1Api) -> None:
    created = batch.create_namespaced_job("default", job_body("crud"))
    assert created.metadata.uid
    assert created.metadata.generation == 1
    assert created.spec.backoff_limit == 6
    got = batch.read_namespaced_job("crud", "default")
    assert got.metadata.resource_version == created.metadata.resource_version
    got.spec.parallelism = 2
    replaced = batch.replace_namespaced_job("crud", "default", got)
    assert replaced.metadata.generation == 2
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    patched = batch.patch_namespaced_job("crud", "default", {"metadata": {"labels": {"x": "y"}}})
    assert patched.metadata.labels["x"] == "y"
    assert patched.metadata.generation == 2
    names = [j.metadata.name for j in batch.list_namespaced_job("default").items]
    assert "crud" in names
    batch.delete_namespaced_job("crud", "default", propagation_policy="Background")
    with pytest.raises(ApiException) as missing:
        batch.read_namespaced_job("crud", "default")
    assert missing.value.status == 404
    assert json.loads(missing.value.body)["reason"] == "NotFound"


def test_list_then_watch_resumes_from_resource_version(batch: client.BatchV1Api) -> None:
    batch.create_namespaced_job("default", job_body("watch-a"))
    listing = batch.list_namespaced_job("default", label_selector="")
    rv = listing.metadata.resource_version
    batch.create_namespaced_job("default", job_body("watch-b"))
    batch.patch_namespaced_job("watch-a", "default", {"spec": {"parallelism": 4}})
    seen = []
    for event in watch.Watch().stream(
        batch.list_namespaced_job, "default", resource_version=rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "watch-b"), ("MODIFIED", "watch-a")]


def test_stale_update_is_a_conflict(batch: client.BatchV1Api) -> None:
    batch.create_namespaced_job("default", job_body("conflict"))
    first = batch.read_namespaced_job("conflict", "default")
    second = batch.read_namespaced_job("conflict", "default")
    first.spec.parallelism = 2
    batch.replace_namespaced_job("conflict", "default", first)
    second.spec.parallelism = 3
    with pytest.raises(ApiException) as conflict:
        batch.replace_namespaced_job("conflict", "default", second)
    assert conflict.value.status == 409
    status = json.loads(conflict.value.body)
    assert status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


def test_server_side_apply_with_the_dynamic_client(cluster: Cluster) -> None:
    with cluster.api_client() as api_client:
        jobs = dynamic.DynamicClient(api_client).resources.get(api_version="batch/v1", kind="Job")
        body = job_body("applied", parallelism=1)
        made = jobs.server_side_apply(body=body, namespace="default", field_manager="deployer")
        assert [(e.manager, e.operation) for e in made.metadata.managedFields] == [("deployer", "Apply")]
        with pytest.raises(ApiException) as conflict:
            jobs.server_side_apply(
                body=job_body("applied", parallelism=2), namespace="default", field_manager="scaler"
            )
        assert conflict.value.status == 409
        assert json.loads(conflict.value.body)["details"]["causes"][0]["field"] == ".spec.parallelism"
        forced = jobs.server_side_apply(
            body=job_body("applied", parallelism=2),
            namespace="default",
            field_manager="scaler",
            force_conflicts=True,
        )
        assert forced.spec.parallelism == 2


def test_invalid_status_transition_is_422_with_causes(batch: client.BatchV1Api) -> None:
    batch.create_namespaced_job("default", job_body("status", suspend=False))
    batch.patch_namespaced_job_status(
        "status", "default", {"status": {"startTime": "2026-01-01T00:00:00Z", "succeeded": 2, "active": 1}}
    )
    with pytest.raises(ApiException) as invalid:
        batch.patch_namespaced_job_status("status", "default", {"status": {"succeeded": 1}})
    assert invalid.value.status == 422
    status = json.loads(invalid.value.body)
    assert status["reason"] == "Invalid"
    assert [c["field"] for c in status["details"]["causes"]] == ["status.succeeded"]
    assert batch.read_namespaced_job_status("status", "default").status.succeeded == 2


def test_expired_resource_version_is_410(tmp_path: Path) -> None:
    with threaded_server(tmp_path / "state", watch_window=5, **tls_config(tmp_path, "small")) as running:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {"small": running.server})
        from kubernetes import config

        with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
            core = client.CoreV1Api(api_client)
            first = core.create_namespaced_config_map("default", {"metadata": {"name": "cm-0"}})
            for i in range(1, 12):
                core.create_namespaced_config_map("default", {"metadata": {"name": f"cm-{i}"}})
            with pytest.raises(ApiException) as gone:
                for _ in watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version=first.metadata.resource_version,
                    timeout_seconds=5,
                ):
                    pass
            assert gone.value.status == 410


def _deleted(list_objects: Any, name: str, since: str) -> bool:
    """Whether a DELETED event for ``name`` arrives within ten seconds of ``since``."""
    for event in watch.Watch().stream(
        list_objects,
        "default",
        field_selector=f"metadata.name={name}",
        resource_version=since,
        timeout_seconds=10,
    ):
        if event["type"] == "DELETED":
            return True
    return False


def _marked_deleting(core: client.CoreV1Api, name: str) -> bool:
    """Whether the pod ``name`` has (or gets, within ten seconds) a deletionTimestamp: the garbage collector works
    after the owner's delete has been answered."""
    listed = core.list_namespaced_pod("default", field_selector=f"metadata.name={name}")
    if any(pod.metadata.deletion_timestamp for pod in listed.items):
        return True
    for event in watch.Watch().stream(
        core.list_namespaced_pod,
        "default",
        field_selector=f"metadata.name={name}",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=10,
    ):
        if event["object"].metadata.deletion_timestamp is not None:
            return True
    return False


def _owned_pod(core: client.CoreV1Api, name: str, job: client.V1Job, block: bool = True) -> None:
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": job.metadata.name,
        "uid": job.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": block,
    }
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": name, "ownerReferences": [owner]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "node-x"},
        },
    )


@pytest.mark.parametrize("policy", ["Background", "Foreground"])
def test_cascading_deletion(batch: client.BatchV1Api, core: client.CoreV1Api, policy: str) -> None:
    name = f"cascade-{policy.lower()}"
    job = batch.create_namespaced_job("default", job_body(name))
    _owned_pod(core, f"{name}-pod", job)
    batch.delete_namespaced_job(name, "default", propagation_policy=policy)
    if policy == "Foreground":
        waiting = batch.read_namespaced_job(name, "default")
        assert waiting.metadata.deletion_timestamp is not None
        assert "foregroundDeletion" in waiting.metadata.finalizers
    # The garbage collector asks the kubelet to stop the pod; with no kubelet here, the test confirms it.
    assert _marked_deleting(core, f"{name}-pod")
    since = core.list_namespaced_pod("default").metadata.resource_version
    core.delete_namespaced_pod(f"{name}-pod", "default", grace_period_seconds=0)
    assert _deleted(core.list_namespaced_pod, f"{name}-pod", since)
    if policy == "Foreground":
        assert _deleted(batch.list_namespaced_job, name, since), (
            "the Job goes once its blocking dependents are gone"
        )


def test_background_deletion_removes_dependents(batch: client.BatchV1Api, core: client.CoreV1Api) -> None:
    job = batch.create_namespaced_job("default", job_body("bg"))
    core.create_namespaced_config_map(
        "default",
        {
            "metadata": {
                "name": "bg-owned",
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "bg",
                        "uid": job.metadata.uid,
                        "controller": True,
                    }
                ],
            }
        },
    )
    stream = watch.Watch()
    start = core.list_namespaced_config_map("default").metadata.resource_version
    batch.delete_namespaced_job("bg", "default", propagation_policy="Background")
    for event in stream.stream(
        core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=10
    ):
        if event["type"] == "DELETED" and event["object"].metadata.name == "bg-owned":
            break
    else:
        raise AssertionError("the dependent ConfigMap was not collected")


def test_orphan_keeps_dependents_and_drops_their_owner_reference(
    batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    job = batch.create_namespaced_job("default", job_body("orphaner"))
    _owned_pod(core, "orphaned-pod", job)
    start = core.list_namespaced_pod("default").metadata.resource_version
    job_start = batch.list_namespaced_job("default").metadata.resource_version
    batch.delete_namespaced_job("orphaner", "default", propagation_policy="Orphan")
    for event in watch.Watch().stream(
        core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=10
    ):
        pod = event["object"]
        if pod.metadata.name == "orphaned-pod" and not pod.metadata.owner_references:
            break
    else:
        raise AssertionError("the orphaned pod kept its owner reference")
    # The collector orphans the dependents first, then lets the Job go (its orphan finalizer comes off last).
    for event in watch.Watch().stream(
        batch.list_namespaced_job, "default", resource_version=job_start, timeout_seconds=10
    ):
        if event["type"] == "DELETED" and event["object"].metadata.name == "orphaner":
            break
    else:
        raise AssertionError("the Job deleted with Orphan never went")
    with pytest.raises(ApiException) as gone:
        batch.read_namespaced_job("orphaner", "default")
    assert gone.value.status == 404

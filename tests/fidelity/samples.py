"""The objects the OpenAPI and Table differential tests make on both clusters, and what a cluster serves.

Every kind the embedded server serves is represented, in the states ``kubectl get`` shows differently: Jobs running,
complete and failed, a suspended CronJob, a running Pod, a Service, a ConfigMap, a Secret, a ServiceAccount, an
Event (one written through core v1, one through events.k8s.io/v1), a Lease, RBAC objects, a PriorityClass, a Deployment, and a CRD with additionalPrinterColumns and one of its
objects. The Node and the Namespace are the cluster's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any, Final

from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, NotFound
from tests.fidelity.openapi_compare import Served

NAMESPACE: Final = "fid-tables"
GROUP: Final = "tables.example.com"
WAIT_TIMEOUT: Final = 120.0
WAIT_POLL: Final = 0.5
# Create-only kinds: asked, never listed.
REVIEWS: Final = frozenset({"selfsubjectaccessreviews", "selfsubjectreviews"})


def _pod_spec(script: str, restart: str = "Never") -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}
    return {"restartPolicy": restart, "terminationGracePeriodSeconds": 1, "containers": [container]}


def _job(name: str, script: str) -> dict[str, Any]:
    spec = {"backoffLimit": 0, "template": {"spec": _pod_spec(script)}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


CRD: Final = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "color": {"type": "string"},
                                    "ready": {"type": "boolean"},
                                    "ratio": {"type": "number"},
                                    "since": {"type": "string", "format": "date-time"},
                                },
                            }
                        },
                    }
                },
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "description": "How big."},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                    {"name": "Ready", "type": "boolean", "jsonPath": ".spec.ready", "priority": 1},
                    {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "format": "float"},
                    {"name": "Since", "type": "date", "jsonPath": ".spec.since"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }
        ],
    },
}
NAMESPACED: Final[list[tuple[str, dict[str, Any]]]] = [
    ("/apis/batch/v1/namespaces/{ns}/jobs", _job("job-running", "exec sleep 600")),
    ("/apis/batch/v1/namespaces/{ns}/jobs", _job("job-complete", "exit 0")),
    ("/apis/batch/v1/namespaces/{ns}/jobs", _job("job-failed", "exit 3")),
    (
        "/apis/batch/v1/namespaces/{ns}/cronjobs",
        {
            "metadata": {"name": "cron"},
            "spec": {
                "schedule": "*/5 * * * *",
                "suspend": True,
                "jobTemplate": {"spec": {"template": {"spec": _pod_spec("exit 0")}}},
            },
        },
    ),
    ("/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "pod"}, "spec": _pod_spec("exec sleep 600")}),
    (
        "/api/v1/namespaces/{ns}/services",
        {
            "metadata": {"name": "service"},
            "spec": {
                "selector": {"app": "x"},
                "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
            },
        },
    ),
    ("/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "config"}, "data": {"a": "1", "b": "2"}}),
    (
        "/api/v1/namespaces/{ns}/secrets",
        {"metadata": {"name": "secret"}, "type": "Opaque", "data": {"k": "dg=="}},
    ),
    ("/api/v1/namespaces/{ns}/serviceaccounts", {"metadata": {"name": "account"}}),
    (
        "/api/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "event"},
            "involvedObject": {
                "kind": "ConfigMap",
                "namespace": "{ns}",
                "name": "config",
                "apiVersion": "v1",
            },
            "reason": "Tested",
            "message": "made by the tables test",
            "type": "Normal",
            "source": {"component": "tables"},
            "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:01:00Z",
        },
    ),
    (
        "/apis/events.k8s.io/v1/namespaces/{ns}/events",
        {
            "metadata": {"name": "recorded"},
            "eventTime": "2026-01-01T00:02:00.000000Z",
            "reportingController": "tables",
            "reportingInstance": "tables-1",
            "action": "Test",
            "reason": "Recorded",
            "note": "made through events.k8s.io by the tables test",
            "type": "Warning",
            "regarding": {"kind": "ConfigMap", "namespace": "{ns}", "name": "config", "apiVersion": "v1"},
        },
    ),
    (
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        {"metadata": {"name": "lease"}, "spec": {"holderIdentity": "holder", "leaseDurationSeconds": 15}},
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        {
            "metadata": {"name": "role"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        },
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        {
            "metadata": {"name": "binding"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "account", "namespace": "{ns}"},
                {"kind": "User", "name": "someone", "apiGroup": "rbac.authorization.k8s.io"},
            ],
        },
    ),
    (
        "/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "metadata": {"name": "deployment"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": _pod_spec("exit 0", "Always")},
            },
        },
    ),
    (
        f"/apis/{GROUP}/v1/namespaces/{{ns}}/gadgets",
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Gadget",
            "metadata": {"name": "gadget"},
            "spec": {"size": 3, "color": "red", "ready": True, "ratio": 0.5, "since": "2026-01-01T00:00:00Z"},
        },
    ),
]
CLUSTER_SCOPED: Final[list[tuple[str, dict[str, Any]]]] = [
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {"metadata": {"name": "fid-tables-role"}, "rules": [{"nonResourceURLs": ["/x"], "verbs": ["get"]}]},
    ),
    (
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "metadata": {"name": "fid-tables-binding"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "fid-tables-role",
            },
            "subjects": [{"kind": "Group", "name": "people", "apiGroup": "rbac.authorization.k8s.io"}],
        },
    ),
    (
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": "fid-tables-priority"}, "value": 1000, "description": "for the tables test"},
    ),
]
# The rows compared: the objects made here (other tests, controllers and the cluster itself make more), the Node,
# the Namespace, and the pods of the Jobs.


def _fill(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("{ns}", NAMESPACE)
    if isinstance(value, dict):
        return {k: _fill(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v) for v in value]
    return value


async def _create(client: KubeClient, path: str, body: dict[str, Any]) -> None:
    with contextlib.suppress(AlreadyExists):  # a rerun against the same clusters
        await client._json("POST", _fill(path), json_body=_fill(body))


async def _wait(client: KubeClient, path: str, done: Callable[[Any], bool]) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline:
        with contextlib.suppress(NotFound):  # not made yet
            if done(await client._json("GET", _fill(path))):
                return
        await asyncio.sleep(WAIT_POLL)  # polling a controller of the other cluster we cannot watch from here
    raise AssertionError(f"{client.name}: {path} did not get there in {WAIT_TIMEOUT}s")


def _condition(kind: str) -> Callable[[Any], bool]:
    return lambda job: any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def make_crd(client: KubeClient) -> None:
    """The CRD, established, on one cluster."""
    await _create(client, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    await _wait(
        client,
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.{GROUP}",
        _condition("Established"),
    )


async def make_objects(client: KubeClient) -> None:
    """The representative objects, on one cluster, in the states the tables should show."""
    await _create(client, "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    await _wait(client, "/api/v1/namespaces/{ns}/serviceaccounts/default", lambda _: True)
    await make_crd(client)
    for path, body in [*CLUSTER_SCOPED, *NAMESPACED]:
        await _create(client, path, body)
    jobs = "/apis/batch/v1/namespaces/{ns}/jobs"
    await _wait(client, f"{jobs}/job-complete", _condition("Complete"))
    await _wait(client, f"{jobs}/job-failed", _condition("Failed"))
    await _wait(client, f"{jobs}/job-running", lambda job: (job.get("status") or {}).get("ready") == 1)
    await _wait(
        client,
        "/api/v1/namespaces/{ns}/pods/pod",
        lambda pod: pod.get("status", {}).get("phase") == "Running",
    )


async def served_resources(client: KubeClient) -> list[Served]:
    """The resources a server's discovery lists (subresources left out), but for other tests' custom kinds."""
    lists = [await get_json(client, "/api/v1")]
    for group in (await get_json(client, "/apis"))["groups"]:
        for version in group["versions"]:
            lists.append(await get_json(client, f"/apis/{version['groupVersion']}"))
    served = []
    for listed in lists:
        group, _, version = listed["groupVersion"].rpartition("/")
        resources = [r for r in listed["resources"] if "/" not in r["name"]]
        served += [Served(group, version, r["kind"], r["name"], r["namespaced"]) for r in resources]
    return [s for s in served if s.group == GROUP or not s.group.endswith(".example.com")]


async def get_json(client: KubeClient, path: str) -> Any:
    """A GET's JSON answer, whatever Content-Type it came with (upstream's /openapi/v3 index says none)."""
    found = await client._json("GET", path, headers={"Accept": "application/json"})
    return json.loads(found) if isinstance(found, str) else found

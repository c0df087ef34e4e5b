"""What programs do with a Kubernetes client library, written once per library: the official ``kubernetes`` client,
``lightkube`` and ``kr8s``. Each flow runs against one cluster in a namespace of its own making and returns what a
program would observe (names, values, types, error codes), nothing that differs between two clusters by nature, so
the embedded and the upstream cluster's outcomes can be compared as they are.

A flow that raises ends in ``error: <type> <HTTP code>``: a request both servers refuse alike is an outcome too.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import kr8s.asyncio
import lightkube
from kr8s.asyncio import objects as kr8s_objects
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from lightkube import codecs
from lightkube.resources import batch_v1 as lk_batch
from lightkube.resources import core_v1 as lk_core
from lightkube.types import CascadeType, PatchType

CONTEXT: Final = "fidelity"
MERGE: Final = "application/merge-patch+json"
APPLY: Final = "application/apply-patch+yaml"
MANAGED_BY: Final = "example.com/other-controller"
# Lines a logging pod prints; the pod runs on the cluster's local kubelet.
LINES: Final = ("one", "two", "three")

Obj = dict[str, Any]
# (kind of object, name, what must hold) -> returns once it holds; fails the flow after a while.
Until = Callable[[str, str, Callable[[Obj], bool]], Awaitable[None]]


# --- the objects every client makes ----------------------------------------------------------------------------


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": data,
    }


def job(name: str, managed_by: str | None = None) -> Obj:
    spec: Obj = {
        "suspend": True,
        "parallelism": 2,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
            }
        },
    }
    if managed_by is not None:
        spec["managedBy"] = managed_by
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def cronjob(name: str, env: dict[str, str]) -> Obj:
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["true"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": {"template": template}}},
    }


def pod(name: str, argv: list[str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": "busybox", "command": argv}],
        },
    }


def secret(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"password": "s3cret"},
    }


def env_names(cron: Obj) -> list[str]:
    containers = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return [e["name"] for e in containers[0].get("env") or []]


def succeeded(obj: Obj) -> bool:
    return (obj.get("status") or {}).get("phase") == "Succeeded"


def managers(obj: Obj) -> list[list[str]]:
    """Who manages which fields, as pairs of manager and operation."""
    return sorted(
        [m.get("manager", ""), m.get("operation", "")] for m in obj["metadata"].get("managedFields") or []
    )


async def outcome(flow: Callable[[], Awaitable[Any]]) -> Any:
    """What the flow observed, or how it failed."""
    try:
        return await flow()
    except k8s.exceptions.ApiException as exc:
        return f"error: ApiException {exc.status}"
    except lightkube.ApiError as exc:
        return f"error: ApiError {exc.status.code}"
    except kr8s.NotFoundError:
        return "error: NotFoundError 404"
    except kr8s.ServerError as exc:
        code = exc.response.status_code if exc.response is not None else "?"
        return f"error: {type(exc).__name__} {code}"
    except TimeoutError:
        return "error: timed out"


# --- the official client ---------------------------------------------------------------------------------------


class Official:
    """The official ``kubernetes`` client: blocking calls, run in a thread; typed models out, dicts in."""

    name = "kubernetes"

    def __init__(self, kubeconfig: Path, namespace: str, until: Until) -> None:
        self.ns = namespace
        self.until = until
        self.api = k8s_config.new_client_from_config(config_file=str(kubeconfig), context=CONTEXT)
        self.core = k8s.CoreV1Api(self.api)
        self.batch = k8s.BatchV1Api(self.api)

    async def close(self) -> None:
        await asyncio.to_thread(self.api.close)

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(method, *args, **kwargs)

    def as_dict(self, model: Any) -> Obj:
        return dict(self.api.sanitize_for_serialization(model))

    async def flow_configmap_crud(self) -> Any:
        made = await self.call(self.core.create_namespaced_config_map, self.ns, configmap("crud", a="1"))
        made.data = {"a": "2"}
        replaced = await self.call(self.core.replace_namespaced_config_map, "crud", self.ns, made)
        read = await self.call(self.core.read_namespaced_config_map, "crud", self.ns)
        await self.call(self.core.delete_namespaced_config_map, "crud", self.ns)
        gone = await outcome(lambda: self.call(self.core.read_namespaced_config_map, "crud", self.ns))
        return [type(made).__name__, replaced.data, read.data, gone]

    async def flow_job_crud(self) -> Any:
        made = await self.call(self.batch.create_namespaced_job, self.ns, job("crud"))
        spec = made.spec
        patched = await self.call(
            self.batch.patch_namespaced_job, "crud", self.ns, {"spec": {"parallelism": 3}}
        )
        await self.call(self.batch.delete_namespaced_job, "crud", self.ns, propagation_policy="Background")
        gone = await outcome(lambda: self.call(self.batch.read_namespaced_job, "crud", self.ns))
        defaults = [
            spec.completions,
            spec.backoff_limit,
            spec.completion_mode,
            spec.suspend,
            spec.manual_selector,
        ]
        return [defaults, made.status is not None, patched.spec.parallelism, gone]

    async def flow_cronjob_crud(self) -> Any:
        made = await self.call(self.batch.create_namespaced_cron_job, self.ns, cronjob("crud", {"A": "1"}))
        made.spec.schedule = "0 4 * * *"
        replaced = await self.call(self.batch.replace_namespaced_cron_job, "crud", self.ns, made)
        await self.call(self.batch.delete_namespaced_cron_job, "crud", self.ns)
        spec = made.spec
        defaults = [
            spec.concurrency_policy,
            spec.successful_jobs_history_limit,
            spec.failed_jobs_history_limit,
        ]
        return [defaults, replaced.spec.schedule]

    async def flow_pod_crud(self) -> Any:
        made = await self.call(self.core.create_namespaced_pod, self.ns, pod("crud", ["sleep", "30"]))
        container = made.spec.containers[0]
        defaults = [made.spec.dns_policy, made.spec.scheduler_name, container.termination_message_path]
        await self.call(self.core.delete_namespaced_pod, "crud", self.ns, grace_period_seconds=0)
        gone = await outcome(lambda: self.call(self.core.read_namespaced_pod, "crud", self.ns))
        return [defaults, made.status.phase, gone]

    async def flow_list_selectors(self) -> Any:
        for name, labels in (
            ("x1", {"app": "a", "tier": "1"}),
            ("x2", {"app": "a", "tier": "2"}),
            ("y", {"app": "b"}),
        ):
            await self.call(self.core.create_namespaced_config_map, self.ns, configmap(name, labels))

        async def names(**selectors: str) -> list[str]:
            listed = await self.call(self.core.list_namespaced_config_map, self.ns, **selectors)
            return sorted(c.metadata.name for c in listed.items)

        return [
            await names(label_selector="app=a"),
            await names(label_selector="app,tier in (2,3)"),
            await names(label_selector="app,app!=a"),
            await names(field_selector="metadata.name=y"),
            await outcome(lambda: names(label_selector="app in in")),
        ]

    async def flow_watch(self) -> Any:
        listed = await self.call(self.core.list_namespaced_config_map, self.ns, label_selector="flow=watch")
        since = listed.metadata.resource_version
        await self.call(self.core.create_namespaced_config_map, self.ns, configmap("w", {"flow": "watch"}))
        await self.call(self.core.patch_namespaced_config_map, "w", self.ns, {"data": {"k": "v"}})
        await self.call(self.core.delete_namespaced_config_map, "w", self.ns)

        def events() -> list[list[Any]]:
            seen = []
            for event in k8s_watch.Watch().stream(
                self.core.list_namespaced_config_map,
                self.ns,
                label_selector="flow=watch",
                resource_version=since,
                timeout_seconds=5,
            ):
                seen.append([event["type"], event["object"].metadata.name, event["object"].data])
                if event["type"] == "DELETED":
                    break
            return seen

        return await asyncio.to_thread(events)

    async def flow_patch_strategic(self) -> Any:
        await self.call(self.batch.create_namespaced_cron_job, self.ns, cronjob("strategic", {"A": "1"}))
        body = cronjob("strategic", {"B": "2"})
        patched = await self.call(
            self.batch.patch_namespaced_cron_job, "strategic", self.ns, {"spec": body["spec"]}
        )
        return env_names(self.as_dict(patched))

    async def flow_patch_merge(self) -> Any:
        await self.call(self.batch.create_namespaced_cron_job, self.ns, cronjob("merge", {"A": "1"}))
        body = {"spec": cronjob("merge", {"B": "2"})["spec"]}
        patched = await self.call(
            self.batch.patch_namespaced_cron_job, "merge", self.ns, body, _content_type=MERGE
        )
        return env_names(self.as_dict(patched))

    async def flow_patch_json(self) -> Any:
        await self.call(self.core.create_namespaced_config_map, self.ns, configmap("json", {"a": "b"}))
        ops = [
            {"op": "add", "path": "/metadata/labels/c", "value": "d"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ]
        patched = await self.call(self.core.patch_namespaced_config_map, "json", self.ns, ops)
        failing = [{"op": "test", "path": "/metadata/labels/c", "value": "x"}]
        refused = await outcome(
            lambda: self.call(self.core.patch_namespaced_config_map, "json", self.ns, failing)
        )
        return [patched.metadata.labels, refused]

    async def flow_server_side_apply(self) -> Any:
        body = configmap("applied", {"app": "a"}, k="v")
        applied = await self.call(
            self.core.patch_namespaced_config_map,
            "applied",
            self.ns,
            body,
            field_manager="flows",
            _content_type=APPLY,
        )
        again = await self.call(
            self.core.patch_namespaced_config_map,
            "applied",
            self.ns,
            configmap("applied", {"app": "a"}, k="w"),
            field_manager="flows",
            _content_type=APPLY,
        )
        return [applied.data, again.data, managers(self.as_dict(again))]

    async def flow_logs(self) -> Any:
        await self.call(
            self.core.create_namespaced_pod,
            self.ns,
            pod("talker", ["sh", "-c", "; ".join(f"echo {w}" for w in LINES)]),
        )
        await self.until("pods", "talker", succeeded)
        return [
            await self.call(self.core.read_namespaced_pod_log, "talker", self.ns),
            await self.call(self.core.read_namespaced_pod_log, "talker", self.ns, tail_lines=1),
            await self.call(self.core.read_namespaced_pod_log, "talker", self.ns, limit_bytes=5),
            await outcome(
                lambda: self.call(self.core.read_namespaced_pod_log, "talker", self.ns, previous=True)
            ),
        ]

    async def flow_node_typed(self) -> Any:
        nodes = await self.call(self.core.list_node)
        return [
            [
                type(n).__name__,
                sorted(c.type for c in n.status.conditions),
                [a.type for a in n.status.addresses],
                n.status.node_info.operating_system,
                sorted(n.status.allocatable),
            ]
            for n in nodes.items
        ]

    async def flow_job_managed_elsewhere(self) -> Any:
        await self.call(self.batch.create_namespaced_job, self.ns, job("elsewhere", MANAGED_BY))
        read = await self.call(self.batch.read_namespaced_job, "elsewhere", self.ns)
        status = await self.call(self.batch.read_namespaced_job_status, "elsewhere", self.ns)
        return [read.spec.managed_by, type(read.status).__name__, type(status.status).__name__]

    async def flow_secret_string_data(self) -> Any:
        made = await self.call(self.core.create_namespaced_secret, self.ns, secret("strings"))
        read = await self.call(self.core.read_namespaced_secret, "strings", self.ns)
        return [made.data, made.string_data, read.type, base64.b64decode(read.data["password"]).decode()]

    async def flow_resource_version_match(self) -> Any:
        first = await self.call(
            self.core.create_namespaced_config_map, self.ns, configmap("r1", {"flow": "rv"})
        )
        await self.call(self.core.create_namespaced_config_map, self.ns, configmap("r2", {"flow": "rv"}))
        rv = first.metadata.resource_version

        async def names(**options: str) -> Any:
            listed = await self.call(
                self.core.list_namespaced_config_map, self.ns, label_selector="flow=rv", **options
            )
            return sorted(c.metadata.name for c in listed.items)

        return [
            await names(resource_version=rv, resource_version_match="Exact"),
            await names(resource_version=rv, resource_version_match="NotOlderThan"),
            await names(resource_version="0", resource_version_match="NotOlderThan"),
            await outcome(lambda: names(resource_version="0", resource_version_match="Exact")),
            await outcome(lambda: names(resource_version_match="NotOlderThan")),
        ]


# --- lightkube ---------------------------------------------------------------------------------------------------


class Lightkube:
    """``lightkube``: an async client with typed resources (lightkube-models)."""

    name = "lightkube"

    def __init__(self, kubeconfig: Path, namespace: str, until: Until) -> None:
        self.ns = namespace
        self.until = until
        config = lightkube.KubeConfig.from_file(kubeconfig).get(context_name=CONTEXT)
        self.client = lightkube.AsyncClient(config=config, namespace=namespace, field_manager="flows")

    async def close(self) -> None:
        await self.client.close()

    async def flow_configmap_crud(self) -> Any:
        made = await self.client.create(codecs.from_dict(configmap("crud", a="1")))
        made.data = {"a": "2"}
        replaced = await self.client.replace(made)
        read = await self.client.get(lk_core.ConfigMap, "crud")
        await self.client.delete(lk_core.ConfigMap, "crud")
        gone = await outcome(lambda: self.client.get(lk_core.ConfigMap, "crud"))
        return [type(made).__name__, replaced.data, read.data, gone]

    async def flow_job_crud(self) -> Any:
        made = await self.client.create(codecs.from_dict(job("crud")))
        spec = made.spec
        patched = await self.client.patch(lk_batch.Job, "crud", {"spec": {"parallelism": 3}})
        await self.client.delete(lk_batch.Job, "crud", cascade=CascadeType.BACKGROUND)
        gone = await outcome(lambda: self.client.get(lk_batch.Job, "crud"))
        defaults = [
            spec.completions,
            spec.backoffLimit,
            spec.completionMode,
            spec.suspend,
            spec.manualSelector,
        ]
        return [defaults, made.status is not None, patched.spec.parallelism, gone]

    async def flow_cronjob_crud(self) -> Any:
        made = await self.client.create(codecs.from_dict(cronjob("crud", {"A": "1"})))
        made.spec.schedule = "0 4 * * *"
        replaced = await self.client.replace(made)
        await self.client.delete(lk_batch.CronJob, "crud")
        spec = made.spec
        defaults = [spec.concurrencyPolicy, spec.successfulJobsHistoryLimit, spec.failedJobsHistoryLimit]
        return [defaults, replaced.spec.schedule]

    async def flow_pod_crud(self) -> Any:
        made = await self.client.create(codecs.from_dict(pod("crud", ["sleep", "30"])))
        container = made.spec.containers[0]
        defaults = [made.spec.dnsPolicy, made.spec.schedulerName, container.terminationMessagePath]
        await self.client.delete(lk_core.Pod, "crud", grace_period=0)
        gone = await outcome(lambda: self.client.get(lk_core.Pod, "crud"))
        return [defaults, made.status.phase, gone]

    async def flow_list_selectors(self) -> Any:
        for name, labels in (
            ("x1", {"app": "a", "tier": "1"}),
            ("x2", {"app": "a", "tier": "2"}),
            ("y", {"app": "b"}),
        ):
            await self.client.create(codecs.from_dict(configmap(name, labels)))

        async def names(**selectors: Any) -> list[str]:
            return sorted([c.metadata.name async for c in self.client.list(lk_core.ConfigMap, **selectors)])

        return [
            await names(labels={"app": "a"}),
            await names(labels={"app": "b"}, fields={"metadata.name": "y"}),
            await names(fields={"metadata.name": "x2"}),
            await names(chunk_size=1, labels={"app": "a"}),
        ]

    async def flow_watch(self) -> Any:
        await self.client.create(codecs.from_dict(configmap("before", {"flow": "watch"})))
        since = (await self.client.get(lk_core.ConfigMap, "before")).metadata.resourceVersion
        await self.client.create(codecs.from_dict(configmap("w", {"flow": "watch"})))
        await self.client.patch(lk_core.ConfigMap, "w", {"data": {"k": "v"}}, patch_type=PatchType.MERGE)
        await self.client.delete(lk_core.ConfigMap, "w")
        seen = []
        async for op, obj in self.client.watch(
            lk_core.ConfigMap, labels={"flow": "watch"}, resource_version=since, server_timeout=5
        ):
            seen.append([op, obj.metadata.name, obj.data])
            if op == "DELETED":
                break
        return seen

    async def flow_patch_strategic(self) -> Any:
        await self.client.create(codecs.from_dict(cronjob("strategic", {"A": "1"})))
        body = {"spec": cronjob("strategic", {"B": "2"})["spec"]}
        patched = await self.client.patch(lk_batch.CronJob, "strategic", body, patch_type=PatchType.STRATEGIC)
        return env_names(patched.to_dict())

    async def flow_patch_merge(self) -> Any:
        await self.client.create(codecs.from_dict(cronjob("merge", {"A": "1"})))
        body = {"spec": cronjob("merge", {"B": "2"})["spec"]}
        patched = await self.client.patch(lk_batch.CronJob, "merge", body, patch_type=PatchType.MERGE)
        return env_names(patched.to_dict())

    async def flow_patch_json(self) -> Any:
        await self.client.create(codecs.from_dict(configmap("json", {"a": "b"})))
        ops = [
            {"op": "add", "path": "/metadata/labels/c", "value": "d"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ]
        patched = await self.client.patch(lk_core.ConfigMap, "json", ops, patch_type=PatchType.JSON)
        return patched.metadata.labels

    async def flow_server_side_apply(self) -> Any:
        applied = await self.client.apply(codecs.from_dict(configmap("applied", {"app": "a"}, k="v")))
        again = await self.client.apply(codecs.from_dict(configmap("applied", {"app": "a"}, k="w")))
        return [applied.data, again.data, managers(again.to_dict())]

    async def flow_logs(self) -> Any:
        await self.client.create(
            codecs.from_dict(pod("talker", ["sh", "-c", "; ".join(f"echo {w}" for w in LINES)]))
        )
        await self.until("pods", "talker", succeeded)
        every = [line async for line in self.client.log("talker")]
        last = [line async for line in self.client.log("talker", tail_lines=1, timestamps=True)]
        return [every, [line.split(" ", 1)[1] for line in last]]

    async def flow_node_typed(self) -> Any:
        return [
            [
                type(n).__name__,
                sorted(c.type for c in n.status.conditions),
                [a.type for a in n.status.addresses],
                n.status.nodeInfo.operatingSystem,
                sorted(n.status.allocatable),
            ]
            async for n in self.client.list(lk_core.Node)
        ]

    async def flow_job_managed_elsewhere(self) -> Any:
        await self.client.create(codecs.from_dict(job("elsewhere", MANAGED_BY)))
        read = await self.client.get(lk_batch.Job, "elsewhere")
        status = await self.client.get(lk_batch.Job.Status, "elsewhere")
        return [read.spec.managedBy, type(read.status).__name__, type(status.status).__name__]

    async def flow_secret_string_data(self) -> Any:
        made = await self.client.create(codecs.from_dict(secret("strings")))
        read = await self.client.get(lk_core.Secret, "strings")
        return [made.data, made.stringData, read.type, base64.b64decode(read.data["password"]).decode()]


# --- kr8s --------------------------------------------------------------------------------------------------------


class Kr8s:
    """``kr8s``: an async client whose objects wrap the raw dicts."""

    name = "kr8s"

    def __init__(self, kubeconfig: Path, namespace: str, until: Until) -> None:
        self.kubeconfig = kubeconfig
        self.ns = namespace
        self.until = until
        self.api: Any = None

    async def start(self) -> None:
        self.api = await kr8s.asyncio.api(kubeconfig=str(self.kubeconfig), context=CONTEXT, namespace=self.ns)

    async def close(self) -> None:
        self.api = None

    async def make(self, kind: type[Any], body: Obj) -> Any:
        obj = kind(body, namespace=self.ns, api=self.api)
        await obj.create()
        return obj

    async def names(self, kind: str, **selectors: str) -> list[str]:
        return sorted(
            [o.name async for o in kr8s.asyncio.get(kind, namespace=self.ns, api=self.api, **selectors)]
        )

    async def flow_configmap_crud(self) -> Any:
        made = await self.make(kr8s_objects.ConfigMap, configmap("crud", a="1"))
        await made.patch({"data": {"a": "2"}})
        read = await kr8s_objects.ConfigMap.get("crud", namespace=self.ns, api=self.api)
        await read.delete()
        gone = await outcome(
            lambda: kr8s_objects.ConfigMap.get("crud", namespace=self.ns, api=self.api, timeout=0)
        )
        return [made.raw["data"], read.raw["data"], gone]

    async def flow_job_crud(self) -> Any:
        made = await self.make(kr8s_objects.Job, job("crud"))
        spec = made.raw["spec"]
        await made.patch({"spec": {"parallelism": 3}})
        parallelism = made.raw["spec"]["parallelism"]
        await made.delete(propagation_policy="Background")
        gone = await outcome(lambda: kr8s_objects.Job.get("crud", namespace=self.ns, api=self.api, timeout=0))
        defaults = [spec.get(k) for k in ("completions", "backoffLimit", "completionMode", "suspend")]
        return [defaults, "status" in made.raw, parallelism, gone]

    async def flow_cronjob_crud(self) -> Any:
        made = await self.make(kr8s_objects.CronJob, cronjob("crud", {"A": "1"}))
        await made.patch({"spec": {"schedule": "0 4 * * *"}})
        await made.delete()
        spec = made.raw["spec"]
        return [spec.get("concurrencyPolicy"), spec.get("successfulJobsHistoryLimit"), spec["schedule"]]

    async def flow_pod_crud(self) -> Any:
        made = await self.make(kr8s_objects.Pod, pod("crud", ["sleep", "30"]))
        spec = made.raw["spec"]
        defaults = [
            spec.get("dnsPolicy"),
            spec.get("schedulerName"),
            spec["containers"][0].get("terminationMessagePath"),
        ]
        await made.delete(grace_period=0)
        gone = await outcome(lambda: kr8s_objects.Pod.get("crud", namespace=self.ns, api=self.api, timeout=0))
        return [defaults, gone]

    async def flow_list_selectors(self) -> Any:
        for name, labels in (
            ("x1", {"app": "a", "tier": "1"}),
            ("x2", {"app": "a", "tier": "2"}),
            ("y", {"app": "b"}),
        ):
            await self.make(kr8s_objects.ConfigMap, configmap(name, labels))
        return [
            await self.names("configmaps", label_selector="app=a"),
            await self.names("configmaps", label_selector="app,tier notin (1)"),
            await self.names("configmaps", field_selector="metadata.name=y"),
        ]

    async def flow_watch(self) -> Any:
        before = await self.make(kr8s_objects.ConfigMap, configmap("before", {"flow": "watch"}))
        since = before.raw["metadata"]["resourceVersion"]
        made = await self.make(kr8s_objects.ConfigMap, configmap("w", {"flow": "watch"}))
        await made.patch({"data": {"k": "v"}})
        await made.delete()
        seen = []
        async with asyncio.timeout(30):
            async for kind, obj in kr8s.asyncio.watch(
                "configmaps", namespace=self.ns, label_selector="flow=watch", since=since, api=self.api
            ):
                seen.append([kind, obj.name, obj.raw.get("data")])
                if kind == "DELETED":
                    break
        return seen

    async def flow_patch_merge(self) -> Any:
        made = await self.make(kr8s_objects.CronJob, cronjob("merge", {"A": "1"}))
        await made.patch({"spec": cronjob("merge", {"B": "2"})["spec"]})
        return env_names(made.raw)

    async def flow_patch_json(self) -> Any:
        made = await self.make(kr8s_objects.ConfigMap, configmap("json", {"a": "b"}))
        ops = [
            {"op": "add", "path": "/metadata/labels/c", "value": "d"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ]
        await made.patch(ops, type="json")
        return made.raw["metadata"]["labels"]

    async def flow_logs(self) -> Any:
        made = await self.make(
            kr8s_objects.Pod, pod("talker", ["sh", "-c", "; ".join(f"echo {w}" for w in LINES)])
        )
        await self.until("pods", "talker", succeeded)
        every = [line async for line in made.logs()]
        tail = [line async for line in made.logs(tail_lines=2, limit_bytes=100)]
        return [every, tail]

    async def flow_node_typed(self) -> Any:
        found = []
        async for node in kr8s.asyncio.get("nodes", api=self.api):
            status = node.raw["status"]
            found.append(
                [
                    type(node).__name__,
                    sorted(c["type"] for c in status["conditions"]),
                    status["nodeInfo"]["operatingSystem"],
                ]
            )
        return found

    async def flow_job_managed_elsewhere(self) -> Any:
        made = await self.make(kr8s_objects.Job, job("elsewhere", MANAGED_BY))
        read = await kr8s_objects.Job.get("elsewhere", namespace=self.ns, api=self.api)
        return [made.raw["spec"].get("managedBy"), read.raw.get("status")]

    async def flow_secret_string_data(self) -> Any:
        made = await self.make(kr8s_objects.Secret, secret("strings"))
        read = await kr8s_objects.Secret.get("strings", namespace=self.ns, api=self.api)
        return [
            "stringData" in made.raw,
            read.raw["type"],
            base64.b64decode(read.raw["data"]["password"]).decode(),
        ]


CLIENTS: Final = (Official, Lightkube, Kr8s)
Client = Official | Lightkube | Kr8s


def flows(client: type[Client]) -> list[str]:
    return sorted(name.removeprefix("flow_") for name in vars(client) if name.startswith("flow_"))


@contextlib.asynccontextmanager
async def opened(
    client: type[Client], kubeconfig: Path, namespace: str, until: Until
) -> AsyncIterator[Client]:
    made = client(kubeconfig, namespace, until)
    if isinstance(made, Kr8s):
        await made.start()
    try:
        yield made
    finally:
        await made.close()


async def run_flows(client: type[Client], kubeconfig: Path, namespace: str, until: Until) -> dict[str, Any]:
    """Every flow of one client against one cluster, one after the other; flow -> outcome."""
    outcomes = {}
    async with opened(client, kubeconfig, namespace, until) as made:
        for flow in flows(client):
            outcomes[flow] = await outcome(getattr(made, f"flow_{flow}"))
    return outcomes

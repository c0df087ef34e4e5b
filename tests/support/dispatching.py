"""What the multi-manager and shared-capacity scenarios share: local clusters with simulated pods and managers
configured in-process, a record of every watch event of a resource, and a stand-in JobGroup controller.

The record (:class:`Recorder`) keeps every event a watch delivered, in order, with the latest state of each
object; tests check "exactly one mirror ever" and "never over capacity" on that history rather than on samples.
A local cluster has one resourceVersion counter for all its resources (as etcd has one revision), so the events
of several recorders on one cluster can be merged into the cluster's own order by resourceVersion.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import yaml

from multiqueue.api.types import CRDS, JOBS, Resource
from multiqueue.dispatch.adapters.declared import JOBGROUP
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, KubeError
from multiqueue.kube.informer import Handlers, Informer
from multiqueue.local.config import ControlPlane, LocalCluster, LocalConfig
from multiqueue.local.up import LocalClusters
from multiqueue.loop.tasks import cancel_and_wait

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOBGROUPS = JOBGROUP.resource
# The label the stand-in JobGroup controller puts on the Jobs it makes for a group.
GROUP_LABEL = "example.multiqueue.dev/jobgroup"


# --- reading objects --------------------------------------------------------------------------------------------


def suspended_job(name: str, managed_by: str) -> Obj:
    """A Job that stays suspended (nothing runs), with the given managedBy: what the dispatcher's readers list."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": managed_by,
            "suspend": True,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            },
        },
    }


def key_of(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or ''}/{meta['name']}"


def condition_true(obj: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def job_finished(job: Obj) -> bool:
    return condition_true(job, "Complete") or condition_true(job, "Failed")


def group_finished(group: Obj) -> bool:
    return condition_true(group, "Completed") or condition_true(group, "Failed")


def finished(kind: str, obj: Obj) -> bool:
    return group_finished(obj) if kind == "JobGroup" else job_finished(obj)


def labels(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def finalizers(obj: Obj) -> list[str]:
    return list((obj.get("metadata") or {}).get("finalizers") or [])


def rv_of(obj: Obj) -> int:
    return int(obj["metadata"].get("resourceVersion") or 0)


# --- clusters and managers --------------------------------------------------------------------------------------


async def start_clusters(
    state_dir: Path,
    names: Iterable[str],
    kubelet: Literal["process", "simulate", "none"] = "simulate",
    control_plane: ControlPlane = "embedded",
) -> LocalClusters:
    """Local clusters with a kubelet of the given mode, and no manager; Jobs run by the embedded Job controllers
    (or, on an upstream ``control_plane``, by kube-controller-manager)."""
    config = LocalConfig(
        clusters=[LocalCluster(name=n, kubelet=kubelet) for n in names], control_plane=control_plane
    )
    clusters = LocalClusters(config, state_dir)
    await clusters.start()
    return clusters


def clients_of(clusters: LocalClusters) -> dict[str, KubeClient]:
    return {name: c.client for name, c in clusters.components.items() if c.client is not None}


def manager_config(
    clusters: LocalClusters,
    name: str,
    managed_by: str,
    workers: dict[str, Obj],
    **extra: Any,
) -> ManagerConfig:
    """A manager over the local clusters: ``workers`` maps each worker's name to the rest of its config entry
    (labels, capacity)."""
    path = clusters.kubeconfig_path
    return ManagerConfig.model_validate(
        {
            "name": name,
            "managedBy": managed_by,
            "namespace": f"{name}-system",
            "management": {"kubeconfig": path, "context": "management"},
            "workers": [
                {"name": worker, "kubeconfig": path, "context": worker, **entry}
                for worker, entry in workers.items()
            ],
            "metricsAddress": "127.0.0.1:0",
            **extra,
        }
    )


async def install_jobgroup_crd(clients: dict[str, KubeClient], within: float = 30.0) -> None:
    """The example JobGroup CRD on every cluster, served (Established) before this returns."""
    crd = yaml.safe_load((EXAMPLES / "jobgroup-crd.yaml").read_text())
    selector = f"metadata.name={crd['metadata']['name']}"
    for client in clients.values():
        await client.create(CRDS, crd)
    async with asyncio.timeout(within):
        for client in clients.values():
            while True:
                items, rv = await client.list(CRDS, field_selector=selector)
                if items and condition_true(items[0], "Established"):
                    break
                async for event in client.watch(
                    CRDS, field_selector=selector, resource_version=rv, timeout_seconds=int(within)
                ):
                    if condition_true(event["object"], "Established"):
                        break  # and list again, to be sure


# --- watching ---------------------------------------------------------------------------------------------------


class Recorder:
    """Every watch event of one resource on one cluster from ``start`` on, in order; and the latest state of each
    object (``latest``, by "namespace/name"). ``changed`` is set on every event."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        name: str = "",
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.name = name or f"{client.name}/{resource.plural}"
        self.events: list[tuple[str, Obj]] = []
        self.latest: dict[str, Obj] = {}
        self.changed = asyncio.Event()
        self.error: BaseException | None = None
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start recording; returns once the first LIST is in, so nothing made after this call is missed."""
        self._task = asyncio.create_task(self._run(), name=f"recorder {self.name}")
        waiter = asyncio.ensure_future(self._synced.wait())
        await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self._task.done():
            self._task.result()

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    async def _run(self) -> None:
        try:
            items, rv = await self.client.list(
                self.resource, self.namespace, label_selector=self.label_selector
            )
            for item in items:
                self._saw("LISTED", item)
            self._synced.set()
            while True:
                async for event in self.client.watch(
                    self.resource,
                    self.namespace,
                    label_selector=self.label_selector,
                    resource_version=rv,
                    timeout_seconds=300,
                ):
                    obj = event["object"]
                    rv = str(obj["metadata"].get("resourceVersion") or rv)
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._saw(event["type"], obj)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # a test waiting on this record must learn the record is broken
            self.error = exc
            self.changed.set()
            raise

    def _saw(self, type_: str, obj: Obj) -> None:
        self.events.append((type_, obj))
        if type_ == "DELETED":
            self.latest.pop(key_of(obj), None)
        else:
            self.latest[key_of(obj)] = obj
        self.changed.set()

    def added(self) -> list[Obj]:
        """Each object created while recording, in order of creation."""
        return [obj for type_, obj in self.events if type_ == "ADDED"]

    async def until(
        self, predicate: Callable[[], bool], within: float, what: str | Callable[[], str] = ""
    ) -> None:
        """Wait until ``predicate`` holds, checking again on every event; fail saying ``what`` did not happen."""
        try:
            async with asyncio.timeout(within):
                while not predicate():
                    if self.error is not None:
                        raise AssertionError(f"the watch of {self.name} broke: {self.error!r}")
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            described = what() if callable(what) else what
            raise AssertionError(f"not within {within:.0f} s: {described or predicate}") from None


async def until_all(
    recorders: list[Recorder], predicate: Callable[[], bool], within: float, what: str | Callable[[], str]
) -> None:
    """Wait until ``predicate`` holds, checking again whenever any of ``recorders`` sees an event."""
    try:
        async with asyncio.timeout(within):
            while not predicate():
                for recorder in recorders:
                    if recorder.error is not None:
                        raise AssertionError(f"the watch of {recorder.name} broke: {recorder.error!r}")
                    recorder.changed.clear()
                waits = [asyncio.ensure_future(r.changed.wait()) for r in recorders]
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()
    except TimeoutError:
        described = what() if callable(what) else what
        raise AssertionError(f"not within {within:.0f} s: {described}") from None


def merged(*recorders: Recorder) -> list[tuple[str, str, Obj]]:
    """(kind, event type, object) of several recorders on one cluster, in the cluster's order."""
    events = [
        (r.resource.kind, type_, obj) for r in recorders for type_, obj in r.events if type_ != "LISTED"
    ]
    return sorted(events, key=lambda e: rv_of(e[2]))


def events_about(events: Recorder, name: str, reasons: Iterable[str] = ()) -> list[Obj]:
    """The Events ``events`` recorded about the object ``name``, with one of ``reasons`` (any when empty), in
    the order they were made; an Event counted again (aggregated) stays where it was first made."""
    wanted = set(reasons)
    found: dict[str, Obj] = {}
    for type_, event in events.events:
        if type_ == "DELETED" or (event.get("involvedObject") or {}).get("name") != name:
            continue
        if wanted and event.get("reason") not in wanted:
            continue
        found.setdefault(event["metadata"]["name"], event)
    return list(found.values())


def told(events: Recorder, name: str, reason: str) -> int:
    """How many times the Event about ``name`` with ``reason`` was told: its count, aggregated repeats included."""
    return max(
        (
            int(event.get("count") or 1)
            for type_, event in events.events
            if type_ != "DELETED"
            and (event.get("involvedObject") or {}).get("name") == name
            and event.get("reason") == reason
        ),
        default=0,
    )


# --- a stand-in JobGroup controller ------------------------------------------------------------------------------


class JobGroupRunner:
    """Plays the JobGroup controller on one worker (the example kind has none): a JobGroup that is not suspended
    gets one Job per replica of each of its replicatedJobs, owned by it (so they go when it goes); it becomes
    Completed when they have all completed, Failed as soon as one fails. Its Jobs are ordinary Jobs, run by the
    worker's own Job controller and kubelet. ``skip`` names groups it must leave alone (the test finishes them)."""

    def __init__(
        self, client: KubeClient, namespace: str, skip: Callable[[Obj], bool] = lambda _g: False
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.skip = skip
        self.groups = Informer(client, JOBGROUPS, namespace)
        self.jobs = Informer(client, JOBS, namespace, label_selector=GROUP_LABEL)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.failures: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self.groups.add_handlers(Handlers(on_add=self._enqueue, on_update=lambda _o, g: self._enqueue(g)))
        self.jobs.add_handlers(
            Handlers(on_add=self._enqueue_owner, on_update=lambda _o, j: self._enqueue_owner(j))
        )

    def _enqueue(self, group: Obj) -> None:
        self.queue.put_nowait(str(group["metadata"]["name"]))

    def _enqueue_owner(self, job: Obj) -> None:
        owner = labels(job).get(GROUP_LABEL)
        if owner:
            self.queue.put_nowait(owner)

    async def start(self) -> None:
        self.groups.start()
        self.jobs.start()
        await self.groups.wait_for_sync()
        await self.jobs.wait_for_sync()
        self._task = asyncio.create_task(self._run(), name=f"jobgroup runner {self.client.name}")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        await self.groups.stop()
        await self.jobs.stop()

    async def _run(self) -> None:
        while True:
            name = await self.queue.get()
            try:
                await self._sync(name)
            except KubeError as exc:
                self.failures.append(f"{name}: {exc}")
                self.queue.put_nowait(name)

    async def _sync(self, name: str) -> None:
        group = self.groups.get(f"{self.namespace}/{name}")
        if group is None or group_finished(group) or self.skip(group):
            return
        meta = group["metadata"]
        if meta.get("deletionTimestamp") or (group.get("spec") or {}).get("suspend") is True:
            return
        children: list[Obj | None] = []
        for entry in (group.get("spec") or {}).get("replicatedJobs") or []:
            for index in range(int(entry.get("replicas", 1))):
                child_name = f"{name}-{entry['name']}-{index}"
                child = self.jobs.get(f"{self.namespace}/{child_name}")
                if child is None:
                    await self._create_child(group, child_name, entry)
                children.append(child)
        if any(c is not None and condition_true(c, "Failed") for c in children):
            await self._finish(name, "Failed", "AJobFailed", children)
        elif children and all(c is not None and condition_true(c, "Complete") for c in children):
            await self._finish(name, "Completed", "AllJobsCompleted", children)

    async def _create_child(self, group: Obj, child_name: str, entry: Obj) -> None:
        meta = group["metadata"]
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": child_name,
                "labels": {GROUP_LABEL: meta["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": group["apiVersion"],
                        "kind": group["kind"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": copy.deepcopy((entry.get("template") or {}).get("spec") or {}),
        }
        with contextlib.suppress(AlreadyExists):
            await self.client.create(JOBS, body, self.namespace)

    async def _finish(self, name: str, condition: str, reason: str, children: list[Obj | None]) -> None:
        succeeded = sum(int((c or {}).get("status", {}).get("succeeded") or 0) for c in children)
        status = {
            "succeeded": succeeded,
            "conditions": [{"type": condition, "status": "True", "reason": reason}],
        }
        await self.client.patch(JOBGROUPS, name, {"status": status}, self.namespace, subresource="status")

"""The local kubelet's Node: registration, node status and the node Lease, as upstream's kubelet keeps them.

What kube-scheduler and kube-controller-manager read of a node agent, on our embedded API server and on an upstream
kube-apiserver alike:

- the Node, registered with addresses (InternalIP 127.0.0.1 and Hostname), capacity and allocatable (cpu, memory,
  pods, ephemeral-storage), a complete ``nodeInfo``, the kubelet endpoint's port in ``daemonEndpoints`` (where the
  API server reaches the kubelet API for ``kubectl logs``), the ``kubernetes.io/{os,arch,hostname}`` labels and no
  taints;
- its conditions: MemoryPressure, DiskPressure and PIDPressure False, Ready True. As upstream's node status
  update does, the status is computed every ``status_period`` (10 s) and posted when it differs from the Node's
  (say the node lifecycle controller marked it Unknown while the kubelet was down) or when ``report_period``
  (5 min) has passed since the last post, which refreshes the heartbeats;
- a Lease named after the node in ``kube-node-lease`` (holder: the node, 40 s, owned by the Node so that it goes
  with it), renewed every ``lease_period`` (10 s): the node lifecycle controller keeps a node Ready while its Lease
  is renewed. The namespace is made when missing (upstream's API server makes it itself; ours may not).

Status goes through ``nodes/status`` as a strategic merge patch, which is what upstream's kubelet sends
(conditions and addresses merge by ``type``), so no read-modify-write conflicts with the node lifecycle
controller's own writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import platform
import shutil
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from multiqueue import __version__
from multiqueue.api.meta import as_dict, as_list, format_time, labels_of, metadata
from multiqueue.api.types import LEASES, NAMESPACES, NODES, Obj
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound

log = logging.getLogger(__name__)

NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
KUBELET_VERSION: Final = "v1.33.0+multiqueue"
NODE_IP: Final = "127.0.0.1"
_ARCHITECTURES: Final = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
# Upstream's kubelet's words for each condition (pkg/kubelet/nodestatus/setters.go).
_CONDITIONS: Final = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


@dataclasses.dataclass(frozen=True)
class NodeTiming:
    """How often the node agent writes (upstream kubelet's defaults)."""

    status_period: float = 10.0  # nodeStatusUpdateFrequency: compute the status, post it when changed
    report_period: float = 300.0  # nodeStatusReportFrequency: post it anyway, refreshing the heartbeats
    lease_period: float = 10.0  # renew the Lease (a quarter of its duration)
    lease_duration: int = 40  # leaseDurationSeconds
    retry: float = 1.0  # after a failed write


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """What the machine says of itself; read once (blocking reads: call :func:`read_node_facts` in a thread)."""

    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str
    architecture: str
    cpu: int
    memory_kib: int
    disk_kib: int

    def node_info(self, mode: str) -> Obj:
        return {
            "machineID": self.machine_id,
            "systemUUID": self.system_uuid,
            "bootID": self.boot_id,
            "kernelVersion": self.kernel_version,
            "osImage": self.os_image,
            "containerRuntimeVersion": f"multiqueue-{mode}://{__version__}",
            "kubeletVersion": KUBELET_VERSION,
            # Deprecated upstream: today's kubelet leaves it empty, and clients still require the field.
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": self.architecture,
        }

    def capacity(self, pods: int) -> Obj:
        return {
            "cpu": str(self.cpu),
            "memory": f"{self.memory_kib}Ki",
            "pods": str(pods),
            "ephemeral-storage": f"{self.disk_kib}Ki",
        }


def read_node_facts(disk: Path) -> NodeFacts:
    """The facts of this machine; ``disk`` is where pods write (its filesystem is the node's ephemeral storage)."""
    machine_id = _first_line(Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
    if not machine_id:
        machine_id = uuid.uuid5(uuid.NAMESPACE_DNS, platform.node() or "localhost").hex
    system_uuid = _first_line(Path("/sys/class/dmi/id/product_uuid")).lower()
    if not system_uuid:
        try:
            system_uuid = str(uuid.UUID(hex=machine_id))
        except ValueError:
            system_uuid = str(uuid.uuid5(uuid.NAMESPACE_OID, machine_id))
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory_kib = pages * page_size // 1024
    except (OSError, ValueError):
        memory_kib = 16 * 1024 * 1024
    while not disk.exists() and disk != disk.parent:
        disk = disk.parent  # not made yet: its filesystem is the one its nearest folder is on
    return NodeFacts(
        machine_id=machine_id,
        system_uuid=system_uuid,
        boot_id=_first_line(Path("/proc/sys/kernel/random/boot_id")) or str(uuid.uuid4()),
        kernel_version=platform.release(),
        os_image=_os_image(),
        architecture=_ARCHITECTURES.get(platform.machine().lower(), platform.machine().lower()),
        cpu=os.cpu_count() or 1,
        memory_kib=memory_kib,
        disk_kib=shutil.disk_usage(disk).total // 1024,
    )


def _first_line(*paths: Path) -> str:
    for path in paths:
        with contextlib.suppress(OSError):
            text = path.read_text(encoding="utf-8").strip()
            if text:
                return text.splitlines()[0].strip()
    return ""


def _os_image() -> str:
    for path in (Path("/etc/os-release"), Path("/usr/lib/os-release")):
        with contextlib.suppress(OSError):
            for line in path.read_text(encoding="utf-8").splitlines():
                key, _, value = line.partition("=")
                if key == "PRETTY_NAME" and value:
                    return value.strip().strip("\"'")
    return "Linux"


# --- what the Node and its Lease say ----------------------------------------------------------------------------


def node_labels(name: str, mode: str, architecture: str) -> dict[str, str]:
    """Upstream kubelet's well-known labels (and their beta forms), plus the local kubelet's mode."""
    return {
        "beta.kubernetes.io/arch": architecture,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": architecture,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "multiqueue.dev/kubelet-mode": mode,
    }


def node_conditions(current: list[Obj], now: str) -> list[Obj]:
    """The node's conditions, heartbeats at ``now``; a condition whose status stays keeps its transition time."""
    previous = {str(as_dict(c).get("type")): as_dict(c) for c in current}
    conditions = []
    for type_, status, reason, message in _CONDITIONS:
        before = previous.get(type_, {})
        kept = before.get("status") == status and before.get("lastTransitionTime")
        conditions.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": kept or now,
            }
        )
    return conditions


def node_status(facts: NodeFacts, name: str, mode: str, pods: int, port: int, conditions: list[Obj]) -> Obj:
    capacity = facts.capacity(pods)
    return {
        "addresses": [{"type": "InternalIP", "address": NODE_IP}, {"type": "Hostname", "address": name}],
        "capacity": capacity,
        "allocatable": dict(capacity),
        "conditions": conditions,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": facts.node_info(mode),
    }


def _without_heartbeats(status: Obj) -> Obj:
    conditions = [
        {k: v for k, v in as_dict(c).items() if k != "lastHeartbeatTime"}
        for c in as_list(status.get("conditions"))
    ]
    return {**status, "conditions": sorted(conditions, key=lambda c: str(c.get("type")))}


def status_differs(desired: Obj, current: Obj) -> bool:
    """Whether the Node's status says anything else than ``desired`` (heartbeat times aside)."""
    mine = _without_heartbeats(desired)
    theirs = _without_heartbeats(current)
    return any(mine.get(key) != theirs.get(key) for key in mine)


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(name: str, duration: int, now: datetime, node_uid: str | None) -> Obj:
    meta: Obj = {"name": name, "namespace": NODE_LEASE_NAMESPACE}
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {"holderIdentity": name, "leaseDurationSeconds": duration, "renewTime": micro_time(now)},
    }


# --- the agent --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class NodeIdentity:
    name: str
    mode: str  # the local kubelet's mode, in a label and in nodeInfo.containerRuntimeVersion
    capacity_pods: int
    disk: Path  # where pods write: its filesystem is the node's ephemeral storage
    cpu: int | None = None  # the cores the Node advertises; None: this machine's


class NodeAgent:
    """Registers the Node and keeps its status and its Lease fresh until cancelled."""

    def __init__(
        self,
        client: KubeClient,
        identity: NodeIdentity,
        clock: Callable[[], datetime],
        timing: NodeTiming | None = None,
    ) -> None:
        self.client = client
        self.identity = identity
        self.clock = clock
        self.timing = timing or NodeTiming()
        self.port = 0  # the kubelet API's port, in daemonEndpoints
        self._facts: NodeFacts | None = None
        self._uid: str | None = None
        self._lease: Obj | None = None
        self._reported: datetime | None = None  # when the status was last posted

    @property
    def name(self) -> str:
        return self.identity.name

    async def register(self, port: int) -> None:
        """Create the Node (or take over the one there, with today's labels) and post its status."""
        self.port = port
        if self._facts is None:
            facts = await asyncio.to_thread(read_node_facts, self.identity.disk)
            cpu = self.identity.cpu
            self._facts = facts if cpu is None else dataclasses.replace(facts, cpu=cpu)
        labels = node_labels(self.name, self.identity.mode, self._facts.architecture)
        node: Obj = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels},
            "spec": {},  # no taints: ready for pods at once (the node lifecycle controller taints it if it fails)
        }
        try:
            created = await self.client.create(NODES, node)
        except AlreadyExists:
            created = await self.client.get(NODES, self.name)
            if any(labels_of(created).get(k) != v for k, v in labels.items()):
                created = await self.client.patch(NODES, self.name, {"metadata": {"labels": labels}})
        self._uid = str(metadata(created).get("uid") or "") or None
        self._lease = None
        await self.update_status(force=True, current=created)

    async def run(self) -> None:
        """Renew the Lease and keep the status posted, until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(
                self._every(lambda: self.timing.lease_period, self.renew_lease, "renew its Lease")
            )
            group.create_task(
                self._every(lambda: self.timing.status_period, self.update_status, "post its status")
            )

    async def _every(
        self, period: Callable[[], float], work: Callable[[], Awaitable[None]], what: str
    ) -> None:
        while True:
            try:
                await work()
                delay = period()
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                log.warning("kubelet %s: could not %s: %s", self.name, what, exc)
                delay = min(self.timing.retry, period())
            except Exception:
                log.exception("kubelet %s: could not %s", self.name, what)
                delay = min(self.timing.retry, period())
            await asyncio.sleep(delay)

    async def update_status(self, force: bool = False, current: Obj | None = None) -> None:
        """Post the node's status when it differs from the Node's, or when the report period has passed."""
        assert self._facts is not None, "register first"
        now = self.clock()
        if current is None:
            try:
                current = await self.client.get(NODES, self.name)
            except NotFound:
                log.warning("kubelet %s: its Node is gone; registering it again", self.name)
                await self.register(self.port)
                return
        status = as_dict(current.get("status"))
        conditions = node_conditions(as_list(status.get("conditions")), format_time(now))
        desired = node_status(
            self._facts, self.name, self.identity.mode, self.identity.capacity_pods, self.port, conditions
        )
        due = self._reported is None or now - self._reported >= timedelta(seconds=self.timing.report_period)
        if not (force or due or status_differs(desired, status)):
            return
        await self.client.patch(
            NODES, self.name, {"status": desired}, patch_type="strategic", subresource="status"
        )
        self._reported = now

    async def renew_lease(self) -> None:
        """Renew the node's Lease (made, with its namespace, when missing)."""
        now = self.clock()
        if self._lease is None:
            try:
                self._lease = await self.client.get(LEASES, self.name, NODE_LEASE_NAMESPACE)
            except NotFound:
                self._lease = await self._create_lease(now)
                return
        lease = dict(self._lease)
        lease["spec"] = {
            **as_dict(lease.get("spec")),
            "holderIdentity": self.name,
            "leaseDurationSeconds": self.timing.lease_duration,
            "renewTime": micro_time(now),
        }
        try:
            self._lease = await self.client.update(LEASES, lease)
        except (Conflict, NotFound):
            self._lease = None  # read it again next time
            raise

    async def _create_lease(self, now: datetime) -> Obj:
        body = lease_body(self.name, self.timing.lease_duration, now, self._uid)
        try:
            return await self.client.create(LEASES, body, NODE_LEASE_NAMESPACE)
        except NotFound:
            # No kube-node-lease namespace: upstream's API server makes it, ours may not.
            with contextlib.suppress(AlreadyExists):
                namespace = {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": NODE_LEASE_NAMESPACE},
                }
                await self.client.create(NAMESPACES, namespace)
            return await self.client.create(LEASES, body, NODE_LEASE_NAMESPACE)


def cordoned(node: Obj | None) -> bool:
    """Whether the Node is marked unschedulable (``kubectl cordon``, ``kubectl drain``): a kubelet that binds pods
    itself, where no scheduler runs, binds no new pod there, as kube-scheduler would not."""
    return node is not None and as_dict(node.get("spec")).get("unschedulable") is True

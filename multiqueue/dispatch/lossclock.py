"""The loss clock in cluster state: when each worker stopped answering, kept on the management cluster so that a
new leader, or a restarted manager, goes on counting from there instead of starting the worker-lost timeout anew.

One Lease per worker (``<manager>-worker-<worker>`` in the leader-election namespace) carries the annotation
``multiqueue.dev/inactive-since`` while the worker is unreachable; only the leader writes them, through the
shared reconcile loop. Every replica reads them when it starts and when it takes the lead, and keeps the earlier
of what it saw itself and what is recorded.
"""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from typing import Final

from multiqueue.api.meta import annotations_of, as_dict, metadata, parse_time
from multiqueue.api.types import LEASES, Obj
from multiqueue.dispatch.mirror import ORIGIN_LABEL
from multiqueue.dispatch.workers import WorkerPool
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner

log = logging.getLogger(__name__)

INACTIVE_SINCE: Final = "multiqueue.dev/inactive-since"
RETRY_SOON: Final = 0.1


def lease_name(origin: str, worker: str) -> str:
    return f"{origin}-worker-{worker}"


def _micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def recorded_since(lease: Obj | None) -> float | None:
    """When the Lease says its worker stopped answering (epoch seconds), or None."""
    moment = parse_time(annotations_of(lease).get(INACTIVE_SINCE)) if lease is not None else None
    return moment.timestamp() if moment is not None else None


def lease_to_write(
    existing: Obj | None, namespace: str, origin: str, worker: str, since: float | None, now: float
) -> Obj | None:
    """The Lease that records ``since`` (None: the worker answers), or None when nothing needs writing."""
    recorded = recorded_since(existing)
    if (existing is None and since is None) or (
        existing is not None
        and (recorded is None) == (since is None)
        and abs((recorded or 0) - (since or 0)) < 1e-3
    ):
        return None
    lease = copy.deepcopy(existing) if existing is not None else {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease_name(origin, worker), "namespace": namespace, "labels": {ORIGIN_LABEL: origin}},
        "spec": {},
    }  # fmt: skip
    annotations = dict(annotations_of(lease))
    if since is None:
        annotations.pop(INACTIVE_SINCE, None)
    else:
        annotations[INACTIVE_SINCE] = _micro_time(since)
    metadata(lease)["annotations"] = annotations
    lease["spec"] = {**as_dict(lease.get("spec")), "holderIdentity": origin, "renewTime": _micro_time(now)}
    return lease


class LossClock:
    """Keeps the pool's loss clocks and their Leases in step."""

    def __init__(self, client: KubeClient, namespace: str, pool: WorkerPool) -> None:
        self.client = client
        self.namespace = namespace
        self.pool = pool
        # Fed by the pool's health changes; each term starts from every worker.
        self.runner: Runner[str] = Runner(
            Controller("loss-clock", self.sync, cached=lambda: list(pool.workers), prepare=self.load)
        )
        pool.on_health.append(self.runner.add)

    async def load(self) -> None:
        """Take over what is recorded: a worker that is unreachable now has been so since the earlier time."""
        try:
            leases, _ = await self.client.list(
                LEASES, self.namespace, label_selector=f"{ORIGIN_LABEL}={self.pool.origin}"
            )
        except KubeError as exc:
            log.warning("reading the workers' loss clocks: %s", exc)
            return
        for lease in leases:
            since = recorded_since(lease)
            for name, worker in self.pool.workers.items():
                if lease_name(self.pool.origin, name) != metadata(lease).get("name") or since is None:
                    continue
                if worker.inactive_since is not None and since < worker.inactive_since:
                    self.pool.unreachable_since(worker, since)
                    log.info("worker %s has been unreachable since %s", name, _micro_time(since))

    async def run(self) -> None:
        """While leading: load what is recorded, then write every worker's state as it changes."""
        await self.runner.run()

    async def sync(self, name: str) -> float | None:
        worker = self.pool.workers.get(name)
        if worker is None:
            return None
        try:
            existing: Obj | None = await self.client.get(
                LEASES, lease_name(self.pool.origin, name), self.namespace
            )
        except NotFound:
            existing = None
        lease = lease_to_write(
            existing, self.namespace, self.pool.origin, name, worker.inactive_since, self.pool.clock()
        )
        if lease is None:
            return None
        try:
            if existing is None:
                await self.client.create(LEASES, lease, self.namespace)
            else:
                await self.client.update(LEASES, lease)
        except (AlreadyExists, Conflict):
            return RETRY_SOON
        return None

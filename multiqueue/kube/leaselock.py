"""A coordination.k8s.io/v1 Lease used as a lock (client-go's resourcelock.LeaseLock): reading the lease and
writing its record for one candidate. When to take, renew or give it up is the elector's business
(:mod:`multiqueue.kube.leaderelection`); this module only knows what the record looks like.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from datetime import UTC, datetime
from typing import Any

from multiqueue.api.types import LEASES
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import Conflict, NotFound


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclasses.dataclass(frozen=True)
class LeaseLock:
    """The Lease ``namespace/name``, as seen and written by the candidate ``identity``."""

    client: KubeClient
    namespace: str
    name: str
    identity: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> dict[str, Any]:
        return await self.client.get(LEASES, self.name, self.namespace)

    async def create(self, now: datetime, duration: float) -> None:
        """Take a lease nobody has made yet."""
        await self.client.create(LEASES, self._record(None, now, 0, duration), self.namespace)

    async def update(
        self, current: dict[str, Any], now: datetime, transitions: int, duration: float, keep_acquire: bool
    ) -> dict[str, Any]:
        """Write ``current`` back held by this candidate (renewed, or taken over); the lease as stored."""
        return await self.client.update(
            LEASES, self._record(current, now, transitions, duration, keep_acquire)
        )

    async def release(self) -> None:
        """Hand the lease back so the next candidate need not wait for it to expire."""
        lease = await self.get()
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(datetime.now(UTC)))
        lease["spec"] = spec
        with contextlib.suppress(Conflict, NotFound):
            await self.client.update(LEASES, lease)

    def _record(
        self,
        current: dict[str, Any] | None,
        now: datetime,
        transitions: int,
        duration: float,
        keep_acquire: bool = False,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
        }
        if current is not None:
            body = copy.deepcopy(current)
        spec: dict[str, Any] = body.setdefault("spec", {})
        stamp = _micro_time(now)
        if not keep_acquire:
            spec["acquireTime"] = stamp
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=int(duration),
            renewTime=stamp,
            leaseTransitions=transitions,
        )
        return body

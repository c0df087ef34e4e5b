"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's timing rules.

A candidate takes the lease when it is free or its holder has not renewed it for ``lease_duration`` as observed
by this candidate's own clock (clocks of different machines are never compared). The leader renews every
``retry_period``; if it cannot renew within ``renew_deadline`` it stops leading, before anyone else may take over.
On a clean shutdown the leader releases the lease so a successor need not wait out the duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from multiqueue.api.types import LEASES
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from multiqueue.kube.tasks import cancel_and_wait

log = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None] | None]


@dataclasses.dataclass
class LeaseTimings:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        timings: LeaseTimings | None = None,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.timings = timings or LeaseTimings()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self._leading = asyncio.Event()
        self._observed: dict[str, Any] | None = None  # last lease record we saw
        self._observed_at = 0.0  # monotonic time we first saw that record
        self._last_renew = 0.0

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    async def wait_until_leading(self) -> None:
        await self._leading.wait()

    async def run(self) -> None:
        """Campaign, lead, and campaign again after losing the lease, until cancelled (which releases it)."""
        try:
            while True:
                if await self._try_acquire_or_renew():
                    if not self.is_leader:
                        self._leading.set()
                        log.info("%s became leader of lease %s/%s", self.identity, self.namespace, self.name)
                        await _call(self.on_started_leading)
                    self._last_renew = time.monotonic()
                elif self.is_leader and time.monotonic() - self._last_renew > self.timings.renew_deadline:
                    await self._step_down()
                await asyncio.sleep(self.timings.retry_period)
        finally:
            if self.is_leader:
                with contextlib.suppress(KubeError, asyncio.CancelledError):
                    await asyncio.shield(self._release())
                await self._step_down()

    async def _step_down(self) -> None:
        if self.is_leader:
            self._leading.clear()
            log.warning("%s stopped leading lease %s/%s", self.identity, self.namespace, self.name)
            await _call(self.on_stopped_leading)

    async def _try_acquire_or_renew(self) -> bool:
        now = datetime.now(UTC)
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            try:
                await self.client.create(LEASES, self._lease_body(None, now, transitions=0), self.namespace)
                return True
            except (AlreadyExists, Conflict):
                return False
            except KubeError as exc:
                log.warning("creating lease %s/%s: %s", self.namespace, self.name, exc)
                return False
        except KubeError as exc:
            log.warning("reading lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        spec = lease.get("spec") or {}
        if spec != (self._observed or {}).get("spec"):
            self._observed = lease
            self._observed_at = time.monotonic()
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.timings.lease_duration)
        held_by_other = holder not in ("", self.identity)
        if held_by_other and time.monotonic() - self._observed_at < duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        body = self._lease_body(lease, now, transitions, keep_acquire=holder == self.identity)
        try:
            updated = await self.client.update(LEASES, body)
        except (Conflict, NotFound):
            return False
        except KubeError as exc:
            log.warning("renewing lease %s/%s: %s", self.namespace, self.name, exc)
            return False
        self._observed = updated
        self._observed_at = time.monotonic()
        return True

    def _lease_body(
        self, current: dict[str, Any] | None, now: datetime, transitions: int, keep_acquire: bool = False
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
            leaseDurationSeconds=int(self.timings.lease_duration),
            renewTime=stamp,
            leaseTransitions=transitions,
        )
        return body

    async def _release(self) -> None:
        """Hand the lease back so the next candidate need not wait for it to expire."""
        lease = await self.client.get(LEASES, self.name, self.namespace)
        spec = lease.get("spec") or {}
        if spec.get("holderIdentity") != self.identity:
            return
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time(datetime.now(UTC)))
        lease["spec"] = spec
        with contextlib.suppress(Conflict, NotFound):
            await self.client.update(LEASES, lease)


async def _call(callback: Callback | None) -> None:
    if callback is None:
        return
    result = callback()
    if result is not None:
        await result


class LeaderWork:
    """Named work that runs while this replica leads (at once without leader election) and is cancelled when
    it stops leading; each term starts it afresh."""

    def __init__(self) -> None:
        self._work: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.leading = False

    def add(self, name: str, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._work[name] = work
        if self.leading:
            self._tasks.append(asyncio.create_task(work(), name=name))

    def start(self) -> None:
        self.leading = True
        self._tasks = [asyncio.create_task(work(), name=name) for name, work in self._work.items()]

    async def stop(self) -> None:
        self.leading = False
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

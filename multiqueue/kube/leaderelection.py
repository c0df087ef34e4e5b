"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's timing rules.

A candidate takes the lease when it is free or its holder has not renewed it for ``lease_duration`` as observed
by this candidate's own clock (clocks of different machines are never compared). The leader renews every
``retry_period``; if it cannot renew within ``renew_deadline`` it stops leading, before anyone else may take over.
On a clean shutdown the leader releases the lease so a successor need not wait out the duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from multiqueue.kube.leaselock import LeaseLock
from multiqueue.loop.tasks import cancel_and_wait, start_guarded

log = logging.getLogger(__name__)

Callback = Callable[[], Awaitable[None] | None]


@dataclasses.dataclass
class LeaseTimings:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


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
        self.lock = LeaseLock(client, namespace, name, identity)
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
                        log.info("%s became leader of lease %s", self.lock.identity, self.lock)
                        await _call(self.on_started_leading)
                    self._last_renew = time.monotonic()
                elif self.is_leader and time.monotonic() - self._last_renew > self.timings.renew_deadline:
                    await self._step_down()
                await asyncio.sleep(self.timings.retry_period)
        finally:
            if self.is_leader:
                with contextlib.suppress(KubeError, asyncio.CancelledError):
                    await asyncio.shield(self.lock.release())
                await self._step_down()

    async def _step_down(self) -> None:
        if self.is_leader:
            self._leading.clear()
            log.warning("%s stopped leading lease %s", self.lock.identity, self.lock)
            await _call(self.on_stopped_leading)

    async def _try_acquire_or_renew(self) -> bool:
        now = datetime.now(UTC)
        lock, identity = self.lock, self.lock.identity
        try:
            lease = await lock.get()
        except NotFound:
            try:
                await lock.create(now, self.timings.lease_duration)
                return True
            except (AlreadyExists, Conflict):
                return False
            except KubeError as exc:
                log.warning("creating lease %s: %s", lock, exc)
                return False
        except KubeError as exc:
            log.warning("reading lease %s: %s", lock, exc)
            return False
        spec = lease.get("spec") or {}
        if spec != (self._observed or {}).get("spec"):
            self._observed = lease
            self._observed_at = time.monotonic()
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.timings.lease_duration)
        held_by_other = holder not in ("", identity)
        if held_by_other and time.monotonic() - self._observed_at < duration:
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == identity else 1)
        try:
            updated = await lock.update(
                lease, now, transitions, self.timings.lease_duration, keep_acquire=holder == identity
            )
        except (Conflict, NotFound):
            return False
        except KubeError as exc:
            log.warning("renewing lease %s: %s", lock, exc)
            return False
        self._observed = updated
        self._observed_at = time.monotonic()
        return True


async def _call(callback: Callback | None) -> None:
    if callback is None:
        return
    result = callback()
    if result is not None:
        await result


class LeaderWork:
    """Named work that runs while this replica leads (at once without leader election) and is cancelled when
    it stops leading; each term starts it afresh. Each part is guarded: one that fails is logged by its name."""

    def __init__(self) -> None:
        self._work: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.leading = False

    def add(self, name: str, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self._work[name] = work
        if self.leading:
            self._tasks.append(start_guarded(name, work))

    def start(self) -> None:
        self.leading = True
        self._tasks = [start_guarded(name, work) for name, work in self._work.items()]

    async def stop(self) -> None:
        self.leading = False
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

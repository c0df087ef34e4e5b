"""The manager's connections to its workers: one client and informer factory each, from the config file or from
a Secret, and the way a worker leaves (drained until nothing of ours is left on it, then removed)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Final

from multiqueue.dispatch.capacity import Ledger
from multiqueue.dispatch.workers import WorkerPool, WorkerSettings
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import Credentials
from multiqueue.kube.informer import COMPACT, InformerFactory
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# How often a draining worker is looked at besides when a Job or mirror of it goes.
DRAIN_CHECK: Final = 5.0


@dataclasses.dataclass
class Connection:
    client: KubeClient
    factory: InformerFactory
    secret: str | None = None  # the Secret it came from; None for workers of the config file
    fingerprint: str = ""


class WorkerConnections:
    def __init__(
        self, pool: WorkerPool, ledger: Ledger, released: asyncio.Event, options: ClientOptions | None = None
    ) -> None:
        self.options = options
        self.pool = pool
        self.ledger = ledger
        self.released = released  # set when a Job stops holding a worker or a mirror goes
        self.by_name: dict[str, Connection] = {}
        self._retiring: dict[str, asyncio.Task[None]] = {}

    def retiring(self, name: str) -> bool:
        return name in self._retiring

    def by_secret(self, secret: str) -> str | None:
        return next((w for w, c in self.by_name.items() if c.secret == secret), None)

    async def connect(
        self,
        name: str,
        credentials: Credentials,
        settings: WorkerSettings,
        secret: str | None = None,
        fingerprint: str = "",
    ) -> None:
        """Dispatch to ``name`` through ``credentials``; replaces (and closes) an earlier connection of it."""
        retiring = self._retiring.pop(name, None)
        if retiring is not None:
            retiring.cancel()
        client = KubeClient(credentials, name, self.options)
        factory = InformerFactory(client, COMPACT)
        old = self.by_name.get(name)
        self.by_name[name] = Connection(client, factory, secret, fingerprint)
        self.pool.add(name, client, factory, settings)
        factory.start()
        if old is not None:
            await _close(old)

    def drain(self, name: str) -> None:
        """No new Jobs for ``name``; it is let go once nothing of ours is left on it."""
        if name in self._retiring:
            return
        self.pool.drain(name)
        log.info("worker %s is draining", name)
        self._retiring[name] = asyncio.create_task(self._retire(name), name=f"retire:{name}")

    async def _retire(self, name: str) -> None:
        while not self.pool.drained(name, self.ledger):
            self.released.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_CHECK):
                    await self.released.wait()
        self.pool.remove(name)
        connection = self.by_name.pop(name, None)
        self._retiring.pop(name, None)
        if connection is not None:
            await _close(connection)
        log.info("worker %s removed", name)

    async def close(self) -> None:
        await cancel_and_wait(self._retiring.values())
        for connection in self.by_name.values():
            await _close(connection)


async def _close(connection: Connection) -> None:
    await connection.factory.stop()
    await connection.client.close()

"""The manager process's dispatching half: clients for every cluster, the dispatcher, and their lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher
from multiqueue.dispatch.generic import BatchJobAdapter
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory

log = logging.getLogger(__name__)


class Manager:
    def __init__(self, config: ManagerConfig) -> None:
        self.config = config
        self.management: KubeClient | None = None
        self.management_factory: InformerFactory | None = None
        self.dispatcher: Dispatcher | None = None
        self._clients: list[KubeClient] = []
        self._factories: list[InformerFactory] = []
        self._recorder: EventRecorder | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        config = self.config
        credentials = await load_credentials(
            config.management.kubeconfig,
            config.management.context,
            allow_insecure=config.management.allow_insecure,
        )
        self.management = KubeClient(credentials, "management")
        self.management_factory = InformerFactory(self.management)
        self._clients.append(self.management)
        self._factories.append(self.management_factory)
        workers = {}
        for worker in config.workers:
            worker_credentials = await load_credentials(
                worker.kubeconfig, worker.context, allow_insecure=worker.allow_insecure
            )
            client = KubeClient(worker_credentials, worker.name)
            factory = InformerFactory(client)
            self._clients.append(client)
            self._factories.append(factory)
            workers[worker.name] = (client, factory, dict(worker.labels))
        self._recorder = EventRecorder(self.management, COMPONENT)
        self.dispatcher = Dispatcher(
            BatchJobAdapter(),
            self.management,
            self.management_factory,
            workers,
            self._recorder,
            origin=config.name,
            managed_by=config.managed_by,
            policy=config.placement,
        )
        for factory in self._factories:
            factory.start()
        self._recorder.start()
        self._task = asyncio.create_task(self._run(), name="dispatcher")

    async def _run(self) -> None:
        assert self.dispatcher is not None
        try:
            await self.dispatcher.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the dispatcher stopped")
            raise

    async def wait(self) -> None:
        if self._task is not None:
            await self._task

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._recorder is not None:
            await self._recorder.stop()
        for factory in self._factories:
            await factory.stop()
        for client in self._clients:
            await client.close()

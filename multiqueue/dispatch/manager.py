"""The manager process's dispatching half: clients for every cluster, the dispatcher, and their lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher
from multiqueue.dispatch.kinds import ADAPTERS
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
        self.dispatchers: dict[str, Dispatcher] = {}
        self._clients: list[KubeClient] = []
        self._factories: list[InformerFactory] = []
        self._recorder: EventRecorder | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def dispatcher(self) -> Dispatcher | None:
        """The batch/v1 Job dispatcher (what status, metrics and most tests look at)."""
        return self.dispatchers.get("Job")

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
        for kind in config.kinds:
            self.dispatchers[kind] = Dispatcher(
                ADAPTERS[kind](),
                self.management,
                self.management_factory,
                workers,
                self._recorder,
                origin=config.name,
                managed_by=config.managed_by,
                policy=config.placement,
                namespaces=frozenset(config.namespaces),
                gc_interval=config.gc_interval,
            )
        for factory in self._factories:
            factory.start()
        self._recorder.start()
        self._tasks = [
            asyncio.create_task(self._run(d), name=f"dispatcher:{k}") for k, d in self.dispatchers.items()
        ]

    async def _run(self, dispatcher: Dispatcher) -> None:
        try:
            await dispatcher.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the dispatcher of %s stopped", dispatcher.adapter.resource.kind)
            raise

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._recorder is not None:
            await self._recorder.stop()
        for factory in self._factories:
            await factory.stop()
        for client in self._clients:
            await client.close()

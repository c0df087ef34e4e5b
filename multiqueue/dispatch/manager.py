"""The manager process's dispatching half: clients for every cluster, the dispatcher, and their lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid

from multiqueue.api.quantities import parse_quantity
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher, WorkerSettings
from multiqueue.dispatch.kinds import ADAPTERS
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import InformerFactory
from multiqueue.kube.leaderelection import LeaderElector, LeaseTimings

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
        self._elector: LeaderElector | None = None
        self._election: asyncio.Task[None] | None = None
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

    @property
    def leading(self) -> bool:
        """Dispatching now: always without leader election, else while holding the Lease."""
        return bool(self._tasks)

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
            quota = {name: parse_quantity(value) or 0.0 for name, value in worker.capacity.resources.items()}
            settings = WorkerSettings(dict(worker.labels), worker.capacity.max_jobs, quota)
            workers[worker.name] = (client, factory, settings)
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
        election = config.leader_election
        if not election.enabled:
            self._start_dispatching()
            return
        self._elector = LeaderElector(
            self.management,
            election.namespace,
            election.lease_name,
            self.identity,
            timings=LeaseTimings(election.lease_duration, election.renew_deadline, election.retry_period),
            on_started_leading=self._start_dispatching,
            on_stopped_leading=self._stop_dispatching,
        )
        self._election = asyncio.create_task(self._elector.run(), name="leader-election")

    def _start_dispatching(self) -> None:
        log.info("manager %s dispatches", self.identity)
        self._tasks = [
            asyncio.create_task(self._run(d), name=f"dispatcher:{k}") for k, d in self.dispatchers.items()
        ]

    async def _stop_dispatching(self) -> None:
        """Lost the Lease: stop writing at once; the caches stay warm for a later term."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for dispatcher in self.dispatchers.values():
            dispatcher.reset_queue()

    async def _run(self, dispatcher: Dispatcher) -> None:
        try:
            await dispatcher.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the dispatcher of %s stopped", dispatcher.adapter.resource.kind)
            raise

    async def stop(self) -> None:
        """Stop cleanly: hand the Lease back (so a successor starts at once), then close everything."""
        if self._election is not None:
            self._election.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._election
        await self._stop_dispatching()
        if self._recorder is not None:
            await self._recorder.stop()
        for factory in self._factories:
            await factory.stop()
        for client in self._clients:
            await client.close()

"""The manager process's dispatching half: clients for every cluster, the dispatcher, and their lifecycle.

Workers come from the config file and, at runtime, from Secrets (``workersecrets``): a new Secret adds a worker,
a changed one reconnects it, a deleted one drains it (no new Jobs; it is let go once nothing of ours is left).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Final

from opentelemetry.metrics import Meter

from multiqueue.api.meta import metadata
from multiqueue.api.types import PRIORITY_CLASSES, SECRETS
from multiqueue.dispatch.adapters import ADAPTERS
from multiqueue.dispatch.config import ManagerConfig
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher, DispatchSettings
from multiqueue.dispatch.mirror import CLUSTER_LABEL, Identity
from multiqueue.dispatch.workersecrets import SecretWorker, WorkerSecretError, settings_of, worker_from_secret
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import KubeconfigError, load_credentials
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.kube.leaderelection import LeaderElector, LeaseTimings
from multiqueue.kube.tasks import cancel_and_wait
from multiqueue.kube.workqueue import WorkQueue, run_workers

log = logging.getLogger(__name__)

# How often a draining worker is looked at besides when a Job or mirror of it goes.
DRAIN_CHECK: Final = 5.0


@dataclasses.dataclass
class _Connection:
    client: KubeClient
    factory: InformerFactory
    secret: str | None = None  # the Secret it came from; None for workers of the config file
    fingerprint: str = ""


class Manager:
    def __init__(self, config: ManagerConfig, meter: Meter | None = None) -> None:
        self.config = config
        self.meter = meter
        self.management: KubeClient | None = None
        self.management_factory: InformerFactory | None = None
        self.dispatcher: Dispatcher | None = None
        self._clients: list[KubeClient] = []
        self._factories: list[InformerFactory] = []
        self._workers: dict[str, _Connection] = {}
        # Why a Secret did not make a worker, by Secret name (shown by status and metrics).
        self.refused_secrets: dict[str, WorkerSecretError] = {}
        self._secrets: Informer | None = None
        self._secret_queue: WorkQueue[str] = WorkQueue("worker-secrets")
        self._secret_worker: asyncio.Task[None] | None = None
        self._retiring: dict[str, asyncio.Task[None]] = {}
        # What else only the leader runs (the embedded controllers), by name.
        self._leader_work: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        self._recorder: EventRecorder | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._elector: LeaderElector | None = None
        self._election: asyncio.Task[None] | None = None
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"

    @property
    def leading(self) -> bool:
        """Dispatching now: always without leader election, else while holding the Lease."""
        return bool(self._tasks)

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
        priorities = self.management_factory.informer(PRIORITY_CLASSES)
        self._recorder = EventRecorder(self.management, COMPONENT)
        self.dispatcher = dispatcher = Dispatcher(
            [ADAPTERS[kind]() for kind in config.kinds],
            self.management,
            self.management_factory,
            self._recorder,
            DispatchSettings(
                Identity(config.name, config.managed_by),
                config.placement,
                namespaces=frozenset(config.namespaces),
                gc_interval=config.gc_interval,
                worker_lost_timeout=config.worker_lost_timeout,
            ),
            priorities=priorities,
            meter=self.meter,
        )
        for worker in config.workers:
            worker_credentials = await load_credentials(
                worker.kubeconfig, worker.context, allow_insecure=worker.allow_insecure
            )
            client = KubeClient(worker_credentials, worker.name)
            factory = InformerFactory(client)
            self._workers[worker.name] = _Connection(client, factory)
            dispatcher.pool.add(worker.name, client, factory, settings_of(worker.labels, worker.capacity))
        if config.worker_secrets.enabled:
            self._secrets = self.management_factory.informer(
                SECRETS, config.namespace, label_selector=CLUSTER_LABEL
            )
            self._secrets.add_handlers(
                Handlers(
                    on_add=self._secret_changed,
                    on_update=lambda _old, new: self._secret_changed(new),
                    on_delete=self._secret_changed,
                )
            )
            self._secret_worker = asyncio.create_task(
                run_workers(self._secret_queue, self._sync_secret, 1), name="worker-secrets"
            )
        for factory in self._factories:
            factory.start()
        for connection in self._workers.values():
            connection.factory.start()
        dispatcher.pool.start_following()
        self._recorder.start()
        election = config.leader_election
        if not election.enabled:
            self._start_dispatching()
            return
        self._elector = LeaderElector(
            self.management,
            config.lease_namespace,
            election.lease_name,
            self.identity,
            timings=LeaseTimings(election.lease_duration, election.renew_deadline, election.retry_period),
            on_started_leading=self._start_dispatching,
            on_stopped_leading=self._stop_dispatching,
        )
        self._election = asyncio.create_task(self._elector.run(), name="leader-election")

    def run_while_leading(self, name: str, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work`` whenever this replica leads (at once without leader election), cancel it when it stops."""
        self._leader_work[name] = work
        if self.leading:
            self._tasks.append(asyncio.create_task(work(), name=name))

    def _start_dispatching(self) -> None:
        log.info("manager %s dispatches", self.identity)
        assert self.dispatcher is not None
        self._tasks = [asyncio.create_task(self._run(self.dispatcher), name="dispatcher")]
        self._tasks += [asyncio.create_task(work(), name=name) for name, work in self._leader_work.items()]

    async def _stop_dispatching(self) -> None:
        """Lost the Lease: stop writing at once; the caches stay warm for a later term."""
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        if self.dispatcher is not None:
            self.dispatcher.reset_queue()

    async def _run(self, dispatcher: Dispatcher) -> None:
        try:
            await dispatcher.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the dispatcher stopped")
            raise

    async def stop(self) -> None:
        """Stop cleanly: hand the Lease back (so a successor starts at once), then close everything."""
        await cancel_and_wait([self._election])
        await self._stop_dispatching()
        self._secret_queue.shut_down()
        await cancel_and_wait([self._secret_worker, *self._retiring.values()])
        if self.dispatcher is not None:
            await self.dispatcher.pool.close()
        if self._recorder is not None:
            await self._recorder.stop()
        for factory in [*self._factories, *(c.factory for c in self._workers.values())]:
            await factory.stop()
        for client in [*self._clients, *(c.client for c in self._workers.values())]:
            await client.close()

    # --- workers from Secrets ------------------------------------------------------------------------------------

    def _secret_changed(self, secret: dict[str, Any]) -> None:
        self._secret_queue.add(str(metadata(secret).get("name")))

    async def _sync_secret(self, name: str) -> None:
        assert self._secrets is not None
        secret = self._secrets.get(f"{self.config.namespace}/{name}")
        current = next((w for w, c in self._workers.items() if c.secret == name), None)
        if secret is None or metadata(secret).get("deletionTimestamp"):
            self.refused_secrets.pop(name, None)
            if current is not None:
                self._drain(current)
            return
        try:
            found = worker_from_secret(
                secret, allow_unsafe=self.config.worker_secrets.allow_insecure_kubeconfigs
            )
            taken = self._workers.get(found.name)
            if taken is not None and taken.secret != name:
                where = f"Secret {taken.secret}" if taken.secret else "the config file"
                raise WorkerSecretError(
                    "DuplicateWorker", f"worker {found.name} is already defined by {where}"
                )
            if current is not None and current != found.name:
                self._drain(current)  # the Secret now names another worker
            if (
                taken is not None
                and taken.fingerprint == found.fingerprint
                and found.name not in self._retiring
            ):
                return
            await self._connect(name, found)
        except (WorkerSecretError, KubeconfigError) as exc:
            refusal = (
                exc if isinstance(exc, WorkerSecretError) else WorkerSecretError("BadKubeConfig", str(exc))
            )
            self.refused_secrets[name] = refusal
            log.warning("Secret %s/%s makes no worker: %s", self.config.namespace, name, refusal)
            if self.leading and self._recorder is not None:
                self._recorder.warning(_secret_ref(secret), refusal.reason, str(refusal))
            return
        self.refused_secrets.pop(name, None)

    async def _connect(self, secret: str, found: SecretWorker) -> None:
        """Reach the worker through the Secret's kubeconfig; replaces an earlier connection of that worker."""
        credentials = await load_credentials(
            config_dict=found.kubeconfig, allow_exec=self.config.worker_secrets.allow_insecure_kubeconfigs
        )
        retiring = self._retiring.pop(found.name, None)
        if retiring is not None:
            retiring.cancel()
        client = KubeClient(credentials, found.name)
        factory = InformerFactory(client)
        old = self._workers.get(found.name)
        self._workers[found.name] = _Connection(client, factory, secret, found.fingerprint)
        assert self.dispatcher is not None
        self.dispatcher.pool.add(found.name, client, factory, found.settings)
        factory.start()
        if old is not None:
            await old.factory.stop()
            await old.client.close()
        log.info("worker %s added from Secret %s/%s", found.name, self.config.namespace, secret)

    def _drain(self, worker: str) -> None:
        if worker in self._retiring:
            return
        assert self.dispatcher is not None
        self.dispatcher.pool.drain(worker)
        log.info("worker %s is draining: its Secret is gone", worker)
        self._retiring[worker] = asyncio.create_task(self._retire(worker), name=f"retire:{worker}")

    async def _retire(self, worker: str) -> None:
        """Let a drained worker go once nothing of ours is left on it."""
        dispatcher = self.dispatcher
        assert dispatcher is not None
        while not dispatcher.pool.drained(worker, dispatcher.ledger):
            dispatcher.released.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DRAIN_CHECK):
                    await dispatcher.released.wait()
        dispatcher.pool.remove(worker)
        connection = self._workers.pop(worker, None)
        self._retiring.pop(worker, None)
        if connection is not None:
            await connection.factory.stop()
            await connection.client.close()
        log.info("worker %s removed", worker)


def _secret_ref(secret: dict[str, Any]) -> dict[str, Any]:
    """The Secret as an Event's involved object (objects from a list carry no kind)."""
    return {**secret, "apiVersion": "v1", "kind": "Secret"}

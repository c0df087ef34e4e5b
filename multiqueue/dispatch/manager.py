"""The manager process's dispatching half: the clients of every cluster, the dispatcher, and their lifecycle.

Workers come from the config file and, at runtime, from Secrets (``secretwatch``). Only the replica holding the
Lease dispatches (and runs whatever else is handed to :attr:`Manager.leader_work`); every replica follows the
workers' health, so a new leader knows how long each has been gone.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final, Protocol

from opentelemetry.metrics import Meter
from opentelemetry.trace import Tracer

from multiqueue import __version__
from multiqueue.api.types import NAMESPACES, PRIORITY_CLASSES, Resource
from multiqueue.dispatch.adapters import adapters_of
from multiqueue.dispatch.config import ConfigError, ManagerConfig
from multiqueue.dispatch.connections import WorkerConnections
from multiqueue.dispatch.dispatcher import COMPONENT, Dispatcher, DispatchSettings
from multiqueue.dispatch.lossclock import LossClock
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.readmodel import ReadModel
from multiqueue.dispatch.secretwatch import SecretWorkers
from multiqueue.dispatch.workersecrets import WorkerSecretError, settings_of
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from multiqueue.kube.errors import AlreadyExists, Forbidden, KubeError, NotFound
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import COMPACT, InformerFactory
from multiqueue.kube.leaderelection import LeaderElector, LeaderWork, LeaseTimings
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# Servers log and count the manager's requests under this name, and name it as the field manager of its writes.
USER_AGENT: Final = f"multiqueue-manager/{__version__}"


class Embedded(Protocol):
    """Parts that run on the management cluster beside the dispatcher, as leader work (the embedded controllers)."""

    def work(self) -> Mapping[str, Callable[[], Coroutine[Any, Any, None]]]: ...

    def start(self) -> None: ...

    async def close(self) -> None: ...


# Builds the embedded parts from the management cluster's client and informer factory, before the factory starts.
Embed = Callable[[KubeClient, InformerFactory], Embedded]


class Manager:
    def __init__(
        self, config: ManagerConfig, meter: Meter | None = None, tracer: Tracer | None = None
    ) -> None:
        self.config = config
        self.meter = meter
        self.tracer = tracer
        self.embedded: Embedded | None = None
        self.identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.management: KubeClient | None = None
        self.management_factory: InformerFactory | None = None
        self.dispatcher: Dispatcher | None = None
        self.connections: WorkerConnections | None = None
        self.secrets: SecretWorkers | None = None
        # What /metrics, the dashboard and probes read of this manager, once started.
        self.read_model: ReadModel | None = None
        self.leader_work = LeaderWork()
        self._election: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        """Dispatching now: always without leader election, else while holding the Lease."""
        return self.leader_work.leading

    @property
    def refused_secrets(self) -> dict[str, WorkerSecretError]:
        """Why a Secret made no worker, by Secret name."""
        return self.secrets.refused if self.secrets is not None else {}

    @property
    def client_options(self) -> ClientOptions:
        """Every cluster's client: the config's rate limits (a bucket per cluster), and the manager's User-Agent."""
        limits = self.config.client
        return ClientOptions(qps=limits.qps, burst=limits.burst, user_agent=USER_AGENT)

    def clients(self) -> list[KubeClient]:
        """The manager's clients now: the management cluster's, then each worker's."""
        found = [self.management] if self.management is not None else []
        if self.connections is not None:
            found += [c.client for c in self.connections.by_name.values()]
        return found

    async def start(self, embed: Embed | None = None) -> None:
        """Connect to every cluster and start dispatching (at once, or once elected); ``embed`` builds the parts
        that run beside the dispatcher as leader work."""
        config = self.config
        credentials = await load_credentials(
            config.management.kubeconfig,
            config.management.context,
            allow_insecure=config.management.allow_insecure,
        )
        self.management = management = KubeClient(credentials, "management", self.client_options)
        adapters = adapters_of(config.kinds)
        for adapter in adapters:
            await _ensure_served(management, adapter.resource)
        for namespace in dict.fromkeys([config.namespace, config.lease_namespace]):
            await _ensure_namespace(management, namespace)
        self.management_factory = factory = InformerFactory(management, COMPACT)
        recorder = EventRecorder(management, COMPONENT)
        self.dispatcher = dispatcher = Dispatcher(
            adapters,
            management,
            factory,
            recorder,
            DispatchSettings(
                Identity(config.name, config.managed_by),
                config.placement,
                namespaces=frozenset(config.namespaces),
                gc_interval=config.gc_interval,
                worker_lost_timeout=config.worker_lost_timeout,
                mirror_ttl_after_finished=config.mirror_ttl_after_finished,
                split_limit=config.max_split_parts,
            ),
            priorities=factory.informer(PRIORITY_CLASSES),
            meter=self.meter,
            tracer=self.tracer,
        )
        self.connections = WorkerConnections(
            dispatcher.pool, dispatcher.ledger, dispatcher.released, self.client_options
        )
        for worker in config.workers:
            worker_credentials = await load_credentials(
                worker.kubeconfig, worker.context, allow_insecure=worker.allow_insecure
            )
            await self.connections.connect(
                worker.name, worker_credentials, settings_of(worker.labels, worker.capacity)
            )
        loss_clock = LossClock(management, config.lease_namespace, dispatcher.pool)
        await loss_clock.load()
        if config.worker_secrets.enabled:
            self.secrets = SecretWorkers(
                factory,
                config.namespace,
                self.connections,
                recorder,
                allow_insecure=config.worker_secrets.allow_insecure_kubeconfigs,
                leading=lambda: self.leading,
            )
        self.read_model = ReadModel(
            dispatcher,
            refused=lambda: {name: refusal.reason for name, refusal in self.refused_secrets.items()},
            clients=self.clients,
        )
        self.leader_work.add("dispatcher", dispatcher.run)
        self.leader_work.add("loss-clock", loss_clock.run)
        if embed is not None:
            self.embedded = embed(management, factory)
            for name, work in self.embedded.work().items():
                self.leader_work.add(name, work)
            self.embedded.start()
        factory.start()
        dispatcher.pool.start_following()
        recorder.start()
        election = config.leader_election
        if not election.enabled:
            self._lead()
            return
        elector = LeaderElector(
            management,
            config.lease_namespace,
            election.lease_name,
            self.identity,
            timings=LeaseTimings(election.lease_duration, election.renew_deadline, election.retry_period),
            on_started_leading=self._lead,
            on_stopped_leading=self._follow,
        )
        self._election = asyncio.create_task(elector.run(), name="leader-election")

    def _lead(self) -> None:
        log.info("manager %s dispatches", self.identity)
        self.leader_work.start()

    async def _follow(self) -> None:
        """Lost the Lease: stop writing at once; the caches stay warm for a later term."""
        await self.leader_work.stop()

    async def stop(self) -> None:
        """Stop cleanly: hand the Lease back (so a successor starts at once), then close everything."""
        await cancel_and_wait([self._election])
        await self._follow()
        if self.embedded is not None:
            await self.embedded.close()
        if self.secrets is not None:
            await self.secrets.close()
        if self.dispatcher is not None:
            await self.dispatcher.close()
            await self.dispatcher.pool.close()
            await self.dispatcher.executor.recorder.stop()
        if self.connections is not None:
            await self.connections.close()
        if self.management_factory is not None:
            await self.management_factory.stop()
        if self.management is not None:
            await self.management.close()


async def _ensure_served(client: KubeClient, resource: Resource) -> None:
    """A kind to dispatch must be served by the management cluster (its CRD installed there): refuse to start
    otherwise, naming the kind and the cluster. An identity that may not list it finds out when it dispatches."""
    try:
        await client.list_page(resource, limit=1)
    except NotFound as exc:
        raise ConfigError(
            f"kinds: {resource.kind} ({resource.group or 'core'}/{resource.version} {resource.plural}) is not served "
            f"by the management cluster {client.credentials.server}: install its CRD there, or take it out of kinds"
        ) from exc
    except Forbidden:
        return


async def _ensure_namespace(client: KubeClient, name: str) -> None:
    """The manager's namespace holds its Leases and the Secrets of live workers: make it when it is missing (as
    deploy/ does), and say plainly what is lost when that is not allowed. An identity that may not read Namespaces
    (deploy/'s RBAC grants the manager only what it uses) cannot tell, and goes on as if it were there."""
    try:
        await client.get(NAMESPACES, name)
        return
    except NotFound:
        pass
    except Forbidden:
        log.debug("may not read namespace %s on the management cluster; taking it to exist", name)
        return
    try:
        await client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        log.info("created namespace %s on the management cluster for the manager's Leases", name)
    except AlreadyExists:
        pass
    except KubeError as exc:
        log.warning(
            "namespace %s does not exist on the management cluster and cannot be created (%s): worker loss clocks "
            "are not recorded and leader election cannot run; create it with: kubectl create namespace %s",
            name,
            exc,
            name,
        )

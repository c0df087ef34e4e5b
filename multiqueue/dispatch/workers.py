"""The worker clusters of one manager, shared by every kind it dispatches.

Each worker has one client, one mirror informer per kind (mirrors of this manager only, by the origin label), its
health, the loss clock, drain state and the request slots that keep a hung worker from holding every sync. A worker
whose capacity is read from its Nodes also has a Node and a Pod informer, each keeping a small record per object.

Health comes from the connection itself: a probe of ``/readyz`` with a deadline every few seconds, besides the
watches' own errors, so a worker frozen behind a silent connection is reported within PROBE_PERIOD +
PROBE_TIMEOUT rather than when a watch read times out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Final, Protocol

from multiqueue.api.meta import uid_of
from multiqueue.api.types import NODES, PODS, Obj, Resource
from multiqueue.dispatch.capacity import Ledger, Usage
from multiqueue.dispatch.mirror import ORIGIN_LABEL, cached_mirror
from multiqueue.dispatch.nodecapacity import (
    NodeCapacity,
    combined,
    counted,
    node_capacity,
    node_record,
    pod_record,
)
from multiqueue.dispatch.placement import WorkerView, WorkerViews
from multiqueue.kube.client import KubeClient
from multiqueue.kube.config import KubeconfigError
from multiqueue.kube.errors import Forbidden, KubeError, NotFound, TransportError, Unauthorized
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.loop.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CONNECTED: Final = "Connected"
PROBE_PERIOD: Final = 5.0
PROBE_TIMEOUT: Final = 5.0
# A worker whose every slot is taken by a request older than SLOW_AFTER is slow or hung: Jobs for it are synced
# again later instead of waiting for a slot. A worker that is merely busy is waited for.
SLOW_AFTER: Final = 2.0
# Capacity read from Nodes that grows (a pod of someone else's ends, a Node comes): the waiting Jobs look again
# after this long, so that a burst of such changes makes one pass over them.
FREED_COALESCE: Final = 0.5


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """What the config says about a worker besides how to reach it."""

    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    max_jobs: int | None = None
    quota: dict[str, float] = dataclasses.field(default_factory=dict)
    # Capacity is also read from the worker's Nodes and pods (the smaller wins, resource by resource).
    from_nodes: bool = False


@dataclasses.dataclass
class NodeView:
    """The Node and Pod informers of a worker whose capacity comes from its Nodes, and the last computation over
    them, kept until something it was made from changes."""

    nodes: Informer
    pods: Informer
    generation: int = 0
    computed: tuple[int, NodeCapacity] | None = None

    def changed(self) -> None:
        self.generation += 1

    @property
    def informers(self) -> tuple[Informer, Informer]:
        return self.nodes, self.pods

    def capacity(self, mirrors: Sequence[Informer]) -> NodeCapacity:
        """What the Nodes have left for this manager's Jobs (the pods of its own mirrors left out)."""
        if self.computed is None or self.computed[0] != self.generation:
            ours = frozenset(uid_of(m) for informer in mirrors for m in informer.objects())
            self.computed = (
                self.generation,
                node_capacity(self.nodes.objects(), self.pods.objects(), ours),
            )
        return self.computed[1]


class WorkerBusy(Exception):
    """No slot for this worker came free in time: it is slow or hung."""


class WorkerUnreachable(Exception):
    """The worker stopped answering while a request to it was under way; the request was given up."""


class Slots:
    """Requests to one worker at once; a worker that hangs holds no more than these, and none of them for longer
    than it takes the health probe to notice (:meth:`abort`)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._free = asyncio.Semaphore(count)
        # The deadline of each request holding a slot, and when it started (monotonic).
        self._held: dict[asyncio.Timeout, float] = {}

    def slow(self, now: float) -> bool:
        # Every slot held: a request holds its slot from the moment it takes it (no await between the two).
        return len(self._held) >= self._count and now - min(self._held.values()) > SLOW_AFTER

    def abort(self) -> None:
        """Give up every request under way: the worker stopped answering, so none of them will be answered."""
        now = asyncio.get_running_loop().time()
        for deadline in self._held:
            deadline.reschedule(now)

    @contextlib.asynccontextmanager
    async def held(self, name: str) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(SLOW_AFTER):
                await self._free.acquire()
        except TimeoutError:
            raise WorkerBusy(name) from None
        deadline = asyncio.timeout(None)
        try:
            async with deadline:
                self._held[deadline] = time.monotonic()
                try:
                    yield
                finally:
                    del self._held[deadline]
        except TimeoutError:
            if not deadline.expired():
                raise
            raise WorkerUnreachable(name) from None
        finally:
            self._free.release()


def health_reason(error: BaseException | None, synced: bool) -> str:
    """Connected, or why a worker is not: upstream-style reasons an admin can act on."""
    if error is None:
        return CONNECTED if synced else "Connecting"
    if isinstance(error, Unauthorized):
        return "Unauthorized"
    if isinstance(error, Forbidden):
        return "Forbidden"
    if isinstance(error, KubeconfigError):
        return "BadKubeConfig"
    if isinstance(error, TransportError | OSError):
        return "ClientConnectionFailed"
    return type(error).__name__


@dataclasses.dataclass
class Worker:
    name: str
    client: KubeClient
    settings: WorkerSettings
    mirrors: dict[str, Informer]  # by kind
    slots: Slots
    # Why the last probe failed, or None when it was answered (or none has run yet).
    probe_failure: str | None = None
    # When it stopped being Connected (the pool's clock), or None while it is.
    inactive_since: float | None = None
    # When its last probe was answered (the pool's clock), or None before that.
    last_contact: float | None = None
    draining: bool = False
    follower: asyncio.Task[None] | None = None
    # Its Nodes and pods, when its capacity is read from them.
    node_view: NodeView | None = None

    @property
    def reason(self) -> str:
        """Connected, or why not: what its watches say first, then its last probe. A kind it does not serve
        takes only that kind away from it (:attr:`missing_kinds`), not the worker. Whose capacity comes from its
        Nodes is not Connected before its Nodes and pods are known."""
        for kind, informer in self.mirrors.items():
            if kind in self.missing_kinds:
                continue
            reason = health_reason(informer.last_error, informer.has_synced)
            if reason != CONNECTED:
                return reason
        for informer in self.node_view.informers if self.node_view is not None else ():
            reason = health_reason(informer.last_error, informer.has_synced)
            if reason != CONNECTED:
                return reason
        return self.probe_failure or CONNECTED

    def node_capacity(self) -> NodeCapacity | None:
        """What its Nodes have left for this manager's Jobs, when its capacity is read from them."""
        if self.node_view is None:
            return None
        return self.node_view.capacity(list(self.mirrors.values()))

    @property
    def watched(self) -> list[Informer]:
        """Every informer whose health is the worker's."""
        extra = list(self.node_view.informers) if self.node_view is not None else []
        return [*self.mirrors.values(), *extra]

    @property
    def missing_kinds(self) -> frozenset[str]:
        """The kinds its API server answers 404 for: their CRD is not installed there (yet)."""
        return frozenset(
            k for k, informer in self.mirrors.items() if isinstance(informer.last_error, NotFound)
        )

    @property
    def active(self) -> bool:
        return self.reason == CONNECTED


class PoolListener(Protocol):
    """What the pool tells the dispatcher."""

    def mirror_changed(self, kind: str, mirror: Obj, deleted: bool) -> None: ...

    def worker_changed(self, name: str) -> None:
        """The worker came back, was lost, was added or removed: its Jobs and the waiting ones are synced."""
        ...


class WorkerPool:
    def __init__(
        self,
        kinds: Sequence[Resource],
        origin: str,
        listener: PoolListener,
        *,
        lost_timeout: float,
        slots: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kinds = list(kinds)
        self.origin = origin
        self.listener = listener
        self.lost_timeout = lost_timeout
        self.slot_count = max(1, slots)
        self.clock = clock
        self.workers: dict[str, Worker] = {}
        self.changed = asyncio.Event()  # set when a worker is added or removed
        # Called with a worker's name whenever it stops or starts answering.
        self.on_health: list[Callable[[str], None]] = []
        self._following = False
        # Bumped whenever what a view of a worker shows may have changed, other than what the ledger says it uses
        # (a view is kept while both are as they were): placing a Job sees every worker, and there may be many.
        self.generation = 0
        self._views: dict[str, tuple[int, Usage, WorkerView]] = {}
        self._roster: tuple[int, dict[str, Worker]] = (-1, {})  # the workers as of a generation

    def add(self, name: str, client: KubeClient, factory: InformerFactory, settings: WorkerSettings) -> None:
        """Dispatch to one more worker, or reach a known one through new credentials (its Jobs stay placed)."""
        old = self.workers.get(name)
        if old is not None and old.follower is not None:
            old.follower.cancel()
        mirrors = {}
        for resource in self.kinds:
            informer = factory.informer(
                resource, label_selector=f"{ORIGIN_LABEL}={self.origin}", transform=cached_mirror
            )
            informer.add_handlers(self._mirror_handlers(resource.kind))
            mirrors[resource.kind] = informer
        worker = Worker(name, client, settings, mirrors, Slots(self.slot_count))
        if settings.from_nodes:
            worker.node_view = self._node_view(name, factory, mirrors)
        worker.inactive_since = old.inactive_since if old is not None else self.clock()
        self.workers[name] = worker
        self.generation += 1
        self.changed.set()
        if self._following:
            self._follow(worker)
        self.listener.worker_changed(name)

    def _mirror_handlers(self, kind: str) -> Handlers:
        changed = self.listener.mirror_changed
        return Handlers(
            on_add=lambda m: changed(kind, m, False),
            on_update=lambda _o, m: changed(kind, m, False),
            on_delete=lambda m: changed(kind, m, True),
        )

    def _node_view(self, name: str, factory: InformerFactory, mirrors: dict[str, Informer]) -> NodeView:
        """Node and Pod informers for ``name``, keeping records only; capacity that grows wakes the waiting Jobs."""
        view = NodeView(
            factory.informer(NODES, transform=lambda node, _kept: node_record(node)),
            factory.informer(PODS, transform=lambda pod, _kept: pod_record(pod)),
        )
        freed = self._freed_later(name)

        def node_changed(old: Obj | None, new: Obj) -> None:
            """A Node that can take pods now, or whose allocatable changed, may leave room."""
            view.changed()
            grew = (
                old is None or not old.get("schedulable") or old.get("allocatable") != new.get("allocatable")
            )
            if new.get("schedulable") and grew:
                freed()

        def pod_changed(old: Obj, new: Obj | None) -> None:
            view.changed()
            everywhere = frozenset(n.get("metadata", {}).get("name", "") for n in view.nodes.objects())
            if counted(old, everywhere) and (new is None or not counted(new, everywhere)):
                freed()

        view.nodes.add_handlers(
            Handlers(
                on_add=lambda n: node_changed(None, n),
                on_update=node_changed,
                on_delete=lambda _n: view.changed(),
            )
        )
        view.pods.add_handlers(
            Handlers(
                on_add=lambda _p: view.changed(),
                on_update=pod_changed,
                # A watch's DELETED event brings the whole object, not the record.
                on_delete=lambda p: pod_changed(p if "owners" in p else pod_record(p), None),
            )
        )
        for informer in mirrors.values():
            # Which pods are this manager's follows its mirrors.
            informer.add_handlers(
                Handlers(
                    on_add=lambda _m: view.changed(),
                    on_update=lambda _o, _m: view.changed(),
                    on_delete=lambda _m: view.changed(),
                )
            )
        return view

    def _freed_later(self, name: str) -> Callable[[], None]:
        """A call that, once or many times, tells the listener about ``name`` after FREED_COALESCE."""
        pending: list[asyncio.TimerHandle] = []

        def fire() -> None:
            pending.clear()
            if name in self.workers:
                self.listener.worker_changed(name)

        def freed() -> None:
            if not pending:
                pending.append(asyncio.get_running_loop().call_later(FREED_COALESCE, fire))

        return freed

    def drain(self, name: str) -> None:
        """No new Jobs for this worker; those it runs finish there. Its Jobs are synced at once: the mirrors of
        those already finished go now, not when their mirrorTTLSecondsAfterFinished is up."""
        worker = self.workers.get(name)
        if worker is not None and not worker.draining:
            worker.draining = True
            self.generation += 1
            self.listener.worker_changed(name)

    def unreachable_since(self, worker: Worker, since: float) -> None:
        """``worker`` has been unreachable since ``since`` (an earlier replica's record): it may be lost already,
        so no view of it as it was is kept."""
        worker.inactive_since = since
        self.generation += 1

    def drained(self, name: str, ledger: Ledger) -> bool:
        """Nothing of ours is left on the worker: no Job placed there, no mirror in its caches."""
        worker = self.workers.get(name)
        if worker is None:
            return True
        return not ledger.placed_on(name) and not any(i.keys() for i in worker.mirrors.values())

    def remove(self, name: str) -> None:
        worker = self.workers.pop(name, None)
        self._views.pop(name, None)
        self.generation += 1
        self.changed.set()
        if worker is not None and worker.follower is not None:
            worker.follower.cancel()
        self.listener.worker_changed(name)

    def mirrors(self, kind: str, key: str) -> dict[str, Obj]:
        """Worker name -> our mirror named ``key`` there (any origin UID)."""
        return {n: m for n, w in self.workers.items() if (m := w.mirrors[kind].get(key)) is not None}

    def views(self, ledger: Ledger, held: frozenset[str] = frozenset()) -> WorkerViews:
        """Every worker as placement sees it now, each view made when first asked for. A worker's view is kept
        until the pool's generation moves or the ledger's use of it changes; whether it is slow and held is read
        anew each time."""
        now = self.clock()
        started = time.monotonic()
        if self._roster[0] != self.generation:
            # A copy: a view asked for later in the sync finds the worker it was promised.
            self._roster = (self.generation, dict(self.workers))
        generation, workers = self._roster

        def view_of(name: str) -> WorkerView:
            worker = workers[name]
            usage = ledger.usage(name)
            kept = self._views.get(name)
            if kept is not None and kept[0] == generation and kept[1] is usage:
                view = kept[2]
            else:
                view = self._view(worker, usage, now)
                if worker.node_view is None:  # capacity read from Nodes changes with every pod there
                    self._views[name] = (generation, usage, view)
            slow, is_held = worker.slots.slow(started), name in held
            if slow or is_held:
                view = dataclasses.replace(view, slow=slow, held=is_held)
            return view

        return WorkerViews(workers.keys(), view_of)

    def _view(self, worker: Worker, usage: Usage, now: float) -> WorkerView:
        since = worker.inactive_since
        capacity, free = combined(worker.settings.quota, usage.used, worker.node_capacity())
        return WorkerView(
            name=worker.name,
            labels=worker.settings.labels,
            active=worker.active,
            load=usage.jobs,
            max_jobs=worker.settings.max_jobs,
            reason=worker.reason,
            free=free,
            lost=not worker.active and since is not None and now - since >= self.lost_timeout,
            accepting=not worker.draining,
            capacity=capacity,
            missing_kinds=worker.missing_kinds,
        )

    # --- health ------------------------------------------------------------------------------------------------

    def start_following(self) -> None:
        """Follow every worker's health from now on, leading or not: a replica that takes over must know how
        long each worker has been unreachable."""
        self._following = True
        for worker in self.workers.values():
            if worker.follower is None:
                self._follow(worker)

    async def close(self) -> None:
        self._following = False
        await cancel_and_wait(w.follower for w in self.workers.values())
        for worker in self.workers.values():
            worker.follower = None

    def _follow(self, worker: Worker) -> None:
        worker.follower = asyncio.create_task(self._follow_health(worker), name=f"health:{worker.name}")

    async def _follow_health(self, worker: Worker) -> None:
        """Probe the worker and watch its informers; mark when it stops answering, and tell the listener when it
        is back and when it has been gone for the lost timeout."""
        reported_lost = False
        missing: frozenset[str] = frozenset()
        while True:
            self.generation += 1  # woken by a change of its watches' health, or its lost timeout came
            for informer in worker.watched:
                informer.health_changed.clear()
            was_active = worker.active
            if worker.missing_kinds != missing:
                # A kind's CRD came or went there: the Jobs of that kind that wait look again.
                missing = worker.missing_kinds
                if missing:
                    log.warning(
                        "worker %s does not serve %s: no CRD there", worker.name, ", ".join(sorted(missing))
                    )
                else:
                    log.info("worker %s serves every kind", worker.name)
                self.listener.worker_changed(worker.name)
                self._health_changed(worker.name)
            await self._probe(worker)
            self.generation += 1
            if worker.probe_failure is None:
                worker.last_contact = self.clock()
            if worker.active and worker.inactive_since is not None:
                worker.inactive_since = None
                log.info("worker %s is connected", worker.name)
                self.listener.worker_changed(worker.name)
                self._health_changed(worker.name)
            elif not worker.active and worker.inactive_since is None:
                worker.inactive_since = self.clock()
                worker.slots.abort()
                self._health_changed(worker.name)
            if was_active and not worker.active:
                log.warning("worker %s is unreachable: %s", worker.name, worker.reason)
            wait = PROBE_PERIOD
            if worker.inactive_since is None:
                reported_lost = False
            else:
                left = worker.inactive_since + self.lost_timeout - self.clock()
                if left <= 0 and not reported_lost:
                    reported_lost = True
                    log.warning("worker %s is lost; its Jobs are dispatched again", worker.name)
                    self.listener.worker_changed(worker.name)
                elif left > 0:
                    wait = min(wait, left)
            await _any_set([i.health_changed for i in worker.watched], wait)

    def _health_changed(self, name: str) -> None:
        for call in self.on_health:
            call(name)

    @staticmethod
    async def _probe(worker: Worker) -> None:
        try:
            await worker.client.probe(PROBE_TIMEOUT)
        except KubeError as exc:
            worker.probe_failure = health_reason(exc, True)
        else:
            worker.probe_failure = None


async def read_node_capacity(client: KubeClient, kinds: Sequence[Resource], origin: str) -> NodeCapacity:
    """What a worker's Nodes have left, read once as a worker's informers keep it (for ``multiqueue status``
    without a running manager): the pods of ``origin``'s mirrors of ``kinds`` are left out."""
    nodes, _ = await client.list(NODES)
    pods, _ = await client.list(PODS)
    ours: set[str] = set()
    for kind in kinds:
        mirrors, _ = await client.list(kind, label_selector=f"{ORIGIN_LABEL}={origin}")
        ours.update(uid_of(m) for m in mirrors)
    return node_capacity([node_record(n) for n in nodes], [pod_record(p) for p in pods], frozenset(ours))


async def _any_set(events: list[asyncio.Event], seconds: float) -> None:
    """Wait until one of ``events`` is set, or ``seconds`` pass."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()

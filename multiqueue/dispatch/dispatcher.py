"""The dispatcher: runs the managedBy Jobs of every configured kind on workers and mirrors their status back.

One informer per kind on the management cluster and, through the worker pool, one per kind and worker (mirrors
of this manager only) feed one work queue of (kind, namespace/name) keys. A sync reads the caches, asks
``lifecycle.decide`` what to do and hands that to the executor; the shared reconcile loop requeues the key when
decide (or the executor's record of a conflict) asks for it. Capacity is one ledger across kinds.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Final

from opentelemetry.metrics import Meter
from opentelemetry.trace import Tracer

from multiqueue.api.meta import key_of, metadata, namespace_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.capacity import Key, Ledger, Rank, held_on, rank_of
from multiqueue.dispatch.decision import Observed
from multiqueue.dispatch.executor import Executor
from multiqueue.dispatch.generic import GenericJob, cached_user, priority_class_of
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.metrics import DispatcherMetrics
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.placement import WorkerView
from multiqueue.dispatch.sweep import collect_garbage, sweep_every
from multiqueue.dispatch.workers import WorkerPool
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import NotFound
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.loop.controller import Controller
from multiqueue.loop.runner import Runner
from multiqueue.loop.source import Feed

log = logging.getLogger(__name__)

COMPONENT: Final = "multiqueue-dispatcher"
# A running mirror's status changes in bursts (pods start and end together): gather a burst into one write. A
# second, as the Job controller batches pod updates: a short Job then costs one status write, its last (a finished
# mirror is synced at once, so how a Job ends is never held back).
STATUS_COALESCE: Final = 1.0
WORKER_SYNC_WAIT: Final = 10.0
# Freed capacity on a worker: this many of the Jobs waiting for it are synced, best ranked first.
NUDGE: Final = 16


@dataclasses.dataclass(frozen=True)
class DispatchSettings:
    identity: Identity
    policy: str
    namespaces: frozenset[str] = frozenset()
    gc_interval: float = 60.0
    worker_lost_timeout: float = 900.0
    workers_count: int = 8
    mirror_ttl_after_finished: float = 3600.0
    split_limit: int = 4


class Dispatcher:
    def __init__(
        self,
        adapters: Sequence[GenericJob],
        management: KubeClient,
        factory: InformerFactory,
        recorder: EventRecorder,
        settings: DispatchSettings,
        *,
        priorities: Informer | None = None,
        clock: Callable[[], float] = time.time,
        meter: Meter | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        self.settings = settings
        # None when tracing is off: then a sync opens no span at all, which costs no context switch per sync.
        self.tracer = tracer
        self.adapters = {a.resource.kind: a for a in adapters}
        self.users = {
            kind: factory.informer(a.resource, transform=functools.partial(cached_user, a))
            for kind, a in self.adapters.items()
        }
        self.priorities = priorities
        self.ledger = Ledger()
        self.pool = WorkerPool(
            [a.resource for a in adapters],
            settings.identity.origin,
            self,
            lost_timeout=settings.worker_lost_timeout,
            slots=settings.workers_count // 2,
            clock=clock,
        )
        self.metrics = DispatcherMetrics.with_meter(meter)
        self.executor = Executor(
            management, self.pool, self.ledger, recorder, self.metrics, settings.identity
        )
        # Set whenever a Job stops holding a worker, or a mirror goes: drains wait on it.
        self.released = asyncio.Event()
        self.runner: Runner[Key] = Runner(
            Controller(
                "dispatcher",
                self.sync,
                settings.workers_count,
                feeds=[Feed(informer, self._user_handlers(kind)) for kind, informer in self.users.items()],
                cached=self._cached,
                prepare=self._wait_for_workers,
                beside=lambda: sweep_every(
                    self.settings.gc_interval, self.pool, self.users, self.adapters, self.executor
                ),
            )
        )
        self.runner.open()

    async def run(self) -> None:
        """Dispatch until cancelled: one term as leader, starting from every cached Job of ours."""
        await self.runner.run()

    async def close(self) -> None:
        """For good: the handlers unsubscribed, the queue shut down."""
        await self.runner.stop()

    async def _wait_for_workers(self) -> None:
        """One unreachable worker must not hold up the others: wait a while for each cache, then go on; a worker
        whose cache has not synced counts as inactive until it does."""
        pending = [
            asyncio.ensure_future(_settled(i)) for w in self.pool.workers.values() for i in w.mirrors.values()
        ]
        _, late = await asyncio.wait(pending, timeout=WORKER_SYNC_WAIT) if pending else (set(), set())
        for future in late:
            future.cancel()
        if late:
            log.warning("starting before the caches of some workers have synced")

    def _cached(self) -> list[Key]:
        """The cached Jobs a term starts from: those of ours, or that hold a worker of ours."""
        return [
            (kind, key_of(user))
            for kind, informer in self.users.items()
            for user in informer.objects()
            if self._relevant(kind, user)
        ]

    async def collect_garbage(self) -> int:
        return await collect_garbage(self.pool, self.users, self.adapters, self.executor)

    # --- what the read model reads --------------------------------------------------------------------------

    def worker_views(self) -> list[WorkerView]:
        return list(self.pool.views(self.ledger))

    @property
    def synced(self) -> bool:
        return all(u.has_synced for u in self.users.values())

    # --- handlers: only bookkeeping and enqueueing ---------------------------------------------------------------

    def _user_handlers(self, kind: str) -> Handlers:
        return Handlers(
            on_add=lambda u: self._user_changed(kind, u),
            on_update=lambda _o, u: self._user_changed(kind, u),
            on_delete=lambda u: self._user_deleted(kind, u),
        )

    def _relevant(self, kind: str, user: Obj) -> bool:
        if self.settings.namespaces and namespace_of(user) not in self.settings.namespaces:
            return False
        identity = self.settings.identity
        return self.adapters[kind].managed_by(user) == identity.managed_by or identity.holds(user)

    def _user_changed(self, kind: str, user: Obj) -> None:
        if not self._relevant(kind, user):
            return
        key = (kind, key_of(user))
        if not self.settings.identity.holds(user) and not self.adapters[kind].is_finished(user):
            self.metrics.seen(key)  # dispatch latency counts from here
        holdings = held_on(self.adapters[kind], self.settings.identity, user)
        freed = self.ledger.hold(key, holdings) if holdings else self.ledger.release(key)
        for worker in freed:
            self._released(worker)
        self.runner.add(key)

    def _user_deleted(self, kind: str, user: Obj) -> None:
        key = (kind, key_of(user))
        self.ledger.unwait(key)
        for worker in self.ledger.release(key):
            self._released(worker)
        self.metrics.forget(key)
        self.executor.rejections.pop(key, None)
        self.executor.status_rejections.pop(key, None)
        if self._relevant(kind, user):
            self.runner.add(key)  # its mirrors go

    def _released(self, worker: str) -> None:
        self.released.set()
        self._nudge(worker)

    def _nudge(self, worker: str) -> None:
        """Capacity on ``worker`` changed hands: the best-ranked Jobs waiting for it look again."""
        for key in itertools.islice(self.ledger.waiting(worker), NUDGE):
            self.runner.add(key)

    def mirror_changed(self, kind: str, mirror: Obj, deleted: bool) -> None:
        key = (kind, key_of(mirror))
        if deleted:
            self.released.set()
            self.runner.add(key)
        elif self.adapters[kind].is_finished(mirror):
            self.metrics.mirror_finished(key)
            self.runner.add(key, first=True)  # its user is waiting to see the end: ahead of new Jobs to place
        else:
            self.runner.add_after(key, STATUS_COALESCE)

    def worker_changed(self, name: str) -> None:
        """A worker came back, was lost, added or removed: its Jobs, its mirrors and every waiting Job look again."""
        keys = set(self.ledger.placed_on(name))
        worker = self.pool.workers.get(name)
        if worker is not None:
            for kind, informer in worker.mirrors.items():
                keys.update((kind, key) for key in informer.keys())  # noqa: SIM118 (an informer, not a dict)
        for key in sorted(keys):
            self.runner.add(key)
        for key in self.ledger.waiting():
            self.runner.add(key)

    # --- sync ----------------------------------------------------------------------------------------------------

    def rank(self, key: Key, user: Obj | None) -> Rank:
        """Where a Job stands among those waiting: its PriorityClass value (0 without one), then its age."""
        if user is None:
            return rank_of(key, 0, "")
        value = 0
        name = priority_class_of(self.adapters[key[0]], user)
        found = self.priorities.get(name) if name is not None and self.priorities is not None else None
        if found is not None and isinstance(found.get("value"), int):
            value = found["value"]
        return rank_of(key, value, str(metadata(user).get("creationTimestamp") or ""))

    async def sync(self, key: Key) -> float | None:
        kind, name = key
        adapter = self.adapters[kind]
        user = self.users[kind].get(name)
        rank = self.rank(key, user)
        held: frozenset[str] = frozenset()
        if user is not None and not self.settings.identity.holds(user):
            held = self.ledger.held_for_others(rank, frozenset(self.pool.workers))
        seen = Observed(
            user,
            self.pool.mirrors(kind, name),
            self.pool.views(self.ledger, held),
            self.executor.rejections.get(key, {}),
            self.pool.clock(),
            turn=sum(self.metrics.dispatched.values()),
            status_rejection=self.executor.status_rejections.get(key),
        )
        with (
            self.tracer.start_as_current_span("dispatch.sync", attributes={"job": name, "kind": kind})
            if self.tracer is not None
            else contextlib.nullcontext()
        ):
            actions = decide(
                adapter,
                self.settings.identity,
                self.settings.policy,
                seen,
                keep_finished=self.settings.mirror_ttl_after_finished,
                split_limit=self.settings.split_limit,
            )
            requeue_after = await self.executor.run(key, adapter, user, actions, rank)
        for worker in actions.hold or {}:
            self._nudge(worker)
        return requeue_after


async def _settled(informer: Informer) -> None:
    """Its cache synced, or its kind not served there: a 404 (the CRD is not installed) is an answer that no
    wait turns into a sync."""
    await informer.wait_for_answer()
    if not isinstance(informer.last_error, NotFound):
        await informer.wait_for_sync()

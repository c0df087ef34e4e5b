"""The dispatcher: runs managedBy Jobs of the management cluster on workers and mirrors their status back.

One informer for the kind on the management cluster and one per worker (mirrors only, by our origin label) feed
a work queue of Job keys. A sync reads both caches, asks ``lifecycle.decide``, and performs the actions: place
(one patch: finalizer + cluster label), create the namespace if the worker lacks it and the mirror, suspend or
resume the mirror, write the user's status, delete mirrors, release the finalizer, record events.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from opentelemetry import metrics, trace
from opentelemetry.metrics import Meter

from multiqueue.api.meta import as_list, key_of, metadata, namespace_of
from multiqueue.api.types import NAMESPACES, Obj
from multiqueue.dispatch.generic import (
    CLUSTER_LABEL,
    MIRROR_FINALIZER,
    ORIGIN_LABEL,
    ORIGIN_UID_ANNOTATION,
    GenericJob,
    demand,
)
from multiqueue.dispatch.lifecycle import Actions, decide, with_suspend
from multiqueue.dispatch.placement import WorkerView
from multiqueue.kube.client import KubeClient
from multiqueue.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    KubeError,
    NotFound,
    TransportError,
    Unauthorized,
)
from multiqueue.kube.events import EventRecorder
from multiqueue.kube.informer import Handlers, Informer, InformerFactory
from multiqueue.kube.tasks import cancel_and_wait
from multiqueue.kube.workqueue import WorkQueue, run_workers

log = logging.getLogger(__name__)

COMPONENT: Final = "multiqueue-dispatcher"
RETRY_SOON: Final = 0.05
# A running mirror's status changes in bursts (pods start and end together): gather a burst into one write.
STATUS_COALESCE: Final = 0.25
WORKER_SYNC_WAIT: Final = 10.0
# A worker whose every slot is taken by a request older than WORKER_SLOW is slow or hung: Jobs for it are synced
# again after WORKER_BUSY_RETRY instead of waiting for a slot. A worker that is merely busy is waited for.
WORKER_SLOW: Final = 2.0
WORKER_BUSY_RETRY: Final = 1.0
LATENCY_SAMPLES: Final = 10_000
tracer = trace.get_tracer("multiqueue.dispatch")


@dataclasses.dataclass
class Worker:
    name: str
    client: KubeClient
    labels: dict[str, str]
    informer: Informer
    max_jobs: int | None = None
    quota: dict[str, float] = dataclasses.field(default_factory=dict)
    namespaces: set[str] = dataclasses.field(default_factory=set)
    # When it stopped being Connected (the dispatcher's clock), or None while it is.
    inactive_since: float | None = None
    draining: bool = False
    watcher: asyncio.Task[None] | None = None
    # Syncs talking to this worker at once; a worker that hangs can hold no more than these.
    slots: asyncio.Semaphore = dataclasses.field(default_factory=lambda: asyncio.Semaphore(1))
    # Start times (monotonic) of the requests holding a slot.
    in_flight: list[float] = dataclasses.field(default_factory=list)

    def slow(self, now: float) -> bool:
        return self.slots.locked() and bool(self.in_flight) and now - min(self.in_flight) > WORKER_SLOW


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """What the config says about a worker besides how to reach it."""

    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    max_jobs: int | None = None
    quota: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class DispatcherMetrics:
    dispatched: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    rejected: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    # The latest samples, for benchmarks; operators read the histogram on /metrics.
    dispatch_latency: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_SAMPLES)
    )
    status_sync_latency: collections.deque[float] = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_SAMPLES)
    )
    # By the worker that was lost.
    redispatched: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


class WorkerBusy(Exception):
    """No slot for this worker came free in time: it is slow or hung."""


def health_reason(informer: Informer) -> str:
    """Connected, or why a worker is not: upstream-style reasons an admin can act on."""
    error = informer.last_error
    if error is None:
        return "Connected" if informer.has_synced else "Connecting"
    if isinstance(error, Unauthorized):
        return "Unauthorized"
    if isinstance(error, Forbidden):
        return "Forbidden"
    if isinstance(error, TransportError):
        return "ClientConnectionFailed"
    return type(error).__name__


class Dispatcher:
    def __init__(
        self,
        adapter: GenericJob,
        management: KubeClient,
        management_factory: InformerFactory,
        workers: dict[str, tuple[KubeClient, InformerFactory, WorkerSettings]],
        recorder: EventRecorder,
        *,
        origin: str,
        managed_by: str,
        policy: str,
        namespaces: frozenset[str] = frozenset(),
        gc_interval: float = 60.0,
        worker_lost_timeout: float = 900.0,
        priorities: Informer | None = None,
        workers_count: int = 8,
        clock: Callable[[], float] = time.monotonic,
        meter: Meter | None = None,
    ) -> None:
        self.adapter = adapter
        self.management = management
        self.recorder = recorder
        self.origin = origin
        self.managed_by = managed_by
        self.policy = policy
        self.namespaces = namespaces
        self.gc_interval = gc_interval
        self.worker_lost_timeout = worker_lost_timeout
        self.priorities = priorities
        self.workers_count = workers_count
        self.clock = clock
        self._watching = False
        self.users: Informer = management_factory.informer(adapter.resource)
        self.queue: WorkQueue[str] = WorkQueue("dispatcher")
        self.metrics = DispatcherMetrics()
        self._latency = (meter or metrics.get_meter(__name__)).create_histogram(
            "multiqueue_dispatch_latency_seconds",
            unit="s",
            description="From the manager first seeing a Job to its mirror existing on a worker.",
        )
        self._turn = 0
        self._seen_at: dict[str, float] = {}
        self._mirror_finished_at: dict[str, float] = {}
        self.workers: dict[str, Worker] = {}
        # Jobs placed on a worker and not finished: key -> (worker, demand). Updated before any await, so
        # concurrent syncs never place past a worker's capacity.
        self._placed: dict[str, tuple[str, dict[str, float]]] = {}
        self._waiting: set[str] = set()
        # Set whenever a Job stops holding a worker, or a mirror goes: drains wait on it.
        self.placements_changed = asyncio.Event()
        self.workers_changed = asyncio.Event()  # set when a worker is added or removed
        for name, (client, factory, settings) in workers.items():
            self.add_worker(name, client, factory, settings)
        self.users.add_handlers(
            Handlers(
                on_add=self._user_changed,
                on_update=lambda _o, u: self._user_changed(u),
                on_delete=self._user_changed,
            )
        )

    async def run(self) -> None:
        await self.users.wait_for_sync()
        # One unreachable worker must not hold up the others: wait a while for each cache, then go on; a worker
        # whose cache has not synced counts as inactive until it does.
        pending = [asyncio.ensure_future(w.informer.wait_for_sync()) for w in self.workers.values()]
        _, late = await asyncio.wait(pending, timeout=WORKER_SYNC_WAIT) if pending else (set(), set())
        for future in late:
            future.cancel()
        if late:
            names = [w.name for w in self.workers.values() if not w.informer.has_synced]
            log.warning("starting without workers whose caches have not synced: %s", ", ".join(names))
        collector = asyncio.create_task(self._collect_periodically(), name="dispatcher-gc")
        try:
            await run_workers(self.queue, self.sync, self.workers_count)
        finally:
            collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await collector
            self.queue.shut_down()

    def start_watching(self) -> None:
        """Follow every worker's health from now on, leading or not: a replica that takes over must know how
        long each worker has been unreachable."""
        self._watching = True
        for worker in self.workers.values():
            if worker.watcher is None:
                self._watch(worker)

    async def close(self) -> None:
        self._watching = False
        await cancel_and_wait(w.watcher for w in self.workers.values())
        for worker in self.workers.values():
            worker.watcher = None

    # --- workers -----------------------------------------------------------------------------------------------

    def add_worker(
        self, name: str, client: KubeClient, factory: InformerFactory, settings: WorkerSettings
    ) -> None:
        """Dispatch to one more worker, or reach a known one through new credentials (its Jobs stay placed)."""
        old = self.workers.get(name)
        if old is not None and old.watcher is not None:
            old.watcher.cancel()
        informer = factory.informer(self.adapter.resource, label_selector=f"{ORIGIN_LABEL}={self.origin}")
        informer.add_handlers(
            Handlers(
                on_add=self._mirror_changed,
                on_update=lambda _o, m: self._mirror_changed(m),
                on_delete=self._mirror_deleted,
            )
        )
        worker = Worker(name, client, settings.labels, informer, settings.max_jobs, settings.quota)
        worker.slots = asyncio.Semaphore(max(1, self.workers_count // 2))
        worker.inactive_since = old.inactive_since if old is not None else self.clock()
        self.workers[name] = worker
        self.workers_changed.set()
        if self._watching:
            self._watch(worker)
        self._requeue_waiting()

    def drain_worker(self, name: str) -> None:
        """No new Jobs for this worker; those it runs finish there."""
        worker = self.workers.get(name)
        if worker is not None:
            worker.draining = True

    def drained(self, name: str) -> bool:
        """Nothing of ours is left on the worker: no Job placed there, no mirror in its cache."""
        worker = self.workers.get(name)
        if worker is None:
            return True
        return not any(w == name for w, _ in self._placed.values()) and not worker.informer.keys()

    def remove_worker(self, name: str) -> None:
        worker = self.workers.pop(name, None)
        self.workers_changed.set()
        if worker is not None and worker.watcher is not None:
            worker.watcher.cancel()

    def _watch(self, worker: Worker) -> None:
        worker.watcher = asyncio.create_task(self._watch_health(worker), name=f"health:{worker.name}")

    async def _watch_health(self, worker: Worker) -> None:
        """Track when a worker stopped being reachable; when that passes workerLostTimeout, its Jobs are synced
        (and so re-dispatched); when it is back, everything of it is synced (stale mirrors go at once)."""
        informer = worker.informer
        while True:
            informer.health_changed.clear()
            connected = health_reason(informer) == "Connected"
            if connected and worker.inactive_since is not None:
                worker.inactive_since = None
                log.info("worker %s is connected", worker.name)
                self._sync_worker_jobs(worker.name)
                self._requeue_waiting()
            elif not connected and worker.inactive_since is None:
                worker.inactive_since = self.clock()
                log.warning("worker %s is unreachable: %s", worker.name, health_reason(informer))
            if worker.inactive_since is None:
                await informer.health_changed.wait()
                continue
            left = worker.inactive_since + self.worker_lost_timeout - self.clock()
            if left <= 0:
                await informer.health_changed.wait()
                continue
            try:
                async with asyncio.timeout(left):
                    await informer.health_changed.wait()
            except TimeoutError:
                log.warning("worker %s is lost; its Jobs are dispatched again", worker.name)
                self._sync_worker_jobs(worker.name)
                await informer.health_changed.wait()

    def _sync_worker_jobs(self, name: str) -> None:
        worker = self.workers.get(name)
        keys = {key for key, (w, _) in self._placed.items() if w == name}
        if worker is not None:
            keys.update(worker.informer.keys())
        for key in sorted(keys):
            self.queue.add(key)

    def reset_queue(self) -> None:
        """A fresh queue for the next term as leader, filled from the caches."""
        self.queue = WorkQueue("dispatcher")
        for user in self.users.objects():
            self._user_changed(user)

    async def _collect_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.gc_interval)
            try:
                await self.collect_garbage()
            except KubeError as exc:
                log.warning("garbage collection of mirrors: %s", exc)

    def garbage(self) -> list[tuple[str, Obj]]:
        """Mirrors of ours whose user Job is gone, or is a new Job with the same name (another UID)."""
        found = []
        for name, worker in self.workers.items():
            if health_reason(worker.informer) != "Connected":
                continue  # asked again once it is back
            for mirror in worker.informer.objects():
                user = self.users.get(key_of(mirror))
                origin_uid = (metadata(mirror).get("annotations") or {}).get(ORIGIN_UID_ANNOTATION)
                if user is None or metadata(user).get("uid") != origin_uid:
                    found.append((name, mirror))
        return found

    async def collect_garbage(self) -> int:
        """Delete every mirror :meth:`garbage` finds; mirrors of other origins are never in our caches."""
        doomed = self.garbage()
        for name, mirror in doomed:
            await self._delete_mirror(name, mirror)
        return len(doomed)

    # --- handlers ----------------------------------------------------------------------------------------------

    def _relevant(self, user: Obj) -> bool:
        if self.namespaces and namespace_of(user) not in self.namespaces:
            return False
        return self.adapter.managed_by(user) == self.managed_by or MIRROR_FINALIZER in as_list(
            metadata(user).get("finalizers")
        )

    def _user_changed(self, user: Obj) -> None:
        if self._relevant(user):
            key = key_of(user)
            self._seen_at.setdefault(key, time.monotonic())
            self._track_placement(key, user)
            self.queue.add(key)

    def _track_placement(self, key: str, user: Obj | None) -> None:
        """Keep the capacity ledger: a Job holds its worker's capacity from placement until it finishes."""
        worker = (metadata(user).get("labels") or {}).get(CLUSTER_LABEL) if user is not None else None
        holding = (
            user is not None
            and worker is not None
            and MIRROR_FINALIZER in as_list(metadata(user).get("finalizers"))
            and not self.adapter.is_finished(user)
            and not metadata(user).get("deletionTimestamp")
        )
        if holding and user is not None and worker is not None:
            self._placed[key] = (str(worker), demand(self.adapter.pod_sets(user)))
        elif self._placed.pop(key, None) is not None:
            self.placements_changed.set()
            self._requeue_waiting()

    def priority(self, user: Obj) -> int:
        """The value of the Job's PriorityClass; 0 without one (or when the class does not exist)."""
        name = self.adapter.priority_class(user)
        if name is None or self.priorities is None:
            return 0
        found = self.priorities.get(name)
        value = found.get("value") if found is not None else None
        return value if isinstance(value, int) else 0

    @property
    def waiting_count(self) -> int:
        return len(self._waiting)

    def waiting_order(self) -> list[str]:
        """Waiting Jobs as capacity goes to them: higher priority first, then older first."""

        def rank(key: str) -> tuple[int, str, str]:
            user = self.users.get(key)
            if user is None:
                return (0, "", key)
            return (-self.priority(user), str(metadata(user).get("creationTimestamp") or ""), key)

        return sorted(self._waiting, key=rank)

    def _requeue_waiting(self) -> None:
        """Capacity freed or workers changed: the waiting Jobs are placed again, in :meth:`waiting_order`."""
        for key in self.waiting_order():
            self.queue.add(key)

    def _mirror_deleted(self, mirror: Obj) -> None:
        self.placements_changed.set()
        self._mirror_changed(mirror)

    def _mirror_changed(self, mirror: Obj) -> None:
        key = key_of(mirror)
        if self.adapter.is_finished(mirror):
            self._mirror_finished_at.setdefault(key, time.monotonic())
            self.queue.add(key)
        else:
            self.queue.add_after(key, STATUS_COALESCE)

    # --- sync --------------------------------------------------------------------------------------------------

    def worker_views(self) -> list[WorkerView]:
        load: dict[str, int] = {name: 0 for name in self.workers}
        used: dict[str, dict[str, float]] = {name: {} for name in self.workers}
        for worker_name, asked in self._placed.values():
            if worker_name in load:
                load[worker_name] += 1
                for resource, amount in asked.items():
                    used[worker_name][resource] = used[worker_name].get(resource, 0.0) + amount
        views = []
        now = self.clock()
        for worker in self.workers.values():
            free = {r: q - used[worker.name].get(r, 0.0) for r, q in worker.quota.items()}
            reason = health_reason(worker.informer)
            since = worker.inactive_since
            views.append(
                WorkerView(
                    name=worker.name,
                    labels=worker.labels,
                    active=reason == "Connected",
                    load=load[worker.name],
                    max_jobs=worker.max_jobs,
                    reason=reason,
                    free=free,
                    lost=reason != "Connected"
                    and since is not None
                    and now - since >= self.worker_lost_timeout,
                    accepting=not worker.draining,
                )
            )
        return views

    async def sync(self, key: str) -> None:
        with tracer.start_as_current_span(
            "dispatch.sync", attributes={"job": key, "kind": self.adapter.resource.kind}
        ):
            try:
                await self._sync(key)
            except WorkerBusy as busy:
                # Everything done so far is recorded in the clusters; the next sync goes on from there.
                log.info("worker %s is slow to answer; %s is synced again later", busy, key)
                self.queue.add_after(key, WORKER_BUSY_RETRY)

    async def _sync(self, key: str) -> None:
        user = self.users.get(key)
        mirrors = {name: m for name, w in self.workers.items() if (m := w.informer.get(key)) is not None}
        if user is None:
            self._track_placement(key, None)
            self._waiting.discard(key)
            # The user's Job is gone for good: any mirror of it is garbage.
            for name, mirror in mirrors.items():
                await self._delete_mirror(name, mirror)
            self._seen_at.pop(key, None)
            self._mirror_finished_at.pop(key, None)
            return
        actions = decide(
            self.adapter,
            user,
            mirrors,
            self.worker_views(),
            origin=self.origin,
            managed_by=self.managed_by,
            policy=self.policy,
            turn=self._turn,
        )
        await self._execute(key, user, actions)

    async def _execute(self, key: str, user: Obj, actions: Actions) -> None:
        touched = {w for w, _ in actions.delete_mirrors}
        for target in (actions.create_mirror, actions.suspend_mirror):
            if target is not None:
                touched.add(target[0])
        now = time.monotonic()
        if any(self.workers[w].slow(now) for w in touched if w in self.workers):
            # That worker is slow to answer: decide again later rather than hold a sync worker waiting on it.
            self.queue.add_after(key, WORKER_BUSY_RETRY)
            return
        if actions.place_on is not None:
            self._placed[key] = (
                actions.place_on,
                demand(self.adapter.pod_sets(user)),
            )  # reserve before any await
            self._waiting.discard(key)
        elif actions.redispatch is not None:
            self._placed[key] = (actions.redispatch[1], demand(self.adapter.pod_sets(user)))
            self._waiting.discard(key)
        elif actions.waiting and actions.waiting != "suspended":
            self._waiting.add(key)
        else:
            self._waiting.discard(key)
        for name, mirror in actions.delete_mirrors:
            async with self._slot(name):
                await self._delete_mirror(name, mirror)
        if actions.place_on is not None:
            placed = await self._place(user, actions.place_on)
            if placed is None:
                self._placed.pop(key, None)
                return
            user = placed
            self._turn += 1
        if actions.redispatch is not None:
            moved = await self._place(user, actions.redispatch[1])
            if moved is None:
                return  # re-read and decided again
            user = moved
            self.metrics.redispatched[actions.redispatch[0]] += 1
        if actions.create_mirror is not None:
            worker, body = actions.create_mirror
            async with self._slot(worker):
                await self._create_mirror(key, user, worker, body)
        if actions.suspend_mirror is not None:
            worker, suspend = actions.suspend_mirror
            async with self._slot(worker):
                with contextlib.suppress(NotFound):
                    await self.workers[worker].client.patch(
                        self.adapter.resource,
                        str(metadata(user)["name"]),
                        self.adapter.suspend_patch(suspend),
                        namespace_of(user),
                    )
        if actions.status is not None:
            try:
                await self.management.update_status(self.adapter.resource, {**user, "status": actions.status})
            except Conflict:
                self.queue.add_after(key, RETRY_SOON)
                return
            except NotFound:
                return
            if self.adapter.is_finished({**user, "status": actions.status}):
                finished_at = self._mirror_finished_at.pop(key, None)
                if finished_at is not None:
                    self.metrics.status_sync_latency.append(time.monotonic() - finished_at)
        if actions.remove_finalizer:
            await self._release(user)
        for event in actions.events:
            if event.reason == "StatusSyncRejected":
                self.metrics.rejected["invalid_transition"] += 1
            self.recorder.event(user, event.type, event.reason, event.message)

    @contextlib.asynccontextmanager
    async def _slot(self, name: str) -> AsyncIterator[None]:
        worker = self.workers.get(name)
        if worker is None:
            yield
            return
        try:
            async with asyncio.timeout(WORKER_SLOW):
                await worker.slots.acquire()
        except TimeoutError:
            raise WorkerBusy(name) from None
        started = time.monotonic()
        worker.in_flight.append(started)
        try:
            yield
        finally:
            worker.in_flight.remove(started)
            worker.slots.release()

    async def _place(self, user: Obj, worker: str) -> Obj | None:
        """Record the placement on the user's Job (the commit point of a dispatch); the updated Job, or None
        when it changed meanwhile (a sync follows)."""
        finalizers = [*as_list(metadata(user).get("finalizers")), MIRROR_FINALIZER]
        patch = {
            "metadata": {
                "finalizers": list(dict.fromkeys(finalizers)),
                "labels": {CLUSTER_LABEL: worker},
                "resourceVersion": metadata(user).get("resourceVersion"),
            }
        }
        try:
            return await self.management.patch(
                self.adapter.resource, str(metadata(user)["name"]), patch, namespace_of(user)
            )
        except (Conflict, NotFound):
            self.queue.add_after(key_of(user), RETRY_SOON)
            return None

    async def _create_mirror(self, key: str, user: Obj, worker_name: str, body: Obj) -> None:
        worker = self.workers[worker_name]
        namespace = namespace_of(user)
        if namespace not in worker.namespaces:
            with contextlib.suppress(AlreadyExists):
                await worker.client.create(
                    NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
            worker.namespaces.add(namespace)
        progress = self.adapter.progress(user)
        if progress is not None:
            if await self._create_with_progress(worker, body, progress):
                await self._dispatched(key, user, worker_name)
            return
        try:
            await worker.client.create(self.adapter.resource, body, namespace)
        except AlreadyExists:
            existing = await worker.client.get(self.adapter.resource, str(metadata(user)["name"]), namespace)
            if metadata(existing).get("labels", {}).get(ORIGIN_LABEL) != self.origin:
                self.recorder.warning(
                    user,
                    "MirrorConflict",
                    f"worker {worker_name} has a Job {namespace}/{metadata(user)['name']} that multiqueue did not create; "
                    "it is left alone and this Job waits",
                )
            return
        await self._dispatched(key, user, worker_name)

    async def _create_with_progress(self, worker: Worker, body: Obj, progress: Obj) -> bool:
        """A mirror that goes on from where the user's Job stands (succeeded and failed counts, finished
        indexes): created suspended, given that status, then let run."""
        resource = self.adapter.resource
        meta = metadata(body)
        run = not self.adapter.is_suspended(body)
        try:
            mirror = await worker.client.create(resource, with_suspend(body, self.adapter, True))
        except AlreadyExists:
            return False  # made by an earlier sync, which seeded it
        for _ in range(10):
            status = {**(mirror.get("status") or {}), **progress}
            try:
                await worker.client.update_status(resource, {**mirror, "status": status})
                break
            except Conflict:
                mirror = await worker.client.get(resource, str(meta["name"]), str(meta["namespace"]))
        if run:
            await worker.client.patch(
                resource, str(meta["name"]), self.adapter.suspend_patch(False), str(meta["namespace"])
            )
        return True

    async def _dispatched(self, key: str, user: Obj, worker_name: str) -> None:
        self.metrics.dispatched[worker_name] += 1
        seen = self._seen_at.pop(key, None)
        if seen is not None:
            self.metrics.dispatch_latency.append(time.monotonic() - seen)
            self._latency.record(time.monotonic() - seen)
        self.recorder.normal(user, "Dispatched", f"Job dispatched to worker {worker_name}")

    async def _delete_mirror(self, worker_name: str, mirror: Obj) -> None:
        meta = metadata(mirror)
        with contextlib.suppress(NotFound, Conflict):
            await self.workers[worker_name].client.delete(
                self.adapter.resource,
                str(meta["name"]),
                namespace_of(mirror),
                propagation="Background",
                preconditions={"uid": str(meta.get("uid"))},
            )

    async def _release(self, user: Obj) -> None:
        remaining = [f for f in as_list(metadata(user).get("finalizers")) if f != MIRROR_FINALIZER]
        patch: dict[str, Any] = {
            "metadata": {
                "finalizers": remaining or None,
                "resourceVersion": metadata(user).get("resourceVersion"),
            }
        }
        try:
            await self.management.patch(
                self.adapter.resource, str(metadata(user)["name"]), patch, namespace_of(user)
            )
        except Conflict:
            self.queue.add_after(key_of(user), RETRY_SOON)
        except NotFound:
            pass
        except KubeError as exc:
            log.warning("releasing %s: %s", key_of(user), exc)
            raise

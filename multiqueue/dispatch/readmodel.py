"""One read model of the manager: what /metrics, the dashboard and ``multiqueue status`` show of it.

In the manager process, :class:`ReadModel` takes frozen :class:`Snapshot`\\ s of the dispatcher's own state (its
worker pool, ledger, counts and caches) and tells subscribers when a managed Job or a worker changes. Out of
process, ``multiqueue status`` rebuilds the same :class:`WorkerState` from the clusters with the same functions
(:func:`worker_state`, :func:`~multiqueue.dispatch.capacity.held_on`, the ledger), so the three cannot disagree
on a worker's health or the capacity its Jobs use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from multiqueue.api.types import Obj
from multiqueue.dispatch.capacity import Usage
from multiqueue.dispatch.dispatcher import Dispatcher
from multiqueue.dispatch.generic import GenericJob
from multiqueue.dispatch.mirror import Identity
from multiqueue.dispatch.nodecapacity import NodeCapacity, combined
from multiqueue.dispatch.workers import CONNECTED, WorkerSettings
from multiqueue.kube.client import KubeClient
from multiqueue.kube.informer import Handlers

ManagedJob = tuple[GenericJob, Obj]


@dataclasses.dataclass(frozen=True)
class WorkerState:
    """A worker as the manager sees it: health, and each configured limit's use by the Jobs placed there."""

    name: str
    reason: str  # Connected, or why not (Unauthorized, ClientConnectionFailed, BadKubeConfig, ...)
    labels: Mapping[str, str]
    running: int  # Jobs placed there that have not finished
    # "jobs" -> (running, maxJobs) when limited, then each resource with a quota -> (used, quota).
    capacity: Mapping[str, tuple[float, float]]
    lost: bool = False  # unreachable for longer than workerLostTimeout
    draining: bool = False
    last_contact: float | None = None  # when a probe was last answered, seconds since the epoch
    missing_kinds: tuple[str, ...] = ()  # kinds it does not serve (no CRD there): it takes none of those

    @property
    def active(self) -> bool:
        return self.reason == CONNECTED


def worker_state(
    name: str,
    settings: WorkerSettings,
    reason: str,
    usage: Usage,
    *,
    lost: bool = False,
    draining: bool = False,
    last_contact: float | None = None,
    missing_kinds: Iterable[str] = (),
    nodes: NodeCapacity | None = None,
) -> WorkerState:
    """``nodes``: what its Nodes have left, when its capacity is read from them; each resource then shows all
    that takes it (these Jobs and every other pod) against the smaller of the quota and the Nodes' allocatable."""
    capacity = {r: (usage.used.get(r, 0.0), quota) for r, quota in sorted(settings.quota.items())}
    if nodes is not None:
        totals, free = combined(settings.quota, usage.used, nodes)
        capacity = {r: (totals[r] - free[r], totals[r]) for r in sorted(totals)}
    if settings.max_jobs is not None:
        capacity = {"jobs": (float(usage.jobs), float(settings.max_jobs)), **capacity}
    return WorkerState(
        name,
        reason,
        dict(settings.labels),
        usage.jobs,
        capacity,
        lost,
        draining,
        last_contact,
        tuple(sorted(missing_kinds)),
    )


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The manager at one moment; nothing in it changes afterwards."""

    identity: Identity
    synced: bool  # the management cluster's caches of every kind have synced
    workers: tuple[WorkerState, ...]
    refused: Mapping[str, str]  # worker Secret name -> why it makes no worker
    jobs: Mapping[str, Mapping[str, int]]  # kind -> {"active": n, "finished": n}: Jobs with our managedBy
    waiting: int  # Jobs that fit on no worker now
    dispatched: Mapping[str, int]  # by worker
    redispatched: Mapping[str, int]  # by the worker that was lost
    rejected: Mapping[str, int]  # mirror statuses not written back, by reason
    dispatch_latency: tuple[float, ...]  # the latest samples, oldest first
    requests: Mapping[tuple[str, str, str], int]  # (code, host, method) -> requests sent

    @property
    def managed(self) -> dict[str, int]:
        """Jobs with our managedBy by state, every kind together."""
        total = {"active": 0, "finished": 0}
        for states in self.jobs.values():
            for state, count in states.items():
                total[state] += count
        return total


class Listener(Protocol):
    """What a subscriber hears: a Job with our managedBy changed or went, or some worker's line changed."""

    def job_changed(self, adapter: GenericJob, job: Obj) -> None: ...

    def job_deleted(self, job: Obj) -> None: ...

    def workers_changed(self) -> None: ...


@dataclasses.dataclass
class Subscription:
    """A subscriber's handle: :meth:`cancel` and it hears nothing more."""

    _listeners: list[Listener]
    _listener: Listener

    def cancel(self) -> None:
        if self._listener in self._listeners:
            self._listeners.remove(self._listener)


class ReadModel:
    """The manager as its readers see it, built on the dispatcher; reading it never changes the manager."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        refused: Callable[[], Mapping[str, str]] = dict,
        clients: Callable[[], list[KubeClient]] = list,
    ) -> None:
        self._dispatcher = dispatcher
        self._refused = refused
        self._clients = clients
        self._listeners: list[Listener] = []
        # Jobs of ours by kind, active or finished: kept up to date by the informers' handlers, so that a scrape
        # of a manager tracking a great many Jobs does not look at each of them.
        self._counts_by_kind = {kind: {"active": 0, "finished": 0} for kind in dispatcher.adapters}
        for kind, informer in dispatcher.users.items():
            informer.add_handlers(self._job_handlers(dispatcher.adapters[kind]))
        dispatcher.pool.on_health.append(lambda _name: self._tell(lambda s: s.workers_changed()))

    @property
    def identity(self) -> Identity:
        return self._dispatcher.settings.identity

    @property
    def policy(self) -> str:
        """The placement policy the dispatcher chooses among workers with."""
        return self._dispatcher.settings.policy

    @property
    def turn(self) -> int:
        """The round-robin counter the dispatcher's next placement uses."""
        return sum(self._dispatcher.metrics.dispatched.values())

    @property
    def synced(self) -> bool:
        """What /readyz asks, often: the snapshot's ``synced`` without the rest of it."""
        return self._dispatcher.synced

    def snapshot(self) -> Snapshot:
        dispatcher = self._dispatcher
        metrics = dispatcher.metrics
        return Snapshot(
            identity=self.identity,
            synced=self.synced,
            workers=self.workers(),
            refused=dict(self._refused()),
            jobs=self._counts(),
            waiting=dispatcher.ledger.waiting_count,
            dispatched=dict(metrics.dispatched),
            redispatched=dict(metrics.redispatched),
            rejected=dict(metrics.rejected),
            dispatch_latency=tuple(metrics.dispatch_latency),
            requests=self._requests(),
        )

    def workers(self) -> tuple[WorkerState, ...]:
        """Every worker the dispatcher places on, in its order (cheaper than a whole snapshot)."""
        pool, ledger = self._dispatcher.pool, self._dispatcher.ledger
        return tuple(
            worker_state(
                view.name,
                worker.settings,
                view.reason,
                ledger.usage(view.name),
                lost=view.lost,
                draining=not view.accepting,
                last_contact=worker.last_contact,
                missing_kinds=view.missing_kinds,
                nodes=worker.node_capacity(),
            )
            for view in pool.views(ledger)
            if (worker := pool.workers.get(view.name)) is not None
        )

    def jobs(self) -> Iterator[ManagedJob]:
        """Every Job with our managedBy, with the adapter of its kind."""
        for kind, informer in self._dispatcher.users.items():
            adapter = self._dispatcher.adapters[kind]
            for job in informer.objects():
                if self._ours(adapter, job):
                    yield adapter, job

    def job(self, kind: str, key: str) -> ManagedJob | None:
        """The Job of ``kind`` named ``namespace/name``, if it has our managedBy."""
        adapter = self._dispatcher.adapters.get(kind)
        found = self._dispatcher.users[kind].get(key) if adapter is not None else None
        return (
            (adapter, found)
            if adapter is not None and found is not None and self._ours(adapter, found)
            else None
        )

    def subscribe(self, listener: Listener) -> Subscription:
        """Tell ``listener`` of every change from now on; it first hears of each Job there is already."""
        self._listeners.append(listener)
        for adapter, job in self.jobs():
            listener.job_changed(adapter, job)
        return Subscription(self._listeners, listener)

    # --- inside ----------------------------------------------------------------------------------------------

    def _ours(self, adapter: GenericJob, job: Obj) -> bool:
        return adapter.managed_by(job) == self.identity.managed_by

    def _job_handlers(self, adapter: GenericJob) -> Handlers:
        counts = self._counts_by_kind[adapter.resource.kind]

        def state(job: Obj) -> str:
            return "finished" if adapter.is_finished(job) else "active"

        def added(job: Obj) -> None:
            if self._ours(adapter, job):  # managedBy is immutable: a Job never shown needs no forgetting
                counts[state(job)] += 1
                self._tell(lambda s: s.job_changed(adapter, job))

        def updated(old: Obj, job: Obj) -> None:
            if self._ours(adapter, job):
                counts[state(old)] -= 1
                counts[state(job)] += 1
                self._tell(lambda s: s.job_changed(adapter, job))

        def deleted(job: Obj) -> None:
            if self._ours(adapter, job):
                counts[state(job)] -= 1
                self._tell(lambda s: s.job_deleted(job))

        return Handlers(on_add=added, on_update=updated, on_delete=deleted)

    def _tell(self, call: Callable[[Listener], None]) -> None:
        for listener in list(self._listeners):
            call(listener)

    def _counts(self) -> dict[str, dict[str, int]]:
        return {kind: dict(counts) for kind, counts in self._counts_by_kind.items()}

    def _requests(self) -> dict[tuple[str, str, str], int]:
        totals: dict[tuple[str, str, str], int] = {}
        for client in self._clients():
            host = client.credentials.server.split("://", 1)[-1].rstrip("/")
            for (method, code), n in client.responses.items():
                totals[(code, host, method)] = totals.get((code, host, method), 0) + n
        return dict(sorted(totals.items()))

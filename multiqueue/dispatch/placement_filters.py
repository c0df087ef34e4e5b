"""Placement's filters: each tells, for one Job and one worker, whether the worker could take the Job now, and if
not, why, in words a user reads in ``multiqueue explain`` and in the one-line summary of a waiting Job.

Filters are pure and independent: every filter runs over every worker, so each worker gets a verdict from each.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from multiqueue.api.labelselectors import LabelSelector
from multiqueue.dispatch.affinity import NO_AFFINITY, Affinity


class Worker(Protocol):
    """What the filters read of a worker (placement's ``WorkerView``)."""

    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def active(self) -> bool: ...
    @property
    def load(self) -> int: ...
    @property
    def max_jobs(self) -> int | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def free(self) -> dict[str, float]: ...
    @property
    def accepting(self) -> bool: ...
    @property
    def held(self) -> bool: ...
    @property
    def capacity(self) -> dict[str, float]: ...
    @property
    def missing_kinds(self) -> frozenset[str]: ...


@dataclasses.dataclass(frozen=True)
class Asked:
    """What the Job asks of a worker, read once from the Job."""

    demand: Mapping[str, float] = dataclasses.field(default_factory=dict)  # resource -> amount, all pods
    pinned: str | None = None
    kind: str | None = None
    selector: LabelSelector | None = None  # None: no (valid) cluster selector
    affinity: Affinity = NO_AFFINITY
    excluded: frozenset[str] = frozenset()  # workers that refused its mirror lately, or lost ones


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One filter's answer for one worker: passes, or a reason code, a phrase and the numbers behind it."""

    filter: str
    code: str = ""  # empty when the worker passes
    text: str = ""  # "has no capacity now": reads after "1 worker ..." in the summary
    detail: str = ""  # "cpu 3.5/4": what this worker has

    @property
    def passes(self) -> bool:
        return not self.code


Filter = Callable[[Asked, Worker], Verdict]
EPSILON: Final = 1e-9


@functools.cache
def _passes(name: str) -> Verdict:
    """One passing verdict per filter, shared: a verdict is immutable, and placement asks every filter about every
    worker for each Job it places, where most pass."""
    return Verdict(name)


def not_excluded(asked: Asked, worker: Worker) -> Verdict:
    if worker.name in asked.excluded:
        return Verdict("Excluded", "Excluded", "refused this Job's mirror lately, or is lost")
    return _passes("Excluded")


def pinned(asked: Asked, worker: Worker) -> Verdict:
    if asked.pinned and worker.name != asked.pinned:
        return Verdict("Pinned", "NotPinned", "is not the pinned worker", asked.pinned)
    return _passes("Pinned")


def accepting(_asked: Asked, worker: Worker) -> Verdict:
    if not worker.accepting:
        return Verdict("Accepting", "Draining", "is draining")
    return _passes("Accepting")


def serves_kind(asked: Asked, worker: Worker) -> Verdict:
    if asked.kind is not None and asked.kind in worker.missing_kinds:
        return Verdict("ServesKind", "KindNotServed", f"does not serve {asked.kind}")
    return _passes("ServesKind")


def selector(asked: Asked, worker: Worker) -> Verdict:
    if asked.selector is not None and not asked.selector.matches(worker.labels):
        return Verdict("Selector", "SelectorMismatch", "does not match the selector", str(asked.selector))
    return _passes("Selector")


def affinity(asked: Asked, worker: Worker) -> Verdict:
    if not asked.affinity.allows(worker.labels):
        return Verdict("Affinity", "AffinityMismatch", "does not match the required worker affinity")
    return _passes("Affinity")


def could_ever_fit(asked: Asked, worker: Worker) -> Verdict:
    """Whether the Job fits in all the worker has, with nothing else running there."""
    what = beyond(asked.demand, worker)
    if what is None:
        return _passes("CouldEverFit")
    if what == TAKES_NO_JOBS:
        return Verdict("CouldEverFit", "NeverFits", "takes no Jobs", TAKES_NO_JOBS)
    quota = _n(worker.capacity[what])
    return Verdict("CouldEverFit", "NeverFits", f"asks more {what} than it has in all", f"{what} {quota}")


def active(_asked: Asked, worker: Worker) -> Verdict:
    if not worker.active:
        return Verdict("Active", "Inactive", "is not active", worker.reason)
    return _passes("Active")


def fits_now(asked: Asked, worker: Worker) -> Verdict:
    """Whether the worker has room for the Job beside what runs there now."""
    what = lacking(asked.demand, worker)
    if what is None:
        return _passes("FitsNow")
    if what == HELD:
        return Verdict("FitsNow", "NoCapacity", "holds its capacity for higher-ranked Jobs")
    if what == JOBS:
        return Verdict(
            "FitsNow", "NoCapacity", "has no capacity now", f"jobs {worker.load}/{worker.max_jobs}"
        )
    free = worker.free[what]
    quota = worker.capacity.get(what, free)
    return Verdict("FitsNow", "NoCapacity", "has no capacity now", f"{what} {_n(quota - free)}/{_n(quota)}")


# What a worker lacks that is not a resource of its quota.
TAKES_NO_JOBS: Final = "maxJobs 0"
JOBS: Final = "jobs"
HELD: Final = "capacity held for higher-priority Jobs"


def beyond(demand: Mapping[str, float], worker: Worker) -> str | None:
    """The first thing ``worker`` could never give a Job asking ``demand``, even with nothing else running:
    TAKES_NO_JOBS or a resource of its quota."""
    if worker.max_jobs == 0:
        return TAKES_NO_JOBS
    for resource, amount in sorted(demand.items()):
        if resource in worker.capacity and amount > worker.capacity[resource] + EPSILON:
            return resource
    return None


def lacking(demand: Mapping[str, float], worker: Worker) -> str | None:
    """The first thing ``worker`` has too little of now for a Job asking ``demand`` (HELD, JOBS or a resource of
    its quota), or None when it fits."""
    if worker.held:
        return HELD
    if worker.max_jobs is not None and worker.load >= worker.max_jobs:
        return JOBS
    for resource, amount in sorted(demand.items()):
        if resource in worker.free and amount > worker.free[resource] + EPSILON:
            return resource
    return None


# In the order a worker's first failing verdict names it in the summary.
FILTERS: Final[tuple[Filter, ...]] = (
    not_excluded,
    pinned,
    accepting,
    serves_kind,
    selector,
    affinity,
    could_ever_fit,
    active,
    fits_now,
)


def verdicts(asked: Asked, worker: Worker) -> tuple[Verdict, ...]:
    """Every filter's verdict on ``worker``."""
    return tuple(f(asked, worker) for f in FILTERS)


def _n(amount: float) -> str:
    return f"{round(amount, 3):g}"

"""Choosing a worker for a Job: pins and selectors first, then the placement policy among active workers."""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Sequence
from typing import Final

from multiqueue.api.errors import SelectorError
from multiqueue.api.labelsyntax import parse_label_selector
from multiqueue.api.meta import annotations_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.mirror import CLUSTER_SELECTOR_ANNOTATION

LEAST_LOADED: Final = "LeastLoaded"
ROUND_ROBIN: Final = "RoundRobin"
ORDERED: Final = "Ordered"  # the config's worker order, first that fits: primary/backup setups
POLICIES: Final = (LEAST_LOADED, ROUND_ROBIN, ORDERED)


class WaitReason(enum.StrEnum):
    """Why a Job does not run yet: the reason of its Pending Event and of ``multiqueue status``."""

    SUSPENDED = "Suspended"
    NO_WORKER = "NoWorker"  # pinned to a worker that is not configured, or none configured
    NO_MATCHING_WORKER = "NoMatchingWorker"
    INVALID_SELECTOR = "InvalidSelector"
    WORKER_DRAINING = "WorkerDraining"
    NO_ACTIVE_WORKER = "NoActiveWorker"
    NO_CAPACITY = "NoCapacity"
    NEVER_FITS = "NeverFits"  # asks more than any matching worker has in all: it waits until that changes
    WORKER_INACTIVE = "WorkerInactive"  # placed on a worker that cannot be reached (not lost yet)
    MIRROR_REJECTED = "MirrorRejected"
    MIRROR_CONFLICT = "MirrorConflict"  # a Job of that name, not made for this one, is in the way there
    KIND_NOT_SERVED = "KindNotServed"  # no worker left serves the Job's kind (its CRD is not installed there)


# Reasons that do not pass by themselves (a worker freeing capacity or coming back): someone must change the Job,
# the config or a worker. Their Events are Warnings.
NEEDS_A_CHANGE: Final = frozenset(
    {
        WaitReason.NO_WORKER,
        WaitReason.NO_MATCHING_WORKER,
        WaitReason.INVALID_SELECTOR,
        WaitReason.NEVER_FITS,
        WaitReason.MIRROR_REJECTED,
        WaitReason.MIRROR_CONFLICT,
        WaitReason.KIND_NOT_SERVED,
    }
)


@dataclasses.dataclass(frozen=True)
class WorkerView:
    """What placement knows of a worker."""

    name: str
    labels: dict[str, str]
    active: bool
    load: int  # Jobs placed there that are not finished
    max_jobs: int | None = None
    reason: str = (
        "Connected"  # why the worker is (not) active: Connected, ClientConnectionFailed, Unauthorized...
    )
    # Resource name -> what is still free (base units); only resources with a configured quota appear.
    free: dict[str, float] = dataclasses.field(default_factory=dict)
    # Inactive for longer than workerLostTimeout: its Jobs run elsewhere.
    lost: bool = False
    # False while draining (its Secret was deleted): the Jobs it runs finish there, no new ones come.
    accepting: bool = True
    # Every request slot is held by a request older than the slow limit: act on it later.
    slow: bool = False
    # Its free capacity is promised to a waiting Job ranked before the one being placed.
    held: bool = False
    # Resource name -> its configured quota in all (base units), as ``free`` lists them.
    capacity: dict[str, float] = dataclasses.field(default_factory=dict)
    # Kinds it cannot take: its API server does not serve them (their CRD is not installed there).
    missing_kinds: frozenset[str] = frozenset()


def beyond(demand: dict[str, float], worker: WorkerView) -> str | None:
    """The first thing ``worker`` could never give a Job asking ``demand``, even with nothing else running."""
    if worker.max_jobs == 0:
        return "maxJobs 0"
    for resource, amount in sorted(demand.items()):
        if resource in worker.capacity and amount > worker.capacity[resource] + 1e-9:
            return resource
    return None


def lacking(demand: dict[str, float], worker: WorkerView) -> str | None:
    """The first thing ``worker`` has too little of for a Job asking ``demand``, or None when it fits."""
    if worker.held:
        return "capacity held for higher-priority Jobs"
    if worker.max_jobs is not None and worker.load >= worker.max_jobs:
        return "jobs"
    for resource, amount in sorted(demand.items()):
        if resource in worker.free and amount > worker.free[resource] + 1e-9:
            return resource
    return None


@dataclasses.dataclass(frozen=True)
class Placement:
    worker: str | None
    reason: WaitReason | None = None  # why nothing fits, when worker is None
    message: str = ""
    # When it waits for capacity: the workers it would fit on once capacity frees.
    candidates: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Kept:
    """What one step of placement leaves: the workers still in the running, or why the Job can go nowhere."""

    workers: list[WorkerView]
    waiting: Placement | None = None


Step = Callable[[list[WorkerView]], Kept]


def place(
    job: Obj,
    workers: Sequence[WorkerView],
    policy: str,
    turn: int = 0,
    exclude: frozenset[str] = frozenset(),
    demand: dict[str, float] | None = None,
    pinned: str | None = None,
    kind: str | None = None,
) -> Placement:
    """The worker for ``job``, asking ``demand`` (resource -> amount, all pods together) of its capacity.

    ``turn`` is the round-robin counter; ``exclude`` lists workers already ruled out; ``pinned`` is the only worker
    the user allows (``mirror.requested_worker``); ``kind`` is the Job's kind, which a worker must serve. The steps
    run in order; the first that leaves the Job nowhere to go says why it waits.
    """
    asked = demand or {}
    steps: list[Step] = [
        functools.partial(keep_pinned, pinned=pinned),
        keep_accepting,
        functools.partial(keep_serving, kind=kind),
        functools.partial(keep_selected, selector_text=annotations_of(job).get(CLUSTER_SELECTOR_ANNOTATION)),
        functools.partial(keep_if_any_could_fit, demand=asked),
        keep_active,
        functools.partial(keep_fitting, demand=asked),
        prefer_responsive,
    ]
    candidates = [w for w in workers if w.name not in exclude]
    for step in steps:
        kept = step(candidates)
        if kept.waiting is not None:
            return kept.waiting
        candidates = kept.workers
    return Placement(choose(policy, candidates, turn))


def keep_serving(workers: list[WorkerView], kind: str | None) -> Kept:
    """The workers that serve the Job's kind; none left says which lack it."""
    kept = [w for w in workers if kind is None or kind not in w.missing_kinds]
    if workers and not kept:
        names = ", ".join(sorted(w.name for w in workers))
        return _waits(WaitReason.KIND_NOT_SERVED, f"no worker serves {kind}: its CRD is missing on {names}")
    return Kept(kept)


def keep_pinned(workers: list[WorkerView], pinned: str | None) -> Kept:
    """Only the worker the user pinned the Job to, when it pinned it: it must be configured and not draining."""
    if not pinned:
        return Kept(workers)
    kept = [w for w in workers if w.name == pinned]
    if not kept:
        return _waits(WaitReason.NO_WORKER, f"pinned to worker {pinned}, which is not configured")
    if not kept[0].accepting:
        return _waits(WaitReason.WORKER_DRAINING, f"pinned to worker {pinned}, which is draining")
    return Kept(kept)


def keep_accepting(workers: list[WorkerView]) -> Kept:
    """Draining workers take no new Job; the steps after say why none is left."""
    return Kept([w for w in workers if w.accepting])


def keep_selected(workers: list[WorkerView], selector_text: str | None) -> Kept:
    """The workers whose labels the Job's cluster selector matches (all of them without one)."""
    if not selector_text:
        return Kept(workers)
    try:
        selector = parse_label_selector(selector_text)
    except SelectorError as exc:
        return _waits(WaitReason.INVALID_SELECTOR, f"invalid {CLUSTER_SELECTOR_ANNOTATION}: {exc}")
    kept = [w for w in workers if selector.matches(w.labels)]
    if not kept:
        return _waits(WaitReason.NO_MATCHING_WORKER, f"no worker matches selector {selector_text}")
    return Kept(kept)


def keep_if_any_could_fit(workers: list[WorkerView], demand: dict[str, float]) -> Kept:
    """All of them, unless the Job asks more than each has in all: then it waits until a worker or the Job
    changes, and says what each lacks."""
    never = {w.name: beyond(demand, w) for w in workers}
    if workers and all(never.values()):
        detail = ", ".join(f"{name} ({what})" for name, what in sorted(never.items()))
        return _waits(WaitReason.NEVER_FITS, f"asks more than any worker has in all: {detail}")
    return Kept(workers)


def keep_active(workers: list[WorkerView]) -> Kept:
    """The workers that answer; none left says whether there was no worker at all or none answers."""
    kept = [w for w in workers if w.active]
    if kept:
        return Kept(kept)
    if not workers:
        return _waits(WaitReason.NO_WORKER, "no worker")
    names = ", ".join(sorted(w.name for w in workers))
    return _waits(WaitReason.NO_ACTIVE_WORKER, f"no active worker: {names}")


def keep_fitting(workers: list[WorkerView], demand: dict[str, float]) -> Kept:
    """The workers with room for the Job now; when none has, it waits for capacity on all of them."""
    shortfalls = {w.name: lacking(demand, w) for w in workers}
    kept = [w for w in workers if shortfalls[w.name] is None]
    if kept:
        return Kept(kept)
    missing = sorted({m for m in shortfalls.values() if m is not None})
    return Kept(
        [],
        Placement(
            None,
            WaitReason.NO_CAPACITY,
            f"waiting for capacity: {', '.join(missing)}",
            frozenset(w.name for w in workers),
        ),
    )


def prefer_responsive(workers: list[WorkerView]) -> Kept:
    """A worker whose requests hang gets a Job only when no responsive one fits."""
    return Kept([w for w in workers if not w.slow] or workers)


def choose(policy: str, workers: list[WorkerView], turn: int) -> str:
    """The policy's pick among ``workers`` (not empty), all of which would take the Job."""
    if policy == ROUND_ROBIN:
        return workers[turn % len(workers)].name
    if policy == ORDERED:
        return workers[0].name
    return min(workers, key=lambda w: (w.load, w.name)).name


def _waits(reason: WaitReason, message: str) -> Kept:
    return Kept([], Placement(None, reason, message))

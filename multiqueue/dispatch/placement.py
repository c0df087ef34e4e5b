"""Choosing a worker for a Job: pins and selectors first, then the placement policy among active workers."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
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


def place(
    job: Obj,
    workers: Sequence[WorkerView],
    policy: str,
    turn: int = 0,
    exclude: frozenset[str] = frozenset(),
    demand: dict[str, float] | None = None,
    pinned: str | None = None,
) -> Placement:
    """The worker for ``job``, asking ``demand`` (resource -> amount, all pods together) of its capacity.

    ``turn`` is the round-robin counter; ``exclude`` lists workers already ruled out; ``pinned`` is the only worker
    the user allows (``mirror.requested_worker``).
    """
    candidates = [w for w in workers if w.name not in exclude]
    if pinned:
        candidates = [w for w in candidates if w.name == pinned]
        if not candidates:
            return Placement(
                None, WaitReason.NO_WORKER, f"pinned to worker {pinned}, which is not configured"
            )
        if not candidates[0].accepting:
            return Placement(
                None, WaitReason.WORKER_DRAINING, f"pinned to worker {pinned}, which is draining"
            )
    candidates = [w for w in candidates if w.accepting]
    selector_text = annotations_of(job).get(CLUSTER_SELECTOR_ANNOTATION)
    if selector_text:
        try:
            selector = parse_label_selector(selector_text)
        except SelectorError as exc:
            return Placement(
                None, WaitReason.INVALID_SELECTOR, f"invalid {CLUSTER_SELECTOR_ANNOTATION}: {exc}"
            )
        candidates = [w for w in candidates if selector.matches(w.labels)]
        if not candidates:
            return Placement(
                None, WaitReason.NO_MATCHING_WORKER, f"no worker matches selector {selector_text}"
            )
    never = {w.name: beyond(demand or {}, w) for w in candidates}
    if candidates and all(never.values()):
        detail = ", ".join(f"{name} ({what})" for name, what in sorted(never.items()))
        return Placement(None, WaitReason.NEVER_FITS, f"asks more than any worker has in all: {detail}")
    active = [w for w in candidates if w.active]
    if not active:
        if not candidates:
            return Placement(None, WaitReason.NO_WORKER, "no worker")
        names = ", ".join(sorted(w.name for w in candidates))
        return Placement(None, WaitReason.NO_ACTIVE_WORKER, f"no active worker: {names}")
    shortfalls = {w.name: lacking(demand or {}, w) for w in active}
    fitting = [w for w in active if shortfalls[w.name] is None]
    if not fitting:
        missing = sorted({m for m in shortfalls.values() if m is not None})
        return Placement(
            None,
            WaitReason.NO_CAPACITY,
            f"waiting for capacity: {', '.join(missing)}",
            frozenset(w.name for w in active),
        )
    # A worker whose requests hang gets a Job only when no responsive one fits.
    fitting = [w for w in fitting if not w.slow] or fitting
    if policy == ROUND_ROBIN:
        return Placement(fitting[turn % len(fitting)].name)
    if policy == ORDERED:
        return Placement(fitting[0].name)
    return Placement(min(fitting, key=lambda w: (w.load, w.name)).name)

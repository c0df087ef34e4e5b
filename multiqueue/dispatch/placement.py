"""Choosing a worker for a Job: pins and selectors first, then the placement policy among Active workers."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from multiqueue.api.meta import annotations_of, labels_of
from multiqueue.api.selectors import SelectorError, parse_label_selector
from multiqueue.api.types import Obj
from multiqueue.dispatch.generic import CLUSTER_LABEL, CLUSTER_SELECTOR_ANNOTATION

LEAST_LOADED: Final = "LeastLoaded"
ROUND_ROBIN: Final = "RoundRobin"
ORDERED: Final = "Ordered"  # the config's worker order, first that fits: primary/backup setups
POLICIES: Final = (LEAST_LOADED, ROUND_ROBIN, ORDERED)


@dataclasses.dataclass(frozen=True)
class WorkerView:
    """What placement knows of a worker."""

    name: str
    labels: dict[str, str]
    active: bool
    load: int  # mirrors it runs that are not finished
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


def lacking(demand: dict[str, float], worker: WorkerView) -> str | None:
    """The first thing ``worker`` has too little of for a Job asking ``demand``, or None when it fits."""
    if worker.max_jobs is not None and worker.load >= worker.max_jobs:
        return "jobs"
    for resource, amount in sorted(demand.items()):
        if resource in worker.free and amount > worker.free[resource] + 1e-9:
            return resource
    return None


@dataclasses.dataclass(frozen=True)
class Placement:
    worker: str | None
    reason: str  # why nothing fits, when worker is None


def place(
    job: Obj,
    workers: Sequence[WorkerView],
    policy: str,
    turn: int = 0,
    exclude: frozenset[str] = frozenset(),
    demand: dict[str, float] | None = None,
) -> Placement:
    """The worker for ``job``, asking ``demand`` (resource -> amount, all pods together) of its capacity.

    ``turn`` is the round-robin counter; ``exclude`` lists workers already ruled out.
    """
    candidates = [w for w in workers if w.name not in exclude]
    pinned = labels_of(job).get(CLUSTER_LABEL)
    if pinned:
        candidates = [w for w in candidates if w.name == pinned]
        if not candidates:
            return Placement(None, f"pinned to worker {pinned}, which is not configured")
        if not candidates[0].accepting:
            return Placement(None, f"pinned to worker {pinned}, which is draining")
    candidates = [w for w in candidates if w.accepting]
    selector_text = annotations_of(job).get(CLUSTER_SELECTOR_ANNOTATION)
    if selector_text:
        try:
            selector = parse_label_selector(selector_text)
        except SelectorError as exc:
            return Placement(None, f"invalid {CLUSTER_SELECTOR_ANNOTATION}: {exc}")
        candidates = [w for w in candidates if selector.matches(w.labels)]
        if not candidates:
            return Placement(None, f"no worker matches selector {selector_text}")
    active = [w for w in candidates if w.active]
    if not active:
        return Placement(
            None,
            "no active worker: " + ", ".join(sorted(w.name for w in candidates))
            if candidates
            else "no worker",
        )
    shortfalls = {w.name: lacking(demand or {}, w) for w in active}
    fitting = [w for w in active if shortfalls[w.name] is None]
    if not fitting:
        missing = sorted({m for m in shortfalls.values() if m is not None})
        return Placement(None, f"waiting for capacity: {', '.join(missing)}")
    active = fitting
    if policy == ROUND_ROBIN:
        return Placement(active[turn % len(active)].name, "")
    if policy == ORDERED:
        return Placement(active[0].name, "")
    return Placement(min(active, key=lambda w: (w.load, w.name)).name, "")

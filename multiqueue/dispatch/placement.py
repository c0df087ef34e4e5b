"""Choosing a worker for a Job: every filter over every worker (``placement_filters``), the scores over those that
pass (``placement_scores``), then the choice; a Job that goes nowhere waits with the reason of the first step that
leaves it no worker, and the one-line summary of every worker's verdict (``placement_summary``)."""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Final, overload

from multiqueue.api.errors import SelectorError
from multiqueue.api.labelselectors import LabelSelector
from multiqueue.api.labelsyntax import parse_label_selector
from multiqueue.api.meta import annotations_of
from multiqueue.api.types import Obj
from multiqueue.dispatch.affinity import (
    NO_AFFINITY,
    WORKER_AFFINITY_ANNOTATION,
    Affinity,
    AffinityError,
    parse_affinity,
)
from multiqueue.dispatch.mirror import CLUSTER_SELECTOR_ANNOTATION
from multiqueue.dispatch.placement_filters import Asked, Verdict, beyond, lacking, verdicts
from multiqueue.dispatch.placement_scores import (
    LEAST_LOADED,
    ORDERED,
    POLICIES,
    ROUND_ROBIN,
    affinity_scores,
    best,
    pick,
    policy_scores,
    top_weighted,
)
from multiqueue.dispatch.placement_summary import summary

__all__ = ["LEAST_LOADED", "ORDERED", "POLICIES", "ROUND_ROBIN", "WORKER_AFFINITY_ANNOTATION"]


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
    INVALID_AFFINITY = "InvalidAffinity"  # its multiqueue.dev/worker-affinity cannot be read


# Reasons that do not pass by themselves (a worker freeing capacity or coming back): someone must change the Job,
# the config or a worker. Their Events are Warnings.
NEEDS_A_CHANGE: Final = frozenset(
    {
        WaitReason.NO_WORKER,
        WaitReason.NO_MATCHING_WORKER,
        WaitReason.INVALID_SELECTOR,
        WaitReason.INVALID_AFFINITY,
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


class WorkerViews(Sequence[WorkerView]):
    """Every worker as one sync sees it, each view made when first asked for: most syncs look at a worker or two
    by name, only placing a Job looks at them all, and there may be many. Read within one sync."""

    def __init__(self, names: Collection[str], view: Callable[[str], WorkerView]) -> None:
        self._names = names
        self._view = view
        self._made: dict[str, WorkerView] = {}
        self._every: list[WorkerView] | None = None

    @classmethod
    def of(cls, views: Iterable[WorkerView]) -> WorkerViews:
        """Views made already, in their order."""
        by_name = {v.name: v for v in views}
        return cls(by_name.keys(), by_name.__getitem__)

    def get(self, name: str) -> WorkerView | None:
        """The view of the worker ``name``; None when there is no such worker."""
        return self._made.get(name) or (self._make(name) if name in self._names else None)

    def answers(self, name: str) -> bool:
        """Whether there is a worker ``name`` and it is active: whether anything can be asked of it now."""
        view = self.get(name)
        return view is not None and view.active

    def _make(self, name: str) -> WorkerView:
        view = self._made.get(name)
        if view is None:
            view = self._made[name] = self._view(name)
        return view

    def _all(self) -> list[WorkerView]:
        if self._every is None:
            self._every = [self._make(n) for n in self._names]
        return self._every

    def __iter__(self) -> Iterator[WorkerView]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._names)

    @overload
    def __getitem__(self, index: int) -> WorkerView: ...
    @overload
    def __getitem__(self, index: slice) -> list[WorkerView]: ...
    def __getitem__(self, index: int | slice) -> WorkerView | list[WorkerView]:
        return self._all()[index]


@dataclasses.dataclass(frozen=True)
class Placement:
    worker: str | None
    reason: WaitReason | None = None  # why nothing fits, when worker is None
    message: str = ""
    # When it waits for capacity: the workers it would fit on once capacity frees.
    candidates: frozenset[str] = frozenset()
    # When it waits: the line accounting for every worker ("0/3 workers can take this Job: ...").
    summary: str = dataclasses.field(default="", compare=False)


@dataclasses.dataclass(frozen=True)
class Kept:
    """What one step of placement leaves: the workers still in the running, or why the Job can go nowhere."""

    workers: list[WorkerView]
    waiting: Placement | None = None


Step = Callable[[list[WorkerView]], Kept]


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Placement shown whole: each worker's verdict from each filter, the scores of those every filter passed,
    and the outcome. ``multiqueue explain`` prints it; the dispatcher keeps only ``placement``."""

    asked: Asked
    placement: Placement
    verdicts: dict[str, tuple[Verdict, ...]]  # every worker given, in their order
    affinity: dict[str, int]  # preferred-term weight of each worker every filter passed
    # the policy's score of each of those tied on the top weight (among the responsive ones, when one passed)
    policy: dict[str, float]


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
    the user allows (``mirror.requested_worker``); ``kind`` is the Job's kind, which a worker must serve.
    """
    return evaluate(job, workers, policy, turn, exclude, demand, pinned, kind).placement


def evaluate(
    job: Obj,
    workers: Sequence[WorkerView],
    policy: str,
    turn: int = 0,
    exclude: frozenset[str] = frozenset(),
    demand: dict[str, float] | None = None,
    pinned: str | None = None,
    kind: str | None = None,
) -> Evaluation:
    """:func:`place` with its workings: every filter runs over every worker, the scores over the workers every
    filter passed, and the best of them takes the Job. When none is left (or the Job's selector or affinity
    cannot be read) the steps below, in order, say why it waits: the first that leaves it nowhere to go."""
    asked_demand = demand or {}
    notes = annotations_of(job)
    selector_text = notes.get(CLUSTER_SELECTOR_ANNOTATION)
    selector, affinity, unreadable = _job_terms(selector_text, notes.get(WORKER_AFFINITY_ANNOTATION))
    asked = Asked(asked_demand, pinned, kind, selector, affinity, exclude)
    seen: dict[str, tuple[Verdict, ...]] = {}
    passing = []
    for worker in workers:
        found = seen[worker.name] = verdicts(asked, worker)
        if not any(v.code for v in found):
            passing.append(worker)
    if passing and not unreadable:
        weights = affinity_scores(affinity, passing)
        tied = top_weighted(prefer_responsive(passing).workers, weights)
        scores = policy_scores(policy, tied, turn)
        return Evaluation(asked, Placement(pick(tied, scores)), seen, weights, scores)
    steps: list[Step] = [
        functools.partial(keep_pinned, pinned=pinned),
        keep_accepting,
        functools.partial(keep_serving, kind=kind),
        functools.partial(keep_selected, selector_text=selector_text),
        functools.partial(keep_affine, affinity=affinity, error=unreadable),
        functools.partial(keep_if_any_could_fit, demand=asked_demand),
        keep_active,
        functools.partial(keep_fitting, demand=asked_demand),
    ]
    candidates = [w for w in workers if w.name not in exclude]
    waiting = Placement(None, WaitReason.NO_WORKER, "no worker")
    for step in steps:
        kept = step(candidates)
        if kept.waiting is not None:
            waiting = kept.waiting
            break
        candidates = kept.workers
    line = unreadable or summary(seen)
    return Evaluation(asked, dataclasses.replace(waiting, summary=line), seen, {}, {})


def _job_terms(
    selector_text: str | None, affinity_text: str | None
) -> tuple[LabelSelector | None, Affinity, str]:
    """The Job's cluster selector and worker affinity, and why one of them cannot be read (empty when both can)."""
    selector: LabelSelector | None = None
    if selector_text:
        try:
            selector = parse_label_selector(selector_text)
        except SelectorError as exc:
            return None, NO_AFFINITY, f"invalid {CLUSTER_SELECTOR_ANNOTATION}: {exc}"
    try:
        return selector, parse_affinity(affinity_text), ""
    except AffinityError as exc:
        return selector, NO_AFFINITY, str(exc)


def keep_affine(workers: list[WorkerView], affinity: Affinity, error: str = "") -> Kept:
    """The workers the Job's required worker affinity allows; an affinity that cannot be read (``error``) stops the
    Job. Runs after the selector step, which stops a Job whose selector cannot be read."""
    if error:
        return _waits(WaitReason.INVALID_AFFINITY, error)
    if not affinity.required:
        return Kept(workers)
    kept = [w for w in workers if affinity.allows(w.labels)]
    if not kept:
        return _waits(WaitReason.NO_MATCHING_WORKER, "no worker matches the required worker affinity")
    return Kept(kept)


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
    return best(policy, workers, turn, NO_AFFINITY)


def _waits(reason: WaitReason, message: str) -> Kept:
    return Kept([], Placement(None, reason, message))

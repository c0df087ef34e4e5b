"""The decide step of the dispatcher: from what is observed of one Job to the actions to take, and when to look
again.

All state lives in the clusters: this manager's finalizer and the ``multiqueue.dev/cluster`` label on the user's
Job say it was placed and where; the mirror carries its origin and the user Job's UID, and, until it has been
given the user's progress, the progress it must start from. So a restarted manager decides exactly as the one
before it would have, never makes a second mirror, and never lets a mirror run without its progress.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Final

from multiqueue.api.meta import as_dict, labels_of, metadata
from multiqueue.api.types import NORMAL, WARNING, Event, Obj
from multiqueue.dispatch.decision import (
    CACHE_WAIT,
    WORKER_BUSY_RETRY,
    Actions,
    Observed,
    Rejection,
    Waiting,
)
from multiqueue.dispatch.generic import GenericJob, StatusRefused, demand, rerun_status_of
from multiqueue.dispatch.lifecycle_parts import place_as_parts, run_parts
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    Identity,
    holds_progress,
    pending_progress,
    requested_worker,
)
from multiqueue.dispatch.mirrorbody import mirror_body
from multiqueue.dispatch.placement import (
    NEEDS_A_CHANGE,
    Placement,
    WaitReason,
    WorkerViews,
    evaluate,
    place,
)
from multiqueue.dispatch.split import parts_of

# Why a Job placed whole waits that parts may not: all of it has no room on one worker, now or ever.
SPLIT_WHEN: Final = frozenset({WaitReason.NO_CAPACITY, WaitReason.NEVER_FITS})


def decide(
    adapter: GenericJob,
    identity: Identity,
    policy: str,
    seen: Observed,
    keep_finished: float = 0.0,
    split_limit: int = 0,
) -> Actions:
    """The actions for one Job. ``keep_finished``: seconds a finished Job's mirror (and so its pods and their
    logs) stays on the worker after the Job finished; deleting the user's Job takes it sooner. ``split_limit``:
    the most parts an Indexed Job that asks to be split may run as (below 2: none is split)."""
    actions = _decide(adapter, identity, policy, seen, keep_finished, split_limit)
    # Only reachable workers are asked to delete: a mirror on an unreachable one goes when it is back (its
    # cache lists the mirror again and the Job is synced), so no sync waits on a dead connection.
    workers = seen.workers
    actions.delete_mirrors = [(w, m) for w, m in actions.delete_mirrors if workers.answers(w)]
    touched = {w for w, _ in actions.delete_mirrors}
    for target in (
        actions.create_mirror,
        actions.seed_progress,
        actions.suspend_mirror,
        actions.scale_mirror,
    ):
        if target is not None:
            touched.add(target[0])
    if not all(workers.answers(w) for w in touched):
        # It does not answer: nothing is asked of it until it is back, and its return syncs every Job placed there.
        return Actions()
    if any((v := workers.get(w)) is not None and v.slow for w in touched):
        # That worker is slow to answer: decide again later rather than hold a sync waiting on it.
        return Actions(requeue_after=WORKER_BUSY_RETRY)
    return actions


@dataclasses.dataclass(frozen=True)
class Ours:
    """A Job of ours as one sync sees it: the user's object, our mirrors of it by worker, the worker it is placed
    on (None: not placed), and which of those workers are lost."""

    user: Obj
    mirrors: dict[str, Obj]
    placed: str | None
    lost: frozenset[str]


class Stage(enum.Enum):
    """Where a Job of ours is in its life: each stage has its own decision."""

    ENDING = "ending"  # finished, or being deleted: its mirrors go (a finished one's may stay a while)
    UNPLACED = "unplaced"  # on no worker yet: it is placed when one takes it
    STRANDED = "stranded"  # placed on a lost worker: it runs on another
    PLACED = "placed"  # its mirror is created, given its progress, suspended or resumed, and followed


def stage_of(adapter: GenericJob, job: Ours) -> Stage:
    """The stage, and so the decision, of a Job of ours: an ending one ends wherever it was placed."""
    if metadata(job.user).get("deletionTimestamp") or adapter.is_finished(job.user):
        return Stage.ENDING
    if job.placed is None:
        return Stage.UNPLACED
    if job.placed in job.lost:
        return Stage.STRANDED
    return Stage.PLACED


def _decide(
    adapter: GenericJob,
    identity: Identity,
    policy: str,
    seen: Observed,
    keep_finished: float,
    split_limit: int,
) -> Actions:
    """The actions for one Job, before the workers that cannot be asked are taken into account."""
    user = seen.user
    if user is None:
        # The user's Job is gone for good: any mirror of it is garbage.
        return Actions(delete_mirrors=list(seen.mirrors.items()))
    if adapter.managed_by(user) != identity.managed_by and not identity.holds(user):
        return Actions()
    job = _ours(identity, seen, user)
    # Mirrors of an earlier Job with the same name (the user re-created it) are garbage.
    actions = Actions(delete_mirrors=[(w, m) for w, m in seen.mirrors.items() if w not in job.mirrors])
    stage = stage_of(adapter, job)
    parts = parts_of(user) if job.placed is not None else None
    if parts is not None and stage is not Stage.ENDING:
        return run_parts(actions, adapter, identity, seen, user, job.mirrors, parts)
    match stage:
        case Stage.ENDING:
            return _end(actions, adapter, identity, seen, job, keep_finished)
        case Stage.UNPLACED:
            return _place(actions, adapter, identity, policy, seen, job, split_limit)
        case Stage.STRANDED:
            return _redispatch(actions, adapter, identity, policy, seen, job)
        case Stage.PLACED:
            return _run(actions, adapter, identity, seen, job)


def _ours(identity: Identity, seen: Observed, user: Obj) -> Ours:
    """What of ``seen`` is ours: a mirror another manager made, or one of an earlier Job of that name, is not."""
    mirrors = {w: m for w, m in seen.mirrors.items() if identity.owns_mirror(m, user)}
    placed = labels_of(user).get(CLUSTER_LABEL) if identity.holds(user) else None
    lost = frozenset(
        name for name in (placed, *mirrors) if name is not None and (v := seen.workers.get(name)) and v.lost
    )
    return Ours(user, mirrors, placed, lost)


def kept_until(adapter: GenericJob, job: Ours, workers: WorkerViews, keep_finished: float) -> float | None:
    """Until when a finished Job's mirror stays on its worker so that its pods' logs can still be read; None when
    it goes now (the Job is being deleted, its finish has no time, no mirror is there, or the worker drains)."""
    if metadata(job.user).get("deletionTimestamp") or not adapter.is_finished(job.user):
        return None
    finish = adapter.finish(job.user)
    if finish is None or finish.at is None or job.placed not in job.mirrors:
        return None
    # A draining worker is being let go: what is finished there goes at once.
    view = workers.get(job.placed) if job.placed is not None else None
    if view is not None and not view.accepting:
        return None
    return finish.at + keep_finished


def _end(
    actions: Actions, adapter: GenericJob, identity: Identity, seen: Observed, job: Ours, keep_finished: float
) -> Actions:
    """Finished or being deleted: its mirrors go, the one it ran on once its time is up."""
    until = kept_until(adapter, job, seen.workers, keep_finished)
    if until is not None and seen.now < until:
        # Kept, finished, so that its pods' logs can still be read; then it goes as below. A Job run as parts
        # keeps every part's.
        parts = parts_of(job.user)
        kept = {p.worker for p in parts.plans} if parts is not None else {job.placed}
        actions.delete_mirrors += [(w, m) for w, m in job.mirrors.items() if w not in kept]
        actions.requeue_after = until - seen.now
        return actions
    actions.delete_mirrors += list(job.mirrors.items())
    # A mirror on a lost worker must not keep the user's Job from going: it is collected on the worker's return,
    # as an orphan.
    if identity.holds(job.user) and all(w in job.lost for w in job.mirrors):
        actions.remove_finalizer = True
    return actions


def _run(actions: Actions, adapter: GenericJob, identity: Identity, seen: Observed, job: Ours) -> Actions:
    """Placed on a worker that is not lost: its mirror there is created, given its progress, suspended or resumed
    as the user's Job is, and its status becomes the user's."""
    placed = job.placed
    assert placed is not None
    # Mirrors on workers other than the chosen one are stale (a lost race or an old placement).
    actions.delete_mirrors += [(w, m) for w, m in job.mirrors.items() if w != placed]
    mirror = job.mirrors.get(placed)
    if mirror is None:
        return _create(actions, adapter, identity, seen, job.user, placed)
    progress = pending_progress(mirror)
    if progress is not None and not holds_progress(mirror, progress):
        # Created to go on from the user's progress, not given it yet: give it, and only then let it run.
        status = {**as_dict(mirror.get("status")), **progress}
        actions.seed_progress = (placed, {**mirror, "status": status})
        return actions
    if adapter.is_suspended(mirror) != adapter.is_suspended(job.user):
        actions.suspend_mirror = (placed, adapter.is_suspended(job.user))
    if progress is None:  # else its status is the seeded one until it runs
        _follow(actions, adapter, seen, job.user, mirror, placed)
    return actions


def _follow(
    actions: Actions, adapter: GenericJob, seen: Observed, user: Obj, mirror: Obj, worker: str
) -> None:
    """The mirror's status becomes the user's, unless the user's status rules refuse it, or the management
    cluster refused that very status and its back-off has not passed."""
    try:
        status = adapter.synced_status(user, mirror)
    except StatusRefused as refused:
        actions.status_refused = True
        actions.events.append(
            Event(WARNING, "StatusSyncRejected", f"status from worker {worker} not applied: {refused}")
        )
        return
    if status is None:
        return
    rejection = seen.status_rejection
    if rejection is not None and rejection.status == status and seen.now < rejection.retry_at():
        message = f"the management cluster refused it ({rejection.reason}): {rejection.message}"
        actions.events.append(
            Event(WARNING, "StatusSyncRejected", f"status from worker {worker} not applied: {message}")
        )
        actions.requeue_after = rejection.retry_at() - seen.now
        return
    actions.status = status
    _finished_event(actions, adapter, {**user, "status": status}, worker)


def _finished_event(actions: Actions, adapter: GenericJob, synced: Obj, worker: str) -> None:
    """The status being written finishes the Job: say how, as the worker's Job controller said it there."""
    finish = adapter.finish(synced)
    if finish is None:
        return
    kind = adapter.resource.kind
    if finish.succeeded:
        actions.events.append(Event(NORMAL, "Completed", f"{kind} completed on worker {worker}"))
        return
    message = (
        f"{finish.message} (on worker {worker})" if finish.message else f"{kind} failed on worker {worker}"
    )
    actions.events.append(Event(WARNING, finish.reason, message))


def _pending_event(waiting: Waiting) -> Event:
    """A Job that waits for something that passes by itself gets a Pending Event; one that waits until someone
    changes the Job, the config or a worker gets a Warning with the reason."""
    if waiting.reason in NEEDS_A_CHANGE:
        return Event(WARNING, waiting.reason.value, waiting.message)
    return Event(NORMAL, "Pending", waiting.message)


def _place(
    actions: Actions,
    adapter: GenericJob,
    identity: Identity,
    policy: str,
    seen: Observed,
    job: Ours,
    split_limit: int,
) -> Actions:
    user = job.user
    if adapter.is_suspended(user):
        actions.waiting = Waiting(WaitReason.SUSPENDED, "the Job is suspended")
        return actions
    refused = {w: r for w, r in seen.rejections.items() if seen.now < r.retry_at()}
    asked = demand(adapter.pod_sets(user))
    pinned = requested_worker(user, identity.holds(user))
    evaluation = evaluate(
        user,
        seen.workers,
        policy,
        seen.turn,
        exclude=frozenset(refused),
        demand=asked,
        pinned=pinned,
        kind=adapter.resource.kind,
    )
    placement = evaluation.placement
    if placement.worker is None:
        split = placement.reason in SPLIT_WHEN and place_as_parts(
            actions, adapter, identity, seen, user, evaluation, split_limit
        )
        if not split:
            _wait(actions, placement, refused, seen.now)
        return actions
    actions.hold = {placement.worker: asked}
    actions.place_on = placement.worker
    actions.create_mirror = (placement.worker, mirror_body(adapter, identity, user))
    actions.events.append(Event(NORMAL, "Dispatched", f"Job dispatched to worker {placement.worker}"))
    return actions


def _wait(actions: Actions, placement: Placement, refused: dict[str, Rejection], now: float) -> None:
    assert placement.reason is not None
    if refused and placement.reason in (WaitReason.NO_WORKER, WaitReason.NO_MATCHING_WORKER):
        # Every worker that would take it refused its mirror: that is why it waits.
        latest = max(refused.values(), key=lambda r: r.at)
        actions.waiting = Waiting(_refusal_reason(latest), _rejected_message(latest))
    else:
        # Placement's line accounting for every worker, as kube-scheduler's Event does for every node.
        actions.waiting = Waiting(placement.reason, placement.summary, placement.candidates)
    actions.events.append(_pending_event(actions.waiting))
    if refused:
        actions.requeue_after = max(0.0, min(r.retry_at() for r in refused.values()) - now)


def _create(
    actions: Actions, adapter: GenericJob, identity: Identity, seen: Observed, user: Obj, placed: str
) -> Actions:
    """Placed, and no mirror of ours is there (yet): create it, unless the worker refused it."""
    rejection = seen.rejections.get(placed)
    if (
        rejection is not None
        and rejection.existing_origin == identity.origin
        and seen.now < rejection.retry_at()
    ):
        # Ours after all (made by an earlier sync, or an old one still going); look again once the cache has it.
        actions.requeue_after = min(CACHE_WAIT, rejection.retry_at() - seen.now)
        return actions
    if rejection is not None and seen.now < rejection.retry_at():
        # Nothing was created: let the placement go, so the Job waits (or goes elsewhere) with the reason.
        actions.unplace = True
        actions.waiting = Waiting(_refusal_reason(rejection), _rejected_message(rejection))
        actions.events.append(_pending_event(actions.waiting))
        return actions
    if not seen.workers.answers(placed):
        actions.waiting = Waiting(WaitReason.WORKER_INACTIVE, f"worker {placed} is not active")
        return actions
    actions.create_mirror = (placed, mirror_body(adapter, identity, user))
    actions.events.append(Event(NORMAL, "Dispatched", f"Job dispatched to worker {placed}"))
    return actions


def _refusal_reason(rejection: Rejection) -> WaitReason:
    return WaitReason.MIRROR_REJECTED if rejection.existing_origin is None else WaitReason.MIRROR_CONFLICT


def _rejected_message(rejection: Rejection) -> str:
    if rejection.existing_origin:
        return (
            f"worker {rejection.worker} has a Job of this name made by another manager "
            f"({rejection.existing_origin}); it is left alone"
        )
    if rejection.existing_origin is not None:
        return f"worker {rejection.worker} has a Job of this name that multiqueue did not create; it is left alone"
    return f"worker {rejection.worker} refused the mirror ({rejection.reason}): {rejection.message}"


def _redispatch(
    actions: Actions, adapter: GenericJob, identity: Identity, policy: str, seen: Observed, job: Ours
) -> Actions:
    """The worker running this Job is lost: run it on another, from the progress the user's Job records."""
    user, placed = job.user, job.placed
    assert placed is not None
    # A pin chose the first worker only; a selector still applies.
    asked = demand(adapter.pod_sets(user))
    refused = frozenset(w for w, r in seen.rejections.items() if seen.now < r.retry_at())
    placement = place(
        user,
        seen.workers,
        policy,
        seen.turn,
        exclude=frozenset(w.name for w in seen.workers if w.lost) | refused,
        demand=asked,
        kind=adapter.resource.kind,
    )
    if placement.worker is None:
        assert placement.reason is not None
        message = f"worker {placed} is lost; {placement.summary}"
        actions.waiting = Waiting(placement.reason, message, placement.candidates)
        # It waits for its worker to come back, or for another to take it: that passes by itself.
        actions.events.append(Event(NORMAL, "Pending", message))
        return actions
    actions.hold = {placement.worker: asked}
    actions.redispatch = (placed, placement.worker)
    rerun = rerun_status_of(adapter, user)
    if rerun is not None and rerun != (user.get("status") or {}):
        actions.status = rerun
    actions.create_mirror = (placement.worker, mirror_body(adapter, identity, user))
    actions.events.append(
        Event(
            WARNING,
            "Redispatched",
            f"worker {placed} was unreachable for longer than the worker-lost timeout; "
            f"the Job runs on worker {placement.worker} now",
        )
    )
    return actions

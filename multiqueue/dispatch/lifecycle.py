"""The decide step of the dispatcher: from a user's Job, its mirrors and the workers to the actions to take.

All state lives in the clusters: the finalizer ``multiqueue.dev/mirror`` and the label ``multiqueue.dev/cluster``
on the user's Job say it was placed and where; the mirror carries its origin and the user Job's UID. So a
restarted manager decides exactly as the one before it would have, and never makes a second mirror.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

from multiqueue.api.meta import as_list, labels_of, metadata, uid_of
from multiqueue.api.types import Event, Obj
from multiqueue.dispatch.generic import (
    CLUSTER_LABEL,
    MIRROR_FINALIZER,
    GenericJob,
    StatusRefused,
    demand,
    mirror_identity,
)
from multiqueue.dispatch.placement import WorkerView, place


@dataclasses.dataclass
class Actions:
    place_on: str | None = None  # add our finalizer and the cluster label (first step of a dispatch)
    create_mirror: tuple[str, Obj] | None = None  # (worker, mirror)
    suspend_mirror: tuple[str, bool] | None = None
    status: Obj | None = None
    delete_mirrors: list[tuple[str, Obj]] = dataclasses.field(default_factory=list)
    redispatch: tuple[str, str] | None = None  # (lost worker, new worker): move the cluster label
    remove_finalizer: bool = False
    events: list[Event] = dataclasses.field(default_factory=list)
    waiting: str = ""  # why the Job is not running yet


def _has_finalizer(user: Obj) -> bool:
    return MIRROR_FINALIZER in as_list(metadata(user).get("finalizers"))


def decide(
    adapter: GenericJob,
    user: Obj,
    mirrors: dict[str, Obj],
    workers: Sequence[WorkerView],
    *,
    origin: str,
    managed_by: str,
    policy: str,
    turn: int = 0,
) -> Actions:
    """``mirrors``: worker name -> a Job there with our origin label and this user Job's name (any origin UID)."""
    actions = _decide(adapter, user, mirrors, workers, origin, managed_by, policy, turn)
    # Only reachable workers are asked to delete: a mirror on an unreachable one goes when it is back (its
    # cache lists the mirror again and the Job is synced), so no sync waits on a dead connection.
    active = {w.name for w in workers if w.active}
    actions.delete_mirrors = [(w, m) for w, m in actions.delete_mirrors if w in active]
    return actions


def _decide(
    adapter: GenericJob,
    user: Obj,
    mirrors: dict[str, Obj],
    workers: Sequence[WorkerView],
    origin: str,
    managed_by: str,
    policy: str,
    turn: int,
) -> Actions:
    actions = Actions()
    if adapter.managed_by(user) != managed_by and not _has_finalizer(user):
        return actions
    ours = {w: m for w, m in mirrors.items() if mirror_identity(m) == (origin, uid_of(user))}
    # Mirrors of an earlier Job with the same name (the user re-created it) are garbage.
    actions.delete_mirrors = [(w, m) for w, m in mirrors.items() if w not in ours]
    placed = labels_of(user).get(CLUSTER_LABEL) if _has_finalizer(user) else None
    lost = frozenset(w.name for w in workers if w.lost)

    if metadata(user).get("deletionTimestamp") or adapter.is_finished(user):
        actions.delete_mirrors += list(ours.items())
        # A mirror on a lost worker must not keep the user's Job from going: it is collected on the
        # worker's return, as an orphan.
        if _has_finalizer(user) and all(w in lost for w in ours):
            actions.remove_finalizer = True
        return actions

    if placed is not None and placed in lost:
        return _redispatch(actions, adapter, user, workers, placed, lost, origin, policy, turn)

    if placed is None:
        if adapter.is_suspended(user):
            actions.waiting = "suspended"
            return actions
        placement = place(user, workers, policy, turn, demand=demand(adapter.pod_sets(user)))
        if placement.worker is None:
            actions.waiting = placement.reason
            actions.events.append(Event("Normal", "Pending", placement.reason))
            return actions
        actions.place_on = placement.worker
        actions.create_mirror = (placement.worker, adapter.build_mirror(user, origin))
        return actions

    # Mirrors on workers other than the chosen one are stale (a lost race or an old placement).
    actions.delete_mirrors += [(w, m) for w, m in ours.items() if w != placed]
    mirror = ours.get(placed)
    if mirror is None:
        if not any(w.name == placed and w.active for w in workers):
            actions.waiting = f"worker {placed} is not active"
            return actions
        actions.create_mirror = (placed, _fresh_mirror(adapter, user, origin))
        return actions
    if adapter.is_suspended(mirror) != adapter.is_suspended(user):
        actions.suspend_mirror = (placed, adapter.is_suspended(user))
    try:
        actions.status = adapter.synced_status(user, mirror)
    except StatusRefused as refused:
        actions.events.append(
            Event("Warning", "StatusSyncRejected", f"status from worker {placed} not applied: {refused}")
        )
    return actions


def _redispatch(
    actions: Actions,
    adapter: GenericJob,
    user: Obj,
    workers: Sequence[WorkerView],
    placed: str,
    lost: frozenset[str],
    origin: str,
    policy: str,
    turn: int,
) -> Actions:
    """The worker running this Job is lost: run it on another, from the progress the user's Job records."""
    # The cluster label is ours since placement, so it no longer pins the Job; a selector still applies.
    unplaced = copy.deepcopy(user)
    metadata(unplaced).get("labels", {}).pop(CLUSTER_LABEL, None)
    placement = place(unplaced, workers, policy, turn, exclude=lost, demand=demand(adapter.pod_sets(user)))
    if placement.worker is None:
        actions.waiting = f"worker {placed} is lost; {placement.reason}"
        actions.events.append(Event("Normal", "Pending", actions.waiting))
        return actions
    actions.redispatch = (placed, placement.worker)
    rerun = adapter.rerun_status(user)
    if rerun != (user.get("status") or {}):
        actions.status = rerun
    actions.create_mirror = (placement.worker, _fresh_mirror(adapter, user, origin))
    actions.events.append(
        Event(
            "Warning",
            "Redispatched",
            f"worker {placed} was unreachable for longer than the worker-lost timeout; "
            f"the Job runs on worker {placement.worker} now",
        )
    )
    return actions


def _fresh_mirror(adapter: GenericJob, user: Obj, origin: str) -> Obj:
    """A mirror for a Job already placed: suspended when the user's Job is."""
    body = adapter.build_mirror(user, origin)
    return with_suspend(body, adapter, True) if adapter.is_suspended(user) else body


def with_suspend(body: Obj, adapter: GenericJob, suspend: bool) -> Obj:
    """``body`` with the adapter's suspend patch applied."""
    patch = adapter.suspend_patch(suspend)
    merged = dict(body)
    for key, value in patch.items():
        merged[key] = {**dict(body.get(key) or {}), **value} if isinstance(value, dict) else value
    return merged

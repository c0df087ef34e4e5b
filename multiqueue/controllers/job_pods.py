"""Pod management of the Job controller: which pods to create and which to delete in one sync.

A running Job keeps ``parallelism`` pods active, no more than the completions left need: extra pods (and, for
Indexed Jobs, pods of a finished index or a duplicate index) are deleted, missing ones created once the failure
back-off allows. A Job that ends or is suspended loses every active pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from multiqueue.api import jobs, pods
from multiqueue.api.meta import metadata
from multiqueue.api.types import Obj
from multiqueue.controllers.job_accounting import Accounting
from multiqueue.controllers.job_backoff import (
    backoff_until,
    has_backoff_limit_per_index,
    indexes_due,
    last_failed_per_index,
    next_index_counts,
)
from multiqueue.controllers.job_pod_facts import index_of
from multiqueue.controllers.job_pod_template import pod_for

MAX_POD_CHANGES_PER_SYNC: Final = 500


@dataclasses.dataclass(frozen=True)
class PodChanges:
    """The pods to create or delete, and when to look again if the back-off holds creation back."""

    create: list[Obj] = dataclasses.field(default_factory=list)
    delete: list[Obj] = dataclasses.field(default_factory=list)
    # Pods removed to suspend the Job or to trim extra ones lose the tracking finalizer before the delete, so
    # they never count as failed; pods removed because the Job ends keep it and are counted.
    release_before_delete: bool = False
    requeue_after: float | None = None


def remove_active(counted: Accounting, *, release: bool) -> PodChanges:
    """Delete what still runs: the Job ends (``release`` False) or is suspended (``release`` True)."""
    return PodChanges(delete=list(counted.active[:MAX_POD_CHANGES_PER_SYNC]), release_before_delete=release)


def excess_indexed(job: Obj, active: Sequence[Obj], done: frozenset[int]) -> list[Obj]:
    """Pods with no valid index, a finished index, or a duplicate of another active pod's index (the ready and
    older pod of an index stays)."""
    seen: set[int] = set()
    excess = []
    for pod in sorted(
        active, key=lambda p: (not pods.is_ready(p), str(metadata(p).get("creationTimestamp")))
    ):
        index = index_of(pod, job)
        if index is None or index in done or index in seen:
            excess.append(pod)
        else:
            seen.add(index)
    return excess


def deletion_order(active: Sequence[Obj]) -> list[Obj]:
    """Upstream's ranking of pods to remove first: not ready, unscheduled, pending, newest."""

    def rank(pod: Obj) -> tuple[bool, bool, bool, str]:
        return (
            pods.is_ready(pod),
            pods.is_scheduled(pod),
            pods.phase(pod) == pods.RUNNING,
            "~" + str(metadata(pod).get("creationTimestamp") or ""),
        )

    return sorted(active, key=rank)


def _target(job: Obj, counted: Accounting) -> tuple[int, list[Obj]]:
    """How many pods should be active, and the active pods of an Indexed Job that must go whatever the number."""
    parallelism = max(jobs.parallelism(job), 0)
    total = jobs.completions(job)
    done = counted.completed_indexes | counted.failed_indexes
    if jobs.is_indexed(job) and total is not None:
        remaining = [i for i in range(total) if i not in done]
        return min(parallelism, len(remaining)), excess_indexed(job, counted.active, done)
    if total is not None:
        return max(0, min(parallelism, total - counted.succeeded_total)), []
    # No completions: once one pod has succeeded, what runs goes on running and nothing new starts.
    return (len(counted.active) if counted.succeeded_total > 0 else parallelism), []


def _free_indexes(job: Obj, busy: Sequence[Obj], counted: Accounting) -> tuple[list[int], set[int]]:
    """The indexes of an Indexed Job neither done nor held by ``busy``, lowest first, and the ones that are."""
    held = {index_of(p, job) for p in busy}
    taken = {i for i in held if i is not None} | counted.completed_indexes | counted.failed_indexes
    return [i for i in range(jobs.completions(job) or 0) if i not in taken], taken


def _new_pods(
    job: Obj, owned_pods: Sequence[Obj], busy: Sequence[Obj], counted: Accounting, count: int, now: datetime
) -> PodChanges:
    """``count`` pods to create; for an Indexed Job, for the lowest indexes neither done nor held by ``busy``,
    each carrying the failure counts of the pod it replaces and, with per-index limits, once its back-off is
    over."""
    if not jobs.is_indexed(job) or jobs.completions(job) is None:
        return PodChanges(create=[pod_for(job, None) for _ in range(count)])
    free, taken = _free_indexes(job, busy, counted)
    wanted = free[:count]
    latest = last_failed_per_index(job, owned_pods, taken)
    if has_backoff_limit_per_index(job):
        plan = indexes_due(wanted, latest, now)
        if not plan.now:
            return PodChanges(requeue_after=plan.requeue_after)
        wanted = list(plan.now)
    created = []
    for index in wanted:
        counts = next_index_counts(job, latest.get(index))
        created.append(pod_for(job, index, counts.failed, counts.ignored))
    return PodChanges(create=created)


def manage_pods(job: Obj, owned_pods: Sequence[Obj], counted: Accounting, now: datetime) -> PodChanges:
    """The pods a running, unsuspended Job creates or deletes: deletes first, creates only when none is due."""
    want, excess = _target(job, counted)
    keep = [p for p in counted.active if p not in excess]
    if len(keep) > want:
        excess += deletion_order(keep)[: len(keep) - want]
    if excess:
        return PodChanges(delete=excess[:MAX_POD_CHANGES_PER_SYNC], release_before_delete=True)
    missing = want - len(keep)
    if jobs.spec_of(job).get("podReplacementPolicy") == jobs.FAILED_ONLY:
        missing -= len(counted.terminating)
    if missing <= 0:
        return PodChanges()
    if not has_backoff_limit_per_index(job):
        not_before = backoff_until(owned_pods)
        if not_before is not None and now < not_before:
            return PodChanges(requeue_after=(not_before - now).total_seconds())
    busy = [*keep, *counted.terminating]
    return _new_pods(job, owned_pods, busy, counted, min(missing, MAX_POD_CHANGES_PER_SYNC), now)

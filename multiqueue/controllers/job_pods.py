"""Pod management of the Job controller: which pods to create and which to delete in one sync.

A running Job keeps ``parallelism`` pods active, no more than the completions left need: extra pods (and, for
Indexed Jobs, pods of a finished index or a duplicate index) are deleted, missing ones created once the failure
back-off allows. A Job that ends or is suspended loses every active pod.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

from multiqueue.api import jobs, pods
from multiqueue.api.meta import metadata
from multiqueue.api.types import Obj
from multiqueue.controllers.job_accounting import Accounting
from multiqueue.controllers.job_pod_facts import index_failure_count, index_of
from multiqueue.controllers.job_pod_template import pod_for

MAX_POD_CHANGES_PER_SYNC: Final = 500
BACKOFF_BASE: Final = timedelta(seconds=10)
BACKOFF_MAX: Final = timedelta(minutes=10)


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


def backoff_until(owned_pods: Sequence[Obj]) -> datetime | None:
    """When the next pod may be created: 10 s x 2^(n-1) after the last of n failures since the last success."""
    finished = [(pods.finish_time(p), pods.phase(p)) for p in owned_pods if pods.is_terminal(p)]
    last_success = max(
        (t for t, phase in finished if phase == pods.SUCCEEDED and t is not None), default=None
    )
    failures: list[datetime] = [
        t
        for t, phase in finished
        if phase == pods.FAILED and t is not None and (last_success is None or t > last_success)
    ]
    if not failures:
        return None
    delay = min(BACKOFF_BASE * (1 << min(len(failures) - 1, 16)), BACKOFF_MAX)
    return max(failures) + delay


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


def _failure_counts(job: Obj, owned_pods: Sequence[Obj]) -> dict[int, int]:
    """Per index, failures so far (for the per-index back-off annotation of the next pod)."""
    counts: dict[int, int] = {}
    for pod in owned_pods:
        index = index_of(pod, job)
        if index is not None and pods.phase(pod) == pods.FAILED:
            counts[index] = max(counts.get(index, 0), index_failure_count(pod) + 1)
    return counts


def _new_pods(
    job: Obj, owned_pods: Sequence[Obj], busy: Sequence[Obj], counted: Accounting, count: int
) -> list[Obj]:
    """``count`` pods to create; for an Indexed Job, for the lowest indexes neither done nor held by ``busy``."""
    total = jobs.completions(job)
    if not jobs.is_indexed(job) or total is None:
        return [pod_for(job, None) for _ in range(count)]
    held = {index_of(p, job) for p in busy}
    done = counted.completed_indexes | counted.failed_indexes
    free = [i for i in range(total) if i not in done and i not in held]
    failure_counts = _failure_counts(job, owned_pods)
    return [pod_for(job, i, failure_counts.get(i, 0)) for i in free[:count]]


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
    not_before = backoff_until(owned_pods)
    if not_before is not None and now < not_before:
        return PodChanges(requeue_after=(not_before - now).total_seconds())
    busy = [*keep, *counted.terminating]
    return PodChanges(
        create=_new_pods(job, owned_pods, busy, counted, min(missing, MAX_POD_CHANGES_PER_SYNC))
    )

"""The pod failure back-off of the Job controller: when a failed pod's replacement may be created.

A Job waits 10 s after a failure before it makes a new pod, twice as long after each further failure, at most
10 minutes (kube-controller-manager's figures). Without ``backoffLimitPerIndex`` the failures counted are the
Job's since its last success; with it, each index keeps its own count, carried from pod to pod by the failure-count
annotations, so one index succeeding does not cut short the back-off of another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from multiqueue.api import jobs, pods
from multiqueue.api.types import Obj
from multiqueue.controllers.job_failure_policy import IGNORE, match_failure_policy
from multiqueue.controllers.job_pod_facts import (
    counts_as_failed,
    ignored_failure_count,
    index_failure_count,
    index_of,
)

BACKOFF_BASE: Final = timedelta(seconds=10)
BACKOFF_MAX: Final = timedelta(minutes=10)
_LONG_AGO: Final = datetime.min.replace(tzinfo=UTC)


def backoff_delay(failures: int) -> timedelta:
    """The wait after the last of ``failures`` consecutive failures: 10 s, 20 s, 40 s ... up to 10 minutes."""
    if failures <= 0:
        return timedelta(0)
    return min(BACKOFF_BASE * (1 << min(failures - 1, 16)), BACKOFF_MAX)


def backoff_until(owned_pods: Sequence[Obj]) -> datetime | None:
    """When a Job without per-index limits may create its next pod: 10 s x 2^(n-1) after the last of the n
    failures since its last success (None: no failure holds it back)."""
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
    return max(failures) + backoff_delay(len(failures))


def _all_failures(pod: Obj) -> int:
    """Every failure of the pod's index before it, counted or ignored."""
    return index_failure_count(pod) + ignored_failure_count(pod)


def last_failed_per_index(job: Obj, owned_pods: Iterable[Obj], settled: Iterable[int]) -> dict[int, Obj]:
    """Per index not in ``settled`` (completed, failed or held by an active pod), its latest failed pod: the one
    with the most failures before it and, among those, the one that finished last. Its replacement inherits
    its counts and waits out its back-off."""
    skip = set(settled)
    latest: dict[int, Obj] = {}
    for pod in owned_pods:
        index = index_of(pod, job)
        if index is None or index in skip or not counts_as_failed(pod, job):
            continue
        known = latest.get(index)
        if known is None or (
            _all_failures(known) <= _all_failures(pod)
            and (pods.finish_time(pod) or _LONG_AGO) >= (pods.finish_time(known) or _LONG_AGO)
        ):
            latest[index] = pod
    return latest


@dataclasses.dataclass(frozen=True)
class IndexCounts:
    """The failure-count annotations of an index's next pod."""

    failed: int = 0
    ignored: int = 0


def next_index_counts(job: Obj, replaced: Obj | None) -> IndexCounts:
    """The counts a new pod of an index carries: those of the failed pod it replaces, plus that pod's own
    failure (as ignored when the pod failure policy says Ignore)."""
    if replaced is None:
        return IndexCounts()
    matched = match_failure_policy(job, replaced) if pods.phase(replaced) == pods.FAILED else None
    if matched is not None and matched.action == IGNORE:
        return IndexCounts(index_failure_count(replaced), ignored_failure_count(replaced) + 1)
    return IndexCounts(index_failure_count(replaced) + 1, ignored_failure_count(replaced))


def index_ready_at(replaced: Obj | None) -> datetime | None:
    """When an index whose latest failed pod is ``replaced`` may have a new pod (None: at once)."""
    if replaced is None:
        return None
    finished = pods.finish_time(replaced)
    if finished is None:
        return None
    return finished + backoff_delay(_all_failures(replaced) + 1)


@dataclasses.dataclass(frozen=True)
class IndexPlan:
    """Which of the wanted indexes get a pod now, and when to look again for those that wait."""

    now: tuple[int, ...] = ()
    requeue_after: float | None = None


def indexes_due(wanted: Sequence[int], latest: dict[int, Obj], now: datetime) -> IndexPlan:
    """Of ``wanted`` (the lowest free indexes), those whose back-off is over; when none is, the wait until the
    first one is (upstream makes no pod at all in that sync, and none early)."""
    due: list[int] = []
    waits: list[float] = []
    for index in wanted:
        ready = index_ready_at(latest.get(index))
        if ready is None or ready <= now:
            due.append(index)
        else:
            waits.append((ready - now).total_seconds())
    if due:
        return IndexPlan(tuple(due))
    return IndexPlan(requeue_after=min(waits) if waits else None)


def has_backoff_limit_per_index(job: Obj) -> bool:
    """Whether each index of ``job`` keeps its own failure count and back-off."""
    return jobs.is_indexed(job) and jobs.spec_of(job).get("backoffLimitPerIndex") is not None

"""Pod accounting of the Job controller: which owned pods count as succeeded, failed, active or terminating.

Counting follows upstream's finalizer protocol: a finished pod that still has ``batch.kubernetes.io/job-tracking``
is first written into ``status.uncountedTerminatedPods``; once its finalizer is gone (or the pod is) it is
counted into ``succeeded``/``failed`` and leaves the uncounted list. A pod is therefore counted exactly once, even
across controller restarts. Indexed Jobs count completed and failed indexes instead of succeeded pods.

With ``backoffLimitPerIndex`` the latest failed pod of an index that will run again is held back (neither
recorded nor released) until its replacement exists, as upstream holds it: it carries the index's failure counts
and the moment its back-off runs from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Final, NamedTuple

from multiqueue.api import indexes, jobs, pods
from multiqueue.api.meta import as_dict, as_list, metadata, uid_of
from multiqueue.api.types import Obj
from multiqueue.controllers.job_backoff import has_backoff_limit_per_index, last_failed_per_index
from multiqueue.controllers.job_failure_policy import (
    COUNT,
    FAIL_INDEX,
    FAIL_JOB,
    IGNORE,
    match_failure_policy,
)
from multiqueue.controllers.job_pod_facts import (
    has_finished,
    has_tracking_finalizer,
    index_failure_count,
    index_of,
)

MAX_UNCOUNTED_PER_SYNC: Final = 500

SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
RELEASED: Final = "released"  # finished, but no success and no failure: only the finalizer comes off


@dataclasses.dataclass(frozen=True)
class Accounting:
    """The owned pods of one sync, counted: what the status records and what the later steps decide from."""

    indexed: bool = False
    succeeded: int = 0  # status.succeeded to write (the completed indexes, when indexed)
    failed: int = 0  # status.failed to write
    uncounted_succeeded: tuple[str, ...] = ()  # UIDs still held by their finalizer
    uncounted_failed: tuple[str, ...] = ()
    completed_indexes: frozenset[int] = frozenset()
    failed_indexes: frozenset[int] = frozenset()
    fail_job: str | None = None  # the message of the first FailJob rule a newly failed pod matched
    release: tuple[Obj, ...] = ()  # pods whose finalizer comes off once this sync's status is written
    recount: bool = False  # more finished pods than one sync records: sync again at once
    active: tuple[Obj, ...] = ()
    terminating: tuple[Obj, ...] = ()

    @property
    def failed_total(self) -> int:
        """Failures counted or about to be: what backoffLimit compares."""
        return self.failed + len(self.uncounted_failed)

    @property
    def succeeded_total(self) -> int:
        """Successes counted or about to be: what completions compare."""
        return self.succeeded if self.indexed else self.succeeded + len(self.uncounted_succeeded)

    @property
    def all_counted(self) -> bool:
        """Whether no finished pod waits for its finalizer to go: a Job ends only then."""
        return not self.uncounted_succeeded and not self.uncounted_failed


class PodOutcome(NamedTuple):
    """How one finished pod is recorded: SUCCEEDED, FAILED or RELEASED, with what a failure implies."""

    kind: str
    fail_job: str | None = None  # the message of a matched FailJob rule
    fails_index: bool = False  # the failure uses up its index's backoffLimitPerIndex (or matched FailIndex)


def _fails_index(job: Obj, pod: Obj, action: str) -> bool:
    per_index = jobs.spec_of(job).get("backoffLimitPerIndex")
    if not jobs.is_indexed(job) or index_of(pod, job) is None or not isinstance(per_index, int):
        return False
    return action == FAIL_INDEX or index_failure_count(pod) + 1 > per_index


def pod_outcome(job: Obj, pod: Obj, *, ending_in_success: bool) -> PodOutcome:
    """How the finished ``pod`` of ``job`` is recorded. Pods removed because the Job succeeded or was suspended,
    and failures the pod failure policy ignores, are no failures."""
    if pods.phase(pod) == pods.SUCCEEDED:
        return PodOutcome(SUCCEEDED)
    stopped_by_us = jobs.is_suspended(job) and pods.phase(pod) != pods.FAILED
    if ending_in_success or stopped_by_us:
        return PodOutcome(RELEASED)
    matched = match_failure_policy(job, pod) if pods.phase(pod) == pods.FAILED else None
    action = matched.action if matched is not None else COUNT
    if action == IGNORE:
        return PodOutcome(RELEASED)
    fail_job = matched.message if matched is not None and action == FAIL_JOB else None
    return PodOutcome(FAILED, fail_job, _fails_index(job, pod, action))


def _to_record(job: Obj, owned_pods: Sequence[Obj], recorded: set[str], now: datetime) -> list[Obj]:
    """Finished pods still tracked and not yet in the uncounted lists, in the order they finished."""
    return [
        pod
        for pod in sorted(
            owned_pods, key=lambda p: (pods.finish_time(p) or now, str(metadata(p).get("name")))
        )
        if has_tracking_finalizer(pod) and uid_of(pod) not in recorded and has_finished(pod, job)
    ]


class _Flushed(NamedTuple):
    """The status's counts and uncounted lists once the pods no longer held by their finalizer are counted."""

    succeeded: int
    failed: int
    uncounted_succeeded: list[str]
    uncounted_failed: list[str]


def _flush(job: Obj, tracked: set[str]) -> _Flushed:
    """The counts and uncounted lists of the status, once the uncounted pods whose finalizer is gone (or that
    are gone) are counted. An Indexed Job counts completed indexes instead of succeeded pods."""
    status = jobs.status_of(job)
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    listed_ok = [str(u) for u in as_list(uncounted.get("succeeded"))]
    listed_failed = [str(u) for u in as_list(uncounted.get("failed"))]
    succeeded = int(status.get("succeeded") or 0)
    if not jobs.is_indexed(job):
        succeeded += sum(1 for u in listed_ok if u not in tracked)
    return _Flushed(
        succeeded,
        int(status.get("failed") or 0) + sum(1 for u in listed_failed if u not in tracked),
        [u for u in listed_ok if u in tracked],
        [u for u in listed_failed if u in tracked],
    )


def _status_indexes(job: Obj) -> tuple[set[int], set[int]]:
    """The completed (Indexed Jobs only) and failed indexes the status holds."""
    status = jobs.status_of(job)
    total = jobs.completions(job) or 0
    failed = set(indexes.parse_indexes(str(status.get("failedIndexes") or ""), total))
    if not jobs.is_indexed(job):
        return set(), failed
    return set(indexes.parse_indexes(str(status.get("completedIndexes") or ""), total)), failed


@dataclasses.dataclass
class _Recorded:
    """What one sync records of the pods that finished since the last."""

    succeeded: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)
    released: list[Obj] = dataclasses.field(default_factory=list)
    completed_indexes: set[int] = dataclasses.field(default_factory=set)
    failed_indexes: set[int] = dataclasses.field(default_factory=set)
    fail_job: str | None = None


def _record(job: Obj, finished: Sequence[Obj], *, ending_in_success: bool) -> _Recorded:
    """Record each newly finished pod by its outcome; the first FailJob match is the one reported."""
    recorded = _Recorded()
    for pod in finished:
        outcome = pod_outcome(job, pod, ending_in_success=ending_in_success)
        index = index_of(pod, job)
        if outcome.kind == SUCCEEDED:
            recorded.succeeded.append(uid_of(pod))
            if index is not None:
                recorded.completed_indexes.add(index)
        elif outcome.kind == RELEASED:
            recorded.released.append(pod)
        else:
            recorded.failed.append(uid_of(pod))
            if recorded.fail_job is None:
                recorded.fail_job = outcome.fail_job
            if outcome.fails_index and index is not None:
                recorded.failed_indexes.add(index)
    return recorded


def _held_for_replacement(
    job: Obj, owned_pods: Sequence[Obj], finished: Sequence[Obj], settled: set[int]
) -> list[Obj]:
    """The failed pods whose recording waits for their replacement: per index neither ``settled`` (completed or
    failed) nor held by an active pod, the latest failed pod still tracked."""
    active = {index_of(p, job) for p in owned_pods if pods.is_active(p)}
    taken = settled | {i for i in active if i is not None}
    return list(last_failed_per_index(job, finished, taken).values())


def account(
    job: Obj,
    owned_pods: Sequence[Obj],
    now: datetime,
    *,
    ending_in_success: bool,
    holding: bool = False,
) -> Accounting:
    """Count the pods of ``job`` (terminating and finished ones too) against its status, as this sync records.

    ``ending_in_success``: the Job has SuccessCriteriaMet, so the pods removed from now on are no failures.
    ``holding``: the Job neither ends nor is being deleted, so with per-index limits the latest failed pod of an
    index to retry is held back until its replacement exists.
    """
    by_uid = {uid_of(p): p for p in owned_pods}
    flushed = _flush(job, {u for u, p in by_uid.items() if has_tracking_finalizer(p)})
    uncounted = set(flushed.uncounted_succeeded) | set(flushed.uncounted_failed)
    finished = _to_record(job, owned_pods, uncounted, now)
    new = _record(job, finished[:MAX_UNCOUNTED_PER_SYNC], ending_in_success=ending_in_success)
    completed, failed_indexes = _status_indexes(job)
    failed_indexes |= new.failed_indexes
    if holding and has_backoff_limit_per_index(job):
        settled = completed | new.completed_indexes | failed_indexes
        held = {uid_of(p) for p in _held_for_replacement(job, owned_pods, finished, settled)}
        if held:
            finished = [p for p in finished if uid_of(p) not in held]
            new = _record(job, finished[:MAX_UNCOUNTED_PER_SYNC], ending_in_success=ending_in_success)
    succeeded = flushed.succeeded
    indexed = jobs.is_indexed(job)
    if indexed:
        completed = (completed | new.completed_indexes) - failed_indexes
        succeeded = len(completed)
    uncounted_ok = (*flushed.uncounted_succeeded, *new.succeeded)
    uncounted_failed = (*flushed.uncounted_failed, *new.failed)
    # Finalizers come off only for pods the status about to be written records.
    recorded = set(uncounted_ok) | set(uncounted_failed)
    return Accounting(
        indexed=indexed,
        succeeded=succeeded,
        failed=flushed.failed,
        uncounted_succeeded=uncounted_ok,
        uncounted_failed=uncounted_failed,
        completed_indexes=frozenset(completed),
        failed_indexes=frozenset(failed_indexes),
        fail_job=new.fail_job,
        release=(*new.released, *(by_uid[u] for u in recorded if u in by_uid)),
        recount=len(finished) > MAX_UNCOUNTED_PER_SYNC,
        active=tuple(p for p in owned_pods if pods.is_active(p)),
        terminating=tuple(p for p in owned_pods if pods.is_deleting(p) and not pods.is_terminal(p)),
    )


def counted_status(job: Obj, counted: Accounting) -> Obj:
    """The status fields the accounting writes, in the order the status gets them."""
    fields: Obj = {}
    if counted.indexed:
        fields["completedIndexes"] = indexes.format_indexes(counted.completed_indexes)
        if jobs.spec_of(job).get("backoffLimitPerIndex") is not None:
            fields["failedIndexes"] = indexes.format_indexes(counted.failed_indexes)
    fields["succeeded"] = counted.succeeded
    fields["failed"] = counted.failed
    ok, failed = list(counted.uncounted_succeeded), list(counted.uncounted_failed)
    fields["uncountedTerminatedPods"] = {"succeeded": ok, "failed": failed} if ok or failed else {}
    return fields


def pod_counts(counted: Accounting, deleting: Sequence[Obj]) -> Obj:
    """status.active, ready and terminating: pods deleted in this sync count as terminating at once, as
    upstream reports them."""
    removing = [p for p in deleting if p in counted.active]
    return {
        "active": len(counted.active) - len(removing),
        "ready": sum(1 for p in counted.active if pods.is_ready(p) and p not in removing),
        "terminating": len(counted.terminating) + len(removing),
    }

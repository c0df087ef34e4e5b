"""Why an Indexed or counted Job fails or succeeds, from what it has done: the rules upstream's Job controller
applies, shared by the embedded controller (which counts its pods) and the dispatcher (which merges the parts of a
Job run on several workers). Only the conditions' reasons and messages are decided here; when they are written is
each caller's business.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from datetime import datetime, timedelta
from typing import Final, NamedTuple

from multiqueue.api import indexes, jobs
from multiqueue.api.meta import as_dict, as_list, parse_time
from multiqueue.api.types import Obj

DEFAULT_BACKOFF_LIMIT: Final = 6
COMPLETIONS_REACHED_MESSAGE: Final = "Reached expected number of succeeded pods"
BACKOFF_LIMIT_MESSAGE: Final = "Job has reached the specified backoff limit"
MAX_FAILED_INDEXES_MESSAGE: Final = "Job has exceeded the specified maximal number of failed indexes"
FAILED_INDEXES_MESSAGE: Final = "Job has failed indexes"
DEADLINE_MESSAGE: Final = "Job was active longer than specified deadline"


class Verdict(NamedTuple):
    """Why a Job fails or succeeds: the reason and message of its condition."""

    reason: str
    message: str


def interim_condition(conditions: Sequence[Obj]) -> Obj | None:
    """The FailureTarget or SuccessCriteriaMet condition that is True, if the Job has one: its fate is decided,
    and its final condition follows once none of its pods runs."""
    for cond in conditions:
        if (
            cond.get("type") in (jobs.FAILURE_TARGET, jobs.SUCCESS_CRITERIA_MET)
            and cond.get("status") == "True"
        ):
            return cond
    return None


def backoff_limit(job: object) -> int:
    """``spec.backoffLimit``, upstream's default when unset."""
    limit = jobs.spec_of(job).get("backoffLimit")
    return limit if isinstance(limit, int) else DEFAULT_BACKOFF_LIMIT


def failures_verdict(job: object, failures: int) -> Verdict | None:
    """More failed pods than ``backoffLimit`` allows."""
    if failures > backoff_limit(job):
        return Verdict(jobs.BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE)
    return None


def deadline_verdict(job: object, now: datetime) -> Verdict | None:
    """Running for ``activeDeadlineSeconds`` since its start time (a suspended Job's clock is stopped)."""
    deadline = jobs.spec_of(job).get("activeDeadlineSeconds")
    started = parse_time(jobs.status_of(job).get("startTime"))
    if jobs.is_suspended(job) or not isinstance(deadline, int) or started is None:
        return None
    if now - started >= timedelta(seconds=deadline):
        return Verdict(jobs.DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
    return None


def failed_indexes_verdict(job: object, completed: Set[int], failed: Set[int]) -> Verdict | None:
    """Under ``backoffLimitPerIndex``: more failed indexes than ``maxFailedIndexes``, or every index finished
    with at least one failed."""
    total = jobs.completions(job) or 0
    limit = jobs.spec_of(job).get("maxFailedIndexes")
    if isinstance(limit, int) and len(failed) > limit:
        return Verdict(jobs.MAX_FAILED_INDEXES_EXCEEDED, MAX_FAILED_INDEXES_MESSAGE)
    if failed and len(failed) + len(completed) >= total:
        return Verdict(jobs.FAILED_INDEXES, FAILED_INDEXES_MESSAGE)
    return None


def success_policy_verdict(job: object, completed: Set[int]) -> Verdict | None:
    """The first ``successPolicy`` rule the completed indexes satisfy."""
    total = jobs.completions(job) or 0
    for i, raw in enumerate(as_list(as_dict(jobs.spec_of(job).get("successPolicy")).get("rules"))):
        rule = as_dict(raw)
        listed = rule.get("succeededIndexes")
        wanted = set(indexes.parse_indexes(str(listed), total)) if listed is not None else None
        count = rule.get("succeededCount")
        done = len(completed & wanted) if wanted is not None else len(completed)
        satisfied = (wanted is None or wanted <= completed) if count is None else done >= int(count)
        if satisfied:
            return Verdict(jobs.SUCCESS_POLICY, f"Matched rules at index {i}")
    return None


def indexed_success_verdict(job: object, completed: Set[int]) -> Verdict | None:
    """An Indexed Job succeeds by a successPolicy rule, or once every index has completed."""
    by_policy = success_policy_verdict(job, completed)
    if by_policy is not None:
        return by_policy
    total = jobs.completions(job)
    if total is not None and len(completed) >= total:
        return Verdict(jobs.COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE)
    return None

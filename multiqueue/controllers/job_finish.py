"""Finish detection of the Job controller: whether a Job has failed or succeeded, and how it ends.

A Job first gets an interim condition (FailureTarget or SuccessCriteriaMet) and only gets its final one (Failed
or Complete) once no pod of it runs and every finished pod is counted, as upstream does.
Failure: a FailJob rule of the pod failure policy, backoffLimit (or restarts under OnFailure),
backoffLimitPerIndex with maxFailedIndexes, activeDeadlineSeconds. Success: completions, or a successPolicy rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final, NamedTuple

from multiqueue.api import indexes, jobs, pods
from multiqueue.api.meta import as_dict, as_list, parse_time
from multiqueue.api.types import Event, Obj
from multiqueue.controllers.job_accounting import Accounting

DEFAULT_BACKOFF_LIMIT: Final = 6
COMPLETIONS_REACHED_MESSAGE: Final = "Reached expected number of succeeded pods"
BACKOFF_LIMIT_MESSAGE: Final = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE: Final = "Job was active longer than specified deadline"
MAX_FAILED_INDEXES_MESSAGE: Final = "Job has exceeded the specified maximal number of failed indexes"
FAILED_INDEXES_MESSAGE: Final = "Job has failed indexes"


class Verdict(NamedTuple):
    """Why a Job fails or succeeds: the reason and message of its condition."""

    reason: str
    message: str


class Condition(NamedTuple):
    """A condition to set True on the Job."""

    type: str
    reason: str
    message: str


class Ending(NamedTuple):
    """The final condition of a Job whose interim condition has come true, and the event that says so."""

    condition: Condition
    event: Event
    completed: bool  # a success, which stamps status.completionTime


def interim_condition(conditions: Sequence[Obj]) -> Obj | None:
    """The FailureTarget or SuccessCriteriaMet condition that is True, if the Job has one."""
    for cond in conditions:
        if (
            cond.get("type") in (jobs.FAILURE_TARGET, jobs.SUCCESS_CRITERIA_MET)
            and cond.get("status") == "True"
        ):
            return cond
    return None


def _failed_indexes_verdict(job: Obj, counted: Accounting, total: int) -> Verdict | None:
    limit = jobs.spec_of(job).get("maxFailedIndexes")
    if isinstance(limit, int) and len(counted.failed_indexes) > limit:
        return Verdict(jobs.MAX_FAILED_INDEXES_EXCEEDED, MAX_FAILED_INDEXES_MESSAGE)
    if counted.failed_indexes and len(counted.failed_indexes) + len(counted.completed_indexes) >= total:
        return Verdict(jobs.FAILED_INDEXES, FAILED_INDEXES_MESSAGE)
    return None


def _backoff_verdict(job: Obj, counted: Accounting) -> Verdict | None:
    spec = jobs.spec_of(job)
    limit = spec.get("backoffLimit")
    limit = DEFAULT_BACKOFF_LIMIT if not isinstance(limit, int) else limit
    if counted.failed_total > limit:
        return Verdict(jobs.BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE)
    if as_dict(as_dict(spec.get("template")).get("spec")).get("restartPolicy") == "OnFailure":
        restarts = sum(pods.restart_count(p) for p in counted.active)
        if (limit == 0 and restarts > 0) or (limit > 0 and restarts >= limit):
            return Verdict(jobs.BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE)
    return None


def _deadline_verdict(job: Obj, now: datetime) -> Verdict | None:
    deadline = jobs.spec_of(job).get("activeDeadlineSeconds")
    started = parse_time(jobs.status_of(job).get("startTime"))
    if jobs.is_suspended(job) or not isinstance(deadline, int) or started is None:
        return None
    if now - started >= timedelta(seconds=deadline):
        return Verdict(jobs.DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
    return None


def failure_verdict(job: Obj, counted: Accounting, now: datetime) -> Verdict | None:
    """Why ``job`` fails now, if it does: its failed indexes (with backoffLimitPerIndex) or its failures
    (backoffLimit), then its deadline (activeDeadlineSeconds, from the start time it had)."""
    total = jobs.completions(job)
    if jobs.spec_of(job).get("backoffLimitPerIndex") is not None and total is not None:
        verdict = _failed_indexes_verdict(job, counted, total)
    else:
        verdict = _backoff_verdict(job, counted)
    return verdict if verdict is not None else _deadline_verdict(job, now)


def _success_policy_verdict(job: Obj, completed: frozenset[int]) -> Verdict | None:
    total = jobs.completions(job)
    for i, raw in enumerate(as_list(as_dict(jobs.spec_of(job).get("successPolicy")).get("rules"))):
        rule = as_dict(raw)
        listed = rule.get("succeededIndexes")
        wanted = set(indexes.parse_indexes(str(listed), total or 0)) if listed is not None else None
        count = rule.get("succeededCount")
        done = len(completed & wanted) if wanted is not None else len(completed)
        satisfied = (wanted is None or wanted <= completed) if count is None else done >= int(count)
        if satisfied:
            return Verdict(jobs.SUCCESS_POLICY, f"Matched rules at index {i}")
    return None


def success_verdict(job: Obj, counted: Accounting) -> Verdict | None:
    """Why ``job`` succeeds now, if it does: a successPolicy rule (Indexed Jobs), or enough completions. A Job
    without completions succeeds once one pod has and none is active."""
    total = jobs.completions(job)
    reached = Verdict(jobs.COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE)
    if jobs.is_indexed(job):
        by_policy = _success_policy_verdict(job, counted.completed_indexes)
        if by_policy is not None:
            return by_policy
        return reached if total is not None and len(counted.completed_indexes) >= total else None
    if total is None:
        return reached if counted.succeeded_total > 0 and not counted.active else None
    return reached if counted.succeeded_total >= total else None


def interim_verdict(job: Obj, counted: Accounting, now: datetime) -> Condition | None:
    """The interim condition a Job without one gets in this sync: failure is looked for before success."""
    failure: Verdict | None
    if counted.fail_job is not None:
        failure = Verdict(jobs.POD_FAILURE_POLICY, counted.fail_job)
    else:
        failure = failure_verdict(job, counted, now)
    if failure is not None:
        return Condition(jobs.FAILURE_TARGET, *failure)
    success = success_verdict(job, counted)
    return Condition(jobs.SUCCESS_CRITERIA_MET, *success) if success is not None else None


def may_end(counted: Accounting) -> bool:
    """Whether a Job with an interim condition can take its final one: nothing runs, everything is counted."""
    return not counted.active and not counted.terminating and counted.all_counted


def ending(interim: Obj) -> Ending:
    """The final condition that follows ``interim``, with its reason and message."""
    reason, message = str(interim.get("reason", "")), str(interim.get("message", ""))
    if interim.get("type") == jobs.SUCCESS_CRITERIA_MET:
        return Ending(
            Condition(jobs.COMPLETE, reason, message), Event("Normal", "Completed", "Job completed"), True
        )
    return Ending(Condition(jobs.FAILED, reason, message), Event("Warning", reason, message), False)


def until_deadline(job: Obj, started: datetime | None, now: datetime) -> float | None:
    """Seconds until activeDeadlineSeconds runs out for a Job running since ``started``, when it can."""
    deadline = jobs.spec_of(job).get("activeDeadlineSeconds")
    if jobs.is_suspended(job) or not isinstance(deadline, int) or started is None:
        return None
    return (started + timedelta(seconds=deadline) - now).total_seconds()

"""Finish detection of the Job controller: whether a Job has failed or succeeded, and how it ends.

A Job first gets an interim condition (FailureTarget or SuccessCriteriaMet) and only gets its final one (Failed
or Complete) once no pod of it runs and every finished pod is counted, as upstream does.
Failure: a FailJob rule of the pod failure policy, backoffLimit (or restarts under OnFailure),
backoffLimitPerIndex with maxFailedIndexes, activeDeadlineSeconds. Success: completions, or a successPolicy rule.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from multiqueue.api import jobs, jobverdicts, pods
from multiqueue.api.jobverdicts import BACKOFF_LIMIT_MESSAGE, COMPLETIONS_REACHED_MESSAGE, Verdict
from multiqueue.api.meta import as_dict
from multiqueue.api.types import Event, Obj
from multiqueue.controllers.job_accounting import Accounting


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


def _backoff_verdict(job: Obj, counted: Accounting) -> Verdict | None:
    verdict = jobverdicts.failures_verdict(job, counted.failed_total)
    if verdict is not None:
        return verdict
    limit = jobverdicts.backoff_limit(job)
    if as_dict(as_dict(jobs.spec_of(job).get("template")).get("spec")).get("restartPolicy") == "OnFailure":
        restarts = sum(pods.restart_count(p) for p in counted.active)
        if (limit == 0 and restarts > 0) or (limit > 0 and restarts >= limit):
            return Verdict(jobs.BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE)
    return None


def failure_verdict(job: Obj, counted: Accounting, now: datetime) -> Verdict | None:
    """Why ``job`` fails now, if it does: its failed indexes (with backoffLimitPerIndex) or its failures
    (backoffLimit), then its deadline (activeDeadlineSeconds, from the start time it had)."""
    total = jobs.completions(job)
    if jobs.spec_of(job).get("backoffLimitPerIndex") is not None and total is not None:
        verdict = jobverdicts.failed_indexes_verdict(job, counted.completed_indexes, counted.failed_indexes)
    else:
        verdict = _backoff_verdict(job, counted)
    return verdict if verdict is not None else jobverdicts.deadline_verdict(job, now)


def success_verdict(job: Obj, counted: Accounting) -> Verdict | None:
    """Why ``job`` succeeds now, if it does: a successPolicy rule (Indexed Jobs), or enough completions. A Job
    without completions succeeds once one pod has and none is active."""
    total = jobs.completions(job)
    reached = Verdict(jobs.COMPLETIONS_REACHED, COMPLETIONS_REACHED_MESSAGE)
    if jobs.is_indexed(job):
        return jobverdicts.indexed_success_verdict(job, counted.completed_indexes)
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

"""What the CronJob's own Jobs say: which finished ones its history limits delete, which of ``status.active``
still run, and when one last succeeded.

Pure functions of the CronJob's spec and status and the Jobs it owns, each with the events upstream records.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from multiqueue.api import jobs
from multiqueue.api.meta import metadata, parse_time, uid_of
from multiqueue.api.types import Event, Obj


def finished_type(job: Obj) -> str | None:
    """Complete or Failed, once the Job has finished."""
    finished = jobs.finished_condition(job)
    return finished[0] if finished is not None else None


def _start_sort_key(job: Obj) -> tuple[bool, float]:
    """Oldest start first; Jobs that never started last."""
    started = parse_time(jobs.status_of(job).get("startTime"))
    return (started is None, started.timestamp() if started is not None else 0.0)


def deleted_event(job: Obj) -> Event:
    """The event of a Job the CronJob controller deletes."""
    return Event("Normal", "SuccessfulDelete", f"Deleted job {metadata(job).get('name')}")


def expired_history(spec: Obj, owned_jobs: Sequence[Obj]) -> list[Obj]:
    """The oldest finished Jobs beyond successfulJobsHistoryLimit and failedJobsHistoryLimit, succeeded first."""
    expired: list[Obj] = []
    for finished, field in (
        (jobs.COMPLETE, "successfulJobsHistoryLimit"),
        (jobs.FAILED, "failedJobsHistoryLimit"),
    ):
        limit = spec.get(field)
        if not isinstance(limit, int):
            continue
        history = sorted((j for j in owned_jobs if finished_type(j) == finished), key=_start_sort_key)
        expired += history[: max(0, len(history) - limit)]
    return expired


class Running(NamedTuple):
    """The references of ``status.active`` whose Jobs still run, and the events about the others."""

    active: list[Obj]
    events: list[Event]


def running_jobs(active: Sequence[Obj], owned_jobs: Sequence[Obj]) -> Running:
    """Reconcile ``status.active`` with the Jobs that exist: a Job gone or finished leaves it, and a running Job
    missing from it is reported (the controller did not create it, or forgot it)."""
    by_uid = {uid_of(j): j for j in owned_jobs}
    kept: list[Obj] = []
    events: list[Event] = []
    for ref in active:
        job = by_uid.get(str(ref.get("uid")))
        if job is None:
            events.append(Event("Normal", "MissingJob", f"Active job went missing: {ref.get('name')}"))
            continue
        outcome = finished_type(job)
        if outcome is not None:
            message = f"Saw completed job: {metadata(job).get('name')}, condition: {outcome}"
            events.append(Event("Normal", "SawCompletedJob", message))
            continue
        kept.append(ref)
    listed = {str(r.get("uid")) for r in active}
    for job in owned_jobs:
        if uid_of(job) not in listed and finished_type(job) is None:
            message = f"Saw a job that the controller did not create or forgot: {metadata(job).get('name')}"
            events.append(Event("Warning", "UnexpectedJob", message))
    return Running(kept, events)


def last_successful_time(status: Obj, owned_jobs: Sequence[Obj]) -> datetime | None:
    """The latest completion of a Job that succeeded: the one the status holds, or a later one."""
    last = parse_time(status.get("lastSuccessfulTime"))
    for job in owned_jobs:
        if finished_type(job) == jobs.COMPLETE:
            completed = parse_time(jobs.status_of(job).get("completionTime"))
            if completed is not None and (last is None or completed > last):
                last = completed
    return last

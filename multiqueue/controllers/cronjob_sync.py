"""The decide step of the embedded CronJob controller: from a CronJob, its Jobs and the clock to actions.

Pure, with the clock injected, so missed schedules, deadlines, concurrency policies, history limits and time
zones are table tests. The executor in ``cronjob.py`` deletes, creates (recording the new Job in
``status.active``, or adopting it on AlreadyExists), writes the status and requeues.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import datetime, timedelta
from typing import Final

from multiqueue.api import cronjobs, cronjobtimes, cronschedules, jobs
from multiqueue.api.meta import as_dict, as_list, format_time, metadata, owner_reference, parse_time, uid_of
from multiqueue.api.types import Event, Obj

NEXT_SCHEDULE_DELTA: Final = timedelta(milliseconds=100)


@dataclasses.dataclass
class Actions:
    status: Obj | None = None  # without the Job about to be created; the executor adds it
    delete: list[Obj] = dataclasses.field(default_factory=list)
    create: Obj | None = None
    scheduled_time: datetime | None = None
    events: list[Event] = dataclasses.field(default_factory=list)
    requeue_after: float | None = None


def _finished_type(job: Obj) -> str | None:
    finished = jobs.finished_condition(job)
    return finished[0] if finished is not None else None


def _start_sort_key(job: Obj) -> tuple[bool, float]:
    """Oldest start first; Jobs that never started last."""
    started = parse_time(jobs.status_of(job).get("startTime"))
    return (started is None, started.timestamp() if started is not None else 0.0)


def job_for(cronjob: Obj, scheduled: datetime) -> Obj:
    """The Job to create for one scheduled time, from the CronJob's template."""
    template = as_dict(as_dict(cronjob.get("spec")).get("jobTemplate"))
    template_meta = as_dict(template.get("metadata"))
    annotations = dict(as_dict(template_meta.get("annotations")))
    annotations[cronjobs.SCHEDULED_TIMESTAMP_ANNOTATION] = cronjobtimes.scheduled_timestamp_annotation(
        cronjob, scheduled
    )
    meta: Obj = {
        "name": cronjobtimes.job_name(str(metadata(cronjob).get("name")), scheduled),
        "namespace": metadata(cronjob).get("namespace"),
        "annotations": annotations,
        "ownerReferences": [owner_reference({**cronjob, "apiVersion": "batch/v1", "kind": "CronJob"})],
    }
    labels = as_dict(template_meta.get("labels"))
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": copy.deepcopy(as_dict(template.get("spec"))),
    }


def decide(cronjob: Obj, owned_jobs: list[Obj], now: datetime) -> Actions:
    actions = Actions()
    if metadata(cronjob).get("deletionTimestamp"):
        return actions
    spec = as_dict(cronjob.get("spec"))
    old_status = as_dict(cronjob.get("status"))
    status = copy.deepcopy(old_status)
    active = [as_dict(r) for r in as_list(status.get("active"))]
    by_uid = {uid_of(j): j for j in owned_jobs}

    # History first, as upstream: the oldest finished Jobs beyond the limits are deleted and leave status.active
    # without a SawCompletedJob event.
    for finished_type, field in (
        (jobs.COMPLETE, "successfulJobsHistoryLimit"),
        (jobs.FAILED, "failedJobsHistoryLimit"),
    ):
        limit = spec.get(field)
        if not isinstance(limit, int):
            continue
        history = sorted((j for j in owned_jobs if _finished_type(j) == finished_type), key=_start_sort_key)
        for old in history[: max(0, len(history) - limit)]:
            actions.delete.append(old)
            active = [r for r in active if str(r.get("uid")) != uid_of(old)]
            actions.events.append(
                Event("Normal", "SuccessfulDelete", f"Deleted job {metadata(old).get('name')}")
            )

    # Reconcile status.active with the Jobs that exist.
    kept: list[Obj] = []
    for ref in active:
        job = by_uid.get(str(ref.get("uid")))
        if job is None:
            actions.events.append(
                Event("Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
            )
            continue
        outcome = _finished_type(job)
        if outcome is not None:
            actions.events.append(
                Event(
                    "Normal",
                    "SawCompletedJob",
                    f"Saw completed job: {metadata(job).get('name')}, condition: {outcome}",
                )
            )
            continue
        kept.append(ref)
    active_uids = {str(r.get("uid")) for r in active}
    for job in owned_jobs:
        if uid_of(job) not in active_uids and _finished_type(job) is None:
            actions.events.append(
                Event(
                    "Warning",
                    "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {metadata(job).get('name')}",
                )
            )
    last_success = parse_time(status.get("lastSuccessfulTime"))
    for job in owned_jobs:
        if _finished_type(job) == jobs.COMPLETE:
            completed = parse_time(jobs.status_of(job).get("completionTime"))
            if completed is not None and (last_success is None or completed > last_success):
                last_success = completed
    if last_success is not None:
        status["lastSuccessfulTime"] = format_time(last_success)

    def done() -> Actions:
        status["active"] = kept
        if not kept:
            status.pop("active", None)
        if status != old_status:
            actions.status = status
        return actions

    zone_name = spec.get("timeZone")
    if zone_name is not None and cronjobtimes.schedule_zone(cronjob) is None:
        actions.events.append(
            Event(
                "Warning",
                "UnknownTimeZone",
                f'invalid timeZone: "{zone_name}": unknown time zone {zone_name}',
            )
        )
        return done()
    schedule = cronschedules.parse_schedule(str(spec.get("schedule", "")))
    if isinstance(schedule, str):
        actions.events.append(
            Event(
                "Warning",
                "UnparseableSchedule",
                f'unparseable schedule: "{spec.get("schedule")}" : {schedule}',
            )
        )
        return done()
    if spec.get("suspend") is True:
        return done()

    def requeue_at_next() -> None:
        following = cronjobtimes.next_schedule_time(cronjob, now)
        if following is not None:
            actions.requeue_after = max(0.0, (following - now + NEXT_SCHEDULE_DELTA).total_seconds())

    scheduled, too_many = cronjobtimes.most_recent_schedule_time(cronjob, now)
    if too_many:
        actions.events.append(
            Event(
                "Warning",
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
            )
        )
    requeue_at_next()
    if scheduled is None:
        return done()
    deadline = spec.get("startingDeadlineSeconds")
    if isinstance(deadline, int) and scheduled + timedelta(seconds=deadline) < now:
        actions.events.append(
            Event(
                "Warning", "MissSchedule", f"Missed scheduled time to start a job: {format_time(scheduled)}"
            )
        )
        return done()
    name = cronjobtimes.job_name(str(metadata(cronjob).get("name")), scheduled)
    already = (
        any(r.get("name") == name for r in kept) or parse_time(status.get("lastScheduleTime")) == scheduled
    )
    if already:
        return done()
    policy = spec.get("concurrencyPolicy", cronjobs.ALLOW)
    if policy == cronjobs.FORBID and kept:
        actions.events.append(
            Event(
                "Normal",
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is Forbid",
            )
        )
        return done()
    if policy == cronjobs.REPLACE:
        for ref in kept:
            job = by_uid.get(str(ref.get("uid")))
            if job is not None:
                actions.delete.append(job)
                actions.events.append(
                    Event("Normal", "SuccessfulDelete", f"Deleted job {metadata(job).get('name')}")
                )
        kept = []
    actions.create = job_for(cronjob, scheduled)
    actions.scheduled_time = scheduled
    status["lastScheduleTime"] = format_time(scheduled)
    return done()

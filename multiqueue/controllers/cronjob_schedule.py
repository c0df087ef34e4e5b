"""Which scheduled time of a CronJob is due now, and when to look again.

Nothing is due for a CronJob with an unknown time zone or an unparseable schedule (each with its warning), for a
suspended one, or when its most recent scheduled time was missed by more than startingDeadlineSeconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final, NamedTuple

from multiqueue.api import cronjobtimes, cronschedules
from multiqueue.api.meta import as_dict, format_time, metadata, parse_time
from multiqueue.api.types import Event, Obj

NEXT_SCHEDULE_DELTA: Final = timedelta(milliseconds=100)
TOO_MANY_MISSED_MESSAGE: Final = (
    "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
)


class Due(NamedTuple):
    """The scheduled time to start a Job for (None: none), the events about the schedule, and the seconds
    until the next scheduled time (None: no wake-up)."""

    scheduled: datetime | None = None
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None


def _schedule_problem(cronjob: Obj) -> Event | None:
    """The warning about a time zone or a schedule the controller cannot use."""
    spec = as_dict(cronjob.get("spec"))
    zone_name = spec.get("timeZone")
    if zone_name is not None and cronjobtimes.schedule_zone(cronjob) is None:
        return Event(
            "Warning", "UnknownTimeZone", f'invalid timeZone: "{zone_name}": unknown time zone {zone_name}'
        )
    schedule = cronschedules.parse_schedule(str(spec.get("schedule", "")))
    if isinstance(schedule, str):
        message = f'unparseable schedule: "{spec.get("schedule")}" : {schedule}'
        return Event("Warning", "UnparseableSchedule", message)
    return None


def due_time(cronjob: Obj, now: datetime) -> Due:
    """The scheduled time a Job is due for at ``now``, if any, and when the next one comes."""
    if (problem := _schedule_problem(cronjob)) is not None:
        return Due(events=(problem,))
    spec = as_dict(cronjob.get("spec"))
    if spec.get("suspend") is True:
        return Due()
    scheduled, too_many = cronjobtimes.most_recent_schedule_time(cronjob, now)
    events = (Event("Warning", "TooManyMissedTimes", TOO_MANY_MISSED_MESSAGE),) if too_many else ()
    following = cronjobtimes.next_schedule_time(cronjob, now)
    requeue_after = (
        max(0.0, (following - now + NEXT_SCHEDULE_DELTA).total_seconds()) if following is not None else None
    )
    deadline = spec.get("startingDeadlineSeconds")
    if scheduled is not None and isinstance(deadline, int) and scheduled + timedelta(seconds=deadline) < now:
        message = f"Missed scheduled time to start a job: {format_time(scheduled)}"
        return Due(None, (*events, Event("Warning", "MissSchedule", message)), requeue_after)
    return Due(scheduled, events, requeue_after)


def already_started(cronjob: Obj, active: Sequence[Obj], scheduled: datetime) -> bool:
    """Whether the Job of ``scheduled`` runs already, or was started before (lastScheduleTime)."""
    name = cronjobtimes.job_name(str(metadata(cronjob).get("name")), scheduled)
    last = parse_time(as_dict(cronjob.get("status")).get("lastScheduleTime"))
    return any(r.get("name") == name for r in active) or last == scheduled

"""When a batch/v1 CronJob runs, as its controller computes it, and what it writes on each Job it creates.

- ``schedule_zone(cronjob) -> tzinfo | None``: spec.timeZone (UTC when unset), None when it cannot be loaded.
- ``next_schedule_time(cronjob, after) -> datetime | None``: the next activation, None for a bad schedule or zone.
- ``most_recent_schedule_time(cronjob, now) -> (datetime | None, bool)``: the latest activation that is due, and
  whether more than 100 were missed.
- ``job_name(cronjob_name, scheduled_time)`` and ``scheduled_timestamp_annotation(cronjob, scheduled_time)``:
  what the controller writes on each Job it creates.

Every datetime is timezone-aware; a naive one is read as UTC. One deliberate deviation from upstream: its most
recent schedule time starts from an estimate (the first interval times the number of missed runs) and finds
nothing when an irregular schedule overshoots it, e.g. ``0 9,10 * * *`` checked at 08:00 two days late. Here the
time is exact; the "more than 100 missed" flag keeps upstream's estimate.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final

from multiqueue.api.cronschedules import Schedule, load_location, parse_schedule
from multiqueue.api.cronsearch import aware, unix_seconds
from multiqueue.api.meta import as_dict, metadata, parse_time
from multiqueue.api.types import Obj

MANY_MISSED: Final = 100
"""Beyond this many missed runs the controller warns (TooManyMissedTimes) and still starts only the latest."""

_SECOND: Final = timedelta(seconds=1)
_GO_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)
_MAX_DURATION_SECONDS: Final = (2**63 - 1) // 10**9


def _spec(cronjob: Any) -> Obj:
    return as_dict(as_dict(cronjob).get("spec"))


def schedule_zone(cronjob: Any) -> tzinfo | None:
    """spec.timeZone as the controller loads it, None when it cannot; unset, "" and "Local" give UTC, the
    embedded controller's local time."""
    name = _spec(cronjob).get("timeZone")
    if name is None:
        return UTC
    if not isinstance(name, str):
        return None
    zone, error = load_location(name)
    return None if error is not None else zone or UTC


def _controller_schedule(cronjob: Any) -> Schedule | None:
    """The schedule as upstream's controller parses it: spec.timeZone becomes a ``TZ=`` prefix unless the
    schedule already has one of its own, which then wins."""
    spec = _spec(cronjob)
    text = spec.get("schedule")
    if not isinstance(text, str) or schedule_zone(cronjob) is None:
        return None
    name = spec.get("timeZone")
    if name is not None and "TZ" not in text:
        text = f"TZ={name} {text}"
    parsed = parse_schedule(text)
    return None if isinstance(parsed, str) else parsed


def next_schedule_time(cronjob: Obj, after: datetime) -> datetime | None:
    """The first activation strictly after ``after`` (in ``after``'s zone); None if schedule or zone is bad."""
    schedule = _controller_schedule(cronjob)
    return None if schedule is None else schedule.next(after, UTC)


def _earliest(cronjob: Any, now: datetime) -> datetime:
    """Where missed activations are counted from: the last one, else creation, else Go's zero time as upstream
    reads a missing timestamp; never before the starting deadline."""
    status = as_dict(as_dict(cronjob).get("status"))
    created = metadata(cronjob).get("creationTimestamp")
    earliest = parse_time(status.get("lastScheduleTime")) or parse_time(created) or _GO_ZERO_TIME
    deadline = _spec(cronjob).get("startingDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool):
        with contextlib.suppress(OverflowError):  # a window reaching past year 1 does not move the start
            earliest = max(earliest, now - timedelta(seconds=deadline))
    return earliest


def _latest_activation(schedule: Schedule, known: datetime, now: datetime, interval: int) -> datetime:
    """The last activation at or before ``now``, given one (``known``) that is.

    ``@every`` activations are a chain from ``known``, so arithmetic finds the last link. For other schedules,
    look back from ``now`` over doubling spans until one holds an activation, then bisect: a few dozen steps
    even after years of missed minutes.
    """
    if schedule.every is not None:
        period = timedelta(seconds=schedule.every)
        return (known.astimezone(UTC) + (now - known) // period * period).astimezone(known.tzinfo)
    latest, bound = (
        known,
        now,
    )  # invariant: every activation after `latest` and at or before `now` is <= bound
    span = timedelta(seconds=interval)
    while span < now - known:
        found = schedule.next(now - span, UTC)
        if found is not None and found <= now:
            latest = found
            break
        bound, span = now - span, span * 2
    while (following := schedule.next(latest, UTC)) is not None and following <= now:
        middle = latest + (bound - latest) / 2
        found = schedule.next(middle, UTC)
        if found is not None and found <= now:
            latest = found
        else:
            bound = middle
    return latest


def most_recent_schedule_time(cronjob: Obj, now: datetime) -> tuple[datetime | None, bool]:
    """The latest activation after the earliest time (see ``_earliest``) and at or before ``now``, or None; and
    whether more than 100 were missed.

    The count is upstream's estimate, the whole intervals between the first two missed activations that fit
    before ``now``, so the TooManyMissedTimes warning appears exactly when it does on a real cluster.
    """
    schedule = _controller_schedule(cronjob)
    if schedule is None:
        return None, False
    now = aware(now)
    first = schedule.next(_earliest(cronjob, now), UTC)
    if first is None or first > now:
        return None, False
    second = schedule.next(first, UTC)
    if second is None or second > now:
        return first.astimezone(now.tzinfo), False
    interval = round((second - first) / _SECOND)  # whole seconds, so Go's rounding mode never matters
    elapsed = min((now - first) // _SECOND, _MAX_DURATION_SECONDS)  # Go durations stop at about 292 years
    missed = elapsed // interval + 1
    latest = _latest_activation(schedule, second, now, interval)
    return latest.astimezone(now.tzinfo), missed > MANY_MISSED


def job_name(cronjob_name: str, scheduled_time: datetime) -> str:
    """``<cronjob>-<minutes since the epoch>``: one name per activation, so a retried create cannot duplicate."""
    seconds = unix_seconds(aware(scheduled_time))
    minutes = seconds // 60 if seconds >= 0 else -(-seconds // 60)  # Go's division truncates toward zero
    return f"{cronjob_name}-{minutes}"


def scheduled_timestamp_annotation(cronjob: Obj, scheduled_time: datetime) -> str:
    """Go's RFC 3339 layout in spec.timeZone (UTC when unset or unloadable): seconds, ``Z`` for a zero offset."""
    local = aware(scheduled_time).astimezone(schedule_zone(cronjob) or UTC)
    offset = local.utcoffset() or timedelta(0)
    text = f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    if offset == timedelta(0):
        return text + "Z"
    minutes = int(offset / timedelta(minutes=1))  # Go drops the seconds of an offset
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"

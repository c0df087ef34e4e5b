"""batch/v1 CronJob rules: defaulting, validation, and schedule arithmetic exactly as Kubernetes does it.

Entry points other programs call (datetimes are timezone-aware):

- ``validate_cronjob(cronjob) -> list[FieldError]`` and ``validate_cronjob_update(new, old)``.
- ``next_schedule_time(cronjob, after) -> datetime | None``: the first schedule time strictly after ``after``.
- ``most_recent_schedule_time(cronjob, now) -> tuple[datetime | None, bool]``: the latest missed schedule time
  (None if none is due) and whether more than 100 were missed, with upstream's counting.
- ``job_name(cronjob_name, scheduled_time) -> str``: ``<cronjob>-<unix seconds // 60>``.

Schedules follow robfig/cron v3 ``ParseStandard``, the parser Kubernetes uses: five fields, ``?``, month and
weekday names, the ``@`` descriptors and ``@every <duration>``. We parse and step through times ourselves rather
than through croniter: robfig's day-of-month/day-of-week rule (OR only when neither field is a bare ``*``/``?``,
a ``*/2`` counting as restricted) and its daylight-saving behaviour (a time skipped by a spring-forward gap does
not fire, a repeated hour fires once) are what CronJob users get on a real cluster, and matching them to the
minute mattered more than reusing a library with different rules.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from multiqueue.api import jobs
from multiqueue.api.errors import FieldError, invalid, non_negative, not_supported, required
from multiqueue.api.meta import (
    as_dict,
    metadata,
    parse_time,
    validate_object_meta,
    validate_object_meta_update,
)

Obj = dict[str, Any]

SCHEDULED_TIMESTAMP_ANNOTATION: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
ALLOW: Final = "Allow"
FORBID: Final = "Forbid"
REPLACE: Final = "Replace"
CONCURRENCY_POLICIES: Final = (ALLOW, FORBID, REPLACE)
MAX_NAME_LENGTH: Final = 52
MANY_MISSED: Final = 100
_STAR: Final = 1 << 63
_TZ_PART: Final = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


# --- schedules ----------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] = dataclasses.field(default_factory=dict)


_MINUTES: Final = _Bounds(0, 59)
_HOURS: Final = _Bounds(0, 23)
_DOM: Final = _Bounds(1, 31)
_MONTHS: Final = _Bounds(
    1,
    12,
    {
        m: i + 1
        for i, m in enumerate(
            ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        )
    },
)
_DOW: Final = _Bounds(0, 6, {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])})
_DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A parsed schedule: field bitmasks (bit 63 marks a bare ``*``/``?``) or a constant ``@every`` delay."""

    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    every: timedelta | None = None
    zone: ZoneInfo | None = None  # from a TZ=/CRON_TZ= prefix

    def next(self, after: datetime, zone: ZoneInfo | None = None) -> datetime | None:
        """The first time strictly after ``after``, computed on the wall clock of the schedule's zone."""
        if self.every is not None:
            step = max(self.every, timedelta(seconds=1))
            return _plus(after, step - timedelta(microseconds=after.microsecond))
        return _next_time(self, after, self.zone or zone or UTC)


def _go_atoi(text: str) -> int | None:
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None


def _number(text: str, bounds: _Bounds) -> int | str:
    named = bounds.names.get(text.lower())
    if named is not None:
        return named
    value = _go_atoi(text)
    if value is None:
        return f"failed to parse int from {text}: strconv.Atoi: parsing {_quote(text)}: invalid syntax"
    if value < 0:
        return f"negative number ({value}) not allowed: {text}"
    return value


def _range(expr: str, bounds: _Bounds) -> int | str:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    extra = 0
    if low_high[0] in ("*", "?"):
        start, end, extra = bounds.low, bounds.high, _STAR
    else:
        parsed = _number(low_high[0], bounds)
        if isinstance(parsed, str):
            return parsed
        start = end = parsed
        if len(low_high) == 2:
            parsed_end = _number(low_high[1], bounds)
            if isinstance(parsed_end, str):
                return parsed_end
            end = parsed_end
        elif len(low_high) > 2:
            return f"too many hyphens: {expr}"
    step = 1
    if len(range_and_step) == 2:
        parsed_step = _number(range_and_step[1], _Bounds(0, 0))
        if isinstance(parsed_step, str):
            return parsed_step
        step = parsed_step
        if len(low_high) == 1:
            end = bounds.high  # "N/step" means N through the maximum
        if step > 1:
            extra = 0
    elif len(range_and_step) > 2:
        return f"too many slashes: {expr}"
    if start < bounds.low:
        return f"beginning of range ({start}) below minimum ({bounds.low}): {expr}"
    if end > bounds.high:
        return f"end of range ({end}) above maximum ({bounds.high}): {expr}"
    if start > end:
        return f"beginning of range ({start}) beyond end of range ({end}): {expr}"
    if step == 0:
        return f"step of range should be a positive number: {expr}"
    bits = 0
    for value in range(start, end + 1, step):
        bits |= 1 << value
    return bits | extra


def _field(text: str, bounds: _Bounds) -> int | str:
    bits = 0
    for expr in text.split(","):
        parsed = _range(expr, bounds)
        if isinstance(parsed, str):
            return parsed
        bits |= parsed
    return bits


_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _go_duration(text: str) -> timedelta | None:
    """Go's time.ParseDuration for the non-negative durations ``@every`` takes."""
    if text in ("0", "+0"):
        return timedelta(0)
    body = text[1:] if text.startswith("+") else text
    position = 0
    total = 0.0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        if match is None:
            return None
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    return timedelta(seconds=int(total)) if body else None


def parse_schedule(text: str) -> Schedule | str:
    """The schedule, or robfig/cron's error message."""
    if not isinstance(text, str) or not text.strip():
        return "empty spec string"
    spec = text.strip()
    zone: ZoneInfo | None = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        name, _, spec = spec.partition(" ")
        zone_name = name.split("=", 1)[1]
        zone = load_zone(zone_name)
        if zone is None:
            return f"provided bad location {zone_name}: unknown time zone {zone_name}"
        spec = spec.strip()
    if spec.startswith("@"):
        if spec.startswith("@every "):
            duration = _go_duration(spec[len("@every ") :].strip())
            if duration is None:
                return f"failed to parse duration {spec}: time: invalid duration {_quote(spec[len('@every ') :].strip())}"
            return Schedule(every=duration, zone=zone)
        expanded = _DESCRIPTORS.get(spec)
        if expanded is None:
            return f"unrecognized descriptor: {spec}"
        spec = expanded
    fields = spec.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]"
    parsed: list[int] = []
    for text_field, bounds in zip(fields, (_MINUTES, _HOURS, _DOM, _MONTHS, _DOW), strict=True):
        bits = _field(text_field, bounds)
        if isinstance(bits, str):
            return bits
        parsed.append(bits)
    minute, hour, dom, month, dow = parsed
    return Schedule(minute=minute, hour=hour, dom=dom, month=month, dow=dow, zone=zone)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _wall(zone: ZoneInfo | Any, year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """A wall-clock time in ``zone``; a time that does not exist (spring-forward gap) moves past the gap."""
    naive = datetime(year, month, day, hour, minute)
    return naive.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)


def _plus(moment: datetime, delta: timedelta) -> datetime:
    """Absolute-time addition (Go's Time.Add), not wall-clock arithmetic."""
    return (moment.astimezone(UTC) + delta).astimezone(moment.tzinfo)


def _day_matches(schedule: Schedule, moment: datetime) -> bool:
    dom = bool((1 << moment.day) & schedule.dom)
    dow = bool((1 << ((moment.weekday() + 1) % 7)) & schedule.dow)
    if schedule.dom & _STAR or schedule.dow & _STAR:
        return dom and dow
    return dom or dow


def _next_time(schedule: Schedule, after: datetime, zone: ZoneInfo | Any) -> datetime | None:
    """robfig's SpecSchedule.Next: move field by field, widest first, wrapping to the year when one overflows."""
    t = after.astimezone(zone)
    t = _plus(t.replace(microsecond=0), timedelta(seconds=1))
    added = False
    year_limit = t.year + 5
    while True:  # each pass restarts from the month, like robfig's WRAP label
        if t.year > year_limit:
            return None
        wrapped = False
        while not (1 << t.month) & schedule.month:
            if not added:
                added = True
                t = _wall(zone, t.year, t.month, 1)
            year, month = (t.year + 1, 1) if t.month == 12 else (t.year, t.month + 1)
            t = _wall(zone, year, month, 1, t.hour, t.minute)
            if t.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(schedule, t):
            if not added:
                added = True
                t = _wall(zone, t.year, t.month, t.day)
            following = date(t.year, t.month, t.day) + timedelta(days=1)
            t = _wall(zone, following.year, following.month, following.day, t.hour, t.minute)
            if t.hour != 0:  # a DST change moved midnight; go back to the start of the day
                t = (
                    _plus(t, timedelta(hours=24 - t.hour))
                    if t.hour > 12
                    else _plus(t, timedelta(hours=-t.hour))
                )
            if t.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.hour) & schedule.hour:
            if not added:
                added = True
                t = _wall(zone, t.year, t.month, t.day, t.hour)
            t = _plus(t, timedelta(hours=1))
            if t.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.minute) & schedule.minute:
            if not added:
                added = True
                t = t.replace(second=0)
            t = _plus(t, timedelta(minutes=1))
            if t.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        if t.second != 0:
            # Standard schedules fire at second 0.
            t = _plus(t.replace(second=0), timedelta(minutes=1))
            continue
        return t.astimezone(after.tzinfo)


def load_zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


# --- defaulting and validation ------------------------------------------------------------------------------


def default_cronjob(cronjob: Obj) -> Obj:
    result = copy.deepcopy(as_dict(cronjob))
    spec = as_dict(result.setdefault("spec", {}))
    if not isinstance(result["spec"], dict):
        return result
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = ALLOW
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    template = as_dict(spec.setdefault("jobTemplate", {}))
    if isinstance(spec["jobTemplate"], dict):
        template["spec"] = jobs.default_job_spec(as_dict(template.get("spec")))
    return result


def _validate_time_zone(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, str) or not value:
        return [invalid(path, value, "timeZone must be nil or non-empty string")]
    for part in value.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return [invalid(path, value, f"unknown time zone {value}")]
    errs: list[FieldError] = []
    if value.lower() == "local":
        errs.append(
            invalid(
                path,
                value,
                "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
            )
        )
    if load_zone(value) is None:
        errs.append(invalid(path, value, f"unknown time zone {value}"))
    return errs


def _validate_spec(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    errs: list[FieldError] = []
    schedule = spec.get("schedule")
    if not schedule:
        errs.append(required("spec.schedule"))
    elif not isinstance(schedule, str):
        errs.append(invalid("spec.schedule", schedule, "must be a string"))
    else:
        parsed = parse_schedule(schedule)
        if isinstance(parsed, str):
            errs.append(invalid("spec.schedule", schedule, parsed))
        allow_tz = old_spec is not None and "TZ" in str(old_spec.get("schedule", ""))
        if allow_tz and "TZ" in schedule and spec.get("timeZone") is not None:
            errs.append(
                invalid(
                    "spec.schedule", schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"
                )
            )
        elif not allow_tz and "TZ" in schedule:
            errs.append(
                invalid(
                    "spec.schedule",
                    schedule,
                    "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
                )
            )
    errs += non_negative("spec.startingDeadlineSeconds", spec.get("startingDeadlineSeconds"))
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        errs += _validate_time_zone(spec.get("timeZone"), "spec.timeZone")
    policy = spec.get("concurrencyPolicy")
    if not policy:
        errs.append(required("spec.concurrencyPolicy"))
    elif policy not in CONCURRENCY_POLICIES:
        errs.append(not_supported("spec.concurrencyPolicy", policy, list(CONCURRENCY_POLICIES)))
    errs += jobs.validate_job_template_spec(as_dict(spec.get("jobTemplate")), "spec.jobTemplate")
    errs += non_negative("spec.successfulJobsHistoryLimit", spec.get("successfulJobsHistoryLimit"))
    errs += non_negative("spec.failedJobsHistoryLimit", spec.get("failedJobsHistoryLimit"))
    return errs


def validate_cronjob(cronjob: Obj) -> list[FieldError]:
    errs = validate_object_meta(as_dict(cronjob).get("metadata"), namespaced=True)
    errs += _validate_spec(as_dict(as_dict(cronjob).get("spec")), None)
    name = metadata(cronjob).get("name")
    if isinstance(name, str) and len(name) > MAX_NAME_LENGTH:
        errs.append(invalid("metadata.name", name, f"must be no more than {MAX_NAME_LENGTH} characters"))
    return errs


def validate_cronjob_update(new: Obj, old: Obj) -> list[FieldError]:
    """As on create, except that an existing TZ schedule may stay and long old names remain usable."""
    errs = validate_object_meta_update(as_dict(new).get("metadata"), as_dict(old).get("metadata"))
    return errs + _validate_spec(as_dict(as_dict(new).get("spec")), as_dict(as_dict(old).get("spec")))


# --- times --------------------------------------------------------------------------------------------------


def schedule_zone(cronjob: Any) -> ZoneInfo | None:
    """The zone schedules are evaluated in: spec.timeZone, else UTC (the embedded controller's local time)."""
    name = as_dict(as_dict(cronjob).get("spec")).get("timeZone")
    if name is None:
        return ZoneInfo("UTC")
    return load_zone(str(name)) if isinstance(name, str) and name.lower() != "local" else None


def _schedule_of(cronjob: Any) -> tuple[Schedule, ZoneInfo] | None:
    parsed = parse_schedule(str(as_dict(as_dict(cronjob).get("spec")).get("schedule", "")))
    zone = schedule_zone(cronjob)
    if isinstance(parsed, str) or zone is None:
        return None
    return parsed, zone


def next_schedule_time(cronjob: Obj, after: datetime) -> datetime | None:
    found = _schedule_of(cronjob)
    if found is None:
        return None
    schedule, zone = found
    return schedule.next(after, zone)


def most_recent_schedule_time(cronjob: Obj, now: datetime) -> tuple[datetime | None, bool]:
    """The most recent schedule time that is due, and whether more than 100 were missed since the last one."""
    found = _schedule_of(cronjob)
    if found is None:
        return None, False
    schedule, zone = found
    meta = metadata(cronjob)
    status = as_dict(as_dict(cronjob).get("status"))
    spec = as_dict(as_dict(cronjob).get("spec"))
    earliest = parse_time(status.get("lastScheduleTime")) or parse_time(meta.get("creationTimestamp")) or now
    deadline = spec.get("startingDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool):
        window_start = now - timedelta(seconds=deadline)
        earliest = max(earliest, window_start)
    first = schedule.next(earliest, zone)
    if first is None or now < first:
        return None, False
    second = schedule.next(first, zone)
    if second is None or now < second:
        return first, False
    interval = round((second - first).total_seconds())
    if interval < 1:
        return None, False
    missed = int((now - first).total_seconds()) // interval + 1
    # Start a little before the estimated last one and step forward: exact for irregular schedules too.
    cursor = first + timedelta(seconds=(missed - 2) * interval)
    latest: datetime | None = None
    candidate = schedule.next(cursor, zone)
    while candidate is not None and candidate <= now:
        latest = candidate
        candidate = schedule.next(candidate, zone)
    return latest, missed > MANY_MISSED


def job_name(cronjob_name: str, scheduled_time: datetime) -> str:
    return f"{cronjob_name}-{int(scheduled_time.timestamp()) // 60}"


def scheduled_timestamp_annotation(cronjob: Obj, scheduled_time: datetime) -> str:
    """RFC 3339 in the CronJob's time zone, as upstream writes it."""
    zone = schedule_zone(cronjob) or ZoneInfo("UTC")
    local = scheduled_time.astimezone(zone)
    text = local.isoformat(timespec="seconds")
    return text.replace("+00:00", "Z") if local.utcoffset() == timedelta(0) else text

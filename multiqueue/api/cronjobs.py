"""batch/v1 CronJob rules: defaulting, validation, cron schedules and the controller's schedule arithmetic.

Entry points other programs call (every datetime is timezone-aware; a naive one is read as UTC):

- ``default_cronjob(cronjob) -> dict``: create-time defaulting, into a new dict.
- ``validate_cronjob(cronjob) -> list[FieldError]``: create validation of a defaulted CronJob.
- ``validate_cronjob_update(new, old) -> list[FieldError]``: the same spec rules, with upstream's tolerance for
  what an old object may keep (a ``TZ=`` schedule, a name longer than 52 characters, an unchanged time zone).
- ``parse_schedule(text) -> Schedule | str``: a schedule, or robfig/cron's error message.
  ``Schedule.next(after, zone)`` gives the first activation strictly after ``after``.
- ``schedule_zone(cronjob) -> tzinfo | None``: spec.timeZone (UTC when unset), None when it cannot be loaded.
- ``next_schedule_time(cronjob, after) -> datetime | None``: the next activation, None for a bad schedule or zone.
- ``most_recent_schedule_time(cronjob, now) -> (datetime | None, bool)``: the latest activation that is due, and
  whether more than 100 were missed.
- ``job_name(cronjob_name, scheduled_time)`` and ``scheduled_timestamp_annotation(cronjob, scheduled_time)``:
  what the controller writes on each Job it creates.

Schedules follow robfig/cron v3 ``ParseStandard``, the parser Kubernetes uses, including its error messages, so a
schedule is accepted or refused here exactly as by a real API server. The next-time search is our own walk over
the fields in robfig's order (month, day, hour, minute, second) on Go's clock rules, rather than croniter: robfig
combines day-of-month and day-of-week with OR only when neither is a bare ``*``/``?`` (so ``*/2`` restricts), and
at daylight-saving changes it skips a wall time the clocks jump over and fires twice for one they repeat. Those
are the times CronJobs run at on a real cluster, and croniter's rules differ in both places.

Deliberate deviations from upstream, each where upstream's answer is an accident rather than a rule:

- robfig panics on ``TZ=<zone>`` with no space after it (the API server answers 500). Here the zone then ends
  the text, so ``TZ=UTC`` is refused like ``TZ=UTC `` ("expected exactly 5 fields, found 0: []").
- upstream's most recent schedule time starts from an estimate (the first interval times the number of missed
  runs) and finds nothing when an irregular schedule overshoots it, e.g. ``0 9,10 * * *`` checked at 08:00 two
  days late. Here the time is exact; the "more than 100 missed" flag keeps upstream's estimate.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import re
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, Final
from zoneinfo import ZoneInfo

from multiqueue.api import jobs, pods
from multiqueue.api.errors import FieldError, invalid, non_negative, not_supported, required, strconv_quote
from multiqueue.api.meta import (
    as_dict,
    metadata,
    parse_time,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.query import go_duration
from multiqueue.api.types import Obj

SCHEDULED_TIMESTAMP_ANNOTATION: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
"""The annotation on each Job with its scheduled time, RFC 3339 in the CronJob's time zone."""

ALLOW: Final = "Allow"
FORBID: Final = "Forbid"
REPLACE: Final = "Replace"
CONCURRENCY_POLICIES: Final = (ALLOW, FORBID, REPLACE)

MAX_NAME_LENGTH: Final = 52
"""Job names are ``<cronjob>-<11 characters>`` and must stay DNS labels (63)."""

MANY_MISSED: Final = 100
"""Beyond this many missed runs the controller warns (TooManyMissedTimes) and still starts only the latest."""

_STAR: Final = 1 << 63  # set in a field's mask when it was written as a bare * or ?
_SECOND: Final = timedelta(seconds=1)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY: Final = date(1970, 1, 1).toordinal()
_GO_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)
_MAX_DURATION_SECONDS: Final = (2**63 - 1) // 10**9
_MAX_WRAPS: Final = 200_000  # far above what five years of any schedule needs; guards against a loop
_TZ_PART: Final = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")
# unicode.IsSpace, which Go's strings.Fields and TrimSpace split on (Python's str.split also splits on \x1c-\x1f).
_GO_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
_GO_FIELDS: Final = re.compile(f"[^{_GO_SPACE}]+")


# --- Go's parsing helpers, for robfig's exact messages ------------------------------------------------------


def _go_fields(text: str) -> list[str]:
    return _GO_FIELDS.findall(text)


def _go_atoi(text: str) -> int | str:
    """Go's strconv.Atoi on a 64-bit platform: the number, or its error text."""
    negative = text[:1] == "-"
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits:
        return f"strconv.Atoi: parsing {strconv_quote(text)}: invalid syntax"
    value = 0
    for char in digits:
        if not "0" <= char <= "9":
            return f"strconv.Atoi: parsing {strconv_quote(text)}: invalid syntax"
        # Go gives up with "out of range" at the first digit that overflows, before seeing later characters.
        value = value * 10 + ord(char) - ord("0")
        if value >= 2**64:
            return f"strconv.Atoi: parsing {strconv_quote(text)}: value out of range"
    if value > 2**63 - (0 if negative else 1):
        return f"strconv.Atoi: parsing {strconv_quote(text)}: value out of range"
    return -value if negative else value


def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return None


def _load_location(name: str) -> tuple[tzinfo | None, str | None]:
    """Go's time.LoadLocation: (zone, None), or (None, its error). "Local" gives (None, None)."""
    if name in ("", "UTC"):
        return UTC, None
    if name == "Local":
        return None, None
    if ".." in name or name.startswith(("/", "\\")):
        return None, "time: invalid location name"
    zone = _zone(name)
    return (zone, None) if zone is not None else (None, f"unknown time zone {name}")


# --- parsing schedules --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: dict[str, int] = dataclasses.field(default_factory=dict)


_MONTH_NAMES: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS: Final = (
    _Bounds(0, 59),  # minute
    _Bounds(0, 23),  # hour
    _Bounds(1, 31),  # day of month
    _Bounds(1, 12, {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}),
    _Bounds(0, 6, {name: i for i, name in enumerate(_DAY_NAMES)}),  # robfig has no 7 for Sunday
)
_DESCRIPTORS: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY: Final = "@every "


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A parsed schedule: one bit mask per field (bit 63 marks a bare ``*``/``?``), or an ``@every`` period.

    ``location`` comes from a ``TZ=``/``CRON_TZ=`` prefix and then wins over the zone given to :meth:`next`;
    None means none was given (or ``TZ=Local``).
    """

    minute: int = 0
    hour: int = 0
    dom: int = 0
    month: int = 0
    dow: int = 0
    every: int | None = None  # seconds, at least 1
    location: tzinfo | None = None

    def next(self, after: datetime, zone: tzinfo | None = None) -> datetime | None:
        """The first activation strictly after ``after``, in ``after``'s zone.

        Standard schedules are evaluated on the wall clock of ``location``, else ``zone``, else ``after``'s own
        zone. None means robfig's zero time: no activation within five years (``0 0 30 2 *``).
        """
        start = _aware(after)
        origin = start.tzinfo or UTC
        try:
            if self.every is not None:
                # Go's ConstantDelaySchedule: drop the fraction of a second, add the period in absolute time.
                moment = start.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=self.every)
                return moment.astimezone(origin)
            found = _Search(self, self.location or zone or origin).run(_unix(start))
            return None if found is None else datetime.fromtimestamp(found, origin)
        except (OverflowError, ValueError, OSError):  # beyond the years Python's datetime can hold
            return None


def _number(text: str, names: dict[str, int]) -> int | str:
    named = names.get(text.lower())
    if named is not None:
        return named
    value = _go_atoi(text)
    if isinstance(value, str):
        return f"failed to parse int from {text}: {value}"
    if value < 0:
        return f"negative number ({value}) not allowed: {text}"
    return value


def _parse_range(expr: str, bounds: _Bounds) -> int | str:
    """One comma-separated part: ``*``, ``?``, ``N`` or ``N-M``, optionally ``/step``."""
    range_text, *steps = expr.split("/")
    ends = range_text.split("-")
    star = 0
    if ends[0] in ("*", "?"):
        low, high, star = bounds.low, bounds.high, _STAR  # robfig ignores anything after "*-"
    else:
        parsed_low = _number(ends[0], bounds.names)
        if isinstance(parsed_low, str):
            return parsed_low
        low = high = parsed_low
        if len(ends) == 2:
            parsed_high = _number(ends[1], bounds.names)
            if isinstance(parsed_high, str):
                return parsed_high
            high = parsed_high
        elif len(ends) > 2:
            return f"too many hyphens: {expr}"
    step = 1
    if len(steps) == 1:
        parsed_step = _number(steps[0], {})
        if isinstance(parsed_step, str):
            return parsed_step
        step = parsed_step
        if len(ends) == 1:
            high = bounds.high  # "N/step" runs from N to the field's maximum
        if step > 1:
            star = 0  # "*/2" restricts the field; only a bare * or ? leaves it open
    elif len(steps) > 1:
        return f"too many slashes: {expr}"
    if low < bounds.low:
        return f"beginning of range ({low}) below minimum ({bounds.low}): {expr}"
    if high > bounds.high:
        return f"end of range ({high}) above maximum ({bounds.high}): {expr}"
    if low > high:
        return f"beginning of range ({low}) beyond end of range ({high}): {expr}"
    if step == 0:
        return f"step of range should be a positive number: {expr}"
    mask = star
    for value in range(low, high + 1, step):  # a step past the range (*/61) keeps only the first value
        mask |= 1 << value
    return mask


def _parse_field(text: str, bounds: _Bounds) -> int | str:
    mask = 0
    for expr in text.split(","):
        if expr:  # robfig drops empty parts, so "1,,2" is fine and "," matches nothing
            parsed = _parse_range(expr, bounds)
            if isinstance(parsed, str):
                return parsed
            mask |= parsed
    return mask


def _parse_fields(spec: str, location: tzinfo | None) -> Schedule | str:
    fields = _go_fields(spec)
    if len(fields) != len(_FIELDS):
        return f"expected exactly {len(_FIELDS)} fields, found {len(fields)}: [{' '.join(fields)}]"
    masks: list[int] = []
    for text, bounds in zip(fields, _FIELDS, strict=True):
        mask = _parse_field(text, bounds)
        if isinstance(mask, str):
            return mask
        masks.append(mask)
    minute, hour, dom, month, dow = masks
    return Schedule(minute=minute, hour=hour, dom=dom, month=month, dow=dow, location=location)


def parse_schedule(text: str) -> Schedule | str:
    """robfig/cron v3 ``ParseStandard``: the schedule, or the error message the API server would print."""
    if not isinstance(text, str):
        return "schedule must be a string"
    if not text:
        return "empty spec string"
    spec = text
    location: tzinfo | None = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        end = len(spec) if space < 0 else space  # robfig panics without the space; see the module docstring
        name = spec[spec.index("=") + 1 : end]
        zone, error = _load_location(name)
        if error is not None:
            return f"provided bad location {name}: {error}"
        location = zone
        spec = spec[end:].strip(_GO_SPACE)
    if spec.startswith("@"):
        if spec in _DESCRIPTORS:
            return _parse_fields(_DESCRIPTORS[spec], location)
        if spec.startswith(_EVERY):
            nanoseconds = go_duration(spec[len(_EVERY) :])
            if isinstance(nanoseconds, str):
                return f"failed to parse duration {spec}: {nanoseconds}"
            return Schedule(every=max(nanoseconds // 10**9, 1))  # robfig: at least 1s, whole seconds
        return f"unrecognized descriptor: {spec}"
    return _parse_fields(spec, location)


# --- finding the next activation ----------------------------------------------------------------------------


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _unix(moment: datetime) -> int:
    """Whole seconds since the epoch, rounded down like Go's Unix()."""
    return (moment - _EPOCH) // _SECOND


def _offset(zone: tzinfo, instant: int) -> int:
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    return 0 if offset is None else offset // _SECOND


def _go_date(
    zone: tzinfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> int:
    """Go's time.Date as Unix seconds: out-of-range fields roll over (October 32 is November 1), and a wall time
    a DST change skips or repeats resolves with the offset in force at that wall time read as UTC, corrected
    once when the result falls outside it -- Go's rule, which robfig's results at DST changes depend on."""
    year, month_index = year + (month - 1) // 12, (month - 1) % 12
    days = date(year, month_index + 1, 1).toordinal() - _EPOCH_DAY + day - 1
    wall = days * 86400 + hour * 3600 + minute * 60 + second
    return wall - _offset(zone, wall - _offset(zone, wall))


def _has(mask: int, value: int) -> bool:
    return bool(mask >> value & 1)


class _Search:
    """robfig's SpecSchedule.Next: advance the first field that does not match, widest first; when a field wraps
    around, start over from the month. Times are Unix seconds; fields are read on ``zone``'s wall clock. Each
    field's step returns True when the field wrapped."""

    def __init__(self, schedule: Schedule, zone: tzinfo) -> None:
        self.schedule = schedule
        self.zone = zone
        self.time = 0
        self.wall = _EPOCH
        self.added = False  # whether a field has moved, so the smaller ones start from zero

    def move(self, instant: int) -> None:
        self.time = instant
        self.wall = datetime.fromtimestamp(instant, self.zone)

    def reset(self, instant: int) -> None:
        """The first move clears the smaller fields; later moves keep them."""
        if not self.added:
            self.added = True
            self.move(instant)

    def date(self, day_offset: int = 0, month_offset: int = 0) -> int:
        w = self.wall
        return _go_date(
            self.zone, w.year, w.month + month_offset, w.day + day_offset, w.hour, w.minute, w.second
        )

    def day_matches(self) -> bool:
        s, w = self.schedule, self.wall
        dom = _has(s.dom, w.day)
        dow = _has(s.dow, (w.weekday() + 1) % 7)
        return dom and dow if (s.dom | s.dow) & _STAR else dom or dow

    def months(self) -> bool:
        while not _has(self.schedule.month, self.wall.month):
            self.reset(_go_date(self.zone, self.wall.year, self.wall.month, 1))
            self.move(self.date(month_offset=1))
            if self.wall.month == 1:
                return True
        return False

    def days(self) -> bool:
        while not self.day_matches():
            self.reset(_go_date(self.zone, self.wall.year, self.wall.month, self.wall.day))
            self.move(self.date(day_offset=1))
            hour = self.wall.hour
            if hour != 0:  # a DST change moved midnight: go to the nearer midnight
                self.move(self.time + (24 - hour) * 3600 if hour > 12 else self.time - hour * 3600)
            if self.wall.day == 1:
                return True
        return False

    def hours(self) -> bool:
        while not _has(self.schedule.hour, self.wall.hour):
            w = self.wall
            self.reset(_go_date(self.zone, w.year, w.month, w.day, w.hour))
            self.move(self.time + 3600)
            if self.wall.hour == 0:
                return True
        return False

    def minutes(self) -> bool:
        while not _has(self.schedule.minute, self.wall.minute):
            self.reset(self.time - self.time % 60)  # Go truncates absolute time, not the wall clock
            self.move(self.time + 60)
            if self.wall.minute == 0:
                return True
        return False

    def seconds(self) -> bool:
        while self.wall.second != 0:  # standard schedules fire at second 0
            self.reset(self.time)
            self.move(self.time + 1)
            if self.wall.second == 0:
                return True
        return False

    def run(self, after: int) -> int | None:
        s = self.schedule
        never_matches = not (s.minute & ~_STAR and s.hour & ~_STAR and s.month & ~_STAR)
        if never_matches or not (s.dom & ~_STAR or s.dow & ~_STAR):
            return None  # a field written as "," matches nothing; robfig would search five years for it
        self.move(after + 1)
        year_limit = self.wall.year + 5
        for _ in range(_MAX_WRAPS):
            if self.wall.year > year_limit:
                return None
            steps = (self.months, self.days, self.hours, self.minutes, self.seconds)
            if not any(step() for step in steps):
                return self.time
        return None


# --- defaulting and validation ------------------------------------------------------------------------------


def default_cronjob(cronjob: Obj) -> Obj:
    """Upstream's SetDefaults_CronJob and the pod defaults of its job template; a JSON null counts as unset."""
    result = copy.deepcopy(as_dict(cronjob))
    if result.get("spec") is None:
        result["spec"] = {}
    spec = result["spec"]
    if not isinstance(spec, dict):
        return result
    for field, value in (
        ("concurrencyPolicy", ALLOW),
        ("suspend", False),
        ("successfulJobsHistoryLimit", 3),
        ("failedJobsHistoryLimit", 1),
    ):
        if spec.get(field) is None or spec.get(field) == "":
            spec[field] = value
    if spec.get("jobTemplate") is None:
        spec["jobTemplate"] = {}
    template = spec["jobTemplate"]
    # Like upstream's generated defaulters: the pod template is defaulted here, the Job spec only when the
    # controller creates a Job from it (so an Indexed template without completions is refused at once).
    job_spec = template.get("spec") if isinstance(template, dict) else None
    pod_template = job_spec.get("template") if isinstance(job_spec, dict) else None
    if isinstance(pod_template, dict):
        pod_template["spec"] = pods.default_pod_spec(as_dict(pod_template.get("spec")))
    return result


def _validate_integer(value: Any, path: str) -> list[FieldError]:
    """Optional and non-negative; upstream cannot even decode another JSON type into its integer fields."""
    if value is None:
        return []
    if not isinstance(value, int) or isinstance(value, bool):
        return [invalid(path, value, "must be an integer")]
    return non_negative(path, value)


def _validate_schedule(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    path = "spec.schedule"
    schedule = spec.get("schedule")
    if schedule is None or schedule == "":
        return [required(path)]
    if not isinstance(schedule, str):
        return [invalid(path, schedule, "must be a string")]
    errs: list[FieldError] = []
    parsed = parse_schedule(schedule)
    if isinstance(parsed, str):
        errs.append(invalid(path, schedule, parsed))
    # Upstream looks for "TZ" anywhere in the text. An object stored with one may keep it, but not together
    # with spec.timeZone.
    old_schedule = None if old_spec is None else old_spec.get("schedule")
    tz_allowed = isinstance(old_schedule, str) and "TZ" in old_schedule
    if "TZ" in schedule and tz_allowed and spec.get("timeZone") is not None:
        detail = "cannot use both timeZone field and TZ or CRON_TZ in schedule"
        errs.append(invalid(path, schedule, detail))
    elif "TZ" in schedule and not tz_allowed:
        errs.append(
            invalid(path, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
        )
    return errs


def _validate_time_zone(value: Any) -> list[FieldError]:
    path = "spec.timeZone"
    if value is None:
        return []
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    if not value:
        return [invalid(path, value, "timeZone must be nil or non-empty string")]
    # IANA's naming rules (digits and "+" tolerated for legacy names) keep file paths out of the zone lookup.
    for part in value.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return [invalid(path, value, f"unknown time zone {value}")]
    errs: list[FieldError] = []
    if value.lower() == "local":
        detail = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        errs.append(invalid(path, value, detail))
    _, error = _load_location(value)
    if error is not None:  # "local" gets both errors, as upstream: only "Local" itself loads in Go
        errs.append(invalid(path, value, error))
    return errs


def _validate_concurrency_policy(value: Any) -> list[FieldError]:
    path = "spec.concurrencyPolicy"
    if value is None or value == "":
        return [required(path)]
    if value not in CONCURRENCY_POLICIES:
        return [not_supported(path, value, list(CONCURRENCY_POLICIES))]
    return []


def _validate_spec(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    """Upstream's validateCronJobSpec, in its order; ``old_spec`` is None on create."""
    errs = _validate_schedule(spec, old_spec)
    errs += _validate_integer(spec.get("startingDeadlineSeconds"), "spec.startingDeadlineSeconds")
    # An unchanged zone is not checked again, so an object stays updatable if its zone leaves the database.
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        errs += _validate_time_zone(spec.get("timeZone"))
    errs += _validate_concurrency_policy(spec.get("concurrencyPolicy"))
    errs += jobs.validate_job_template_spec(as_dict(spec.get("jobTemplate")), "spec.jobTemplate")
    errs += _validate_integer(spec.get("successfulJobsHistoryLimit"), "spec.successfulJobsHistoryLimit")
    return errs + _validate_integer(spec.get("failedJobsHistoryLimit"), "spec.failedJobsHistoryLimit")


def validate_cronjob(cronjob: Obj) -> list[FieldError]:
    """Create validation of a defaulted CronJob."""
    body = as_dict(cronjob)
    errs = validate_object_meta(body.get("metadata"), namespaced=True)
    errs += _validate_spec(as_dict(body.get("spec")), None)
    name = metadata(body).get("name")
    # Go counts bytes. Checked on create only, so CronJobs made before the limit can still be updated.
    if isinstance(name, str) and len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_LENGTH:
        errs.append(invalid("metadata.name", name, f"must be no more than {MAX_NAME_LENGTH} characters"))
    return errs


def validate_cronjob_update(new: Obj, old: Obj) -> list[FieldError]:
    """Update validation: immutable metadata, then the spec rules with the old spec's tolerances."""
    new_body, old_body = as_dict(new), as_dict(old)
    errs = validate_object_meta_update(new_body.get("metadata"), old_body.get("metadata"))
    return errs + _validate_spec(as_dict(new_body.get("spec")), as_dict(old_body.get("spec")))


# --- what the controller computes ---------------------------------------------------------------------------


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
    zone, error = _load_location(name)
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
    now = _aware(now)
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
    seconds = _unix(_aware(scheduled_time))
    minutes = seconds // 60 if seconds >= 0 else -(-seconds // 60)  # Go's division truncates toward zero
    return f"{cronjob_name}-{minutes}"


def scheduled_timestamp_annotation(cronjob: Obj, scheduled_time: datetime) -> str:
    """Go's RFC 3339 layout in spec.timeZone (UTC when unset or unloadable): seconds, ``Z`` for a zero offset."""
    local = _aware(scheduled_time).astimezone(schedule_zone(cronjob) or UTC)
    offset = local.utcoffset() or timedelta(0)
    text = f"{local.year:04d}-{local.month:02d}-{local.day:02d}T{local.hour:02d}:{local.minute:02d}:{local.second:02d}"
    if offset == timedelta(0):
        return text + "Z"
    minutes = int(offset / timedelta(minutes=1))  # Go drops the seconds of an offset
    sign = "-" if minutes < 0 else "+"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"

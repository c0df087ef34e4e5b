"""Cron schedules as robfig/cron v3 ``ParseStandard`` parses them, the parser Kubernetes uses, error messages
included, so a schedule is accepted or refused here exactly as by a real API server.

``parse_schedule(text)`` gives a :class:`Schedule` or robfig's error message; ``Schedule.next(after, zone)`` the
first activation strictly after ``after`` (every datetime is timezone-aware; a naive one is read as UTC).

One deliberate deviation from upstream, where upstream's answer is an accident rather than a rule: robfig panics
on ``TZ=<zone>`` with no space after it (the API server answers 500). Here the zone then ends the text, so
``TZ=UTC`` is refused like ``TZ=UTC `` ("expected exactly 5 fields, found 0: []").
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

from multiqueue.api.cronsearch import STAR, aware, next_activation, unix_seconds
from multiqueue.api.errors import strconv_quote
from multiqueue.api.query import go_duration

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


def load_location(name: str) -> tuple[tzinfo | None, str | None]:
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
        start = aware(after)
        origin = start.tzinfo or UTC
        try:
            if self.every is not None:
                # Go's ConstantDelaySchedule: drop the fraction of a second, add the period in absolute time.
                moment = start.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=self.every)
                return moment.astimezone(origin)
            found = next_activation(self, self.location or zone or origin, unix_seconds(start))
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
        low, high, star = bounds.low, bounds.high, STAR  # robfig ignores anything after "*-"
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
        zone, error = load_location(name)
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

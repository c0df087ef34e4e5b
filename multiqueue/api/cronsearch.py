"""The next activation of a standard cron schedule: robfig/cron v3's SpecSchedule.Next on Go's clock rules.

The walk goes over the fields in robfig's order (month, day, hour, minute, second) rather than croniter's: robfig
combines day-of-month and day-of-week with OR only when neither is a bare ``*``/``?`` (so ``*/2`` restricts), and
at daylight-saving changes it skips a wall time the clocks jump over and fires twice for one they repeat. Those
are the times CronJobs run at on a real cluster, and croniter's rules differ in both places.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Final, Protocol

STAR: Final = 1 << 63
"""Set in a field's mask when it was written as a bare ``*`` or ``?``."""

_SECOND: Final = timedelta(seconds=1)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DAY: Final = date(1970, 1, 1).toordinal()
_MAX_WRAPS: Final = 200_000  # far above what five years of any schedule needs; guards against a loop


class CronMasks(Protocol):
    """A standard schedule's fields, one bit mask each (bit ``n`` set: the value ``n`` matches)."""

    @property
    def minute(self) -> int: ...

    @property
    def hour(self) -> int: ...

    @property
    def dom(self) -> int: ...

    @property
    def month(self) -> int: ...

    @property
    def dow(self) -> int: ...


def aware(moment: datetime) -> datetime:
    """``moment``, read as UTC when it is naive."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def unix_seconds(moment: datetime) -> int:
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

    def __init__(self, schedule: CronMasks, zone: tzinfo) -> None:
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
        return dom and dow if (s.dom | s.dow) & STAR else dom or dow

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
        never_matches = not (s.minute & ~STAR and s.hour & ~STAR and s.month & ~STAR)
        if never_matches or not (s.dom & ~STAR or s.dow & ~STAR):
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


def next_activation(masks: CronMasks, zone: tzinfo, after: int) -> int | None:
    """The first activation strictly after ``after`` (Unix seconds), with the fields read on ``zone``'s wall
    clock; None when there is none within five years."""
    return _Search(masks, zone).run(after)

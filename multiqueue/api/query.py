"""Query parameters decoded as the upstream API server decodes them into options structs, with its messages.

- a boolean is false only when absent, "0" or "false" (any case); anything else, "" included, is true;
- an integer is Go's ``strconv.ParseInt(s, 10, 64)``;
- a time is Go's ``time.Parse(time.RFC3339, s)``, and its errors read as Go's ``ParseError`` does.

Undecodable values raise :class:`QueryError`, whose message the server sends with a 400.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

RFC3339: Final = "2006-01-02T15:04:05Z07:00"
_INT64: Final = re.compile(r"[+-]?[0-9]+")
_DIGITS: Final = re.compile(r"[0-9]+")


class QueryError(ValueError):
    """A parameter that does not decode; the message is upstream's."""


def flag(value: str | None) -> bool:
    return value is not None and value != "0" and value.lower() != "false"


def int64(value: str | None) -> int | None:
    if value is None:
        return None
    if not _INT64.fullmatch(value):
        raise QueryError(f"strconv.ParseInt: parsing {_quote(value)}: invalid syntax")
    number = int(value)
    if not -(1 << 63) <= number < (1 << 63):
        raise QueryError(f"strconv.ParseInt: parsing {_quote(value)}: value out of range")
    return number


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cannot(value: str, rest: str, element: str) -> QueryError:
    return QueryError(
        f"parsing time {_quote(value)} as {_quote(RFC3339)}: cannot parse {_quote(rest)} as {_quote(element)}"
    )


def _out_of_range(value: str, what: str) -> QueryError:
    return QueryError(f"parsing time {_quote(value)}: {what} out of range")


def rfc3339(value: str) -> datetime:
    """A metav1.Time query parameter: "" and "null" are the zero time, the rest must be RFC 3339."""
    if value in ("", "null"):
        return datetime(1, 1, 1, tzinfo=UTC)
    rest = value
    fields: dict[str, int] = {}
    # (layout element, width: 0 for one or two digits, the field, its range)
    numbers = (
        ("2006", 4, "year"),
        ("01", 2, "month"),
        ("02", 2, "day"),
        ("15", 0, "hour"),
        ("04", 2, "minute"),
        ("05", 2, "second"),
    )
    separators = ("-", "-", "T", ":", ":", "")
    for (element, width, name), separator in zip(numbers, separators, strict=True):
        digits = _DIGITS.match(rest)
        taken = digits.group() if digits else ""
        if width == 0:
            taken = taken[:2]
        elif len(taken) < width:
            raise _cannot(value, rest, element)
        else:
            taken = taken[:width]
        if not taken:
            raise _cannot(value, rest, element)
        fields[name] = int(taken)
        rest = rest[len(taken) :]
        limits = {"month": (1, 12), "hour": (0, 23), "minute": (0, 59), "second": (0, 59)}
        low, high = limits.get(name, (0, 9999))
        if not low <= fields[name] <= high:
            raise _out_of_range(value, name)
        if separator:
            if not rest.startswith(separator):
                raise _cannot(value, rest, separator)
            rest = rest[1:]
    nanos = 0
    fraction = re.match(r"[.,]([0-9]+)", rest)
    if fraction:
        nanos = int(fraction.group(1)[:9].ljust(9, "0"))
        rest = rest[fraction.end() :]
    if rest.startswith("Z"):
        zone, rest = UTC, rest[1:]
    else:
        offset = re.match(r"([+-])([0-9]{2}):([0-9]{2})", rest)
        if not offset:
            raise _cannot(value, rest, "Z07:00")
        minutes = int(offset.group(2)) * 60 + int(offset.group(3))
        zone = timezone(timedelta(minutes=minutes if offset.group(1) == "+" else -minutes))
        rest = rest[offset.end() :]
    if rest:
        raise QueryError(f"parsing time {_quote(value)}: extra text: {_quote(rest)}")
    year, month, day = fields["year"], fields["month"], fields["day"]
    if not 1 <= day <= calendar.monthrange(year or 2000, month)[1]:  # year 0 is a leap year, as 2000
        raise _out_of_range(value, "day")
    if year == 0:
        return datetime(1, 1, 1, tzinfo=UTC)  # before anything a log holds, as Go's year 0 would be
    moment = datetime(year, month, day, fields["hour"], fields["minute"], fields["second"], tzinfo=zone)
    return moment.astimezone(UTC) + timedelta(microseconds=nanos // 1000)

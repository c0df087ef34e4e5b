"""Query parameters decoded as the upstream API server decodes them into options structs, with its messages.

- a boolean is false only when absent, "0" or "false" (any case); anything else, "" included, is true;
- an integer is Go's ``strconv.ParseInt(s, 10, 64)``;
- a duration is Go's ``time.ParseDuration(s)``;
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


_DURATION_UNITS: Final = {
    "ns": 1,
    "us": 10**3,
    "\u00b5s": 10**3,  # micro sign
    "\u03bcs": 10**3,  # Greek mu
    "ms": 10**6,
    "s": 10**9,
    "m": 60 * 10**9,
    "h": 3600 * 10**9,
}


def _time_quote(text: str) -> str:
    """The time package's own quoting (durations, locations): bytes outside printable ASCII as \\xNN."""
    out: list[str] = []
    for char in text:
        if char < " " or char >= "\x80":
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        else:
            out.append("\\" + char if char in ('"', "\\") else char)
    return '"' + "".join(out) + '"'


def _leading_digits(text: str) -> int:
    end = 0
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    return end


def go_duration(text: str) -> int | str:
    """Go's time.ParseDuration, in nanoseconds, or its error text (a CronJob's ``@every``, a request's ``timeout``)."""
    invalid_text = f"time: invalid duration {_time_quote(text)}"
    rest = text[1:] if text[:1] in ("+", "-") else text
    if rest == "0":
        return 0
    if not rest:
        return invalid_text
    total = 0
    while rest:
        if not (rest[0] == "." or "0" <= rest[0] <= "9"):
            return invalid_text
        whole_end = _leading_digits(rest)
        significant = rest[:whole_end].lstrip("0")
        if len(significant) > 19 or int(significant or "0") > 2**63:  # Go's uint64 overflows
            return invalid_text
        whole = int(significant or "0")
        rest = rest[whole_end:]
        fraction, scale, has_fraction = 0, 1.0, False
        if rest[:1] == ".":
            fraction_end = _leading_digits(rest[1:])
            has_fraction = fraction_end > 0
            for char in rest[1 : 1 + fraction_end]:
                longer = fraction * 10 + ord(char) - ord("0")
                if fraction > (2**63 - 1) // 10 or longer > 2**63:
                    break  # Go ignores the digits from the first that would overflow
                fraction, scale = longer, scale * 10
            rest = rest[1 + fraction_end :]
        if whole_end == 0 and not has_fraction:
            return invalid_text
        unit_end = 0
        while unit_end < len(rest) and rest[unit_end] != "." and not "0" <= rest[unit_end] <= "9":
            unit_end += 1
        if unit_end == 0:
            return f"time: missing unit in duration {_time_quote(text)}"
        unit_name, rest = rest[:unit_end], rest[unit_end:]
        unit = _DURATION_UNITS.get(unit_name)
        if unit is None:
            return f"time: unknown unit {_time_quote(unit_name)} in duration {_time_quote(text)}"
        if whole > 2**63 // unit:
            return invalid_text
        value = whole * unit + (int(fraction * (unit / scale)) if fraction else 0)
        total += value
        if value > 2**63 or total > 2**63:
            return invalid_text
    if text[:1] == "-":
        return -total
    return invalid_text if total > 2**63 - 1 else total

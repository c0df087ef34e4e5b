"""The interval codec of ``status.completedIndexes``, ``status.failedIndexes`` and ``successPolicy`` indexes.

Entry points:

- ``format_indexes(indexes) -> str``: ``{1, 3, 4, 5, 7}`` -> ``"1,3-5,7"``; a run of two is written ``"3,4"``.
- ``parse_indexes(text, completions) -> list[int]``: the Job controller's tolerant reading: malformed intervals are
  skipped, reading stops at an interval that starts at or beyond ``completions``, and ends are clipped to it.
- ``validate_indexes(text, completions) -> str | None``: the API server's strict reading; the error message
  (upstream's words) or None.

The controller and the status validation must agree on this format to the character, since a status written by one
is checked by the other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

_INTEGER: Final = re.compile(r"[+-]?[0-9]+")


def _atoi(text: str) -> int | None:
    """Go's strconv.Atoi: an optional sign and decimal digits, nothing else."""
    return int(text) if _INTEGER.fullmatch(text) else None


def intervals(indexes: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted, merged inclusive intervals of a set of indexes."""
    result: list[tuple[int, int]] = []
    for index in sorted(set(indexes)):
        if result and result[-1][1] == index - 1:
            result[-1] = (result[-1][0], index)
        else:
            result.append((index, index))
    return result


def format_intervals(spans: Iterable[tuple[int, int]]) -> str:
    parts: list[str] = []
    for first, last in spans:
        if first == last:
            parts.append(str(first))
        elif last == first + 1:
            parts.append(f"{first},{last}")
        else:
            parts.append(f"{first}-{last}")
    return ",".join(parts)


def format_indexes(indexes: Iterable[int]) -> str:
    return format_intervals(intervals(indexes))


def parse_intervals(text: str, completions: int) -> list[tuple[int, int]]:
    """Tolerant parse into merged intervals, as the Job controller reads its own earlier status."""
    if not isinstance(text, str) or not text:
        return []
    result: list[tuple[int, int]] = []
    for fragment in text.split(","):
        limits = fragment.split("-")
        first = _atoi(limits[0])
        if first is None:
            continue
        if first >= completions:
            break
        if len(limits) > 1:
            last = _atoi(limits[1])
            if last is None:
                continue
            last = min(last, completions - 1)
        else:
            last = first
        if result and result[-1][1] == first - 1:
            result[-1] = (result[-1][0], last)
        else:
            result.append((first, last))
    return result


def parse_indexes(text: str, completions: int) -> list[int]:
    return [i for first, last in parse_intervals(text, completions) for i in range(first, last + 1)]


def count_indexes(text: str, completions: int) -> int:
    """How many indexes a tolerant parse yields, without materialising them."""
    return sum(last - first + 1 for first, last in parse_intervals(text, completions))


def _strict_interval(fragment: str, completions: int) -> tuple[int, int] | str:
    limits = fragment.split("-")
    if len(limits) > 2:
        return (
            f"the fragment {_go_quote(fragment)} violates the requirement that an index interval can have "
            "at most two parts separated by '-'"
        )
    first = _atoi(limits[0])
    if first is None:
        return f"cannot convert string to integer for index: {_go_quote(limits[0])}"
    if first >= completions:
        return f"too large index: {_go_quote(limits[0])}"
    if len(limits) == 1:
        return (first, first)
    last = _atoi(limits[1])
    if last is None:
        return f"cannot convert string to integer for index: {_go_quote(limits[1])}"
    if last >= completions:
        return f"too large index: {_go_quote(limits[1])}"
    if first >= last:
        return f"non-increasing order, previous: {first}, current: {last}"
    return (first, last)


def strict_intervals(text: str, completions: int) -> list[tuple[int, int]] | str:
    """Intervals exactly as written, or upstream's message for the first problem."""
    if not text:
        return []
    result: list[tuple[int, int]] = []
    for fragment in text.split(","):
        parsed = _strict_interval(fragment, completions)
        if isinstance(parsed, str):
            return parsed
        if result and result[-1][1] >= parsed[0]:
            return f"non-increasing order, previous: {result[-1][1]}, current: {parsed[0]}"
        result.append(parsed)
    return result


def validate_indexes(text: str, completions: int) -> str | None:
    parsed = strict_intervals(text, completions)
    return parsed if isinstance(parsed, str) else None


def first_overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int | None:
    """The lowest index two interval lists share, or None."""
    i = j = 0
    while i < len(a) and j < len(b):
        low = max(a[i][0], b[j][0])
        high = min(a[i][1], b[j][1])
        if low <= high:
            return low
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return None


def _go_quote(text: str) -> str:
    """Go's %q for the plain ASCII text that appears in index strings."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'

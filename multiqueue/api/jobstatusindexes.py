"""The index lists in a batch/v1 Job's status (completedIndexes, failedIndexes) on a status write: well formed,
below completions, disjoint, and set only on Jobs whose spec gives them a meaning.
"""

from __future__ import annotations

from multiqueue.api import indexes, jobs
from multiqueue.api.errors import FieldError, invalid
from multiqueue.api.jobstatuswrite import StatusWrite
from multiqueue.api.meta import as_int


def _first_overlap(completed: str, failed: str, total: int) -> int | None:
    """Where the two index lists first share an index, found as upstream finds it: one pass over both lists
    in step, skipping fragments that do not parse (the format rules report those) and advancing the side whose
    interval starts first. Lists out of order can hide an overlap from this pass, and then upstream reports
    none either."""
    if not completed or not failed:
        return None
    a: list[tuple[int, int] | None] = [_interval(f, total) for f in completed.split(",")]
    b: list[tuple[int, int] | None] = [_interval(f, total) for f in failed.split(",")]
    i = j = 0
    while i < len(a) and j < len(b):
        left, right = a[i], b[j]
        if left is None:
            i += 1
        elif right is None:
            j += 1
        elif left[0] <= right[1] and right[0] <= left[1]:
            return max(left[0], right[0])
        elif left[0] <= right[0]:
            i += 1
        else:
            j += 1
    return None


def _interval(fragment: str, total: int) -> tuple[int, int] | None:
    parsed = indexes.strict_intervals(fragment, total)
    return parsed[0] if isinstance(parsed, list) and parsed else None


def validate_status_indexes(write: StatusWrite) -> list[FieldError]:
    """completedIndexes and failedIndexes: well formed, below completions, disjoint, and only where they apply."""
    spec, status = write.spec, write.status
    total = as_int(spec.get("completions"))
    per_index = spec.get("backoffLimitPerIndex")
    completed = "" if status.get("completedIndexes") is None else str(status["completedIndexes"])
    failed = None if status.get("failedIndexes") is None else str(status["failedIndexes"])
    errs: list[FieldError] = []
    if write.changed("completedIndexes"):
        problem = None if total is None else indexes.validate_indexes(completed, total)
        if problem is not None:
            detail = f"error parsing completedIndexes: {problem}"
            errs.append(invalid("status.completedIndexes", completed, detail))
        if completed and not jobs.is_indexed(write.new):
            detail = "cannot set non-empty completedIndexes when non-indexed completion mode"
            errs.append(invalid("status.completedIndexes", completed, detail))
    if write.changed("failedIndexes") and failed is not None:
        problem = None if total is None or per_index is None else indexes.validate_indexes(failed, total)
        if problem is not None:
            errs.append(invalid("status.failedIndexes", failed, f"error parsing failedIndexes: {problem}"))
        if per_index is None:
            detail = "cannot set non-null failedIndexes when backoffLimitPerIndex is null"
            errs.append(invalid("status.failedIndexes", failed, detail))
    if (write.changed("completedIndexes") or write.changed("failedIndexes")) and total is not None and failed:
        overlap = _first_overlap(completed, failed, total)
        if overlap is not None:
            detail = f"failedIndexes and completedIndexes overlap at index: {overlap}"
            errs.append(invalid("status.failedIndexes", failed, detail))
    return errs

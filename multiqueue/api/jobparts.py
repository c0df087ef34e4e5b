"""An Indexed Job run as parts on several workers: which indexes each part runs, the status a part's mirror
starts from, and the Job's status as the merge of what its parts did.

A part's mirror is the whole Job (the same completions, so every index keeps its number, hostname and env) whose
status starts with each index it does not run marked completed: the worker's Job controller then runs only the
part's own. What a part did is its mirror's status within its own indexes; the indexes marked for it never count.
The whole Job's conditions are decided here, on the merged indexes and counts, as upstream's controller decides
them for one Job. A part's own verdict on its slice is not the Job's (its indexes done are not every index done),
except a FailJob rule of the pod failure policy, which fails the whole Job wherever it matched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime

from multiqueue.api import indexes, jobs, jobverdicts
from multiqueue.api.jobverdicts import Verdict
from multiqueue.api.meta import (
    as_dict,
    as_int,
    as_list,
    condition_is_true,
    format_time,
    parse_time,
    set_condition,
)
from multiqueue.api.types import Obj


def divide(pending: Sequence[int], shares: Sequence[int]) -> list[list[int]]:
    """``pending`` (ascending indexes) cut into consecutive runs, one per share, each as long as its share of the
    whole (remainders to the largest fractions first). A share larger than what is left gets no more than that."""
    total = sum(shares)
    if total <= 0 or not pending:
        return [[] for _ in shares]
    exact = [len(pending) * s / total for s in shares]
    sizes = [int(x) for x in exact]
    by_fraction = sorted(range(len(shares)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_fraction[: len(pending) - sum(sizes)]:
        sizes[i] += 1
    runs: list[list[int]] = []
    start = 0
    for size in sizes:
        runs.append(list(pending[start : start + size]))
        start += size
    return runs


def seeded_status(completions: int, own: Iterable[int]) -> Obj:
    """The status a part's mirror starts from: every index it does not run completed, and counted as succeeded
    (an Indexed Job's succeeded is its completed indexes), so its Job controller starts only the part's own."""
    mine = set(own)
    others = [i for i in range(completions) if i not in mine]
    return {"completedIndexes": indexes.format_indexes(others), "succeeded": len(others)} if others else {}


@dataclasses.dataclass(frozen=True)
class PartStatus:
    """One part as the merge reads it: the indexes it runs, and its mirror's status (empty until it has one)."""

    own: frozenset[int]
    status: Obj


@dataclasses.dataclass(frozen=True)
class Merged:
    """The Job's status merged from its parts, and whether its fate is decided (the parts still running stop)."""

    status: Obj
    decided: bool


def _within(text: object, own: frozenset[int], total: int) -> set[int]:
    return set(indexes.parse_indexes(str(text or ""), total)) & own


def _fail_job(parts: Sequence[PartStatus]) -> Verdict | None:
    """The message of a FailJob rule that matched on some part: it fails the whole Job."""
    for part in parts:
        for cond in as_list(part.status.get("conditions")):
            entry = as_dict(cond)
            if (
                entry.get("type") in (jobs.FAILURE_TARGET, jobs.FAILED)
                and entry.get("status") == "True"
                and entry.get("reason") == jobs.POD_FAILURE_POLICY
            ):
                return Verdict(jobs.POD_FAILURE_POLICY, str(entry.get("message", "")))
    return None


def _verdict(merged: Obj, parts: Sequence[PartStatus], now: datetime) -> tuple[str, Verdict] | None:
    """The interim condition the whole Job (``merged``: the user's Job with the merged status) gets now, if any:
    failure is looked for before success."""
    total = jobs.completions(merged) or 0
    status = jobs.status_of(merged)
    completed = set(indexes.parse_indexes(str(status.get("completedIndexes") or ""), total))
    failure = _fail_job(parts)
    if failure is None and jobs.spec_of(merged).get("backoffLimitPerIndex") is not None:
        failed = set(indexes.parse_indexes(str(status.get("failedIndexes") or ""), total))
        failure = jobverdicts.failed_indexes_verdict(merged, completed, failed)
    elif failure is None:
        failure = jobverdicts.failures_verdict(merged, as_int(status.get("failed")) or 0)
    if failure is None:
        failure = jobverdicts.deadline_verdict(merged, now)
    if failure is not None:
        return jobs.FAILURE_TARGET, failure
    success = jobverdicts.indexed_success_verdict(merged, completed)
    return (jobs.SUCCESS_CRITERIA_MET, success) if success is not None else None


def _earliest(times: Iterable[object]) -> object:
    stamps = [(parse_time(t), t) for t in times]
    known = [(moment, text) for moment, text in stamps if moment is not None]
    return min(known, key=lambda pair: pair[0])[1] if known else None


def _merged_indexes(user: Obj, parts: Sequence[PartStatus]) -> tuple[set[int], set[int] | None]:
    """The completed and failed indexes (None without backoffLimitPerIndex): the user's own, and what each part
    did within its own indexes."""
    old = jobs.status_of(user)
    total = jobs.completions(user) or 0
    completed = set(indexes.parse_indexes(str(old.get("completedIndexes") or ""), total))
    for part in parts:
        completed |= _within(part.status.get("completedIndexes"), part.own, total)
    if jobs.spec_of(user).get("backoffLimitPerIndex") is None:
        return completed, None
    failed = set(indexes.parse_indexes(str(old.get("failedIndexes") or ""), total))
    for part in parts:
        failed |= _within(part.status.get("failedIndexes"), part.own, total)
    return completed, failed - completed


def _counted(user: Obj, parts: Sequence[PartStatus], carried_failures: int) -> Obj:
    """The counters and indexes of the merge, without conditions."""
    old = jobs.status_of(user)
    completed, failed = _merged_indexes(user, parts)
    failures = carried_failures + sum(as_int(p.status.get("failed")) or 0 for p in parts)
    status: Obj = {k: v for k, v in old.items() if k != "uncountedTerminatedPods"}
    status["failed"] = max(as_int(old.get("failed")) or 0, failures)
    status["succeeded"] = max(as_int(old.get("succeeded")) or 0, len(completed))
    status["completedIndexes"] = indexes.format_indexes(completed)
    if failed is not None:
        status["failedIndexes"] = indexes.format_indexes(failed)
    for gauge in ("active", "ready", "terminating"):
        counts = [as_int(p.status.get(gauge)) for p in parts]
        if gauge == "active" or any(c is not None for c in counts):
            status[gauge] = sum(c or 0 for c in counts)
    started = old.get("startTime") or _earliest(p.status.get("startTime") for p in parts)
    if started is not None:
        status["startTime"] = started
    return status


def merged_status(user: Obj, parts: Sequence[PartStatus], carried_failures: int, now: datetime) -> Merged:
    """The user's status from its parts: indexes and failures added up (never below what it already shows, and
    ``carried_failures`` for parts no longer running), pods summed, the earliest start; then the conditions
    upstream's controller would write for the whole Job, the final one once no part runs a pod."""
    status = _counted(user, parts, carried_failures)
    conditions = [dict(as_dict(c)) for c in as_list(status.get("conditions"))]
    status["conditions"] = conditions
    _suspension(user, parts, conditions, now)
    interim = jobverdicts.interim_condition(conditions)
    if interim is None:
        found = _verdict({**user, "status": status}, parts, now)
        if found is not None:
            set_condition(conditions, found[0], "True", found[1].reason, found[1].message, now)
            interim = jobverdicts.interim_condition(conditions)
    if interim is not None and not status["active"] and not status.get("terminating"):
        _end(status, conditions, interim, now)
    if not conditions:
        del status["conditions"]
    return Merged(status, interim is not None)


def _suspension(user: Obj, parts: Sequence[PartStatus], conditions: list[Obj], now: datetime) -> None:
    """Suspended once every part is (their Job controllers stopped their pods), resumed with the Job."""
    if jobs.is_suspended(user):
        if parts and all(condition_is_true(p.status.get("conditions"), jobs.SUSPENDED) for p in parts):
            set_condition(conditions, jobs.SUSPENDED, "True", jobs.JOB_SUSPENDED, "Job suspended", now)
    elif condition_is_true(conditions, jobs.SUSPENDED):
        set_condition(conditions, jobs.SUSPENDED, "False", jobs.JOB_RESUMED, "Job resumed", now)


def _end(status: Obj, conditions: list[Obj], interim: Obj, now: datetime) -> None:
    """The final condition after ``interim``, with its reason and message; a success stamps completionTime."""
    reason, message = str(interim.get("reason", "")), str(interim.get("message", ""))
    succeeded = interim.get("type") == jobs.SUCCESS_CRITERIA_MET
    final = jobs.COMPLETE if succeeded else jobs.FAILED
    if set_condition(conditions, final, "True", reason, message, now) and succeeded:
        status["completionTime"] = format_time(now)

"""Job status-update validation (reference §3, KEP-4368): each rule refuses its bad write and accepts a good one.

Rules that run only when their trigger fields change also get a "tolerated" case: an old status that already
breaks the rule, updated in an unrelated field, is accepted.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from multiqueue.api.jobstatus import validate_job_status_update
from tests.unit.jobfixtures import T0, T1, T2, cond, job, with_status

NON_INDEXED = job(completions=3, parallelism=2)
INDEXED = job(completionMode="Indexed", completions=4, parallelism=2)
ELASTIC = job(completionMode="Indexed", completions=2, parallelism=2)
PER_INDEX = job(completionMode="Indexed", completions=4, parallelism=2, backoffLimitPerIndex=1)
SUSPENDED = job(suspend=True)
SUSPENDED_EMPTY = job(suspend=True, completions=0, parallelism=0)
WITH_SUCCESS_POLICY = job(
    completionMode="Indexed", completions=4, parallelism=2, successPolicy={"rules": [{"succeededCount": 1}]}
)
COMPLETE = [cond("SuccessCriteriaMet"), cond("Complete")]
FAILED = [cond("FailureTarget"), cond("Failed")]
DONE = {"startTime": T0, "completionTime": T1, "conditions": COMPLETE}
FAILED_DONE = {"startTime": T0, "conditions": FAILED}

Case = tuple[dict[str, Any], dict[str, Any], str | None, str | None]


def case(
    base: dict[str, Any], old: dict[str, Any], new: dict[str, Any], field: str | None, message: str | None
) -> Case:
    return (with_status(base, **old), with_status(base, **new), field, message)


def ok(base: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> Case:
    return case(base, old, new, None, None)


CASES: dict[str, Case] = {
    # --- always ---------------------------------------------------------------------------------------------
    **{
        f"{field}-negative": case(
            NON_INDEXED, {}, {field: -1}, f"status.{field}", "must be greater than or equal to 0"
        )
        for field in ("active", "succeeded", "failed", "ready", "terminating")
    },
    "active-not-a-number": case(NON_INDEXED, {}, {"active": "one"}, "status.active", "must be an integer"),
    "counters-valid": ok(
        NON_INDEXED, {}, {"active": 2, "ready": 1, "terminating": 1, "succeeded": 1, "failed": 1}
    ),
    "uncounted-empty-uid": case(
        NON_INDEXED,
        {},
        {"uncountedTerminatedPods": {"succeeded": [""]}},
        "status.uncountedTerminatedPods.succeeded[0]",
        'Invalid value: "": must not be empty',
    ),
    "uncounted-uid-in-both-lists": case(
        NON_INDEXED,
        {},
        {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["a"]}},
        "status.uncountedTerminatedPods.failed[0]",
        'Duplicate value: "a"',
    ),
    "uncounted-uid-twice": case(
        NON_INDEXED,
        {},
        {"uncountedTerminatedPods": {"failed": ["a", "a"]}},
        "status.uncountedTerminatedPods.failed[1]",
        "Duplicate value",
    ),
    "uncounted-distinct-uids": ok(
        NON_INDEXED, {}, {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["b"]}}
    ),
    "success-criteria-with-failed": case(
        INDEXED,
        {"startTime": T0},
        {"startTime": T0, "conditions": [cond("SuccessCriteriaMet"), *FAILED]},
        "status.conditions",
        "cannot set SuccessCriteriaMet=True and Failed=true conditions",
    ),
    "success-criteria-with-failure-target": case(
        INDEXED,
        {},
        {"conditions": [cond("SuccessCriteriaMet"), cond("FailureTarget")]},
        "status.conditions",
        "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
    ),
    "success-criteria-on-non-indexed": ok(NON_INDEXED, {}, {"conditions": [cond("SuccessCriteriaMet")]}),
    "success-policy-complete-without-criteria": case(
        WITH_SUCCESS_POLICY,
        {"startTime": T0},
        {"startTime": T0, "completionTime": T1, "conditions": [cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
    ),
    "success-policy-complete-with-criteria": ok(WITH_SUCCESS_POLICY, {"startTime": T0}, DONE),
    "success-criteria-removed": case(
        INDEXED,
        {"conditions": [cond("SuccessCriteriaMet")]},
        {"conditions": [cond("SuccessCriteriaMet", "False")]},
        "status.conditions",
        "cannot disable the SuccessCriteriaMet=True condition",
    ),
    "success-criteria-kept": ok(
        INDEXED,
        {"conditions": [cond("SuccessCriteriaMet")]},
        {"conditions": [cond("SuccessCriteriaMet")], "active": 0},
    ),
    "success-criteria-added-after-complete": case(
        INDEXED,
        {"startTime": T0, "completionTime": T1, "conditions": [cond("Complete")]},
        DONE,
        "status.conditions",
        "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
    ),
    # --- always, on transitions -----------------------------------------------------------------------------
    "failed-disabled": case(
        NON_INDEXED,
        FAILED_DONE,
        {"startTime": T0, "conditions": [cond("FailureTarget"), cond("Failed", "False")]},
        "status.conditions",
        "cannot disable the terminal Failed=True condition",
    ),
    "complete-disabled": case(
        NON_INDEXED,
        DONE,
        {"startTime": T0, "conditions": [cond("SuccessCriteriaMet")]},
        "status.conditions",
        "cannot disable the terminal Complete=True condition",
    ),
    "failure-target-disabled": case(
        NON_INDEXED,
        {"conditions": [cond("FailureTarget")]},
        {"conditions": []},
        "status.conditions",
        "cannot disable the terminal FailureTarget=True condition",
    ),
    "terminal-conditions-kept": ok(NON_INDEXED, FAILED_DONE, {**FAILED_DONE, "failed": 1}),
    "failed-decreased": case(
        NON_INDEXED,
        {"failed": 2},
        {"failed": 1},
        "status.failed",
        "Invalid value: 1: cannot decrease the failed counter",
    ),
    "failed-increased": ok(NON_INDEXED, {"failed": 1}, {"failed": 2}),
    "succeeded-decreased": case(
        NON_INDEXED,
        {"succeeded": 2},
        {"succeeded": 1},
        "status.succeeded",
        "cannot decrease the succeeded counter",
    ),
    "succeeded-decreased-indexed": case(
        INDEXED,
        {"succeeded": 2, "completedIndexes": "0,1"},
        {"succeeded": 1, "completedIndexes": "0"},
        "status.succeeded",
        "cannot decrease the succeeded counter",
    ),
    "succeeded-decreased-elastic-indexed": ok(
        ELASTIC, {"succeeded": 2, "completedIndexes": "0,1"}, {"succeeded": 1, "completedIndexes": "0"}
    ),
    "completion-time-mutated": case(
        NON_INDEXED,
        DONE,
        {**DONE, "completionTime": T2},
        "status.completionTime",
        "completionTime cannot be mutated",
    ),
    "completion-time-same-instant": ok(
        NON_INDEXED, DONE, {**DONE, "completionTime": "2026-01-01T00:05:00+00:00"}
    ),
    # --- only when completedIndexes / failedIndexes change --------------------------------------------------
    "completed-indexes-malformed": case(
        INDEXED,
        {},
        {"completedIndexes": "1-x", "succeeded": 1},
        "status.completedIndexes",
        'error parsing completedIndexes: cannot convert string to integer for index: "x"',
    ),
    "completed-indexes-too-large": case(
        INDEXED, {}, {"completedIndexes": "2-4"}, "status.completedIndexes", 'too large index: "4"'
    ),
    "completed-indexes-out-of-order": case(
        INDEXED,
        {},
        {"completedIndexes": "2,1"},
        "status.completedIndexes",
        "non-increasing order, previous: 2, current: 1",
    ),
    "completed-indexes-valid": ok(INDEXED, {}, {"completedIndexes": "0,2-3", "succeeded": 3}),
    "completed-indexes-bad-tolerated": ok(
        INDEXED, {"completedIndexes": "9"}, {"completedIndexes": "9", "active": 1}
    ),
    "completed-indexes-on-non-indexed": case(
        NON_INDEXED,
        {},
        {"completedIndexes": "0"},
        "status.completedIndexes",
        "cannot set non-empty completedIndexes when non-indexed completion mode",
    ),
    "completed-indexes-empty-on-non-indexed": ok(NON_INDEXED, {}, {"completedIndexes": ""}),
    "completed-indexes-on-non-indexed-tolerated": ok(
        NON_INDEXED, {"completedIndexes": "0"}, {"completedIndexes": "0", "active": 1}
    ),
    "failed-indexes-malformed": case(
        PER_INDEX,
        {},
        {"failedIndexes": "2,1"},
        "status.failedIndexes",
        "error parsing failedIndexes: non-increasing order, previous: 2, current: 1",
    ),
    "failed-indexes-valid": ok(PER_INDEX, {}, {"failedIndexes": "1,3", "failed": 2}),
    "failed-indexes-empty": ok(PER_INDEX, {}, {"failedIndexes": ""}),
    "failed-indexes-bad-tolerated": ok(
        PER_INDEX, {"failedIndexes": "x"}, {"failedIndexes": "x", "failed": 1}
    ),
    "failed-indexes-without-per-index": case(
        INDEXED,
        {},
        {"failedIndexes": ""},
        "status.failedIndexes",
        "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
    ),
    "failed-indexes-without-per-index-tolerated": ok(
        INDEXED, {"failedIndexes": "1"}, {"failedIndexes": "1", "active": 1}
    ),
    "failed-indexes-overlap": case(
        PER_INDEX,
        {"completedIndexes": "2,3", "succeeded": 2},
        {"completedIndexes": "2,3", "succeeded": 2, "failedIndexes": "1-2"},
        "status.failedIndexes",
        "failedIndexes and completedIndexes overlap at index: 2",
    ),
    "completed-indexes-overlap": case(
        PER_INDEX,
        {"failedIndexes": "1"},
        {"failedIndexes": "1", "completedIndexes": "0-2", "succeeded": 3},
        "status.failedIndexes",
        "failedIndexes and completedIndexes overlap at index: 1",
    ),
    "overlap-found-past-a-malformed-interval": case(
        PER_INDEX,
        {},
        {"completedIndexes": "x,3", "failedIndexes": "3"},
        "status.failedIndexes",
        "overlap at index: 3",
    ),
    "indexes-disjoint": ok(
        PER_INDEX, {}, {"completedIndexes": "0,2", "succeeded": 2, "failedIndexes": "1,3"}
    ),
    "indexes-overlap-tolerated": ok(
        PER_INDEX,
        {"completedIndexes": "1", "failedIndexes": "1"},
        {"completedIndexes": "1", "failedIndexes": "1", "active": 1},
    ),
    # --- only when the finished state or the pod counters change --------------------------------------------
    "active-when-finishing": case(
        NON_INDEXED,
        {"startTime": T0, "active": 1, "conditions": [cond("FailureTarget")]},
        {"startTime": T0, "active": 1, "conditions": FAILED},
        "status.active",
        "Invalid value: 1: active>0 is invalid for finished job",
    ),
    "active-raised-on-finished": case(
        NON_INDEXED,
        FAILED_DONE,
        {**FAILED_DONE, "active": 2},
        "status.active",
        "active>0 is invalid for finished job",
    ),
    "active-zero-when-finishing": ok(
        NON_INDEXED,
        {"startTime": T0, "active": 1, "conditions": [cond("FailureTarget")]},
        {**FAILED_DONE, "active": 0},
    ),
    "active-on-finished-tolerated": ok(
        NON_INDEXED, {**FAILED_DONE, "active": 1}, {**FAILED_DONE, "active": 1, "failed": 1}
    ),
    "terminating-when-finishing": case(
        NON_INDEXED,
        {"startTime": T0, "terminating": 1, "conditions": [cond("FailureTarget")]},
        {"startTime": T0, "terminating": 1, "conditions": FAILED},
        "status.terminating",
        "terminating>0 is invalid for finished job",
    ),
    "terminating-on-finished-tolerated": ok(
        NON_INDEXED, {**FAILED_DONE, "terminating": 1}, {**FAILED_DONE, "terminating": 1, "failed": 1}
    ),
    "terminating-while-running": ok(NON_INDEXED, {}, {"terminating": 3}),
    "ready-above-active": case(
        NON_INDEXED,
        {},
        {"active": 1, "ready": 2},
        "status.ready",
        "Invalid value: 2: cannot set more ready pods than active",
    ),
    "active-dropped-below-ready": case(
        NON_INDEXED,
        {"active": 2, "ready": 2},
        {"active": 1, "ready": 2},
        "status.ready",
        "cannot set more ready pods than active",
    ),
    "ready-equal-active": ok(NON_INDEXED, {}, {"active": 2, "ready": 2}),
    "ready-above-active-tolerated": ok(
        NON_INDEXED, {"active": 1, "ready": 2}, {"active": 1, "ready": 2, "failed": 1}
    ),
    "uncounted-when-finishing": case(
        NON_INDEXED,
        {
            "startTime": T0,
            "uncountedTerminatedPods": {"failed": ["p"]},
            "conditions": [cond("FailureTarget")],
        },
        {"startTime": T0, "uncountedTerminatedPods": {"failed": ["p"]}, "conditions": FAILED},
        "status.uncountedTerminatedPods",
        "uncountedTerminatedPods needs to be empty for finished job",
    ),
    "uncounted-emptied-when-finishing": ok(
        NON_INDEXED,
        {
            "startTime": T0,
            "uncountedTerminatedPods": {"failed": ["p"]},
            "conditions": [cond("FailureTarget")],
        },
        {**FAILED_DONE, "uncountedTerminatedPods": {}, "failed": 1},
    ),
    "uncounted-on-finished-tolerated": ok(
        NON_INDEXED,
        {**FAILED_DONE, "uncountedTerminatedPods": {"failed": ["p"]}},
        {**FAILED_DONE, "uncountedTerminatedPods": {"failed": ["p"]}, "failed": 1},
    ),
    # --- startTime and completionTime -----------------------------------------------------------------------
    "start-time-missing-when-finishing": case(
        NON_INDEXED,
        {"conditions": [cond("FailureTarget")]},
        {"conditions": FAILED},
        "status.startTime",
        "Required value: startTime is required for finished job",
    ),
    "start-time-removed-from-finished": case(
        NON_INDEXED,
        FAILED_DONE,
        {"conditions": FAILED},
        "status.startTime",
        "startTime is required for finished job",
    ),
    "start-time-missing-suspended-zero-completions": ok(
        SUSPENDED_EMPTY,
        {"conditions": [cond("SuccessCriteriaMet")]},
        {"conditions": COMPLETE, "completionTime": T1},
    ),
    "start-time-missing-tolerated": ok(
        NON_INDEXED, {"conditions": FAILED}, {"conditions": FAILED, "failed": 1}
    ),
    "start-time-set-first": ok(NON_INDEXED, {}, {"startTime": T0}),
    "start-time-changed-while-running": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T1},
        "status.startTime",
        "Required value: startTime cannot be removed for unsuspended job",
    ),
    "start-time-removed-while-running": case(
        NON_INDEXED,
        {"startTime": T0},
        {},
        "status.startTime",
        "startTime cannot be removed for unsuspended job",
    ),
    "start-time-cleared-while-suspended": ok(SUSPENDED, {"startTime": T0}, {}),
    "start-time-reset-on-resume": ok(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("Suspended")]},
        {"startTime": T1, "conditions": [cond("Suspended", "False")]},
    ),
    "completion-before-start": case(
        NON_INDEXED,
        {"startTime": T1, "conditions": [cond("SuccessCriteriaMet")]},
        {"startTime": T1, "completionTime": T0, "conditions": COMPLETE},
        "status.completionTime",
        "completionTime cannot be set before startTime",
    ),
    "start-moved-after-completion": case(
        SUSPENDED,
        DONE,
        {**DONE, "startTime": T2},
        "status.completionTime",
        "completionTime cannot be set before startTime",
    ),
    "completion-after-start": ok(
        NON_INDEXED, {"startTime": T0, "conditions": [cond("SuccessCriteriaMet")]}, DONE
    ),
    "completion-before-start-tolerated": ok(
        NON_INDEXED, {**DONE, "startTime": T2}, {**DONE, "startTime": T2, "succeeded": 3}
    ),
    "completion-time-without-complete": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T0, "completionTime": T1},
        "status.completionTime",
        "cannot set completionTime when there is no Complete=True condition",
    ),
    "completion-time-on-failed-job": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("FailureTarget")]},
        {**FAILED_DONE, "completionTime": T1},
        "status.completionTime",
        "cannot set completionTime when there is no Complete=True condition",
    ),
    "completion-time-without-complete-tolerated": ok(
        NON_INDEXED,
        {"startTime": T0, "completionTime": T1},
        {"startTime": T0, "completionTime": T1, "active": 1},
    ),
    "complete-without-completion-time": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("SuccessCriteriaMet")]},
        {"startTime": T0, "conditions": COMPLETE},
        "status.completionTime",
        "Required value: completionTime is required for Complete jobs",
    ),
    "completion-time-removed-from-complete": case(
        NON_INDEXED,
        DONE,
        {**DONE, "completionTime": None},
        "status.completionTime",
        "completionTime is required for Complete jobs",
    ),
    "complete-without-completion-time-tolerated": ok(
        NON_INDEXED, {**DONE, "completionTime": None}, {**DONE, "completionTime": None, "succeeded": 3}
    ),
    # --- only when the conditions involved change -----------------------------------------------------------
    "complete-and-failed": case(
        NON_INDEXED,
        FAILED_DONE,
        {**FAILED_DONE, "completionTime": T1, "conditions": [*FAILED, cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True and Failed=true conditions",
    ),
    "complete-and-failure-target": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("FailureTarget")]},
        {**DONE, "conditions": [cond("FailureTarget"), cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True and FailureTarget=true conditions",
    ),
    "complete-and-failed-tolerated": ok(
        NON_INDEXED,
        {**DONE, "conditions": [cond("Complete"), *FAILED]},
        {**DONE, "conditions": [cond("Complete"), *FAILED], "succeeded": 3},
    ),
    "failed-without-failure-target": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T0, "conditions": [cond("Failed")]},
        "status.conditions",
        "cannot set Failed=True condition without the FailureTarget=true condition",
    ),
    "failed-after-failure-target": ok(
        NON_INDEXED, {"startTime": T0, "conditions": [cond("FailureTarget")]}, FAILED_DONE
    ),
    "failed-without-failure-target-tolerated": ok(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("Failed")]},
        {"startTime": T0, "conditions": [cond("Failed")], "failed": 1},
    ),
    "complete-without-success-criteria": case(
        NON_INDEXED,
        {"startTime": T0},
        {**DONE, "conditions": [cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
    ),
    "complete-after-success-criteria": ok(
        NON_INDEXED, {"startTime": T0, "conditions": [cond("SuccessCriteriaMet")]}, {**DONE, "succeeded": 3}
    ),
    "complete-without-success-criteria-tolerated": ok(
        NON_INDEXED,
        {**DONE, "conditions": [cond("Complete")]},
        {**DONE, "conditions": [cond("Complete")], "succeeded": 3},
    ),
}


@pytest.mark.parametrize(("old", "new", "field", "message"), [
    pytest.param(*case, id=name) for name, case in CASES.items()
])  # fmt: skip
def test_status_update_rules(
    old: dict[str, Any], new: dict[str, Any], field: str | None, message: str | None
) -> None:
    errors = validate_job_status_update(new, old)
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        assert any(e.field == field and message in e.body() for e in errors if message), [
            str(e) for e in errors
        ]


def test_metadata_identity_is_immutable_on_status_writes() -> None:
    old = with_status(NON_INDEXED)
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "other"
    assert [str(e) for e in validate_job_status_update(new, old)] == [
        'metadata.name: Invalid value: "other": field is immutable'
    ]


def test_absent_counters_equal_zero() -> None:
    """Upstream's non-pointer counters read 0 when absent, so writing 0 is not a change that triggers rules."""
    old = with_status(NON_INDEXED, **FAILED_DONE)
    new = with_status(NON_INDEXED, **FAILED_DONE, active=0, succeeded=0, failed=0, completedIndexes="")
    assert validate_job_status_update(new, old) == []


GARBAGE: list[Any] = [
    None,
    [],
    "x",
    {"status": []},
    {"spec": "x", "status": {"active": "one", "ready": [], "conditions": "x"}},
    {
        "status": {
            "conditions": [None, 1, {"type": []}, {"type": "Complete", "status": "True"}],
            "completionTime": 5,
        }
    },
    {"status": {"uncountedTerminatedPods": {"succeeded": [None, [], {}], "failed": "x"}, "startTime": []}},
    {
        "spec": {"completions": "3", "completionMode": "Indexed"},
        "status": {"completedIndexes": 7, "failedIndexes": []},
    },
    {
        "spec": {"completions": 3, "backoffLimitPerIndex": 1, "completionMode": "Indexed"},
        "status": {"failedIndexes": {"a": 1}},
    },
]


@pytest.mark.parametrize("garbage", [pytest.param(g, id=f"garbage-{i}") for i, g in enumerate(GARBAGE)])
def test_malformed_input_never_raises(garbage: Any) -> None:
    validate_job_status_update(garbage, garbage)
    validate_job_status_update(garbage, with_status(INDEXED, **DONE))
    validate_job_status_update(with_status(INDEXED, **DONE), garbage)

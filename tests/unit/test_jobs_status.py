"""Every Job status-update rule of KEP-4368: each rejects its bad transition and accepts its good one."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.jobs import validate_job_status_update
from tests.unit.jobfixtures import T0, T1, T2, cond, job, with_status

NON_INDEXED = job()
INDEXED = job(completionMode="Indexed", completions=4, parallelism=2)
PER_INDEX = job(completionMode="Indexed", completions=4, parallelism=2, backoffLimitPerIndex=1)
SUSPENDED = job(suspend=True)
WITH_SUCCESS_POLICY = job(
    completionMode="Indexed", completions=4, parallelism=2, successPolicy={"rules": [{"succeededCount": 1}]}
)
COMPLETE = [cond("SuccessCriteriaMet"), cond("Complete")]
FAILED = [cond("FailureTarget"), cond("Failed")]

Case = tuple[dict[str, Any], dict[str, Any], str | None, str | None]


def case(
    base: dict[str, Any], old: dict[str, Any], new: dict[str, Any], field: str | None, message: str | None
) -> Any:
    return (with_status(base, **old), with_status(base, **new), field, message)


CASES: dict[str, Any] = {
    # Always-on rules.
    "negative-active": case(
        NON_INDEXED, {}, {"active": -1}, "status.active", "must be greater than or equal to 0"
    ),
    "positive-counters": case(NON_INDEXED, {}, {"active": 1, "ready": 1, "terminating": 0}, None, None),
    "negative-ready": case(
        NON_INDEXED, {}, {"ready": -1}, "status.ready", "must be greater than or equal to 0"
    ),
    "negative-terminating": case(
        NON_INDEXED, {}, {"terminating": -2}, "status.terminating", "greater than or equal"
    ),
    "empty-uncounted-uid": case(
        NON_INDEXED,
        {},
        {"uncountedTerminatedPods": {"succeeded": [""]}},
        "status.uncountedTerminatedPods.succeeded[0]",
        "must not be empty",
    ),
    "duplicate-uncounted-uid": case(
        NON_INDEXED,
        {},
        {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["a"]}},
        "status.uncountedTerminatedPods.failed[0]",
        "Duplicate value",
    ),
    "distinct-uncounted-uids": case(
        NON_INDEXED, {}, {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["b"]}}, None, None
    ),
    "success-criteria-with-failed": case(
        INDEXED,
        {},
        {"conditions": [cond("SuccessCriteriaMet"), cond("FailureTarget"), cond("Failed")], "startTime": T0},
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
    "success-policy-complete-without-criteria": case(
        WITH_SUCCESS_POLICY,
        {"startTime": T0},
        {"startTime": T0, "completionTime": T1, "conditions": [cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
    ),
    "success-policy-complete-with-criteria": case(
        WITH_SUCCESS_POLICY,
        {"startTime": T0},
        {"startTime": T0, "completionTime": T1, "conditions": COMPLETE},
        None,
        None,
    ),
    "success-criteria-removed": case(
        INDEXED,
        {"conditions": [cond("SuccessCriteriaMet")]},
        {"conditions": []},
        "status.conditions",
        "cannot disable the SuccessCriteriaMet=True condition",
    ),
    "success-criteria-added-after-complete": case(
        INDEXED,
        {"startTime": T0, "completionTime": T1, "conditions": [cond("Complete")]},
        {"startTime": T0, "completionTime": T1, "conditions": COMPLETE},
        "status.conditions",
        "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
    ),
    # Rules that always run, on transitions.
    "terminal-failed-disabled": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": FAILED},
        {"startTime": T0, "conditions": [cond("FailureTarget")]},
        "status.conditions",
        "cannot disable the terminal Failed=True condition",
    ),
    "terminal-failure-target-disabled": case(
        NON_INDEXED,
        {"conditions": [cond("FailureTarget")]},
        {"conditions": [cond("FailureTarget", "False")]},
        "status.conditions",
        "cannot disable the terminal FailureTarget=True condition",
    ),
    "terminal-complete-disabled": case(
        NON_INDEXED,
        {"startTime": T0, "completionTime": T1, "conditions": COMPLETE},
        {"startTime": T0, "conditions": [cond("SuccessCriteriaMet")]},
        "status.conditions",
        "cannot disable the terminal Complete=True condition",
    ),
    "failed-decreased": case(
        NON_INDEXED, {"failed": 2}, {"failed": 1}, "status.failed", "cannot decrease the failed counter"
    ),
    "failed-increased": case(NON_INDEXED, {"failed": 1}, {"failed": 2}, None, None),
    "succeeded-decreased": case(
        NON_INDEXED,
        {"succeeded": 2},
        {"succeeded": 1},
        "status.succeeded",
        "cannot decrease the succeeded counter",
    ),
    "succeeded-decreased-elastic-indexed": case(
        job(completionMode="Indexed", completions=2, parallelism=2),
        {"succeeded": 2, "completedIndexes": "0,1"},
        {"succeeded": 1, "completedIndexes": "0"},
        None,
        None,
    ),
    "completion-time-mutated": case(
        NON_INDEXED,
        {"startTime": T0, "completionTime": T1, "conditions": COMPLETE},
        {"startTime": T0, "completionTime": T2, "conditions": COMPLETE},
        "status.completionTime",
        "completionTime cannot be mutated",
    ),
    # Rules that run only when their fields change.
    "completed-indexes-malformed": case(
        INDEXED,
        {},
        {"completedIndexes": "1-x", "succeeded": 1},
        "status.completedIndexes",
        'error parsing completedIndexes: cannot convert string to integer for index: "x"',
    ),
    "completed-indexes-too-large": case(
        INDEXED, {}, {"completedIndexes": "4"}, "status.completedIndexes", 'too large index: "4"'
    ),
    "completed-indexes-valid": case(INDEXED, {}, {"completedIndexes": "0,2-3", "succeeded": 3}, None, None),
    "completed-indexes-unchanged-bad-tolerated": case(
        INDEXED, {"completedIndexes": "9"}, {"completedIndexes": "9", "active": 1}, None, None
    ),
    "completed-indexes-non-indexed": case(
        NON_INDEXED,
        {},
        {"completedIndexes": "0"},
        "status.completedIndexes",
        "cannot set non-empty completedIndexes when non-indexed completion mode",
    ),
    "failed-indexes-malformed": case(
        PER_INDEX,
        {},
        {"failedIndexes": "2,1"},
        "status.failedIndexes",
        "error parsing failedIndexes: non-increasing order",
    ),
    "failed-indexes-valid": case(PER_INDEX, {}, {"failedIndexes": "1,3", "failed": 2}, None, None),
    "failed-indexes-without-per-index-limit": case(
        INDEXED,
        {},
        {"failedIndexes": "1"},
        "status.failedIndexes",
        "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
    ),
    "failed-indexes-overlap-completed": case(
        PER_INDEX,
        {},
        {"failedIndexes": "1-2", "completedIndexes": "2,3"},
        "status.failedIndexes",
        "failedIndexes and completedIndexes overlap at index: 2",
    ),
    "active-on-finished": case(
        NON_INDEXED,
        {"startTime": T0, "active": 1},
        {"startTime": T0, "active": 1, "conditions": FAILED},
        "status.active",
        "active>0 is invalid for finished job",
    ),
    "active-on-finished-untouched-tolerated": case(
        NON_INDEXED,
        {"startTime": T0, "active": 1, "conditions": FAILED},
        {"startTime": T0, "active": 1, "conditions": FAILED, "failed": 1},
        None,
        None,
    ),
    "terminating-on-finished": case(
        NON_INDEXED,
        {"startTime": T0, "terminating": 1},
        {"startTime": T0, "terminating": 1, "conditions": FAILED},
        "status.terminating",
        "terminating>0 is invalid for finished job",
    ),
    "ready-above-active": case(
        NON_INDEXED, {}, {"active": 1, "ready": 2}, "status.ready", "cannot set more ready pods than active"
    ),
    "start-time-missing-on-finish": case(
        NON_INDEXED, {}, {"conditions": FAILED}, "status.startTime", "startTime is required for finished job"
    ),
    "start-time-missing-suspended-zero-completions": case(
        job(suspend=True, completions=0, parallelism=0),
        {},
        {"conditions": COMPLETE, "completionTime": T1},
        None,
        None,
    ),
    "uncounted-on-finish": case(
        NON_INDEXED,
        {"startTime": T0, "uncountedTerminatedPods": {"failed": ["p"]}},
        {"startTime": T0, "uncountedTerminatedPods": {"failed": ["p"]}, "conditions": FAILED},
        "status.uncountedTerminatedPods",
        "uncountedTerminatedPods needs to be empty for finished job",
    ),
    "start-time-changed-while-running": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T1},
        "status.startTime",
        "startTime cannot be removed for unsuspended job",
    ),
    "start-time-reset-on-resume": case(
        SUSPENDED,
        {"startTime": T0, "conditions": [cond("Suspended")]},
        {"startTime": T1, "conditions": [cond("Suspended", "False")]},
        None,
        None,
    ),
    "start-time-cleared-while-suspended": case(SUSPENDED, {"startTime": T0}, {}, None, None),
    "completion-before-start": case(
        NON_INDEXED,
        {"startTime": T1},
        {"startTime": T1, "completionTime": T0, "conditions": COMPLETE},
        "status.completionTime",
        "completionTime cannot be set before startTime",
    ),
    "completion-time-without-complete": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T0, "completionTime": T1},
        "status.completionTime",
        "cannot set completionTime when there is no Complete=True condition",
    ),
    "complete-without-completion-time": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T0, "conditions": COMPLETE},
        "status.completionTime",
        "completionTime is required for Complete jobs",
    ),
    "complete-and-failed": case(
        NON_INDEXED,
        {"startTime": T0},
        {
            "startTime": T0,
            "completionTime": T1,
            "conditions": [*COMPLETE, cond("FailureTarget"), cond("Failed")],
        },
        "status.conditions",
        "cannot set Complete=True and Failed=true conditions",
    ),
    "complete-and-failure-target": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("FailureTarget")]},
        {"startTime": T0, "completionTime": T1, "conditions": [cond("FailureTarget"), *COMPLETE]},
        "status.conditions",
        "cannot set Complete=True and FailureTarget=true conditions",
    ),
    "failed-without-failure-target": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T0, "conditions": [cond("Failed")]},
        "status.conditions",
        "cannot set Failed=True condition without the FailureTarget=true condition",
    ),
    "failed-after-failure-target": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("FailureTarget")]},
        {"startTime": T0, "conditions": FAILED},
        None,
        None,
    ),
    "complete-without-success-criteria": case(
        NON_INDEXED,
        {"startTime": T0},
        {"startTime": T0, "completionTime": T1, "conditions": [cond("Complete")]},
        "status.conditions",
        "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
    ),
    "complete-after-success-criteria": case(
        NON_INDEXED,
        {"startTime": T0, "conditions": [cond("SuccessCriteriaMet")]},
        {"startTime": T0, "completionTime": T1, "conditions": COMPLETE, "succeeded": 1},
        None,
        None,
    ),
}


@pytest.mark.parametrize(("new", "old", "field", "message"), [
    pytest.param(new, old, field, message, id=name) for name, (old, new, field, message) in CASES.items()
])  # fmt: skip
def test_status_update_rules(
    new: dict[str, Any], old: dict[str, Any], field: str | None, message: str | None
) -> None:
    errors = validate_job_status_update(new, old)
    if field is None:
        assert errors == [], [str(e) for e in errors]
    else:
        matching = [e for e in errors if e.field == field and message is not None and message in e.message()]
        assert matching, f"expected {field}: {message}; got {[str(e) for e in errors]}"


@pytest.mark.parametrize(
    "garbage", [None, [], "x", {"status": []}, {"spec": "x", "status": {"active": "one"}}]
)
def test_malformed_input_never_raises(garbage: Any) -> None:
    validate_job_status_update(garbage, garbage)
    validate_job_status_update(garbage, with_status(NON_INDEXED))

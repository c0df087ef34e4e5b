"""The steps of Job status-update validation on their own: what a write moved (StatusWrite), and the rules on
the index lists (validate_status_indexes)."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.jobstatusindexes import validate_status_indexes
from multiqueue.api.jobstatuswrite import StatusWrite
from tests.unit.jobfixtures import T0, T1, cond, job, with_status

BASE = job(completions=3, parallelism=2)
INDEXED = job(completionMode="Indexed", completions=4, parallelism=2)
PER_INDEX = job(completionMode="Indexed", completions=4, parallelism=2, backoffLimitPerIndex=1)


def _write(base: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> StatusWrite:
    return StatusWrite(with_status(base, **new), with_status(base, **old))


@pytest.mark.parametrize(
    ("old", "new", "field", "changed"),
    [
        pytest.param({}, {"active": 0}, "active", False, id="absent-counter-is-zero"),
        pytest.param({"active": 1}, {"active": 2}, "active", True, id="counter-moved"),
        pytest.param({}, {"completedIndexes": ""}, "completedIndexes", False, id="absent-indexes-are-empty"),
        pytest.param({}, {"ready": 0}, "ready", True, id="ready-is-a-pointer"),
        pytest.param({}, {"failedIndexes": ""}, "failedIndexes", True, id="failed-indexes-is-a-pointer"),
    ],
)
def test_changed(old: dict[str, Any], new: dict[str, Any], field: str, changed: bool) -> None:
    assert _write(BASE, old, new).changed(field) is changed


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        pytest.param(T0, "2026-01-01T01:00:00+01:00", False, id="same-instant-other-spelling"),
        pytest.param(T0, T1, True, id="moved"),
        pytest.param(None, T0, True, id="set"),
        pytest.param(T0, None, True, id="removed"),
        pytest.param(None, None, False, id="never-set"),
    ],
)
def test_time_changed(old: str | None, new: str | None, changed: bool) -> None:
    old_status = {} if old is None else {"startTime": old}
    new_status = {} if new is None else {"startTime": new}
    assert _write(BASE, old_status, new_status).time_changed("startTime") is changed


@pytest.mark.parametrize(
    ("old", "new", "resuming", "finished", "finished_changed"),
    [
        pytest.param([cond("Suspended")], [cond("Suspended", "False")], True, False, False, id="resumed"),
        pytest.param([cond("Suspended")], [], False, False, False, id="condition-dropped"),
        pytest.param([], [cond("SuccessCriteriaMet"), cond("Complete")], False, True, True, id="completes"),
        pytest.param([cond("Failed")], [cond("Failed")], False, True, False, id="stays-failed"),
        pytest.param([], [cond("Complete", "False")], False, False, False, id="false-does-not-count"),
    ],
)
def test_conditions(
    old: list[Any], new: list[Any], resuming: bool, finished: bool, finished_changed: bool
) -> None:
    write = _write(BASE, {"conditions": old}, {"conditions": new})
    assert (write.resuming, write.finished, write.finished_changed) == (resuming, finished, finished_changed)


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        pytest.param(None, {}, True, id="absent-differs-from-empty-object"),
        pytest.param({}, {"succeeded": []}, False, id="absent-list-is-empty"),
        pytest.param({"failed": ["a"]}, {"failed": ["a"]}, False, id="same"),
        pytest.param({"failed": ["a"]}, {"failed": []}, True, id="drained"),
    ],
)
def test_uncounted_changed(old: dict[str, Any] | None, new: dict[str, Any] | None, changed: bool) -> None:
    old_status = {} if old is None else {"uncountedTerminatedPods": old}
    new_status = {} if new is None else {"uncountedTerminatedPods": new}
    assert _write(BASE, old_status, new_status).uncounted_changed is changed


@pytest.mark.parametrize(
    ("base", "old", "new", "problems"),
    [
        pytest.param(INDEXED, {}, {"completedIndexes": "0-2"}, [], id="indexed-well-formed"),
        pytest.param(
            INDEXED,
            {},
            {"completedIndexes": "4"},
            [("status.completedIndexes", "error parsing completedIndexes")],
            id="beyond-completions",
        ),
        pytest.param(
            BASE,
            {},
            {"completedIndexes": "0"},
            [("status.completedIndexes", "cannot set non-empty completedIndexes")],
            id="non-indexed",
        ),
        pytest.param(
            INDEXED,
            {},
            {"failedIndexes": "1"},
            [("status.failedIndexes", "cannot set non-null failedIndexes")],
            id="failed-without-per-index-limit",
        ),
        pytest.param(
            PER_INDEX,
            {},
            {"completedIndexes": "0-2", "failedIndexes": "2,3"},
            [("status.failedIndexes", "failedIndexes and completedIndexes overlap at index: 2")],
            id="overlap",
        ),
        pytest.param(PER_INDEX, {}, {"completedIndexes": "0,1", "failedIndexes": "2,3"}, [], id="disjoint"),
        pytest.param(
            INDEXED,
            {"completedIndexes": "9"},
            {"completedIndexes": "9", "active": 1},
            [],
            id="unchanged-tolerated",
        ),
    ],
)
def test_validate_status_indexes(
    base: dict[str, Any], old: dict[str, Any], new: dict[str, Any], problems: list[tuple[str, str]]
) -> None:
    found = validate_status_indexes(_write(base, old, new))
    assert len(found) == len(problems), found
    for error, (field, detail) in zip(found, problems, strict=True):
        assert error.field == field
        assert detail in error.detail

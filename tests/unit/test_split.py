"""Where the parts of a split Indexed Job go, as a table: split only when no worker runs the whole parallelism
now and two or more run some; ranges sized to what each worker can run; no index in two parts."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api import indexes
from multiqueue.dispatch.split import SPLIT_ANNOTATION, PartPlan, pending_indexes, plan_parts, wants_split


def sweep(
    completions: int = 40, parallelism: int = 8, status: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "sweep", "annotations": {SPLIT_ANNOTATION: "true"}},
        "spec": {
            "completions": completions,
            "parallelism": parallelism,
            "completionMode": "Indexed",
            **spec,
        },
        "status": status or {},
    }


PLAN_CASES = [
    (
        "the issue's Job: 40 indexes, parallelism 8, two workers of 4 pods each",
        sweep(),
        [("worker-1", 4), ("worker-2", 4)],
        4,
        frozenset(),
        [PartPlan("worker-1", "0-19", 4), PartPlan("worker-2", "20-39", 4)],
    ),
    (
        "one worker runs it all: placed whole",
        sweep(),
        [("worker-1", 8), ("worker-2", 4)],
        4,
        frozenset(),
        None,
    ),
    ("no worker runs any: it waits whole", sweep(), [("worker-1", 0), ("worker-2", 0)], 4, frozenset(), None),
    (
        "only one worker runs some: placed whole",
        sweep(),
        [("worker-1", 5), ("worker-2", 0)],
        4,
        frozenset(),
        None,
    ),
    (
        "ranges follow the room: 6 and 2",
        sweep(),
        [("worker-1", 6), ("worker-2", 2)],
        4,
        frozenset(),
        [PartPlan("worker-1", "0-29", 6), PartPlan("worker-2", "30-39", 2)],
    ),
    (
        "the limit on parts: two of three workers",
        sweep(),
        [("worker-1", 3), ("worker-2", 3), ("worker-3", 3)],
        2,
        frozenset(),
        [PartPlan("worker-1", "0-19", 3), PartPlan("worker-2", "20-39", 3)],
    ),
    (
        "no more room taken than the parallelism asks",
        sweep(),
        [("worker-1", 5), ("worker-2", 5), ("worker-3", 5)],
        4,
        frozenset(),
        [PartPlan("worker-1", "0-24", 5), PartPlan("worker-2", "25-39", 3)],
    ),
    (
        "completed and failed indexes run nowhere again",
        sweep(10, 4, {"completedIndexes": "0-3", "failedIndexes": "4"}, backoffLimitPerIndex=0),
        [("worker-1", 2), ("worker-2", 2)],
        4,
        frozenset(),
        [PartPlan("worker-1", "5-7", 2), PartPlan("worker-2", "8,9", 2)],
    ),
    (
        "a lost part's indexes, around the part that goes on",
        sweep(status={"completedIndexes": "0-9"}),
        [("worker-2", 2), ("worker-3", 2)],
        4,
        frozenset(range(20, 40)),
        [PartPlan("worker-2", "10-14", 2), PartPlan("worker-3", "15-19", 2)],
    ),
    (
        "nothing left to run",
        sweep(4, 2, {"completedIndexes": "0-3"}),
        [("w1", 1), ("w2", 1)],
        4,
        frozenset(),
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "user", "room", "max_parts", "taken", "want"), PLAN_CASES, ids=[c[0] for c in PLAN_CASES]
)
def test_plan_parts(
    case: str,
    user: dict[str, Any],
    room: list[tuple[str, int]],
    max_parts: int,
    taken: frozenset[int],
    want: list[PartPlan] | None,
) -> None:
    plan = plan_parts(user, room, max_parts, taken)
    assert plan == want, case
    if plan is not None:
        ran = [i for p in plan for i in indexes.parse_indexes(p.indexes, 40)]
        assert len(ran) == len(set(ran)), "no index in two parts"
        assert set(ran) == set(pending_indexes(user, taken)), "every pending index in some part"
        assert all(p.parallelism <= dict(room)[p.worker] for p in plan), "no part asks more than its room"


@pytest.mark.parametrize(
    ("case", "user", "want"),
    [
        ("annotated Indexed Job", sweep(), True),
        ("not annotated", {**sweep(), "metadata": {"name": "sweep"}}, False),
        (
            "annotated, but false",
            {**sweep(), "metadata": {"annotations": {SPLIT_ANNOTATION: "false"}}},
            False,
        ),
        ("NonIndexed", sweep(completionMode="NonIndexed"), False),
        ("suspended: placed when resumed", sweep(suspend=True), False),
    ],
)
def test_wants_split(case: str, user: dict[str, Any], want: bool) -> None:
    assert wants_split(user) is want, case

"""The stages of a Job's life, each its own decision, and how long a finished Job's mirror is kept."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.lifecycle import Ours, Stage, kept_until, stage_of
from multiqueue.dispatch.placement import WorkerView, WorkerViews
from tests.unit.jobfixtures import T0, T1, cond, job

ADAPTER = BatchJobAdapter()
FINISHED_AT = datetime(2026, 1, 1, 0, 5, tzinfo=UTC).timestamp()  # T1
KEEP = 600.0
MIRROR: dict[str, Any] = {"metadata": {"name": "pi"}}


def _finished(timed: bool = True) -> dict[str, Any]:
    body = job()
    condition = cond("Complete", reason="CompletionsReached", time=T1)
    if not timed:
        del condition["lastTransitionTime"]
    body["status"] = {"startTime": T0, "conditions": [condition]}
    return body


def _deleting(body: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(body)
    result["metadata"]["deletionTimestamp"] = T1
    return result


def ours(
    user: dict[str, Any],
    placed: str | None = None,
    lost: frozenset[str] = frozenset(),
    mirrors: tuple[str, ...] = (),
) -> Ours:
    return Ours(user, {w: MIRROR for w in mirrors}, placed, lost)


@pytest.mark.parametrize(
    ("job_", "stage"),
    [
        pytest.param(ours(job()), Stage.UNPLACED, id="new"),
        pytest.param(ours(job(), "w1", mirrors=("w1",)), Stage.PLACED, id="running"),
        pytest.param(ours(job(), "w1"), Stage.PLACED, id="placed-mirror-not-made-yet"),
        pytest.param(ours(job(), "w1", frozenset({"w2"})), Stage.PLACED, id="another-worker-lost"),
        pytest.param(ours(job(), "w1", frozenset({"w1"})), Stage.STRANDED, id="its-worker-lost"),
        pytest.param(ours(_finished(), "w1", frozenset({"w1"})), Stage.ENDING, id="finished-on-a-lost-worker"),
        pytest.param(ours(_finished()), Stage.ENDING, id="finished-never-placed"),
        pytest.param(ours(_deleting(job())), Stage.ENDING, id="deleted-before-placed"),
        pytest.param(ours(_deleting(job()), "w1", frozenset({"w1"})), Stage.ENDING, id="deleted-on-a-lost-worker"),
    ],
)  # fmt: skip
def test_stage_of(job_: Ours, stage: Stage) -> None:
    assert stage_of(ADAPTER, job_) == stage


W1, W2 = WorkerView("w1", {}, True, 0), WorkerView("w2", {}, True, 0)
W1_DRAINING = WorkerView("w1", {}, True, 0, accepting=False)


@pytest.mark.parametrize(
    ("job_", "workers", "keep", "until"),
    [
        pytest.param(ours(_finished(), "w1", mirrors=("w1",)), [W1, W2], KEEP, FINISHED_AT + KEEP, id="kept"),
        pytest.param(ours(_finished(), "w1", mirrors=("w1",)), [W1, W2], 0.0, FINISHED_AT, id="not-kept-is-kept-until-it-finished"),
        pytest.param(ours(_finished(), "w1", mirrors=("w1", "w2")), [W1, W2], KEEP, FINISHED_AT + KEEP, id="stale-copy-elsewhere"),
        pytest.param(ours(_finished(), "w1", mirrors=("w2",)), [W1, W2], KEEP, None, id="none-on-its-worker"),
        pytest.param(ours(_finished(), None, mirrors=("w1",)), [W1, W2], KEEP, None, id="not-placed"),
        pytest.param(ours(_finished(), "w1", mirrors=("w1",)), [W1_DRAINING, W2], KEEP, None, id="its-worker-draining"),
        pytest.param(ours(_finished(), "w2", mirrors=("w2",)), [W1_DRAINING, W2], KEEP, FINISHED_AT + KEEP, id="another-worker-draining"),
        pytest.param(ours(_finished(timed=False), "w1", mirrors=("w1",)), [W1, W2], KEEP, None, id="no-finish-time"),
        pytest.param(ours(_deleting(_finished()), "w1", mirrors=("w1",)), [W1, W2], KEEP, None, id="deleted"),
        pytest.param(ours(job(), "w1", mirrors=("w1",)), [W1, W2], KEEP, None, id="not-finished"),
    ],
)  # fmt: skip
def test_kept_until(job_: Ours, workers: list[WorkerView], keep: float, until: float | None) -> None:
    assert kept_until(ADAPTER, job_, WorkerViews.of(workers), keep) == until

"""Each step of placement on its own, and the order in which their reasons win."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.dispatch.mirror import CLUSTER_SELECTOR_ANNOTATION
from multiqueue.dispatch.placement import (
    Kept,
    Placement,
    WaitReason,
    WorkerView,
    choose,
    keep_accepting,
    keep_active,
    keep_fitting,
    keep_if_any_could_fit,
    keep_pinned,
    keep_selected,
    keep_serving,
    place,
    prefer_responsive,
)
from tests.unit.jobfixtures import job


def view(name: str, active: bool = True, load: int = 0, **extra: Any) -> WorkerView:
    return WorkerView(name, extra.pop("labels", {}), active, load, **extra)


A, B = view("a", labels={"region": "eu"}), view("b", load=1, labels={"region": "us"})
DRAINING = view("d", accepting=False)
IDLE = view("i", active=False)
SLOW = view("s", slow=True)
SMALL = view("small", capacity={"cpu": 1.0}, free={"cpu": 1.0})
BUSY = view("busy", capacity={"cpu": 4.0}, free={"cpu": 0.5})
FULL = view("full", max_jobs=1, load=1)
ZERO = view("zero", max_jobs=0)
NO_JOBSETS = view("n", missing_kinds=frozenset({"JobSet"}))


def names(kept: Kept) -> list[str]:
    return [w.name for w in kept.workers]


def waits(reason: WaitReason, message: str, candidates: frozenset[str] = frozenset()) -> Placement:
    return Placement(None, reason, message, candidates)


@pytest.mark.parametrize(
    ("workers", "pinned", "kept", "waiting"),
    [
        pytest.param([A, B], None, ["a", "b"], None, id="no-pin"),
        pytest.param([A, B], "", ["a", "b"], None, id="empty-pin"),
        pytest.param([A, B], "b", ["b"], None, id="pinned"),
        pytest.param([A, B], "c", [], waits(WaitReason.NO_WORKER, "pinned to worker c, which is not configured"), id="not-configured"),
        pytest.param([A, DRAINING], "d", [], waits(WaitReason.WORKER_DRAINING, "pinned to worker d, which is draining"), id="draining"),
        pytest.param([A, IDLE], "i", ["i"], None, id="inactive-is-kept"),
    ],
)  # fmt: skip
def test_keep_pinned(
    workers: list[WorkerView], pinned: str | None, kept: list[str], waiting: Placement | None
) -> None:
    result = keep_pinned(workers, pinned)
    assert (names(result), result.waiting) == (kept, waiting)


@pytest.mark.parametrize(
    ("workers", "kind", "kept", "waiting"),
    [
        pytest.param([A, NO_JOBSETS], "JobSet", ["a"], None, id="a-worker-without-the-crd-dropped"),
        pytest.param([A, NO_JOBSETS], "Job", ["a", "n"], None, id="its-other-kinds-still-go-there"),
        pytest.param([A, NO_JOBSETS], None, ["a", "n"], None, id="no-kind-given"),
        pytest.param([NO_JOBSETS], "JobSet", [], waits(WaitReason.KIND_NOT_SERVED, "no worker serves JobSet: its CRD is missing on n"), id="none-serves-it"),
        pytest.param([], "JobSet", [], None, id="no-workers-left-to-ask"),
    ],
)  # fmt: skip
def test_keep_serving(
    workers: list[WorkerView], kind: str | None, kept: list[str], waiting: Placement | None
) -> None:
    result = keep_serving(workers, kind)
    assert (names(result), result.waiting) == (kept, waiting)


def test_a_job_pinned_to_a_worker_without_its_kind_waits_saying_so() -> None:
    placement = place(job(), [A, NO_JOBSETS], "LeastLoaded", pinned="n", kind="JobSet")
    assert placement == waits(WaitReason.KIND_NOT_SERVED, "no worker serves JobSet: its CRD is missing on n")


@pytest.mark.parametrize(
    ("workers", "kept"),
    [
        pytest.param([A, DRAINING, B], ["a", "b"], id="draining-dropped"),
        pytest.param([DRAINING], [], id="none-left-no-reason-yet"),
        pytest.param([], [], id="empty"),
    ],
)  # fmt: skip
def test_keep_accepting(workers: list[WorkerView], kept: list[str]) -> None:
    result = keep_accepting(workers)
    assert (names(result), result.waiting) == (kept, None)


@pytest.mark.parametrize(
    ("workers", "selector", "kept", "reason", "message"),
    [
        pytest.param([A, B], None, ["a", "b"], None, "", id="no-selector"),
        pytest.param([A, B], "", ["a", "b"], None, "", id="empty-selector"),
        pytest.param([A, B], "region=eu", ["a"], None, "", id="matches"),
        pytest.param([A, B], "region in (eu,us)", ["a", "b"], None, "", id="set-based"),
        pytest.param([A, B], "region=asia", [], WaitReason.NO_MATCHING_WORKER, "no worker matches selector region=asia", id="none-match"),
        pytest.param([], "region=eu", [], WaitReason.NO_MATCHING_WORKER, "no worker matches selector region=eu", id="none-there"),
        pytest.param([A, B], "region in (", [], WaitReason.INVALID_SELECTOR, f"invalid {CLUSTER_SELECTOR_ANNOTATION}: unable to parse", id="invalid"),
    ],
)  # fmt: skip
def test_keep_selected(
    workers: list[WorkerView], selector: str | None, kept: list[str], reason: WaitReason | None, message: str
) -> None:
    result = keep_selected(workers, selector)
    assert names(result) == kept
    assert (result.waiting.reason if result.waiting else None) == reason
    assert (result.waiting.message if result.waiting else "").startswith(message)


@pytest.mark.parametrize(
    ("workers", "demand", "waiting"),
    [
        pytest.param([SMALL, BUSY], {"cpu": 2.0}, None, id="one-could-fit"),
        pytest.param([SMALL], {"cpu": 1.0}, None, id="exactly-all-it-has"),
        pytest.param([SMALL, ZERO], {"cpu": 2.0}, waits(WaitReason.NEVER_FITS, "asks more than any worker has in all: small (cpu), zero (maxJobs 0)"), id="none-could"),
        pytest.param([A], {"cpu": 100.0}, None, id="no-quota-no-limit"),
        pytest.param([], {"cpu": 1.0}, None, id="no-worker-is-not-never-fits"),
    ],
)  # fmt: skip
def test_keep_if_any_could_fit(
    workers: list[WorkerView], demand: dict[str, float], waiting: Placement | None
) -> None:
    result = keep_if_any_could_fit(workers, demand)
    # It only ever stops the Job: the workers that could never take it are left to the capacity step.
    assert (result.workers, result.waiting) == ((workers, None) if waiting is None else ([], waiting))


@pytest.mark.parametrize(
    ("workers", "kept", "waiting"),
    [
        pytest.param([A, IDLE, B], ["a", "b"], None, id="inactive-dropped"),
        pytest.param([], [], waits(WaitReason.NO_WORKER, "no worker"), id="no-worker"),
        pytest.param([IDLE, view("h", active=False)], [], waits(WaitReason.NO_ACTIVE_WORKER, "no active worker: h, i"), id="none-active"),
    ],
)  # fmt: skip
def test_keep_active(workers: list[WorkerView], kept: list[str], waiting: Placement | None) -> None:
    result = keep_active(workers)
    assert (names(result), result.waiting) == (kept, waiting)


@pytest.mark.parametrize(
    ("workers", "demand", "kept", "waiting"),
    [
        pytest.param([SMALL, BUSY], {"cpu": 1.0}, ["small"], None, id="fits-one"),
        pytest.param([SMALL, BUSY], {}, ["small", "busy"], None, id="asks-nothing"),
        pytest.param([BUSY, FULL], {"cpu": 1.0}, [], waits(WaitReason.NO_CAPACITY, "waiting for capacity: cpu, jobs", frozenset({"busy", "full"})), id="none-fits"),
        pytest.param([view("h", held=True)], {}, [], waits(WaitReason.NO_CAPACITY, "waiting for capacity: capacity held for higher-priority Jobs", frozenset({"h"})), id="held"),
    ],
)  # fmt: skip
def test_keep_fitting(
    workers: list[WorkerView], demand: dict[str, float], kept: list[str], waiting: Placement | None
) -> None:
    result = keep_fitting(workers, demand)
    assert (names(result), result.waiting) == (kept, waiting)


@pytest.mark.parametrize(
    ("workers", "kept"),
    [
        pytest.param([A, SLOW, B], ["a", "b"], id="slow-dropped"),
        pytest.param([SLOW], ["s"], id="only-slow-kept"),
    ],
)  # fmt: skip
def test_prefer_responsive(workers: list[WorkerView], kept: list[str]) -> None:
    result = prefer_responsive(workers)
    assert (names(result), result.waiting) == (kept, None)


@pytest.mark.parametrize(
    ("policy", "turn", "chosen"),
    [
        pytest.param("LeastLoaded", 0, "a", id="least-loaded"),
        pytest.param("RoundRobin", 0, "b", id="round-robin-0"),
        pytest.param("RoundRobin", 4, "c", id="round-robin-wraps"),
        pytest.param("Ordered", 7, "b", id="ordered"),
        pytest.param("Unknown", 0, "a", id="least-loaded-by-default"),
    ],
)  # fmt: skip
def test_choose(policy: str, turn: int, chosen: str) -> None:
    workers = [view("b", load=2), view("c", load=1), view("a", load=1)]  # a and c tie on load: by name
    assert choose(policy, workers, turn) == chosen


def _job(selector: str | None = None) -> dict[str, Any]:
    body = job()
    if selector is not None:
        body["metadata"]["annotations"] = {CLUSTER_SELECTOR_ANNOTATION: selector}
    return body


@pytest.mark.parametrize(
    ("workers", "selector", "pinned", "demand", "reason"),
    [
        pytest.param([A, DRAINING], "region in (", "d", {}, WaitReason.WORKER_DRAINING, id="pin-before-selector"),
        pytest.param([IDLE], "region in (", None, {}, WaitReason.INVALID_SELECTOR, id="selector-before-activity"),
        pytest.param([DRAINING], "region=eu", None, {}, WaitReason.NO_MATCHING_WORKER, id="draining-then-no-match"),
        pytest.param([DRAINING], None, None, {}, WaitReason.NO_WORKER, id="all-draining-is-no-worker"),
        pytest.param([view("z", active=False, max_jobs=0)], None, None, {}, WaitReason.NEVER_FITS, id="never-fits-before-activity"),
        pytest.param([IDLE, FULL], None, None, {}, WaitReason.NO_CAPACITY, id="inactive-one-left-out-full-one-waited-for"),
        pytest.param([IDLE, FULL], None, "i", {}, WaitReason.NO_ACTIVE_WORKER, id="pinned-to-an-inactive-one"),
    ],
)  # fmt: skip
def test_the_first_step_that_leaves_nowhere_says_why(
    workers: list[WorkerView],
    selector: str | None,
    pinned: str | None,
    demand: dict[str, float],
    reason: WaitReason,
) -> None:
    placement = place(_job(selector), workers, "LeastLoaded", demand=demand, pinned=pinned)
    assert (placement.worker, placement.reason) == (None, reason)


def test_excluded_workers_never_reach_a_step() -> None:
    assert place(_job(), [A, B], "LeastLoaded", exclude=frozenset({"a"})) == Placement("b")
    assert place(_job(), [A], "LeastLoaded", exclude=frozenset({"a"})) == waits(
        WaitReason.NO_WORKER, "no worker"
    )

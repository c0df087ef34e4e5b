"""``lifecycle.decide`` for an Indexed Job run as parts, as table tests: placed as parts when no worker runs all of
it now, each part's mirror made, seeded and let run, the parts' statuses merged, a decided Job's parts stopped,
suspend, a lost worker's indexes moved, a refused part ending the split, and the end. The clock is ``NOW``."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from multiqueue.api import indexes
from multiqueue.api.jobstatus import validate_job_status_update
from multiqueue.api.types import NORMAL, Event
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.decision import Actions, Observed, Rejection
from multiqueue.dispatch.lifecycle import decide
from multiqueue.dispatch.mirror import (
    CLUSTER_LABEL,
    PARTS_ANNOTATION,
    PROGRESS_ANNOTATION,
    SPLIT_ANNOTATION,
    Identity,
    pending_progress,
)
from multiqueue.dispatch.mirrorbody import part_body
from multiqueue.dispatch.placement import WaitReason, WorkerView, WorkerViews
from multiqueue.dispatch.split import PartPlan, Parts, parts_of
from tests.unit.jobfixtures import T0, job

ADAPTER = BatchJobAdapter()
US = Identity("multiqueue", "multiqueue.dev/dispatcher")
NOW = 1_767_225_900.0  # 2026-01-01T00:05:00Z
LOW = PartPlan("worker-1", "0-19", 4)
HIGH = PartPlan("worker-2", "20-39", 4)
SUSPENDED = {"type": "Suspended", "status": "True", "reason": "JobSuspended", "message": "Job suspended"}


def worker(name: str, cpu: float = 4.0, **extra: Any) -> WorkerView:
    """A worker with 4 cpu in all (more if more is free), ``cpu`` of it free now."""
    size = {"cpu": max(4.0, cpu)}
    return WorkerView(name, {}, extra.pop("active", True), 0, free={"cpu": cpu}, capacity=size, **extra)


TWO = [worker("worker-1"), worker("worker-2")]


def sweep(split: bool = True, **spec: Any) -> dict[str, Any]:
    """40 indexes, 8 at once, a cpu each: no worker of TWO runs it all now."""
    body = job(
        name="sweep",
        managedBy=US.managed_by,
        completions=40,
        parallelism=8,
        completionMode="Indexed",
        **spec,
    )
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    if split:
        body["metadata"]["annotations"] = {SPLIT_ANNOTATION: "true"}
    return body


def as_parts(user: dict[str, Any], *plans: PartPlan, carried: int = 0, **status: Any) -> dict[str, Any]:
    """``user`` as the manager leaves it once placed as ``plans``."""
    result = copy.deepcopy(user)
    result["metadata"].setdefault("labels", {})[CLUSTER_LABEL] = plans[0].worker
    result["metadata"]["finalizers"] = [US.finalizer]
    result["metadata"]["annotations"][PARTS_ANNOTATION] = Parts(plans, carried).encoded()
    result["status"] = status
    return result


def part_mirror(
    user: dict[str, Any], plan: PartPlan, done: str = "", *, seeded: bool = True, **status: Any
) -> dict[str, Any]:
    """A part's mirror: as created (``seeded=False``), or given its marked indexes and let run, with ``done`` of
    its own indexes completed."""
    mirror = part_body(ADAPTER, US, user, plan)
    mirror["metadata"]["uid"] = f"mirror-{plan.worker}"
    progress = pending_progress(mirror) or {}
    if not seeded:
        mirror["status"] = {"conditions": [SUSPENDED]}
        return mirror
    del mirror["metadata"]["annotations"][PROGRESS_ANNOTATION]
    mirror["spec"]["suspend"] = status.pop("suspend", False)
    marked = set(indexes.parse_indexes(str(progress.get("completedIndexes", "")), 40))
    completed = marked | set(indexes.parse_indexes(done, 40))
    mirror["status"] = {
        "completedIndexes": indexes.format_indexes(completed),
        "succeeded": len(completed),
        "startTime": T0,
        **status,
    }
    return mirror


def run(
    user: dict[str, Any],
    mirrors: dict[str, dict[str, Any]] | None = None,
    workers: list[WorkerView] = TWO,
    rejections: dict[str, Rejection] | None = None,
    limit: int = 4,
    keep_finished: float = 0.0,
) -> Actions:
    seen = Observed(user, mirrors or {}, WorkerViews.of(workers), rejections or {}, NOW)
    return decide(ADAPTER, US, "LeastLoaded", seen, keep_finished=keep_finished, split_limit=limit)


# --- placing as parts -------------------------------------------------------------------------------------------


def test_a_job_no_worker_runs_whole_is_placed_as_parts_sized_to_each_worker() -> None:
    user = sweep()
    actions = run(user)
    assert actions.hold == {"worker-1": {"cpu": 4.0}, "worker-2": {"cpu": 4.0}}
    assert actions.place_on == "worker-1"
    assert actions.parts is not None
    assert parts_of({"metadata": {"annotations": {PARTS_ANNOTATION: actions.parts}}}) == Parts((LOW, HIGH))
    assert actions.create_mirror is not None
    where, body = actions.create_mirror
    assert where == "worker-1"
    assert body["spec"]["parallelism"] == 4 and body["spec"]["completions"] == 40
    assert body["spec"]["suspend"] is True, "it runs only once its other indexes are marked completed"
    assert pending_progress(body) == {"completedIndexes": "20-39", "succeeded": 20}
    assert actions.events == [
        Event(
            NORMAL,
            "Dispatched",
            "Job split into 2 parts: indexes 0-19 on worker worker-1, indexes 20-39 on worker worker-2",
        )
    ]


@pytest.mark.parametrize(
    ("case", "user", "workers", "limit", "placed_on", "waits"),
    [
        ("not asked to split: it waits whole", sweep(split=False), TWO, 4, None, WaitReason.NEVER_FITS),
        ("splitting turned off: it waits whole", sweep(), TWO, 1, None, WaitReason.NEVER_FITS),
        ("one worker runs it all: placed whole", sweep(), [worker("worker-1", cpu=8), worker("worker-2")], 4, "worker-1", None),
        ("only one worker has room: it waits whole", sweep(), [worker("worker-1"), worker("worker-2", cpu=0)], 4, None, WaitReason.NEVER_FITS),
        ("suspended: it waits", sweep(suspend=True), TWO, 4, None, WaitReason.SUSPENDED),
        ("a worker that does not answer gets no part", sweep(), [worker("worker-1"), worker("worker-2", active=False)], 4, None, WaitReason.NEVER_FITS),
    ],
)  # fmt: skip
def test_when_a_job_is_not_split(
    case: str,
    user: dict[str, Any],
    workers: list[WorkerView],
    limit: int,
    placed_on: str | None,
    waits: WaitReason | None,
) -> None:
    actions = run(user, workers=workers, limit=limit)
    assert actions.parts is None, case
    assert actions.place_on == placed_on
    assert (actions.waiting.reason if actions.waiting else None) == waits


def test_a_job_a_worker_refused_lately_is_placed_whole() -> None:
    refused = Rejection("worker-3", "Forbidden", "no", NOW - 1)
    actions = run(sweep(), workers=[*TWO, worker("worker-3")], rejections={"worker-3": refused})
    assert actions.parts is None and actions.place_on is None


# --- running the parts ------------------------------------------------------------------------------------------


def test_each_part_is_made_in_turn_and_let_run_once_it_holds_its_marked_indexes() -> None:
    user = as_parts(sweep(), LOW, HIGH)
    first = run(user, {"worker-1": part_mirror(user, LOW)})
    assert first.create_mirror is not None and first.create_mirror[0] == "worker-2"
    assert pending_progress(first.create_mirror[1]) == {"completedIndexes": "0-19", "succeeded": 20}

    created = {
        "worker-1": part_mirror(user, LOW, seeded=False),
        "worker-2": part_mirror(user, HIGH, seeded=False),
    }
    seeding = run(user, created)
    assert seeding.seed_progress is not None and seeding.seed_progress[0] == "worker-1", "one seed per sync"
    assert seeding.seed_progress[1]["status"]["completedIndexes"] == "20-39"
    assert seeding.suspend_mirror is None and seeding.create_mirror is None

    seeded = {w: {**m, "status": {**m["status"], **(pending_progress(m) or {})}} for w, m in created.items()}
    resuming = run(user, seeded)
    assert resuming.suspend_mirror == ("worker-1", False)


def test_the_parts_statuses_become_the_users() -> None:
    user = as_parts(sweep(), LOW, HIGH)
    mirrors = {
        "worker-1": part_mirror(user, LOW, "0-4", active=4, ready=4),
        "worker-2": part_mirror(user, HIGH, "20", active=4, ready=2, failed=1),
    }
    actions = run(user, mirrors)
    assert actions.status is not None
    assert actions.status["completedIndexes"] == "0-4,20"
    assert (actions.status["succeeded"], actions.status["failed"]) == (6, 1)
    assert (actions.status["active"], actions.status["ready"]) == (8, 6)
    assert actions.create_mirror is None and actions.suspend_mirror is None
    assert not validate_job_status_update({**user, "status": actions.status}, user)


def test_every_index_done_completes_the_job_once() -> None:
    user = as_parts(sweep(), LOW, HIGH, active=8, startTime=T0)
    mirrors = {"worker-1": part_mirror(user, LOW, "0-19"), "worker-2": part_mirror(user, HIGH, "20-39")}
    actions = run(user, mirrors)
    assert actions.status is not None and actions.status["completedIndexes"] == "0-39"
    assert [c["type"] for c in actions.status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    assert Event(NORMAL, "Completed", "Job completed on workers worker-1, worker-2") in actions.events
    assert not validate_job_status_update({**user, "status": actions.status}, user)


def test_a_decided_job_stops_the_parts_still_running() -> None:
    user = as_parts(
        sweep(successPolicy={"rules": [{"succeededIndexes": "0-3"}]}), LOW, HIGH, active=8, startTime=T0
    )
    mirrors = {
        "worker-1": part_mirror(user, LOW, "0-3", active=4),
        "worker-2": part_mirror(user, HIGH, active=4),
    }
    actions = run(user, mirrors)
    assert actions.status is not None
    assert [c["reason"] for c in actions.status["conditions"]] == ["SuccessPolicy"]
    assert actions.suspend_mirror == ("worker-1", True)
    decided = {**user, "status": actions.status}
    stopped = {**mirrors, "worker-1": part_mirror(user, LOW, "0-3", active=0, suspend=True)}
    assert run(decided, stopped).suspend_mirror == ("worker-2", True)


def test_suspending_the_job_suspends_every_part() -> None:
    user = as_parts(sweep(suspend=True), LOW, HIGH, active=8, startTime=T0)
    mirrors = {"worker-1": part_mirror(user, LOW, active=4), "worker-2": part_mirror(user, HIGH, active=4)}
    assert run(user, mirrors).suspend_mirror == ("worker-1", True)
    one = {**mirrors, "worker-1": part_mirror(user, LOW, suspend=True, active=0, conditions=[SUSPENDED])}
    assert run(user, one).suspend_mirror == ("worker-2", True)


def test_a_worker_that_does_not_answer_is_asked_nothing_and_the_rest_goes_on() -> None:
    user = as_parts(sweep(), LOW, HIGH)
    mirrors = {"worker-1": part_mirror(user, LOW, "0", active=4)}
    actions = run(user, mirrors, [worker("worker-1"), worker("worker-2", active=False)])
    assert actions.create_mirror is None
    assert actions.status is not None and actions.status["completedIndexes"] == "0"


# --- a lost worker, a refused part, the end ---------------------------------------------------------------------


def test_a_lost_workers_unfinished_indexes_go_to_another_and_its_failures_stay_counted() -> None:
    user = as_parts(
        sweep(), LOW, HIGH, completedIndexes="0-4,20-24", succeeded=10, failed=2, active=8, startTime=T0
    )
    mirrors = {
        "worker-1": part_mirror(user, LOW, "0-4", active=4),
        "worker-2": part_mirror(user, HIGH, "20-24", active=4, failed=2),
    }
    workers = [worker("worker-1", cpu=0), worker("worker-2", active=False, lost=True), worker("worker-3")]
    actions = run(user, mirrors, workers)
    assert actions.parts is not None
    moved = parts_of({"metadata": {"annotations": {PARTS_ANNOTATION: actions.parts}}})
    assert moved == Parts((LOW, PartPlan("worker-3", "25-39", 4)), carried_failed=2)
    assert actions.hold == {"worker-1": {"cpu": 4.0}, "worker-3": {"cpu": 4.0}}
    assert actions.create_mirror is not None and actions.create_mirror[0] == "worker-3"
    assert pending_progress(actions.create_mirror[1]) == {"completedIndexes": "0-24", "succeeded": 25}
    assert actions.redispatch is None, "the cluster label names worker-1, which keeps its part"
    assert [e.reason for e in actions.events] == ["Redispatched"]


def test_a_lost_worker_whose_indexes_find_no_room_waits_for_it() -> None:
    user = as_parts(sweep(), LOW, HIGH, active=8, startTime=T0)
    workers = [worker("worker-1", cpu=0), worker("worker-2", active=False, lost=True)]
    actions = run(user, {"worker-1": part_mirror(user, LOW, active=4)}, workers)
    assert actions.parts is None and actions.create_mirror is None
    assert actions.waiting is not None and actions.waiting.reason is WaitReason.NO_CAPACITY


def test_a_refused_part_ends_the_split_and_the_job_is_placed_whole_again() -> None:
    user = as_parts(sweep(), LOW, HIGH)
    mirrors = {"worker-1": part_mirror(user, LOW, active=4)}
    refused = Rejection("worker-2", "Forbidden", "quota", NOW - 1)
    actions = run(user, mirrors, rejections={"worker-2": refused})
    assert actions.unplace is True
    assert actions.delete_mirrors == [("worker-1", mirrors["worker-1"])]
    assert [e.reason for e in actions.events] == ["SplitAbandoned"]


@pytest.mark.parametrize(("keep", "deleted"), [(0.0, ["worker-1", "worker-2"]), (3600.0, [])])
def test_a_finished_job_keeps_every_part_for_the_ttl_then_lets_them_go(
    keep: float, deleted: list[str]
) -> None:
    done = [
        {
            "type": "SuccessCriteriaMet",
            "status": "True",
            "reason": "CompletionsReached",
            "lastTransitionTime": T0,
        },
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": T0},
    ]
    user = as_parts(
        sweep(),
        LOW,
        HIGH,
        completedIndexes="0-39",
        succeeded=40,
        startTime=T0,
        completionTime=T0,
        conditions=done,
    )
    mirrors = {"worker-1": part_mirror(user, LOW, "0-19"), "worker-2": part_mirror(user, HIGH, "20-39")}
    actions = run(user, mirrors, keep_finished=keep)
    assert [w for w, _ in actions.delete_mirrors] == deleted
    assert actions.status is None


def test_the_parts_record_survives_a_round_trip_and_a_broken_one_reads_as_none() -> None:
    parts = Parts((LOW, HIGH), carried_failed=3)
    assert parts_of({"metadata": {"annotations": {PARTS_ANNOTATION: parts.encoded()}}}) == parts
    assert json.loads(parts.encoded())["carriedFailed"] == 3
    assert parts_of({"metadata": {"annotations": {PARTS_ANNOTATION: "{not json"}}}) is None
    assert parts_of({"metadata": {}}) is None


# --- parallelism changed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "parallelism", "workers", "want"),
    [
        ("lowered: each part in proportion", 4, TWO, (2, 2)),
        ("lowered unevenly: the remainder to the first", 3, TWO, (2, 1)),
        ("raised: a pod at a time where there is room", 11, [worker("worker-1", cpu=2), worker("worker-2", cpu=1)], (6, 5)),
        ("raised past every worker's room: as far as the room goes", 16, [worker("worker-1", cpu=1), worker("worker-2", cpu=0)], (5, 4)),
    ],
)  # fmt: skip
def test_a_changed_parallelism_is_divided_over_the_parts_again(
    case: str, parallelism: int, workers: list[WorkerView], want: tuple[int, int]
) -> None:
    user = as_parts(sweep(), LOW, HIGH, active=8, startTime=T0)
    mirrors = {"worker-1": part_mirror(user, LOW, active=4), "worker-2": part_mirror(user, HIGH, active=4)}
    changed = copy.deepcopy(user)
    changed["spec"]["parallelism"] = parallelism
    actions = run(changed, mirrors, workers)
    assert actions.parts is not None, case
    divided = parts_of({"metadata": {"annotations": {PARTS_ANNOTATION: actions.parts}}})
    assert divided is not None and tuple(p.parallelism for p in divided.plans) == want
    assert actions.hold == {"worker-1": {"cpu": float(want[0])}, "worker-2": {"cpu": float(want[1])}}
    assert actions.scale_mirror == ("worker-1", want[0])


def test_a_part_whose_mirror_runs_another_share_is_scaled_to_its_own() -> None:
    user = as_parts(sweep(), LOW, PartPlan("worker-2", "20-39", 2), active=6, startTime=T0)
    mirrors = {"worker-1": part_mirror(user, LOW, active=4), "worker-2": part_mirror(user, HIGH, active=4)}
    user["spec"]["parallelism"] = 6
    actions = run(user, mirrors)
    assert actions.parts is None
    assert actions.scale_mirror == ("worker-2", 2)


def test_a_part_the_worker_already_has_is_not_made_twice_while_the_cache_catches_up() -> None:
    user = as_parts(sweep(), LOW, HIGH)
    ours = Rejection("worker-2", "AlreadyExists", "exists", NOW - 0.1, existing_origin=US.origin)
    actions = run(user, {"worker-1": part_mirror(user, LOW, active=4)}, rejections={"worker-2": ours})
    assert actions.create_mirror is None and actions.unplace is False
    assert actions.requeue_after == pytest.approx(0.5)

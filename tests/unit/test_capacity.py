"""The capacity ledger across kinds, and what each kind's adapter says a Job asks of a worker."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.dispatch.adapters.declared import JOBGROUP, DeclaredAdapter
from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.capacity import Key, Ledger, Rank, Usage, rank_of
from multiqueue.dispatch.generic import PodSet, demand
from tests.unit.jobfixtures import T0, T1, T2, job

JOB_A: Key = ("Job", "default/a")
JOB_B: Key = ("Job", "default/b")
GROUP_A: Key = ("JobGroup", "default/a")  # same name as JOB_A, another kind: another Job
GIB = 2.0**30

# --- holding and releasing --------------------------------------------------------------------------------------

Step = tuple[str, Key, str, dict[str, float]]  # ("hold" | "release", key, worker, demand)


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        pytest.param(
            [("hold", JOB_A, "w1", {"cpu": 1.5})],
            {"w1": Usage(1, {"cpu": 1.5})},
            id="one-job",
        ),
        pytest.param(
            [("hold", JOB_A, "w1", {"cpu": 1.5}), ("hold", GROUP_A, "w1", {"cpu": 2.0, "memory": 4 * GIB})],
            {"w1": Usage(2, {"cpu": 3.5, "memory": 4 * GIB})},
            id="two-kinds-same-name-same-worker",
        ),
        pytest.param(
            [
                ("hold", JOB_A, "w1", {"cpu": 1.5}),
                ("hold", GROUP_A, "w1", {"cpu": 2.0, "memory": 4 * GIB}),
                ("release", JOB_A, "", {}),
            ],
            {"w1": Usage(1, {"cpu": 2.0, "memory": 4 * GIB})},
            id="release-one-kind-keeps-the-other",
        ),
        pytest.param(
            [
                ("hold", JOB_A, "w1", {"cpu": 1.5}),
                ("hold", GROUP_A, "w1", {"cpu": 2.0, "memory": 4 * GIB}),
                ("release", GROUP_A, "", {}),
                ("release", JOB_A, "", {}),
            ],
            {"w1": Usage(0, {"cpu": 0.0, "memory": 0.0})},
            id="release-all",
        ),
        pytest.param(
            [("hold", JOB_A, "w1", {"cpu": 1.5}), ("hold", JOB_A, "w1", {"cpu": 1.5})],
            {"w1": Usage(1, {"cpu": 1.5})},
            id="hold-twice-counts-once",
        ),
        pytest.param(
            [("hold", JOB_A, "w1", {"cpu": 1.5}), ("hold", JOB_A, "w1", {"cpu": 0.5})],
            {"w1": Usage(1, {"cpu": 0.5})},
            id="hold-again-with-another-demand-replaces-it",
        ),
        pytest.param(
            [
                ("hold", JOB_A, "w1", {"cpu": 1.5}),
                ("hold", GROUP_A, "w1", {"cpu": 2.0}),
                ("hold", JOB_A, "w2", {"cpu": 1.5}),
            ],
            {"w1": Usage(1, {"cpu": 2.0}), "w2": Usage(1, {"cpu": 1.5})},
            id="hold-on-another-worker-moves-it",
        ),
        pytest.param(
            [("release", JOB_A, "", {}), ("hold", JOB_B, "w1", {}), ("release", JOB_B, "", {}), ("release", JOB_B, "", {})],
            {"w1": Usage(0, {})},
            id="release-of-what-is-not-held-changes-nothing",
        ),
        pytest.param(
            [("hold", JOB_A, "w1", {"nvidia.com/gpu": 2.0}), ("hold", JOB_B, "w1", {"cpu": 0.25})],
            {"w1": Usage(2, {"nvidia.com/gpu": 2.0, "cpu": 0.25})},
            id="resources-per-name",
        ),
    ],
)  # fmt: skip
def test_usage_is_exact_across_kinds(steps: list[Step], expected: dict[str, Usage]) -> None:
    ledger = Ledger()
    for step, key, worker, asked in steps:
        if step == "hold":
            ledger.hold(key, {worker: asked})
        else:
            ledger.release(key)
    for worker, usage in expected.items():
        assert ledger.usage(worker) == usage, worker


def test_usage_of_decimal_amounts_stays_within_placements_tolerance() -> None:
    ledger = Ledger()
    keys = [("Job", f"default/j{i}") for i in range(100)] + [
        ("JobGroup", f"default/j{i}") for i in range(100)
    ]
    for key in keys:
        ledger.hold(key, {"w1": {"cpu": 0.1, "memory": 0.3 * GIB}})
    assert ledger.usage("w1").jobs == 200
    assert ledger.usage("w1").used["cpu"] == pytest.approx(20.0)
    for key in keys:
        ledger.release(key)
    assert ledger.usage("w1").jobs == 0
    assert ledger.usage("w1").used["cpu"] == pytest.approx(0.0, abs=1e-9)


def test_a_move_says_where_the_job_runs_now() -> None:
    ledger = Ledger()
    ledger.hold(JOB_A, {"w1": {"cpu": 1.0}})
    ledger.hold(GROUP_A, {"w1": {"cpu": 1.0}})
    assert ledger.hold(JOB_A, {"w2": {"cpu": 1.0}}) == ["w1"]
    assert ledger.placed_on("w1") == [GROUP_A] and ledger.placed_on("w2") == [JOB_A]
    assert ledger.usage("w1").used == {"cpu": 1.0}
    assert ledger.release(JOB_A) == ["w2"]
    assert ledger.release(JOB_A) == []
    assert ledger.placed_on("w2") == []


def test_a_job_run_as_parts_holds_each_part_on_its_worker() -> None:
    ledger = Ledger()
    assert ledger.hold(JOB_A, {"w1": {"cpu": 4.0}, "w2": {"cpu": 4.0}}) == []
    assert ledger.placed_on("w1") == [JOB_A] and ledger.placed_on("w2") == [JOB_A]
    assert ledger.usage("w1") == Usage(1, {"cpu": 4.0}) and ledger.usage("w2") == Usage(1, {"cpu": 4.0})
    # A lost part's indexes go to w3: w2 is freed, w1 keeps its part.
    assert ledger.hold(JOB_A, {"w1": {"cpu": 4.0}, "w3": {"cpu": 2.0}}) == ["w2"]
    assert ledger.usage("w2") == Usage(0, {"cpu": 0.0}) and ledger.usage("w3") == Usage(1, {"cpu": 2.0})
    assert sorted(ledger.release(JOB_A)) == ["w1", "w3"]
    assert ledger.usage("w1") == Usage(0, {"cpu": 0.0})


def test_an_unknown_worker_uses_nothing() -> None:
    assert Ledger().usage("nowhere") == Usage(0, {})


# --- waiting ------------------------------------------------------------------------------------------------------


def _rank(key: Key, priority: int = 0, created: str = T0) -> Rank:
    return rank_of(key, priority, created)


@pytest.mark.parametrize(
    ("waiting", "order"),
    [
        pytest.param(
            [(JOB_A, 0, T0), (JOB_B, 100, T1)],
            [JOB_B, JOB_A],
            id="higher-priority-first",
        ),
        pytest.param(
            [(JOB_A, -5, T0), (JOB_B, 0, T2)],
            [JOB_B, JOB_A],
            id="negative-priority-after-zero",
        ),
        pytest.param(
            [(JOB_B, 0, T0), (JOB_A, 0, T1)],
            [JOB_B, JOB_A],
            id="same-priority-older-first",
        ),
        pytest.param(
            [(GROUP_A, 0, T0), (JOB_B, 0, T0), (JOB_A, 0, T0)],
            [JOB_A, JOB_B, GROUP_A],
            id="same-priority-same-age-by-kind-then-key",
        ),
        pytest.param(
            [(JOB_A, 0, T0), (GROUP_A, 10, T2), (JOB_B, 10, T1)],
            [JOB_B, GROUP_A, JOB_A],
            id="across-kinds",
        ),
    ],
)
def test_waiting_jobs_are_in_rank_order(waiting: list[tuple[Key, int, str]], order: list[Key]) -> None:
    ledger = Ledger()
    for key, priority, created in waiting:
        ledger.wait(key, _rank(key, priority, created), frozenset({"w1"}))
    assert list(ledger.waiting()) == order
    assert list(ledger.waiting("w1")) == order
    assert ledger.waiting_count == len(order)


def test_waiting_again_with_a_new_rank_moves_the_job() -> None:
    ledger = Ledger()
    ledger.wait(JOB_A, _rank(JOB_A, 0), frozenset({"w1"}))
    ledger.wait(JOB_B, _rank(JOB_B, 5), frozenset({"w1"}))
    ledger.wait(JOB_A, _rank(JOB_A, 10), frozenset({"w1"}))
    ledger.wait(JOB_A, _rank(JOB_A, 10), frozenset({"w1"}))
    assert list(ledger.waiting()) == [JOB_A, JOB_B]
    assert ledger.waiting_count == 2


def test_waiting_for_a_worker_lists_only_jobs_that_name_it() -> None:
    ledger = Ledger()
    ledger.wait(JOB_A, _rank(JOB_A, 1), frozenset({"w1", "w2"}))
    ledger.wait(JOB_B, _rank(JOB_B, 2), frozenset({"w2"}))
    ledger.wait(GROUP_A, _rank(GROUP_A, 3), frozenset())  # waits for something else (a matching worker, ...)
    assert list(ledger.waiting("w1")) == [JOB_A]
    assert list(ledger.waiting("w2")) == [JOB_B, JOB_A]
    assert list(ledger.waiting("w3")) == []
    assert list(ledger.waiting()) == [GROUP_A, JOB_B, JOB_A]
    ledger.wait(JOB_B, _rank(JOB_B, 2), frozenset({"w1"}))
    assert list(ledger.waiting("w1")) == [JOB_B, JOB_A] and list(ledger.waiting("w2")) == [JOB_A]


def test_unwait_and_hold_take_a_job_out_of_the_order() -> None:
    ledger = Ledger()
    for priority, key in enumerate([JOB_A, JOB_B, GROUP_A]):
        ledger.wait(key, _rank(key, priority), frozenset({"w1"}))
    ledger.unwait(JOB_B)
    ledger.unwait(JOB_B)
    assert list(ledger.waiting()) == [GROUP_A, JOB_A] and not ledger.is_waiting(JOB_B)
    ledger.hold(GROUP_A, {"w1": {}})
    assert list(ledger.waiting()) == [JOB_A] and not ledger.is_waiting(GROUP_A)
    ledger.hold(GROUP_A, {"w1": {}})  # held already: still not waiting
    assert list(ledger.waiting()) == [JOB_A]
    assert ledger.held_for_others(_rank(JOB_B, -1), frozenset({"w1"})) == frozenset({"w1"})
    ledger.unwait(JOB_A)
    assert list(ledger.waiting()) == [] and ledger.waiting_count == 0
    assert ledger.held_for_others(_rank(JOB_B, -100), frozenset({"w1"})) == frozenset()


HIGH = ("Job", "default/high")
MIDDLE = ("JobGroup", "default/middle")
LOW = ("Job", "default/low")


def _queue() -> Ledger:
    ledger = Ledger()
    ledger.wait(HIGH, _rank(HIGH, 100), frozenset({"w1"}))
    ledger.wait(MIDDLE, _rank(MIDDLE, 50), frozenset({"w2", "w3"}))
    ledger.wait(LOW, _rank(LOW, 0), frozenset({"w4"}))
    return ledger


ALL = frozenset({"w1", "w2", "w3", "w4", "w5"})


@pytest.mark.parametrize(
    ("rank", "workers", "held"),
    [
        pytest.param(_rank(HIGH, 100), ALL, set(), id="the-first-is-held-for-nobody"),
        pytest.param(_rank(MIDDLE, 50), ALL, {"w1"}, id="the-second-waits-behind-the-first"),
        pytest.param(_rank(LOW, 0), ALL, {"w1", "w2", "w3"}, id="the-last-behind-both"),
        pytest.param(_rank(("Job", "default/new"), -1), ALL, {"w1", "w2", "w3", "w4"}, id="a-new-lower-job"),
        pytest.param(_rank(("Job", "default/new"), 200), ALL, set(), id="a-new-higher-job"),
        pytest.param(_rank(("Job", "default/new"), 50, T1), ALL, {"w1", "w2", "w3"}, id="same-priority-younger"),
        pytest.param(_rank(("Job", "default/aaa"), 50, T0), ALL, {"w1"}, id="same-priority-same-age-ranked-before-by-kind"),
        pytest.param(_rank(("Job", "default/new"), 0), frozenset({"w2", "w5"}), {"w2"}, id="only-of-the-workers-asked"),
        pytest.param(_rank(("Job", "default/new"), 0), frozenset({"w5"}), set(), id="a-worker-nobody-waits-for"),
    ],
)  # fmt: skip
def test_capacity_is_held_only_for_jobs_ranked_strictly_before(
    rank: Rank, workers: frozenset[str], held: set[str]
) -> None:
    assert _queue().held_for_others(rank, workers) == frozenset(held)


# --- what a Job asks of a worker: adapters and demand -------------------------------------------------------------


def _containers(*requests: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {"name": f"c{i}", "image": "busybox", "resources": {"requests": r}} for i, r in enumerate(requests)
    ]


def _jobgroup(*replicated: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.multiqueue.dev/v1",
        "kind": "JobGroup",
        "metadata": {"name": "trainer", "namespace": "default", "uid": "uid-g"},
        "spec": {"managedBy": "multiqueue.dev/dispatcher", "replicatedJobs": list(replicated)},
    }


def _replicated(name: str, containers: list[dict[str, Any]], **counts: int) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"restartPolicy": "Never", "containers": containers}}}
    if "parallelism" in counts:
        job_spec["parallelism"] = counts["parallelism"]
    entry: dict[str, Any] = {"name": name, "template": {"spec": job_spec}}
    if "replicas" in counts:
        entry["replicas"] = counts["replicas"]
    return entry


@pytest.mark.parametrize(
    ("group", "pod_sets", "asked"),
    [
        pytest.param(
            _jobgroup(_replicated("workers", _containers({"cpu": "500m", "memory": "1Gi"}), replicas=2, parallelism=2)),
            [PodSet("workers", 4, {"cpu": 0.5, "memory": GIB})],
            {"cpu": 2.0, "memory": 4 * GIB},
            id="replicas-times-parallelism",
        ),
        pytest.param(
            _jobgroup(_replicated("main", _containers({"cpu": "1"}, {"cpu": "250m", "nvidia.com/gpu": "1"}))),
            [PodSet("main", 1, {"cpu": 1.25, "nvidia.com/gpu": 1.0})],
            {"cpu": 1.25, "nvidia.com/gpu": 1.0},
            id="defaults-one-and-containers-added-up",
        ),
        pytest.param(
            _jobgroup(
                _replicated("driver", _containers({"cpu": "1"}), replicas=1),
                _replicated("workers", _containers({"cpu": "2", "memory": "512Mi"}), replicas=3, parallelism=2),
            ),
            [PodSet("driver", 1, {"cpu": 1.0}), PodSet("workers", 6, {"cpu": 2.0, "memory": 512 * 2.0**20})],
            {"cpu": 13.0, "memory": 6 * 512 * 2.0**20},
            id="several-replicated-jobs",
        ),
        pytest.param(
            _jobgroup(_replicated("none", _containers({}), replicas=2)),
            [PodSet("none", 2, {})],
            {},
            id="no-requests",
        ),
    ],
)  # fmt: skip
def test_a_jobgroup_asks_for_its_templates_requests_times_its_pods(
    group: dict[str, Any], pod_sets: list[PodSet], asked: dict[str, float]
) -> None:
    assert DeclaredAdapter(JOBGROUP).pod_sets(group) == pod_sets
    assert demand(DeclaredAdapter(JOBGROUP).pod_sets(group)) == asked


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        pytest.param({}, 1, id="defaults"),
        pytest.param({"parallelism": 3}, 3, id="parallelism"),
        pytest.param({"parallelism": 3, "completions": 10}, 3, id="parallelism-below-completions"),
        pytest.param({"parallelism": 5, "completions": 2}, 2, id="completions-below-parallelism"),
        pytest.param({"parallelism": 0}, 0, id="parallelism-zero"),
    ],
)
def test_a_job_asks_for_its_requests_times_the_pods_that_run_at_once(spec: dict[str, Any], pods: int) -> None:
    body = job(**spec)
    body["spec"]["template"]["spec"]["containers"] = _containers({"cpu": "500m", "memory": "1Gi"})
    sets = BatchJobAdapter().pod_sets(body)
    assert sets == [PodSet("main", pods, {"cpu": 0.5, "memory": GIB})]
    assert demand(sets) == {"cpu": 0.5 * pods, "memory": GIB * pods}


def test_demand_adds_up_pod_sets() -> None:
    sets = [
        PodSet("a", 2, {"cpu": 1.0}),
        PodSet("b", 3, {"cpu": 0.5, "memory": 8.0}),
        PodSet("c", 0, {"cpu": 9.0}),
    ]
    assert demand(sets) == {"cpu": 3.5, "memory": 24.0}
    assert demand([]) == {}

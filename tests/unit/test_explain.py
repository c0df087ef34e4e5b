"""What ``multiqueue explain`` makes of a Job and the workers' states: the decision line per state of the Job,
the verdicts per worker, and a placed Job not counted against its own worker."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.dispatch.adapters.job import BatchJobAdapter
from multiqueue.dispatch.explain import explain, view_of
from multiqueue.dispatch.mirror import CLUSTER_LABEL, Identity
from multiqueue.dispatch.readmodel import WorkerState
from multiqueue.dispatch.workers import CONNECTED
from tests.unit.jobfixtures import job

US = Identity("multiqueue", "multiqueue.dev/dispatcher")


def state(name: str, used: float = 0.0, running: int = 0, **extra: Any) -> WorkerState:
    return WorkerState(
        name,
        extra.pop("reason", CONNECTED),
        extra.pop("labels", {}),
        running,
        {"cpu": (used, 4.0)},
        **extra,
    )


def asking(cpu: str, placed_on: str | None = None, **spec: Any) -> dict[str, Any]:
    body = job(managedBy=US.managed_by, **spec)
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    if placed_on is not None:
        body["metadata"]["labels"] = {CLUSTER_LABEL: placed_on}
        body["metadata"]["finalizers"] = [US.finalizer]
    return body


def test_view_of_a_state_is_what_placement_reads() -> None:
    view = view_of(
        WorkerState(
            "w", "Unauthorized", {"a": "b"}, 2, {"jobs": (2.0, 3.0), "cpu": (1.5, 4.0)}, draining=True
        )
    )
    assert (view.active, view.load, view.max_jobs, view.free, view.capacity, view.accepting, view.reason) == (
        False, 2, 3, {"cpu": 2.5}, {"cpu": 4.0}, False, "Unauthorized",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "states", "expected"),
    [
        pytest.param(asking("1"), [state("a", used=3.5), state("b")], ("Waiting", "not placed yet; now it would go to worker b", "b"), id="would-go-now"),
        pytest.param(asking("1"), [state("a", used=3.5)], ("Waiting", "waiting: 0/1 workers can take this Job: 1 has no capacity now (a: cpu 3.5/4)", None), id="waits"),
        pytest.param(asking("4", "a"), [state("a", used=4.0, running=1), state("b", used=1.0)], ("Placed", "placed on worker a", "a"), id="placed-not-against-itself"),
        pytest.param(asking("1", suspend=True), [state("a")], ("Suspended", "suspended: not placed until it is resumed; now it would go to worker a", "a"), id="suspended"),
    ],
)  # fmt: skip
def test_decision(
    body: dict[str, Any], states: list[WorkerState], expected: tuple[str, str, str | None]
) -> None:
    shown = explain(BatchJobAdapter(), body, US, "LeastLoaded", states)
    assert (shown.state, shown.decision, shown.worker) == expected


def test_a_placed_job_passes_on_its_own_worker() -> None:
    shown = explain(BatchJobAdapter(), asking("4", "a"), US, "LeastLoaded", [state("a", used=4.0, running=1)])
    assert [w.passes for w in shown.workers] == [True] and shown.workers[0].chosen
    assert shown.as_dict()["workers"][0]["passes"] is True

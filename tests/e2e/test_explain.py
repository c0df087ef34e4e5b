"""``multiqueue explain``: each worker's verdict from each placement filter, the scores and the decision, for
Jobs that wait, that are pinned to a draining worker, that ask for workers by label, and that run."""

from __future__ import annotations

import json

import pytest

from multiqueue.api.types import JOBS, Obj
from multiqueue.dispatch.affinity import WORKER_AFFINITY_ANNOTATION
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.explain import Explanation, explain_in_manager
from multiqueue.dispatch.mirror import PIN_LABEL
from tests.e2e.conftest import Clusters
from tests.e2e.test_cli import multiqueue
from tests.e2e.test_dispatch import managed, placed
from tests.e2e.test_dispatch_failures import wait_for_event


@pytest.fixture(autouse=True)
def not_on_kind(e2e_provider: str) -> None:
    """Skips on kind before its clusters are set up: the same manager code explains on local and upstream, and
    kind's time in CI goes to what only kind shows."""
    if e2e_provider == "kind":
        reason = (
            "not on kind: explain reads placement as local and upstream show it; kind's CI time is kept short"
        )
        print(reason)
        pytest.skip(reason)


def failing(shown: dict[str, object]) -> dict[str, list[str]]:
    """Worker -> the reason codes of the filters that stop it, from ``explain -o json``."""
    return {
        str(w["name"]): [v["reason"] for v in w["verdicts"] if not v["passes"]]  # type: ignore[index]
        for w in shown["workers"]  # type: ignore[attr-defined]
    }


async def explained(clusters: Clusters, name: str) -> dict[str, object]:
    code, out, err = await multiqueue("explain", name, *clusters.cli_target(), "-o", "json")
    assert code == 0, err
    document: dict[str, object] = json.loads(out)
    return document


async def test_a_job_no_worker_can_fit_is_explained_worker_by_worker(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    await clusters.set_capacity({w: Capacity(resources={"cpu": "4"}) for w in ("worker-1", "worker-2")})
    huge = managed("huge", "true")
    huge["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    await clusters.client().create(JOBS, huge, "default")
    warning = await wait_for_event(clusters.client(), "huge", "NeverFits")
    line = "0/2 workers can take this Job: 2 ask more cpu than they have in all (worker-1: cpu 4, worker-2: cpu 4)"
    assert (warning["type"], warning["message"]) == ("Warning", line)
    shown = await explained(clusters, "huge")
    assert (shown["state"], shown["reason"], shown["summary"]) == ("Waiting", "NeverFits", line)
    assert shown["decision"] == f"waiting: {line}"
    # Every filter's verdict: neither could ever take it, and neither has room now.
    assert failing(shown) == {
        "worker-1": ["NeverFits", "NoCapacity"],
        "worker-2": ["NeverFits", "NoCapacity"],
    }
    code, out, _ = await multiqueue("status", *clusters.cli_target(), "-o", "wide")
    assert code == 0
    assert next(row for row in out.splitlines() if "default/huge" in row).endswith(line)
    code, out, err = await multiqueue("explain", "nosuch", *clusters.cli_target())
    assert (code, out, err) == (
        1,
        "",
        'multiqueue: error: job "default/nosuch" not found on the management cluster\n',
    )


async def test_a_job_pinned_to_a_draining_worker_is_explained(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    local = clusters.in_process("drains a worker of the in-process manager and reads its read model")
    manager = local.manager
    assert manager is not None and manager.dispatcher is not None and manager.read_model is not None
    manager.dispatcher.pool.drain("worker-1")
    pinned = managed("pinned", "true")
    pinned["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
    await clusters.client().create(JOBS, pinned, "default")
    pending = await wait_for_event(clusters.client(), "pinned", "Pending")
    assert pending["message"] == (
        "0/2 workers can take this Job: 1 is not the pinned worker worker-1 (worker-2), 1 is draining (worker-1)"
    )
    shown = explain_in_manager(manager.read_model, "Job", "default/pinned")
    assert isinstance(shown, Explanation)
    assert (shown.state, shown.reason, shown.pinned) == ("Waiting", "WorkerDraining", "worker-1")
    assert {w.name: [(v.reason, v.message) for v in w.verdicts if not v.passes] for w in shown.workers} == {
        "worker-1": [("Draining", "is draining")],
        "worker-2": [("NotPinned", "is not the pinned worker (worker-1)")],
    }
    assert shown.summary == (
        "0/2 workers can take this Job: 1 is not the pinned worker worker-1 (worker-2), 1 is draining (worker-1)"
    )


async def test_a_job_with_an_affinity_only_worker_2_matches_is_explained(
    dispatching_clusters: Clusters,
) -> None:
    clusters = dispatching_clusters
    gate = clusters.gate("gate")
    choosy: Obj = managed("choosy", f"while [ ! -f {gate} ]; do sleep 0.1; done")
    terms = {"required": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["us"]}]}]}
    choosy["metadata"]["annotations"] = {WORKER_AFFINITY_ANNOTATION: json.dumps(terms)}
    await clusters.client().create(JOBS, choosy, "default")
    running = await clusters.wait_for(JOBS, "default", "choosy", placed)
    assert running["metadata"]["labels"]["multiqueue.dev/cluster"] == "worker-2"
    shown = await explained(clusters, "choosy")
    assert (shown["state"], shown["worker"], shown["decision"]) == (
        "Placed",
        "worker-2",
        "placed on worker worker-2",
    )
    assert failing(shown) == {"worker-1": ["AffinityMismatch"], "worker-2": []}
    assert [w["name"] for w in shown["workers"] if w["chosen"]] == ["worker-2"]  # type: ignore[attr-defined]
    await gate.open()


async def test_a_placed_job_is_explained_in_a_table(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    gate = clusters.gate("gate")
    await clusters.client().create(
        JOBS, managed("runs", f"while [ ! -f {gate} ]; do sleep 0.1; done"), "default"
    )
    running = await clusters.wait_for(JOBS, "default", "runs", placed)
    worker = running["metadata"]["labels"]["multiqueue.dev/cluster"]
    code, out, err = await multiqueue("explain", "runs", "-n", "default", *clusters.cli_target())
    assert code == 0, err
    lines = out.splitlines()
    assert f"Decision:  placed on worker {worker}" in lines and "State:     Placed" in lines
    header = next(line for line in lines if line.startswith("WORKER"))
    assert header.split() == ["WORKER", "ACTIVE", "FILTERS", "VERDICT", "AFFINITY", "POLICY", "CHOSEN"]
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 :] if line.strip()}
    assert set(rows) == {"worker-1", "worker-2"}
    assert all(row[1:4] == ["True", "9/9", "passes"] for row in rows.values())
    assert rows[worker][-1] == "yes"
    await gate.open()


async def test_a_malformed_affinity_is_a_warning_and_the_job_waits(dispatching_clusters: Clusters) -> None:
    clusters = dispatching_clusters
    malformed = managed("malformed", "true")
    malformed["metadata"]["annotations"] = {WORKER_AFFINITY_ANNOTATION: '{"required": {"region": "us"}}'}
    await clusters.client().create(JOBS, malformed, "default")
    warning = await wait_for_event(clusters.client(), "malformed", "InvalidAffinity")
    message = f"invalid {WORKER_AFFINITY_ANNOTATION}: required must be a list"
    assert (warning["type"], warning["message"]) == ("Warning", message)
    shown = await explained(clusters, "malformed")
    assert (shown["state"], shown["reason"], shown["decision"]) == (
        "Waiting",
        "InvalidAffinity",
        f"waiting: {message}",
    )

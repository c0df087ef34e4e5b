"""An Indexed Job split across workers, on local and upstream clusters: 40 indexes, 8 at once, a cpu each, on
workers of 4 cpu, run on two workers at once, each index once; suspend and resume, delete, a failed index, and a
lost worker.

The clusters are the scenario's own (management and three workers of 4 cpu each) with the manager in process;
each pod appends a line to a marker file of its index in a folder every pod process of this machine sees.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest

from multiqueue.api.types import JOBS, PODS
from multiqueue.dispatch.mirror import CLUSTER_LABEL, PARTS_ANNOTATION, SPLIT_ANNOTATION
from multiqueue.dispatch.split import parts_of
from multiqueue.local.config import ControlPlane, LocalCluster, LocalConfig, LocalManager
from multiqueue.local.up import LocalClusters
from tests.e2e.conftest import GATES, Clusters, has_condition, job_body
from tests.e2e.test_dispatch_failures import wait_for_event

pytestmark = pytest.mark.e2e
Obj = dict[str, Any]
MANAGED_BY: Final = "multiqueue.dev/dispatcher"
WORKERS: Final = ("worker-1", "worker-2", "worker-3")
COMPLETIONS: Final = 40


@pytest.fixture
async def split_clusters(control_plane: ControlPlane, tmp_path: Path) -> AsyncIterator[Clusters]:
    """management and three workers of 4 cpu each: the Job's 8 pods fit on two of them, worker-1 and worker-2 (the
    first by name among those with the most room); worker-3 is where a lost worker's part goes."""
    workers = [{"name": w, "capacity": {"resources": {"cpu": "4"}}} for w in WORKERS]
    config = LocalConfig(
        # Each worker's Node says 4 cpu, so that kube-scheduler places 4 pods of a cpu there on upstream.
        clusters=[
            LocalCluster.model_validate({"name": n, **({"capacityCpu": 4} if n != "management" else {})})
            for n in ("management", *WORKERS)
        ],
        manager=LocalManager.model_validate({"workers": workers, "mirrorTTLSecondsAfterFinished": 0}),
        control_plane=control_plane,
    )
    clusters = LocalClusters(config, tmp_path / "state", disposable=True)
    await clusters.start()
    clients = {name: c.client for name, c in clusters.components.items() if c.client is not None}
    scenario = Clusters(
        clients, clusters.kubeconfig_path, clusters, "local" if control_plane == "embedded" else "upstream"
    )
    try:
        yield scenario
    finally:
        await clusters.stop(stop_pods=True)
        shutil.rmtree(GATES / scenario.scenario, ignore_errors=True)


def sweep(name: str, command: str, **spec: Any) -> Obj:
    """The issue's Job: 40 indexes, 8 at once, a cpu each, asking to be split."""
    body = job_body(
        name,
        command,
        managedBy=MANAGED_BY,
        completionMode="Indexed",
        completions=COMPLETIONS,
        parallelism=8,
        **spec,
    )
    body["metadata"]["annotations"] = {SPLIT_ANNOTATION: "true"}
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    return body


def marking(folder: Path, then: str = "true") -> str:
    """Each pod appends its hostname to the marker file of its index, then runs ``then``."""
    return f'echo "$(hostname)" >> {folder}/$JOB_COMPLETION_INDEX; {then}'


async def markers(folder: Path) -> dict[int, list[str]]:
    def read() -> dict[int, list[str]]:
        return {int(p.name): p.read_text().split() for p in folder.iterdir()} if folder.exists() else {}

    return await asyncio.to_thread(read)


def marker_folder(clusters: Clusters) -> Path:
    folder = GATES / clusters.scenario / f"markers-{uuid.uuid4().hex[:6]}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


async def ready_on(clusters: Clusters, worker: str, name: str, ready: int) -> Obj:
    return await clusters.wait_for(
        JOBS,
        "default",
        name,
        lambda j: (j.get("status") or {}).get("ready") == ready,
        cluster=worker,
        within=90,
    )


async def test_an_indexed_job_runs_on_two_workers_at_once_and_each_index_once(
    split_clusters: Clusters,
) -> None:
    clusters = split_clusters
    folder = marker_folder(clusters)
    gate = clusters.gate("go")
    # The first pods of both parts wait at the gate: both workers run 4 of them at once before any finishes.
    await clusters.client().create(
        JOBS, sweep("sweep", marking(folder, f"while [ ! -f {gate} ]; do sleep 0.1; done")), "default"
    )
    user = await clusters.wait_for(
        JOBS, "default", "sweep", lambda j: PARTS_ANNOTATION in (j["metadata"].get("annotations") or {})
    )
    parts = parts_of(user)
    assert parts is not None
    assert [(p.worker, p.indexes, p.parallelism) for p in parts.plans] == [
        ("worker-1", "0-19", 4),
        ("worker-2", "20-39", 4),
    ]
    await ready_on(clusters, "worker-1", "sweep", 4)
    await ready_on(clusters, "worker-2", "sweep", 4)
    running = await clusters.wait_for(
        JOBS, "default", "sweep", lambda j: (j.get("status") or {}).get("active") == 8
    )
    assert running["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"
    await gate.open()
    done = await clusters.wait_for(JOBS, "default", "sweep", has_condition("Complete"), within=180)
    assert done["status"]["completedIndexes"] == "0-39"
    assert done["status"]["succeeded"] == COMPLETIONS
    assert [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"] == [
        "SuccessCriteriaMet",
        "Complete",
    ]
    ran = await markers(folder)
    assert sorted(ran) == list(range(COMPLETIONS))
    assert {i: lines for i, lines in ran.items() if len(lines) != 1} == {}, "an index ran twice"
    for worker, indexes in (("worker-1", range(20)), ("worker-2", range(20, 40))):
        pods, _ = await clusters.client(worker).list(
            PODS, "default", label_selector="batch.kubernetes.io/job-name=sweep"
        )
        ran_there = {
            int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]) for p in pods
        }
        assert ran_there <= set(indexes), (
            f"{worker} ran indexes of another part: {sorted(ran_there - set(indexes))}"
        )


async def test_deleting_a_split_job_deletes_every_part(split_clusters: Clusters) -> None:
    clusters = split_clusters
    await clusters.client().create(JOBS, sweep("doomed", "sleep 60"), "default")
    await ready_on(clusters, "worker-1", "doomed", 4)
    await ready_on(clusters, "worker-2", "doomed", 4)
    await clusters.client().delete(JOBS, "doomed", "default", propagation="Background")
    for worker in ("worker-1", "worker-2"):
        await clusters.wait_gone(JOBS, "default", "doomed", cluster=worker, within=30)
    await clusters.wait_gone(JOBS, "default", "doomed", within=30)


async def test_suspend_and_resume_a_split_job_keeps_every_parts_progress(split_clusters: Clusters) -> None:
    clusters = split_clusters
    folder = marker_folder(clusters)
    gate = clusters.gate("go")
    # Indexes 0-3 and 20-23 finish at once; the rest wait for the gate.
    command = marking(
        folder,
        f"case $JOB_COMPLETION_INDEX in 0|1|2|3|20|21|22|23) ;; *) while [ ! -f {gate} ]; do sleep 0.1; done;; esac",
    )
    management = clusters.client()
    await management.create(JOBS, sweep("pausable", command), "default")
    await clusters.wait_for(
        JOBS,
        "default",
        "pausable",
        lambda j: (
            (j.get("status") or {}).get("completedIndexes") == "0-3,20-23"
            and (j.get("status") or {}).get("ready") == 8
        ),
        within=90,
    )
    await management.patch(JOBS, "pausable", {"spec": {"suspend": True}}, "default")
    suspended = await clusters.wait_for(
        JOBS,
        "default",
        "pausable",
        lambda j: has_condition("Suspended")(j) and not (j.get("status") or {}).get("active"),
        within=60,
    )
    assert suspended["status"]["completedIndexes"] == "0-3,20-23"
    await gate.open()
    await management.patch(JOBS, "pausable", {"spec": {"suspend": False}}, "default")
    done = await clusters.wait_for(JOBS, "default", "pausable", has_condition("Complete"), within=180)
    assert done["status"]["completedIndexes"] == "0-39"
    ran = await markers(folder)
    for index in (0, 1, 2, 3, 20, 21, 22, 23):
        assert len(ran[index]) == 1, f"index {index}, completed before the suspension, ran again"


async def test_a_failed_index_of_a_split_job_is_reported_and_the_rest_complete(
    split_clusters: Clusters,
) -> None:
    clusters = split_clusters
    command = '[ "$JOB_COMPLETION_INDEX" = 7 ] && exit 1; true'
    await clusters.client().create(JOBS, sweep("seven", command, backoffLimitPerIndex=0), "default")
    failed = await clusters.wait_for(JOBS, "default", "seven", has_condition("Failed"), within=180)
    assert failed["status"]["failedIndexes"] == "7"
    assert failed["status"]["completedIndexes"] == "0-6,8-39"
    assert [
        c["reason"] for c in failed["status"]["conditions"] if c["type"] in ("FailureTarget", "Failed")
    ] == [
        "FailedIndexes",
        "FailedIndexes",
    ]
    await wait_for_event(clusters.client(), "seven", "FailedIndexes")


async def test_a_lost_workers_part_runs_its_unfinished_indexes_on_another(split_clusters: Clusters) -> None:
    clusters = split_clusters
    local = clusters.local
    assert local is not None
    assert await clusters.restart_manager(worker_lost_timeout=3.0) is not None
    folder = marker_folder(clusters)
    gate = clusters.gate("go")
    command = marking(
        folder, f'[ "$JOB_COMPLETION_INDEX" -lt 30 ] && exit 0; while [ ! -f {gate} ]; do sleep 0.1; done'
    )
    await clusters.client().create(JOBS, sweep("moving", command), "default")
    await clusters.wait_for(
        JOBS,
        "default",
        "moving",
        lambda j: (j.get("status") or {}).get("completedIndexes") == "0-29",
        within=120,
    )
    await local.stop_server("worker-2")
    stopped = time.monotonic()
    moved = await clusters.wait_for(
        JOBS,
        "default",
        "moving",
        lambda j: (p := parts_of(j)) is not None and "worker-2" not in {x.worker for x in p.plans},
        within=60,
    )
    parts = parts_of(moved)
    assert parts is not None
    assert [(p.worker, p.indexes) for p in parts.plans] == [("worker-1", "0-19"), ("worker-3", "30-39")]
    event = await wait_for_event(clusters.client(), "moving", "Redispatched")
    assert "worker worker-2 was unreachable" in event["message"]
    await gate.open()
    done = await clusters.wait_for(JOBS, "default", "moving", has_condition("Complete"), within=180)
    assert done["status"]["completedIndexes"] == "0-39"
    ran = await markers(folder)
    assert all(len(ran[i]) == 1 for i in range(30)), "an index completed before the loss ran again"
    print(f"\nworker-2 lost: its indexes planned again in {time.monotonic() - stopped:.1f} s")
    await local.start_server("worker-2")
    await clusters.wait_gone(JOBS, "default", "moving", cluster="worker-2", within=60)


async def test_status_explain_and_logs_show_the_parts(split_clusters: Clusters) -> None:
    from multiqueue.dispatch import inspect, joblogs

    clusters = split_clusters
    config, contexts = clusters.reader()
    gate = clusters.gate("go")
    command = f"echo index $JOB_COMPLETION_INDEX; while [ ! -f {gate} ]; do sleep 0.1; done"
    await clusters.client().create(JOBS, sweep("shown", command), "default")
    await ready_on(clusters, "worker-1", "shown", 4)
    await ready_on(clusters, "worker-2", "shown", 4)
    workers, rows = await inspect.status(config, contexts)
    assert [(r.key, r.worker) for r in rows] == [("default/shown", "worker-1[0-19],worker-2[20-39]")]
    assert {w.name: w.running for w in workers} == {"worker-1": 1, "worker-2": 1, "worker-3": 0}
    explained = await inspect.explain(config, "shown", "default", contexts)
    assert (
        explained.decision
        == "placed as parts: indexes 0-19 on worker worker-1, indexes 20-39 on worker worker-2"
    )
    # An index of worker-2's part: its log is read there.
    pods, _ = await clusters.client("worker-2").list(
        PODS, "default", label_selector="batch.kubernetes.io/job-name=shown"
    )
    index_of = {
        int(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]): p for p in pods
    }
    first = min(index_of)
    assert first >= 20
    async with asyncio.timeout(30):
        async for _line in clusters.client("worker-2").follow_log(
            index_of[first]["metadata"]["name"], "default"
        ):
            break
    found = await joblogs.logs(config, "shown", "default", joblogs.LogOptions(index=first), contexts)
    assert [text.strip() for _, text in found] == [f"index {first}"]
    await gate.open()
    await clusters.wait_for(JOBS, "default", "shown", has_condition("Complete"), within=180)

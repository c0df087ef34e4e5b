"""JobSet dispatched to a worker where the real JobSet controller (built from its Go module by
hack/build-jobset.sh) runs the mirror: its child Jobs and pods run there, and the JobSet's status comes back to the
user's JobSet on the management cluster, which no JobSet controller touches.

On the local and upstream providers the controller runs as one process per worker; on kind it is installed as an
admin installs it (the admin guide's commands: the image built here loaded into each worker, the upstream manifest
with its webhooks, the CRD alone on the management cluster) for this module's scenarios, and deploy/'s manager is
reconfigured to dispatch JobSets.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from multiqueue.api.meta import as_dict
from multiqueue.api.types import JOBS
from multiqueue.dashboard import server as dashboard
from multiqueue.dispatch import dispatcher, inspect
from multiqueue.dispatch.adapters.declared import JOBSET
from multiqueue.dispatch.config import Capacity
from multiqueue.dispatch.mirror import CLUSTER_LABEL, ORIGIN_LABEL, PIN_LABEL
from multiqueue.kube.errors import NotFound
from tests.e2e.conftest import Clusters, has_condition, job_body
from tests.e2e.kind import KindEnvironment
from tests.e2e.test_cli import multiqueue
from tests.e2e.test_dispatch_failures import wait_for_event
from tests.support import jobset
from tests.support.processes import REPO

pytestmark = pytest.mark.e2e
JOBSETS = JOBSET.resource
WORKERS = ("worker-1", "worker-2")
MANAGED_BY = "multiqueue.dev/dispatcher"


@pytest.fixture(scope="module")
def jobset_on_kind(request: pytest.FixtureRequest, e2e_provider: str) -> Iterator[Path | None]:
    """On kind, JobSet installed on the session's clusters as the admin guide says, for this module's scenarios,
    and taken away after them, so the other modules find the clusters as kind-up made them (the controller asks
    each worker for half a cpu). It is made before a scenario looks at its clusters, so no scenario's clean-up
    takes jobset-system for a namespace the scenario made. None on the other providers."""
    if e2e_provider != "kind":
        yield None
        return
    environment: KindEnvironment = request.getfixturevalue("kind_environment")
    folder = jobset.image_or_skip()
    try:
        jobset.install_on_kind(environment.kind_kubeconfig, environment.assets.folder)
        yield folder
    finally:
        jobset.remove_from_kind(environment.kind_kubeconfig, environment.assets.folder)


@pytest.fixture
async def jobset_clusters(
    jobset_on_kind: Path | None, dispatching_clusters: Clusters, tmp_path: Path
) -> AsyncIterator[Clusters]:
    """The clusters with the JobSet CRD everywhere, a JobSet controller per worker, and a manager of Jobs and
    JobSets."""
    clusters = dispatching_clusters
    if jobset_on_kind is not None:
        for worker in WORKERS:
            await jobset.until_webhooks_answer(clusters.client(worker))
        await clusters.restart_manager(kinds=["Job", "JobSet"])
        try:
            yield clusters
        finally:
            await _delete_jobsets(clusters)
        return
    folder = jobset.built_or_skip()
    for name in ("management", *WORKERS):
        await jobset.install_crd(clusters.client(name), folder)
    controllers = [
        jobset.JobSetController(folder, clusters.kubeconfig, worker, tmp_path / f"jobset-{worker}")
        for worker in WORKERS
    ]
    try:
        for controller in controllers:
            await controller.start()
        await clusters.restart_manager(kinds=["Job", "JobSet"])
        yield clusters
    finally:
        for controller in controllers:
            await controller.stop()


async def _delete_jobsets(clusters: Clusters) -> None:
    """On kind, where JobSet stays for the module: the scenario's JobSets deleted, users' first (the manager, still
    dispatching JobSets, then deletes their mirrors), so the next scenario can reuse the names."""
    for name in ("management", *WORKERS):
        client = clusters.client(name)
        items, _ = await client.list(JOBSETS)
        for item in items:
            with contextlib.suppress(NotFound):
                await client.delete(
                    JOBSETS, item["metadata"]["name"], item["metadata"]["namespace"], propagation="Background"
                )
        for item in items:
            meta = item["metadata"]
            await clusters.wait_gone(JOBSETS, meta["namespace"], meta["name"], name, within=120)


def example() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "examples" / "jobset.yaml").read_text())
    return loaded


async def test_a_jobset_runs_under_the_real_controller_on_a_worker_and_its_status_comes_back(
    jobset_clusters: Clusters,
) -> None:
    clusters = jobset_clusters
    management = clusters.client()
    created = await management.create(JOBSETS, example(), "default")
    user = await clusters.wait_for(
        JOBSETS, "default", "sweep", lambda s: CLUSTER_LABEL in (s["metadata"].get("labels") or {})
    )
    worker = user["metadata"]["labels"][CLUSTER_LABEL]
    done = await clusters.wait_for(JOBSETS, "default", "sweep", has_condition("Completed"), within=90)
    completed = await wait_for_event(management, "sweep", "Completed")
    assert completed["message"] == f"JobSet completed on worker {worker}"
    status = as_dict(done.get("status"))
    assert status["terminalState"] == "Completed"
    assert [(r["name"], r["succeeded"]) for r in status["replicatedJobsStatus"]] == [("workers", 2)]
    assert done["metadata"]["uid"] == created["metadata"]["uid"]

    mirror = await clusters.client(worker).get(JOBSETS, "sweep", "default")
    assert mirror["metadata"]["labels"][ORIGIN_LABEL] == "multiqueue"
    assert "managedBy" not in mirror["spec"] and mirror["metadata"]["uid"] != created["metadata"]["uid"]
    # The controller records through events.k8s.io/v1; the worker's users read its Events as core ones.
    recorded = await wait_for_event(clusters.client(worker), "sweep", "AllJobsCompleted")
    assert (recorded["involvedObject"]["uid"], recorded["reportingComponent"], recorded["type"]) == (
        mirror["metadata"]["uid"],
        "jobset",
        "Normal",
    )
    children, _ = await clusters.client(worker).list(
        JOBS, "default", label_selector="jobset.sigs.k8s.io/jobset-name=sweep"
    )
    assert sorted(j["metadata"]["name"] for j in children) == ["sweep-workers-0", "sweep-workers-1"]
    leftover, _ = await management.list(
        JOBS, "default", label_selector="jobset.sigs.k8s.io/jobset-name=sweep"
    )
    assert leftover == [], "the management cluster runs no JobSet controller for a managed JobSet"

    await management.delete(JOBSETS, "sweep", "default")
    await clusters.wait_gone(JOBSETS, "default", "sweep", cluster=worker)
    await clusters.wait_gone(JOBSETS, "default", "sweep")
    for child in ("sweep-workers-0", "sweep-workers-1"):  # the worker's garbage collector takes its Jobs
        await clusters.wait_gone(JOBS, "default", child, cluster=worker)


async def test_a_jobset_no_worker_can_ever_fit_waits_naming_every_worker(jobset_clusters: Clusters) -> None:
    clusters = jobset_clusters
    await clusters.set_capacity({w: Capacity(resources={"cpu": "4"}) for w in WORKERS})
    config, contexts = clusters.reader()
    management = clusters.client()
    big = example()
    big["metadata"]["name"] = "big"
    workers = big["spec"]["replicatedJobs"][0]
    workers["replicas"] = 1
    workers["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    big["spec"]["replicatedJobs"] = [{**copy.deepcopy(workers), "name": name} for name in ("a", "b", "c")]
    await management.create(JOBSETS, big, "default")  # 3 replicated Jobs of 2 pods of 1 cpu: 6 cpu
    warning = await wait_for_event(management, "big", "NeverFits")
    assert (
        warning["message"]
        == "0/2 workers can take this Job: 2 ask more cpu than they have in all (worker-1: cpu 4, worker-2: cpu 4)"
    )
    _, rows = await inspect.status(config, contexts)
    row = next(r for r in rows if r.key == "default/big")
    assert (row.kind, row.worker, row.state, row.reason) == ("JobSet", "-", "Waiting", "NeverFits")
    for worker in WORKERS:
        mirrors, _ = await clusters.client(worker).list(JOBSETS, "default")
        assert mirrors == []


def gated(name: str, gate: str) -> dict[str, Any]:
    """One replicated Job of one pod that waits for ``gate``, with the pod template the scenarios' Jobs use."""
    body = example()
    body["metadata"]["name"] = name
    template = job_body(name, f"while [ ! -f {gate} ]; do sleep 0.1; done")["spec"]["template"]
    template["spec"]["restartPolicy"] = "Never"
    rjob = body["spec"]["replicatedJobs"][0]
    rjob["replicas"] = 1
    rjob["template"]["spec"].update({"parallelism": 1, "completions": 1, "template": template})
    return body


def running(replicated_job: str) -> Callable[[dict[str, Any]], bool]:
    def check(jobset_: dict[str, Any]) -> bool:
        statuses = as_dict(jobset_.get("status")).get("replicatedJobsStatus") or []
        return any(s.get("name") == replicated_job and s.get("active", 0) >= 1 for s in statuses)

    return check


async def test_a_suspended_jobset_stops_on_its_worker_and_resumed_it_completes(
    jobset_clusters: Clusters,
) -> None:
    clusters = jobset_clusters
    management = clusters.client()
    gate = clusters.gate("held")
    await management.create(JOBSETS, gated("held", str(gate)), "default")
    user = await clusters.wait_for(JOBSETS, "default", "held", running("workers"), within=60)
    worker = user["metadata"]["labels"][CLUSTER_LABEL]

    await management.patch(JOBSETS, "held", {"spec": {"suspend": True}}, "default")
    await clusters.wait_for(
        JOBSETS, "default", "held", lambda s: s["spec"].get("suspend") is True, cluster=worker
    )
    suspended = await clusters.wait_for(JOBSETS, "default", "held", has_condition("Suspended"), within=60)
    assert not running("workers")(suspended), "the worker's JobSet controller suspended its Jobs"
    children, _ = await clusters.client(worker).list(
        JOBS, "default", label_selector="jobset.sigs.k8s.io/jobset-name=held"
    )
    assert [j["spec"]["suspend"] for j in children] == [True]

    await gate.open()
    await management.patch(JOBSETS, "held", {"spec": {"suspend": False}}, "default")
    done = await clusters.wait_for(JOBSETS, "default", "held", has_condition("Completed"), within=90)
    assert done["metadata"]["labels"][CLUSTER_LABEL] == worker, "resumed where it was placed"


async def test_a_jobset_on_a_lost_worker_runs_again_on_another_and_the_stale_mirror_goes(
    jobset_clusters: Clusters,
) -> None:
    clusters = jobset_clusters
    local = clusters.in_process("stops a worker's API server (test_kind pauses a worker's node instead)")
    await clusters.restart_manager(worker_lost_timeout=2.0)
    management = clusters.client()
    gate = clusters.gate("moving")
    # Its first try fails and the failure policy restarts it on its worker; the second waits for the gate.
    moving = gated("moving", str(gate))
    moving["spec"]["failurePolicy"] = {"maxRestarts": 1}
    container = moving["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    wait = f"while [ ! -f {gate} ]; do sleep 0.1; done"
    container["command"] = [
        "sh",
        "-c",
        f"if [ -f {gate}.tried ]; then {wait}; else mkdir -p {gate.path.parent}; touch {gate}.tried; exit 1; fi",
    ]
    await management.create(JOBSETS, moving, "default")
    user = await clusters.wait_for(
        JOBSETS,
        "default",
        "moving",
        lambda s: running("workers")(s) and s["status"].get("restarts") == 1,
        within=60,
    )
    lost = user["metadata"]["labels"][CLUSTER_LABEL]
    other = next(w for w in WORKERS if w != lost)

    await local.stop_server(lost)
    await clusters.wait_for(
        JOBSETS, "default", "moving", lambda s: s["metadata"]["labels"].get(CLUSTER_LABEL) == other, within=60
    )
    event = await wait_for_event(management, "moving", "Redispatched")
    assert f"worker {lost} was unreachable" in event["message"]
    await gate.open()
    done = await clusters.wait_for(JOBSETS, "default", "moving", has_condition("Completed"), within=90)
    assert done["status"]["terminalState"] == "Completed"
    assert done["status"]["restarts"] == 1, (
        "the new mirror went on from the restart counted on the lost worker"
    )

    await local.start_server(lost)
    await clusters.wait_gone(JOBSETS, "default", "moving", cluster=lost, within=60)
    after = await management.get(JOBSETS, "moving", "default")
    assert after["status"] == done["status"], "the stale mirror's end does not touch the user's JobSet"


async def test_a_worker_without_the_jobset_crd_takes_no_jobsets_but_still_takes_jobs(
    dispatching_clusters: Clusters, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clusters = dispatching_clusters
    clusters.in_process("takes the JobSet CRD away from one worker, where kind keeps JobSet for the module")
    folder = jobset.built_or_skip()
    for name in ("management", "worker-2"):  # worker-1 has no JobSet CRD
        await jobset.install_crd(clusters.client(name), folder)
    controller = jobset.JobSetController(
        folder, clusters.kubeconfig, "worker-2", tmp_path / "jobset-worker-2"
    )
    await controller.start()
    try:
        # The 404 of worker-1 for JobSets is its answer: the manager does not wait for that cache to sync.
        monkeypatch.setattr(dispatcher, "WORKER_SYNC_WAIT", 3600.0)
        async with asyncio.timeout(60):
            manager = await clusters.restart_manager(kinds=["Job", "JobSet"])
        assert manager is not None and manager.read_model is not None
        management = clusters.client()
        pinned = example()
        pinned["metadata"].update(name="pinned", labels={PIN_LABEL: "worker-1"})
        await management.create(JOBSETS, pinned, "default")
        warning = await wait_for_event(management, "pinned", "KindNotServed")
        assert warning["type"] == "Warning"
        assert warning["message"] == (
            "0/2 workers can take this Job: 1 is not the pinned worker worker-1 (worker-2), "
            "1 does not serve JobSet (worker-1)"
        )

        await management.create(JOBSETS, example(), "default")
        done = await clusters.wait_for(JOBSETS, "default", "sweep", has_condition("Completed"), within=90)
        assert done["metadata"]["labels"][CLUSTER_LABEL] == "worker-2"

        job = job_body("plain", "true", managedBy=MANAGED_BY)
        job["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
        await management.create(JOBS, job, "default")
        finished = await clusters.wait_for(JOBS, "default", "plain", has_condition("Complete"), within=60)
        assert finished["metadata"]["labels"][CLUSTER_LABEL] == "worker-1"
        assert {w.name: w.reason for w in manager.read_model.workers()}["worker-1"] == "Connected"
        # multiqueue status, from the clusters, says what the manager's read model says.
        config, contexts = clusters.reader()
        rows, _ = await inspect.status(config, contexts)
        assert [inspect.worker_row(s) for s in manager.read_model.workers()] == rows
        shown = {row.name: (row.active, row.missing_kinds) for row in rows}
        assert shown == {"worker-1": ("True (does not serve JobSet)", ["JobSet"]), "worker-2": ("True", [])}
    finally:
        await controller.stop()


def with_driver(name: str) -> dict[str, Any]:
    """The example with a second replicated Job: a driver of one pod beside the two workers of two pods."""
    body = example()
    body["metadata"]["name"] = name
    driver = copy.deepcopy(body["spec"]["replicatedJobs"][0])
    driver.update(name="driver", replicas=1)
    driver["template"]["spec"].update(parallelism=1, completions=1)
    driver["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "echo driver"]
    body["spec"]["replicatedJobs"].insert(0, driver)
    return body


async def test_status_logs_and_the_dashboard_show_a_jobset_and_every_replicated_jobs_pods(
    jobset_clusters: Clusters,
) -> None:
    clusters = jobset_clusters
    target = clusters.cli_target()
    await clusters.client().create(JOBSETS, with_driver("shown"), "default")
    await clusters.wait_for(JOBSETS, "default", "shown", has_condition("Completed"), within=90)

    code, out, _ = await multiqueue("logs", "jobset/shown", *target)
    assert code == 0
    written = [line.partition("] ")[::2] for line in out.splitlines()]
    assert [text for _, text in written] == ["driver", "shard 0", "shard 1", "shard 0", "shard 1"]
    pods = [prefix.lstrip("[") for prefix, _ in written]
    assert [p.rsplit("-", 2)[0] for p in pods] == ["shown-driver-0"] + ["shown-workers-0"] * 2 + [
        "shown-workers-1"
    ] * 2, "each replicated Job's pods, Job by Job, lowest index first"
    code, out, _ = await multiqueue("logs", "jobsets.jobset.x-k8s.io/shown", "--index", "1", *target)
    assert code == 0 and [line.partition("] ")[2] for line in out.splitlines()] == ["shard 1", "shard 1"]
    code, out, err = await multiqueue("logs", "jobsett/shown", *target)
    assert (code, out) == (2, "") and 'no kind named "jobsett": use one of Job, JobGroup, JobSet' in err
    code, _, err = await multiqueue("logs", "job/shown", *target)
    assert code == 1 and 'job "default/shown" not found on the management cluster' in err

    code, out, _ = await multiqueue("status", *target, "-o", "json")
    assert code == 0
    row = next(j for j in json.loads(out)["jobs"] if j["key"] == "default/shown")
    assert (row["kind"], row["state"], row["reason"]) == ("JobSet", "Complete", "AllJobsCompleted")
    code, out, _ = await multiqueue("status", *target, "-o", "name")
    assert "jobset/default/shown" in out.splitlines()

    local = clusters.in_process(
        "serves the in-process manager's dashboard (deploy/ leaves the dashboard off)"
    )
    assert local.manager is not None
    board = await dashboard.serve(local.manager)
    assert board is not None
    base = board.url.split("?")[0]
    auth = {"Authorization": f"Bearer {board.access.token}"}
    try:
        async with aiohttp.ClientSession(headers=auth) as session:
            async with session.get(f"{base}api/snapshot") as answer:
                shown = next(j for j in (await answer.json())["jobs"] if j["name"] == "shown")
            assert (shown["kind"], shown["state"]) == ("JobSet", "Complete")
            query = {"kind": "JobSet", "namespace": "default", "name": "shown"}
            async with session.get(f"{base}api/logs", params=query) as answer:
                text = await answer.text()
            assert answer.status == 200 and sorted(line.split(" ", 1)[1] for line in text.splitlines()) == [
                "driver",
                "shard 0",
                "shard 0",
                "shard 1",
                "shard 1",
            ]
    finally:
        await board.stop()


async def test_a_failing_replicated_job_restarts_the_jobset_on_its_worker_as_its_failure_policy_says(
    jobset_clusters: Clusters,
) -> None:
    clusters = jobset_clusters
    body = example()
    body["metadata"]["name"] = "flaky"
    body["spec"]["failurePolicy"] = {"maxRestarts": 1}
    rjob = body["spec"]["replicatedJobs"][0]
    rjob["replicas"] = 1
    rjob["template"]["spec"].update(parallelism=1, completions=1)
    rjob["template"]["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", "exit 3"]
    await clusters.client().create(JOBSETS, body, "default")
    failed = await clusters.wait_for(JOBSETS, "default", "flaky", has_condition("Failed"), within=120)
    worker = failed["metadata"]["labels"][CLUSTER_LABEL]
    status = failed["status"]
    assert (status["terminalState"], status["restarts"]) == ("Failed", 1), "restarted once, then failed"
    condition = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert condition["reason"] == "ReachedMaxRestarts"
    mirror = await clusters.client(worker).get(JOBSETS, "flaky", "default")
    assert mirror["status"] == status, "the user's JobSet shows the worker's status whole"
    event = await wait_for_event(clusters.client(), "flaky", "ReachedMaxRestarts")
    assert event["type"] == "Warning" and worker in event["message"]


async def test_jobs_and_jobsets_share_a_workers_capacity(jobset_clusters: Clusters) -> None:
    clusters = jobset_clusters
    # multiqueue's quota, small enough that the pods also fit a kind node that runs its control plane.
    await clusters.set_capacity({w: Capacity(resources={"cpu": "200m"}) for w in WORKERS})
    management = clusters.client()
    gate = clusters.gate("holding")
    holding = gated("holding", str(gate))
    holding["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
    template = holding["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "200m"}}
    await management.create(JOBSETS, holding, "default")
    await clusters.wait_for(JOBSETS, "default", "holding", running("workers"), within=60)

    job = job_body("after", "true", managedBy=MANAGED_BY)
    job["metadata"]["labels"] = {PIN_LABEL: "worker-1"}
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "200m"}}
    await management.create(JOBS, job, "default")
    waiting = await wait_for_event(management, "after", "Pending")
    assert waiting["message"] == (
        "0/2 workers can take this Job: 1 is not the pinned worker worker-1 (worker-2), "
        "1 has no capacity now (worker-1: cpu 0.2/0.2)"
    )
    config, contexts = clusters.reader()
    rows, _ = await inspect.status(config, contexts)
    assert {r.name: r.capacity for r in rows}["worker-1"] == {"cpu": (0.2, 0.2)}, "the JobSet's pod holds it"
    assert CLUSTER_LABEL not in (await management.get(JOBS, "after", "default"))["metadata"].get("labels", {})

    await gate.open()
    await clusters.wait_for(JOBSETS, "default", "holding", has_condition("Completed"), within=90)
    done = await clusters.wait_for(JOBS, "default", "after", has_condition("Complete"), within=90)
    assert done["metadata"]["labels"][CLUSTER_LABEL] == "worker-1", "it ran where the JobSet's cpu was freed"
